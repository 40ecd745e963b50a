//! `rankd cv`: k-fold cross-validation of the reranker on judgments over the index
//! (SPEC §3.5). Queries are split into folds; for each fold a model is trained on the other
//! folds' first-phase windows (with a validation split of them for early stopping) and
//! reranks the held-out fold's windows. The reranked run and the first-phase run over the
//! same windows are scored per query, and a paired randomization test says whether the
//! difference is more than chance. With `--select`, each fold also chooses its features and
//! weight decay (`rerank::select`) from its own training queries.

use std::sync::atomic::AtomicBool;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use super::eval::GainArg;
use super::features::JudgedArgs;
use super::learn::{run_training, LearnArgs, SelectArgs};
use super::{progress, BadInput, DataArgs};
use crate::eval::significance::{paired_randomization, PairedTest};
use crate::eval::{self, EvalOptions, Gain, Report, Run};
use crate::features::FeatureSet;
use crate::judgments::{judged_windows, project, rank_set_named, Window};
use crate::rerank::select::{select, Selection, SelectionGrid};
use crate::rerank::TrainOutcome;
use crate::text::{ModelKind, TextIndex};

#[derive(clap::Args, Debug)]
pub struct CvArgs {
    #[command(flatten)]
    pub judged: JudgedArgs,
    /// The first-phase model whose window is reranked.
    #[arg(long, default_value = "bm25f")]
    pub first_phase: String,
    #[arg(long, default_value_t = crate::second_phase::DEFAULT_WINDOW)]
    pub window: usize,
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// Gain of NDCG (as `rankd eval`).
    #[arg(long, value_enum, default_value = "linear")]
    pub gain: GainArg,
    /// Also rank each window by this one feature (no training; repeatable), e.g. `rm3.bm25`,
    /// and test it against the first phase the same way (SPEC §3.5's best single feature).
    #[arg(long = "single-feature", value_name = "NAME")]
    pub single_features: Vec<String>,
    /// Train on these features only (comma-separated names; default: the whole feature set).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub features: Vec<String>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Write the cross-validated reranked run (every query scored by the model of the fold
    /// that held it out) in TREC format, for trec_eval or a per-query comparison of runs.
    #[arg(long)]
    pub run: Option<std::path::PathBuf>,
    /// Random sign assignments of the significance test.
    #[arg(long, default_value_t = 100_000)]
    pub samples: u64,
    #[command(flatten)]
    pub learn: LearnArgs,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub data: DataArgs,
}

pub fn run(args: CvArgs) -> anyhow::Result<()> {
    let first_phase: ModelKind = args.first_phase.parse().map_err(BadInput)?;
    crate::second_phase::validate_window(1, 0, args.window).map_err(|e| BadInput(e.to_string()))?;
    if args.folds < 2 {
        return Err(BadInput(format!("--folds must be at least 2, got {}", args.folds)).into());
    }
    let set = FeatureSet::current();
    let single_cols: Vec<(&str, usize)> = args
        .single_features
        .iter()
        .map(String::as_str)
        .zip(super::train::feature_columns(
            "--single-feature",
            &args.single_features,
        )?)
        .collect();
    let mut train_cols = super::train::feature_columns("--features", &args.features)?;
    if train_cols.is_empty() {
        train_cols = (0..set.len()).collect();
    }
    let train_names: Vec<String> = train_cols.iter().map(|&c| set.names()[c].clone()).collect();
    let index = TextIndex::open(&args.data.data_dir, args.data.config()?)?;
    let links = crate::links::load(&index)?;
    let (queries, qrels) = args.judged.load()?;
    if queries.len() < args.folds {
        return Err(BadInput(format!(
            "{} judged queries cannot make {} folds",
            queries.len(),
            args.folds
        ))
        .into());
    }
    let bar = progress(queries.len() as u64, "features", args.json);
    let read: Vec<usize> = train_cols
        .iter()
        .copied()
        .chain(single_cols.iter().map(|&(_, c)| c))
        .collect();
    let prf = set.prf_for(&read);
    let (windows, stats) = judged_windows(
        &index,
        links.as_ref(),
        &queries,
        first_phase,
        args.window,
        prf,
        &|| bar.inc(1),
    )
    .map_err(|e| BadInput(e.to_string()))?;
    bar.finish_and_clear();

    // Folds by query, shuffled with the seed.
    let mut order: Vec<usize> = (0..windows.len()).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(args.learn.seed));
    let fold_of: Vec<usize> = {
        let mut f = vec![0; windows.len()];
        for (i, &w) in order.iter().enumerate() {
            f[w] = i % args.folds;
        }
        f
    };
    let score_col = set
        .get("first_phase.score")
        .expect("the feature set has the first-phase score");
    let grid = args.select.grid(&args.learn);
    let (mut baseline, mut reranked) = (Run::new(), Run::new());
    let mut folds = Vec::new();
    for fold in 0..args.folds {
        let trained = train_fold(
            &windows,
            &fold_of,
            fold,
            &train_cols,
            &train_names,
            &args.learn,
            grid.as_ref(),
            format!("cv fold {} of {}", fold + 1, args.folds),
        )?;
        let model = &trained.outcome.model;
        let cols: Vec<usize> = model
            .feature_names()
            .iter()
            .map(|n| set.get(n).expect("the model reads features of the set"))
            .collect();
        let mut test_queries = 0;
        for w in windows
            .iter()
            .enumerate()
            .filter(|(i, _)| fold_of[*i] == fold)
            .map(|(_, w)| w)
        {
            test_queries += 1;
            let x = project(w, &cols).features;
            let scores = model.score(&x.values, x.rows)?;
            for (row, id) in w.ids.iter().enumerate() {
                baseline.push(
                    &w.qid,
                    id.clone(),
                    f64::from(w.features.row(row)[score_col]),
                );
                reranked.push(&w.qid, id.clone(), f64::from(scores[row]));
            }
        }
        folds.push(json!({
            "fold": fold + 1,
            "test_queries": test_queries,
            "best_epoch": model.training.best_epoch,
            "epochs_run": model.training.epochs_run,
            "selection": trained.selection,
        }));
        if !args.json {
            eprintln!(
                "fold {}/{}: {} test queries, best epoch {}",
                fold + 1,
                args.folds,
                test_queries,
                model.training.best_epoch
            );
            if let Some(s) = &trained.selection {
                eprintln!(
                    "  selected {} features (weight decay {}, validation MAP {:.4}): {}",
                    s.features.len(),
                    s.weight_decay,
                    s.valid_map,
                    s.features.join(",")
                );
            }
        }
    }
    let options = EvalOptions {
        cutoffs: vec![1, 3, 5, 10, 20, 100],
        gain: match args.gain {
            GainArg::Linear => Gain::Linear,
            GainArg::Exponential => Gain::Exponential,
        },
        complete: true,
        ..EvalOptions::default()
    };
    if let Some(path) = &args.run {
        super::eval::save_run(path, &reranked, "rankd-cv")?;
    }
    let base = eval::evaluate(&baseline, &qrels, &options).map_err(|e| BadInput(e.to_string()))?;
    let rer = eval::evaluate(&reranked, &qrels, &options).map_err(|e| BadInput(e.to_string()))?;
    // Paired significance of another run against the first phase, per reported metric.
    let against_base = |other: &Report| -> Vec<(&str, PairedTest)> {
        ["map", "ndcg@10", "mrr"]
            .into_iter()
            .map(|m| (m, paired(&base, other, m, args.samples, args.learn.seed)))
            .collect()
    };
    let tests = against_base(&rer);
    // Single features rank every window (ties as trec_eval breaks them, like the reranked run).
    let mut singles = Vec::new();
    for &(name, col) in &single_cols {
        let mut run = Run::new();
        for w in &windows {
            for (row, id) in w.ids.iter().enumerate() {
                run.push(&w.qid, id.clone(), f64::from(w.features.row(row)[col]));
            }
        }
        let report = eval::evaluate(&run, &qrels, &options).map_err(|e| BadInput(e.to_string()))?;
        let tests = against_base(&report);
        singles.push((name, report, tests));
    }
    let significance = |tests: &[(&str, PairedTest)]| {
        tests
            .iter()
            .map(|(m, t)| (m.to_string(), json!(t)))
            .collect::<serde_json::Map<_, _>>()
    };
    if args.json {
        let out = json!({
            "first_phase": first_phase.to_string(),
            "window": args.window,
            "folds": folds,
            "windows": stats,
            "objective": format!("{:?}", args.learn.objective),
            "features": train_names,
            "selection_grid": grid.as_ref().map(|g| json!({
                "top_k": g.top_k,
                "weight_decay": g.weight_decay,
                "anchor": g.anchor,
                "rule": g.rule,
            })),
            "baseline": base.means,
            "reranked": rer.means,
            "significance": significance(&tests),
            "single_features": singles.iter().map(|(name, report, tests)| {
                (name.to_string(), json!({
                    "means": report.means,
                    "significance": significance(tests),
                }))
            }).collect::<serde_json::Map<_, _>>(),
        });
        println!("{out}");
    } else {
        println!(
            "queries {}  (window {} of {first_phase})",
            rer.queries, args.window
        );
        println!(
            "{:<10} {:>10} {:>10} {:>10} {:>10}",
            "metric",
            first_phase.to_string(),
            "reranked",
            "diff",
            "p"
        );
        // One line per metric: the first phase, the other run, their difference and p.
        let print_against = |other: &Report, tests: &[(&str, PairedTest)]| {
            for (m, t) in tests {
                println!(
                    "{m:<10} {:>10.4} {:>10.4} {:>+10.4} {:>10.4}",
                    base.means.get(m).unwrap_or(f64::NAN),
                    other.means.get(m).unwrap_or(f64::NAN),
                    t.mean_difference,
                    t.p_value
                );
            }
        };
        print_against(&rer, &tests);
        for (name, report, tests) in &singles {
            println!("single feature {name} (no training) vs {first_phase}:");
            print_against(report, tests);
        }
    }
    Ok(())
}

/// One fold's model and, with a selection grid, what was selected.
struct FoldModel {
    outcome: TrainOutcome,
    selection: Option<Selection>,
}

/// Trains the model of `fold`: on the windows of the other folds (columns `train_cols`,
/// named `train_names`), with a seeded validation split of them for early stopping and, with
/// `grid`, for model selection. The windows of `fold` itself are not read.
#[allow(clippy::too_many_arguments)]
fn train_fold(
    windows: &[Window],
    fold_of: &[usize],
    fold: usize,
    train_cols: &[usize],
    train_names: &[String],
    learn: &LearnArgs,
    grid: Option<&SelectionGrid>,
    source: String,
) -> anyhow::Result<FoldModel> {
    let train: Vec<Window> = windows
        .iter()
        .zip(fold_of)
        .filter(|(_, &f)| f != fold)
        .map(|(w, _)| project(w, train_cols))
        .collect();
    let train_set =
        rank_set_named(&train, train_names.to_vec()).map_err(|e| BadInput(e.to_string()))?;
    let (t, v) = train_set
        .split_validation(learn.valid_fraction, learn.seed)
        .map_err(|e| BadInput(e.to_string()))?;
    let config = learn.config(source);
    match grid {
        None => Ok(FoldModel {
            outcome: run_training(&t, Some(&v), &config, true)?,
            selection: None,
        }),
        Some(grid) => {
            let (selection, outcome) =
                select(&t, &v, &config, grid, &mut |_| {}, &AtomicBool::new(false))
                    .map_err(|e| BadInput(e.to_string()))?;
            Ok(FoldModel {
                outcome,
                selection: Some(selection),
            })
        }
    }
}

/// Paired test of one metric over the queries both reports scored.
fn paired(a: &Report, b: &Report, metric: &str, samples: u64, seed: u64) -> PairedTest {
    let metric = match metric {
        "map" => "ap",
        "mrr" => "rr",
        m => m,
    };
    let (xs, ys): (Vec<f64>, Vec<f64>) = a
        .per_query
        .iter()
        .filter_map(|(q, m)| Some((m.get(metric)?, b.per_query.get(q)?.get(metric)?)))
        .unzip();
    paired_randomization(&xs, &ys, samples, seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureMatrix;
    use rand::Rng;

    /// Windows of 10 rows over `first_phase.score` (weak), `signal` (strong), `flat`
    /// (constant) and `noise`.
    fn windows(queries: usize) -> (Vec<Window>, Vec<String>) {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let names = ["first_phase.score", "signal", "flat", "noise"].map(String::from);
        let windows = (0..queries)
            .map(|q| {
                let (mut values, mut labels) = (Vec::new(), Vec::new());
                for _ in 0..10 {
                    let s: f32 = rng.random_range(0.0..1.0);
                    labels.push(i32::from(s + rng.random_range(-0.1f32..0.1) > 0.6));
                    let fp = s + rng.random_range(-0.7f32..0.7);
                    values.extend([fp, s, 1.0, rng.random_range(0.0f32..1.0)]);
                }
                Window {
                    qid: format!("q{q}"),
                    features: FeatureMatrix {
                        rows: 10,
                        cols: 4,
                        values,
                    },
                    ids: (0..10).map(|d| format!("d{d}")).collect(),
                    labels,
                }
            })
            .collect();
        (windows, names.to_vec())
    }

    fn flip_labels(windows: &mut [Window], fold_of: &[usize], fold: usize) {
        for (w, _) in windows.iter_mut().zip(fold_of).filter(|(_, &f)| f == fold) {
            for l in &mut w.labels {
                *l = 1 - *l;
            }
        }
    }

    #[test]
    fn selection_uses_only_the_training_folds() {
        let (ws, names) = windows(45);
        let fold_of: Vec<usize> = (0..ws.len()).map(|i| i % 3).collect();
        let learn = LearnArgs {
            model: super::super::learn::ModelArg::Linear,
            epochs: 15,
            patience: 15,
            lr: 0.05,
            ..LearnArgs::defaults()
        };
        let grid = SelectionGrid {
            top_k: vec![0, 1, 8],
            weight_decay: vec![4e-5, 1e-2],
            anchor: Some("first_phase.score".into()),
            rule: crate::rerank::select::SelectionRule::OneSe,
        };
        let fit = |ws: &[Window]| {
            train_fold(
                ws,
                &fold_of,
                0,
                &[0, 1, 2, 3],
                &names,
                &learn,
                Some(&grid),
                "t".into(),
            )
            .unwrap()
        };
        let original = fit(&ws);
        let selection = original.selection.clone().unwrap();
        assert_eq!(selection.constant, vec!["flat".to_string()]);
        assert_eq!(selection.candidates.len(), 6);
        assert!(selection.features.contains(&"signal".to_string()));

        // Inverting every label of the held-out fold changes nothing.
        let mut test_flipped = ws.clone();
        flip_labels(&mut test_flipped, &fold_of, 0);
        let same = fit(&test_flipped);
        assert_eq!(same.selection, original.selection);
        assert_eq!(same.outcome.model.networks, original.outcome.model.networks);
        assert_eq!(
            same.outcome.model.normalization,
            original.outcome.model.normalization
        );

        // Control: inverting a training fold's labels does change the selection.
        let mut train_flipped = ws.clone();
        flip_labels(&mut train_flipped, &fold_of, 1);
        assert_ne!(fit(&train_flipped).selection, original.selection);
    }
}
