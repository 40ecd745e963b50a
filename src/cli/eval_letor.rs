//! `rankd eval-letor`: train on a LETOR file, score the test file, report NDCG@{1,3,5,10} and
//! MAP under LightGBM's convention (INTERFACE.md). With `--scores`, skip training and
//! evaluate given scores (one per test row) — how peers' predictions are scored with the
//! same metric code. `--model gbdt` trains gradient-boosted trees and `--import` scores
//! with another library's trees (both in `gbdt.rs`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::gbdt::TreeFileArgs;
use super::learn::{rank_sets, read_letor, run_training, LearnArgs};
use crate::error::Invalid;
use crate::rerank::gbdt::train::unbiased::PositionBias;
use crate::rerank::gbdt::train::GbdtParams;
use crate::rerank::{
    evaluate_scores, EpochLog, MetricConvention, Objective, PairCoverage, RankMetrics,
};
use crate::training::{ModelChoice, TrainSettings};
use crate::user_clicks::ips::{
    click_set, estimate_noise_floor, estimate_propensities, ClickLabels, Debias, NoiseFloor,
    PropensityModel, DEFAULT_CLICK_LABELS, DEFAULT_NOISE_FLOOR, DEFAULT_PROPENSITY_CLIP,
    PROPENSITY_ITERATIONS,
};
use crate::user_clicks::sessions;

#[derive(clap::Args, Debug)]
pub struct EvalLetorArgs {
    #[arg(long)]
    pub train: Option<PathBuf>,
    /// Group-size file for `--train` (default: `TRAIN.query` if it exists, else `qid:`).
    #[arg(long)]
    pub train_query: Option<PathBuf>,
    #[arg(long)]
    pub test: PathBuf,
    #[arg(long)]
    pub test_query: Option<PathBuf>,
    /// Validation file for early stopping (default: `--valid-fraction` of the training
    /// queries; the test file is never used for any choice).
    #[arg(long)]
    pub valid: Option<PathBuf>,
    #[arg(long)]
    pub valid_query: Option<PathBuf>,
    /// Train from these click sessions (`rankd simulate-clicks`' format; README, "Learning
    /// from clicks") instead of the training file's labels: the training file then supplies
    /// only the features. Early stopping holds out a share of the queries' clicks.
    #[arg(long, requires = "train", conflicts_with = "valid")]
    pub train_clicks: Option<PathBuf>,
    /// With --train-clicks: ips divides each click by its rank's examination probability,
    /// estimated from the sessions by the position-based model's EM; none counts clicks as
    /// they are (the naive baseline).
    #[arg(long, value_enum, default_value_t = Debias::Ips, requires = "train_clicks")]
    pub debias: Debias,
    /// With --train-clicks and --debias ips or none: `graded` trains one group per query, each
    /// row it showed labelled with its estimated click rate given examination (the objectives
    /// that read only the labels' order: stable AP, graded, by default); `binary` one group
    /// per clicked document, weighted by its clicks over their propensities. Graded measured
    /// better (docs/EVALUATION.md, "Graded click labels").
    #[arg(long, value_enum, default_value_t = DEFAULT_CLICK_LABELS, requires = "train_clicks")]
    pub click_labels: ClickLabels,
    /// With --train-clicks: the click model whose examination probabilities are the
    /// propensities (pbm measured best: docs/EVALUATION.md, "Learning from clicks").
    #[arg(long, value_enum, default_value_t = PropensityModel::Pbm, requires = "train_clicks")]
    pub propensity_model: PropensityModel,
    /// With --train-clicks: the smallest propensity a click is divided by.
    #[arg(long, default_value_t = DEFAULT_PROPENSITY_CLIP, requires = "train_clicks")]
    pub propensity_clip: f64,
    /// With --train-clicks and --debias ips: `estimate` subtracts the click-noise floor (the
    /// click rate of an examined irrelevant document), estimated from the sessions, from every
    /// impression: the affine correction (docs/EVALUATION.md, "The noise floor"); `none` is
    /// plain IPS.
    #[arg(long, value_enum, default_value_t = DEFAULT_NOISE_FLOOR, requires = "train_clicks")]
    pub noise_floor: NoiseFloor,
    /// Evaluate these scores (one number per line, one line per test row) instead of training.
    #[arg(long, conflicts_with = "train")]
    pub scores: Option<PathBuf>,
    /// Also write the trained (or imported) model here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write the test scores, one per test row (for per-query comparisons).
    #[arg(long)]
    pub write_scores: Option<PathBuf>,
    #[command(flatten)]
    pub learn: LearnArgs,
    #[command(flatten)]
    pub trees: TreeFileArgs,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: EvalLetorArgs) -> anyhow::Result<()> {
    let test = read_letor(&args.test, args.test_query.as_deref())?;
    if let Some(path) = &args.scores {
        let set = rank_sets(&[&test])?.remove(0);
        let scores = read_scores(path, set.num_rows())?;
        let metrics = evaluate_scores(&set, &scores, MetricConvention::Letor)?;
        return report(&args, &metrics, ScoresGiven { scores: path });
    }
    if args.trees.import.is_some() {
        let (model, test_set, extra) = super::gbdt::eval_imported(&args.trees, &test)?;
        let (scores, metrics) = super::gbdt::score_set(&model, &test_set)?;
        write_outputs(&args, &model, &scores)?;
        return report(&args, &metrics, extra);
    }
    let Some(train_path) = &args.train else {
        return Err(Invalid(
            "give --train FILE to train on, --scores FILE or --import FILE to evaluate".into(),
        )
        .into());
    };
    let settings = args.learn.apply(TrainSettings::letor_for(
        args.learn.model,
        args.learn.objective,
    ))?;
    let train = read_letor(train_path, args.train_query.as_deref())?;
    let valid = args
        .valid
        .as_deref()
        .map(|v| read_letor(v, args.valid_query.as_deref()))
        .transpose()?;
    let mut letor_sets = vec![&train, &test];
    letor_sets.extend(valid.as_ref());
    let mut sets = rank_sets(&letor_sets)?.into_iter();
    let (all_train, test_set) = (sets.next().expect("train"), sets.next().expect("test"));
    if let Some(path) = &args.train_clicks {
        return from_clicks(&args, path, &settings, all_train, &test_set);
    }
    // Trees without early stopping train on every training query.
    let (train_set, valid_set) = match sets.next() {
        Some(v) => (all_train, Some(v)),
        None if settings.holds_out_validation() => {
            let (t, v) = all_train.split_validation(settings.valid_fraction, settings.seed)?;
            (t, Some(v))
        }
        None => (all_train, None),
    };
    let config = settings.config(train_path.display().to_string(), MetricConvention::Letor);
    let started = Instant::now();
    let outcome = run_training(&train_set, valid_set.as_ref(), &config, args.json)?;
    let seconds = started.elapsed().as_secs_f64();
    let model = &outcome.model;
    if let Some(path) = &args.trees.export_xgboost {
        super::gbdt::export_xgboost(model, path)?;
    }
    let (scores, metrics) = super::gbdt::score_set(model, &test_set)?;
    write_outputs(&args, model, &scores)?;
    let family = if settings.model == ModelChoice::Gbdt {
        Family::Trees {
            params: &settings.gbdt,
        }
    } else {
        Family::Network {
            hidden: model.hidden(),
            ensemble: model.training.ensemble,
            average_epochs: model.training.average_epochs,
            lr_halve_after: model.training.lr_halve_after,
            sample_rows: model.training.sample_rows,
            mixup: model.training.mixup,
            member_best_epochs: &model.training.member_best_epochs,
            lr: settings.network.lr,
            batch: settings.network.batch,
        }
    };
    let trained = Trained {
        objective: &model.training.objective,
        model: model.kind(),
        seed: settings.seed,
        id: model.id(),
        train_queries: train_set.queries.len(),
        valid_queries: valid_set.as_ref().map(|v| v.queries.len()),
        coverage: &outcome.coverage,
        best_epoch: model.training.best_epoch,
        epochs_run: model.training.epochs_run,
        train_seconds: seconds,
        valid: &model.training.metrics.valid,
        log: &outcome.log,
        family,
    };
    report(&args, &metrics, trained)
}

/// `--train-clicks`: the training set is built from the sessions (`crate::user_clicks::ips`), the
/// validation split from the held-out queries' sessions, and the test set keeps its labels.
fn from_clicks(
    args: &EvalLetorArgs,
    path: &Path,
    settings: &TrainSettings,
    all_train: crate::rerank::RankSet,
    test_set: &crate::rerank::RankSet,
) -> anyhow::Result<()> {
    let logged = sessions::read(path)?;
    sessions::check(&logged, &all_train)
        .map_err(|e| Invalid(format!("{}: {}", path.display(), e.0)))?;
    let propensities = match args.debias {
        Debias::Ips => estimate_propensities(
            &logged,
            &all_train,
            args.propensity_model,
            PROPENSITY_ITERATIONS,
        )?,
        Debias::Pairwise | Debias::None => Vec::new(),
    };
    let floor = (args.debias == Debias::Ips && args.noise_floor == NoiseFloor::Estimate)
        .then(|| estimate_noise_floor(&logged, &propensities));
    let settings = &settings.clone().for_clicks(
        args.debias,
        args.click_labels,
        args.learn.objective.is_some(),
    )?;
    let (train_part, valid_part) = if settings.holds_out_validation() {
        let (t, v) = all_train.split_validation(settings.valid_fraction, settings.seed)?;
        (t, Some(v))
    } else {
        (all_train, None)
    };
    let build = |part, debias| {
        click_set(
            part,
            &logged,
            debias,
            args.click_labels,
            &propensities,
            args.propensity_clip,
            floor.unwrap_or(0.0),
        )
    };
    let train = build(&train_part, args.debias)?;
    // Validation reads labels: unbiased LambdaMART's are validated on the clicked documents'
    // groups, unweighted.
    let valid_debias = match args.debias {
        Debias::Pairwise => Debias::None,
        other => other,
    };
    let valid = valid_part
        .as_ref()
        .map(|v| build(v, valid_debias).map_err(|e| Invalid(format!("validation split: {}", e.0))))
        .transpose()?;
    // Both splits' clicks, counted once for the text line and the JSON report.
    let parts = || std::iter::once(&train).chain(valid.as_ref());
    let clicks: usize = parts().map(|p| p.clicks).sum();
    let clipped: usize = parts().map(|p| p.clipped).sum();
    let below_floor: usize = parts().map(|p| p.below_floor).sum();
    if !args.json {
        let shown: Vec<String> = propensities.iter().map(|p| format!("{p:.3}")).collect();
        eprintln!(
            "{} sessions, {clicks} clicks ({clipped} below the propensity clip) → {} training \
             groups; propensities by rank (relative to rank 1): {}{}",
            parts().map(|p| p.sessions).sum::<usize>(),
            train.set.queries.len(),
            if shown.is_empty() {
                "not used".into()
            } else {
                shown.join(" ")
            },
            floor.map_or(String::new(), |f| format!(
                "; noise floor {f:.4} subtracted per impression ({below_floor} clicked \
                 documents at or below it left out)"
            ))
        );
    }
    let mut config = settings.config(path.display().to_string(), MetricConvention::Letor);
    config.click_lists = train.lists.clone().map(std::sync::Arc::new);
    let outcome = run_training(
        &train.set,
        valid.as_ref().map(|v| &v.set),
        &config,
        args.json,
    )?;
    let (scores, metrics) = super::gbdt::score_set(&outcome.model, test_set)?;
    write_outputs(args, &outcome.model, &scores)?;
    report(
        args,
        &metrics,
        FromClicks {
            sessions: path,
            debias: args.debias,
            click_labels: (args.debias != Debias::Pairwise).then_some(args.click_labels),
            propensity_model: (args.debias == Debias::Ips).then_some(args.propensity_model),
            propensities: &propensities,
            propensity_clip: args.propensity_clip,
            noise_floor: floor,
            below_floor,
            position_bias: outcome.position_bias.as_ref(),
            clicks,
            clipped,
            train_groups: train.set.queries.len(),
            valid_groups: valid.as_ref().map(|v| v.set.queries.len()),
            model: outcome.model.kind(),
            objective: &outcome.model.training.objective,
            id: outcome.model.id(),
            valid: &outcome.model.training.metrics.valid,
        },
    )
}

/// `--json` with `--train-clicks`: where the training signal came from.
#[derive(Serialize)]
struct FromClicks<'a> {
    sessions: &'a Path,
    debias: Debias,
    /// How the clicks became groups (null with pairwise debiasing, which learns from the
    /// logged lists).
    click_labels: Option<ClickLabels>,
    /// The click model the propensities come from (none without IPS).
    propensity_model: Option<PropensityModel>,
    /// Estimated examination probability per rank, relative to rank 1 (empty without IPS).
    propensities: &'a [f64],
    propensity_clip: f64,
    /// With `--noise-floor estimate`: the click-noise floor estimated from the sessions and
    /// subtracted from every impression (null without it).
    noise_floor: Option<f64>,
    /// Clicked documents left out because the floor explains all their clicks.
    below_floor: usize,
    /// With pairwise debiasing: the position biases of clicks and non-clicks learned with
    /// the trees, by rank, relative to rank 1.
    position_bias: Option<&'a PositionBias>,
    clicks: usize,
    clipped: usize,
    train_groups: usize,
    valid_groups: Option<usize>,
    model: &'static str,
    objective: &'a Objective,
    id: &'a str,
    valid: &'a Option<RankMetrics>,
}

/// `--json` with `--scores`: the scores file evaluated.
#[derive(Serialize)]
struct ScoresGiven<'a> {
    scores: &'a Path,
}

/// `--json` after training: how the model was trained.
#[derive(Serialize)]
struct Trained<'a> {
    objective: &'a Objective,
    model: &'static str,
    seed: u64,
    id: &'a str,
    train_queries: usize,
    valid_queries: Option<usize>,
    coverage: &'a Option<PairCoverage>,
    best_epoch: usize,
    epochs_run: usize,
    train_seconds: f64,
    valid: &'a Option<RankMetrics>,
    log: &'a [EpochLog],
    #[serde(flatten)]
    family: Family<'a>,
}

/// What is reported of the model family's own settings.
#[derive(Serialize)]
#[serde(untagged)]
enum Family<'a> {
    Trees {
        params: &'a GbdtParams,
    },
    Network {
        hidden: &'a [usize],
        ensemble: usize,
        average_epochs: usize,
        lr_halve_after: usize,
        sample_rows: Option<usize>,
        mixup: Option<f32>,
        member_best_epochs: &'a [usize],
        lr: f64,
        batch: usize,
    },
}

/// What `--json` prints: the test metrics, then how the scores came about.
#[derive(Serialize)]
struct Report<'a, S> {
    test: &'a RankMetrics,
    #[serde(flatten)]
    source: S,
}

/// `--out` and `--write-scores`.
fn write_outputs(
    args: &EvalLetorArgs,
    model: &crate::rerank::Reranker,
    scores: &[f32],
) -> anyhow::Result<()> {
    if let Some(out) = &args.out {
        model.save(out)?;
    }
    if let Some(path) = &args.write_scores {
        let text: String = scores.iter().map(|s| format!("{s}\n")).collect();
        crate::text::index::write_atomic(path, text.as_bytes())
            .map_err(|e| Invalid(format!("cannot write {}: {e:#}", path.display())))?;
    }
    Ok(())
}

fn report(args: &EvalLetorArgs, m: &RankMetrics, source: impl Serialize) -> anyhow::Result<()> {
    if args.json {
        let out = Report { test: m, source };
        println!("{}", serde_json::to_string(&out)?);
    } else {
        println!(
            "{}: {} queries ({} without a relevant row: NDCG = 1, left out of MAP — LightGBM's \
             convention; gain 2^l − 1)",
            args.test.display(),
            m.queries,
            m.no_relevant
        );
        println!("NDCG@1  {:.4}", m.ndcg1);
        println!("NDCG@3  {:.4}", m.ndcg3);
        println!("NDCG@5  {:.4}", m.ndcg5);
        println!("NDCG@10 {:.4}", m.ndcg10);
        println!("MAP     {:.4}", m.map);
    }
    Ok(())
}

/// One finite score per line, exactly `rows` of them.
fn read_scores(path: &Path, rows: usize) -> anyhow::Result<Vec<f32>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Invalid(format!("cannot read {}: {e}", path.display())))?;
    let scores: Vec<f32> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            l.trim()
                .parse::<f32>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| {
                    Invalid(format!(
                        "{}:{}: `{}` is not a finite score",
                        path.display(),
                        i + 1,
                        l.trim()
                    ))
                })
        })
        .collect::<Result<_, _>>()?;
    if scores.len() != rows {
        return Err(Invalid(format!(
            "{} has {} scores but the test file has {rows} rows",
            path.display(),
            scores.len()
        ))
        .into());
    }
    Ok(scores)
}
