//! What `rankd train`, `cv`, `eval-letor` and `active-replay` share: the learning flags
//! (applied over `crate::training::TrainSettings`' presets), reading LETOR files into
//! [`RankSet`]s, and running the trainer with a progress bar and a per-epoch log on stderr.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::progress;
use crate::corpus::letor;
use crate::error::Invalid;
use crate::rerank::objective::StableApHessian;
use crate::rerank::select::{SelectionGrid, SelectionRule};
use crate::rerank::{
    self, Activation, NormKind, ObjectiveKind, RankSet, TrainConfig, TrainOutcome,
};
use crate::training::{ModelChoice, TrainSettings};

/// Objective, model and optimiser options (SPEC §3.2–3.3 names). Each one left out keeps the
/// value of the preset the command starts from ([`TrainSettings::letor`] for LETOR files,
/// [`TrainSettings::on_index`] for judgments on the index); the presets are the one home of
/// the defaults, and the help shows theirs ([`preset_defaults_in_help`]).
#[derive(clap::Args, Debug, Clone, Default)]
#[command(mut_args = preset_defaults_in_help)]
pub struct LearnArgs {
    /// The training objective.
    #[arg(long, value_enum)]
    pub objective: Option<ObjectiveKind>,
    /// The model; gbdt trains gradient-boosted trees (the tree options below; objectives
    /// stable-ap, lambda-ndcg, lambda-ap).
    #[arg(long, value_enum)]
    pub model: Option<ModelChoice>,
    /// Hidden layer widths of the MLP, comma-separated (one or two layers).
    #[arg(long, value_delimiter = ',')]
    pub hidden: Option<Vec<usize>>,
    /// Activation of the MLP's hidden layers.
    #[arg(long, value_enum)]
    pub activation: Option<Activation>,
    /// Feature normalisation.
    #[arg(long, value_enum)]
    pub norm: Option<NormKind>,
    /// Seed of the initialisation, the validation split and the batches.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Epochs at most.
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Learning rate α (on LETOR files tuned for both AP objectives).
    #[arg(long)]
    pub lr: Option<f64>,
    /// Queries per batch.
    #[arg(long)]
    pub batch: Option<usize>,
    /// Early stopping: epochs without a better validation MAP.
    #[arg(long)]
    pub patience: Option<usize>,
    /// Train this many networks from different initialisation seeds (same data and
    /// validation split) and score with their mean; linear members fold into one model.
    #[arg(long)]
    pub ensemble: Option<usize>,
    /// Tail averaging: early-stop on and keep the mean of the parameters at the end of the
    /// last this-many epochs (1: the parameters themselves).
    #[arg(long)]
    pub average_epochs: Option<usize>,
    /// Halve the learning rate after every run of this many epochs without a better
    /// validation MAP (0: a constant learning rate).
    #[arg(long)]
    pub lr_halve_after: Option<usize>,
    /// Train on a fresh uniform sample of at most this many rows of a query each time it is
    /// in a batch (default: every row).
    #[arg(long)]
    pub sample_rows: Option<usize>,
    /// Seed 000's deep feature mixup on the input features: each visit adds, per grade with
    /// two or more rows in the query, one row per row, `u·x + (1 − u)·` a random convex
    /// combination of that grade's rows (the paper's u: 0.9; default off).
    #[arg(long)]
    pub mixup: Option<f32>,
    /// Huber margin τ (stable AP, smoothed AP, SOPRC's τ₁), on sigmoid scores.
    #[arg(long)]
    pub tau: Option<f32>,
    /// ε of stable AP's outer function h.
    #[arg(long)]
    pub epsilon: Option<f64>,
    /// a of stable AP's weighting ((1 + a)/(r + a))^t.
    #[arg(long)]
    pub weight_a: Option<f64>,
    /// t of stable AP's weighting ((1 + a)/(r + a))^t.
    #[arg(long)]
    pub weight_t: Option<f64>,
    /// λ of stable AP's μ̂ moving average.
    #[arg(long)]
    pub lambda: Option<f64>,
    /// SOPRC (seed 003): temperature τ₂ of the TPR surrogate (τ₁ is --tau).
    #[arg(long)]
    pub soprc_tau2: Option<f64>,
    /// SOPRC: rate β of the per-query quantile state's moving average.
    #[arg(long)]
    pub soprc_beta: Option<f64>,
    /// SOPRC: length K of the per-query quantile state.
    #[arg(long)]
    pub soprc_quantiles: Option<usize>,
    /// SOPRC: weight λ₁ of the semi-variance regulariser (positives below their mean).
    #[arg(long)]
    pub soprc_var_pos: Option<f64>,
    /// SOPRC: weight λ₂ of the semi-variance regulariser (negatives above their mean).
    #[arg(long)]
    pub soprc_var_neg: Option<f64>,
    /// RankNet's and LambdaMART's σ.
    #[arg(long)]
    pub sigma: Option<f32>,
    /// Grades at or above this are relevant (binary objectives).
    #[arg(long)]
    pub threshold: Option<i32>,
    /// AP objectives: average the loss over every relevance level of a query (graded AP)
    /// instead of the single `--threshold` split.
    #[arg(long)]
    pub graded: bool,
    /// Momentum β of the unified momentum optimiser.
    #[arg(long)]
    pub beta: Option<f64>,
    /// s of the unified momentum: 1 Nesterov, 0 heavy ball.
    #[arg(long)]
    pub momentum_s: Option<f64>,
    /// L2 weight decay.
    #[arg(long)]
    pub weight_decay: Option<f64>,
    /// Fraction of the training queries held out for early stopping when no validation
    /// file is given.
    #[arg(long)]
    pub valid_fraction: Option<f64>,
    /// LambdaMART: pairs need one row among the first this many (σ is --sigma).
    #[arg(long)]
    pub truncation: Option<usize>,
    /// LambdaMART: LightGBM's lambdarank_norm.
    #[arg(long)]
    pub lambda_norm: Option<bool>,
    /// Trees (--model gbdt): boosting rounds at most.
    #[arg(long)]
    pub trees: Option<usize>,
    /// Trees: leaves per tree, grown leaf-wise.
    #[arg(long)]
    pub leaves: Option<usize>,
    /// Trees: shrinkage of every tree.
    #[arg(long)]
    pub tree_lr: Option<f64>,
    /// Trees: depth limit (0: none).
    #[arg(long)]
    pub max_depth: Option<usize>,
    /// Trees: quantile bins per feature, at most 255; missing values get one more.
    #[arg(long)]
    pub max_bins: Option<usize>,
    /// Trees: rows a bin holds at least when it closes, as LightGBM's min_data_in_bin (1:
    /// every distinct value its own bin while there are bins enough).
    #[arg(long)]
    pub min_data_in_bin: Option<usize>,
    /// Trees: rows a leaf needs at least.
    #[arg(long)]
    pub min_data_in_leaf: Option<usize>,
    /// Trees: check --min-data-in-leaf against LightGBM's hessian-based estimate of a
    /// leaf's rows, as LightGBM does (for parity runs).
    #[arg(long)]
    pub count_from_hessian: bool,
    /// Trees: hessian a leaf needs at least.
    #[arg(long)]
    pub min_sum_hessian: Option<f64>,
    /// Trees: L2 penalty λ on leaf values.
    #[arg(long)]
    pub lambda_l2: Option<f64>,
    /// Trees: a split must gain more than this.
    #[arg(long)]
    pub min_split_gain: Option<f64>,
    /// Trees: fraction of rows each tree is grown on, a new sample every round.
    #[arg(long)]
    pub row_fraction: Option<f64>,
    /// Trees: fraction of features each tree may split on.
    #[arg(long)]
    pub feature_fraction: Option<f64>,
    /// Trees: stop after this many rounds without a better validation MAP and keep the best
    /// (0: no early stopping; eval-letor then trains on every training query).
    #[arg(long)]
    pub early_stopping_rounds: Option<usize>,
    /// Stable AP trees: the Newton step's curvature (SPEC §3.6).
    #[arg(long, value_enum)]
    pub stable_ap_hessian: Option<StableApHessian>,
}

/// Appends the presets' value of the setting an option sets to its help (`[default: 0.01 on
/// LETOR files, 0.002 on the index]`), so the numbers are written once, in the presets.
/// Options whose setting is unset in the presets (`--sample-rows`, `--mixup`) say their default
/// in words.
fn preset_defaults_in_help(arg: clap::Arg) -> clap::Arg {
    // Serialised once: the command line is built with every subcommand at every start.
    static PRESETS: std::sync::LazyLock<[serde_json::Value; 2]> = std::sync::LazyLock::new(|| {
        [TrainSettings::letor(), TrainSettings::on_index()]
            .map(|p| serde_json::to_value(p).expect("settings serialise"))
    });
    let value = |json: &serde_json::Value| {
        match json.get(arg.get_id().as_str())? {
            serde_json::Value::Null => None,
            // An enum by the name the command line gives it (serde's `z_score` is `zscore`).
            serde_json::Value::String(s) => {
                let bare = |name: &str| name.replace(['_', '-'], "");
                Some(
                    arg.get_possible_values()
                        .into_iter()
                        .find(|p| bare(p.get_name()) == bare(s))
                        .map_or_else(|| s.clone(), |p| p.get_name().to_string()),
                )
            }
            // Settings held in f32 print as written (0.1, not 0.10000000149011612).
            serde_json::Value::Number(n) if n.is_f64() => n.as_f64().map(|f| {
                if f64::from(f as f32) == f {
                    (f as f32).to_string()
                } else {
                    f.to_string()
                }
            }),
            serde_json::Value::Array(items) => Some(
                items
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            v => Some(v.to_string()),
        }
    };
    let [letor, on_index] = &*PRESETS;
    let default = match (value(letor), value(on_index)) {
        (Some(letor), Some(index)) if letor == index => format!("[default: {letor}]"),
        (Some(letor), Some(index)) => {
            format!("[default: {letor} on LETOR files, {index} on the index]")
        }
        _ => return arg,
    };
    let help = arg.get_help().map(|h| format!("{h} {default}"));
    let long = arg.get_long_help().map(|h| format!("{h}\n\n{default}"));
    let arg = match help {
        Some(h) => arg.help(h),
        None => arg.help(default),
    };
    match long {
        Some(h) => arg.long_help(h),
        None => arg,
    }
}

impl LearnArgs {
    /// `base` with every option given on the command line, checked
    /// ([`TrainSettings::validate`], the message naming the flag).
    pub fn apply(&self, base: TrainSettings) -> Result<TrainSettings, Invalid> {
        let mut s = base;
        // Each flag sets the setting of its name (in its section).
        macro_rules! set {
            ($section:expr; $($field:ident),*) => {
                $(if let Some(v) = &self.$field {
                    $section.$field = v.clone();
                })*
            };
        }
        set!(s; objective, model, seed, valid_fraction, tau, epsilon, weight_a, weight_t,
            lambda, soprc_tau2, soprc_beta, soprc_quantiles, soprc_var_pos, soprc_var_neg, sigma,
            threshold, truncation, lambda_norm);
        set!(s.network; hidden, activation, norm, epochs, lr, batch, patience, ensemble,
            average_epochs, lr_halve_after, beta, momentum_s, weight_decay);
        set!(s.gbdt; trees, leaves, tree_lr, max_depth, max_bins, min_data_in_bin,
            min_data_in_leaf, min_sum_hessian, lambda_l2, min_split_gain, row_fraction,
            feature_fraction, early_stopping_rounds, stable_ap_hessian);
        if self.sample_rows.is_some() {
            s.network.sample_rows = self.sample_rows;
        }
        if self.mixup.is_some() {
            s.network.mixup = self.mixup;
        }
        if self.graded {
            s.graded = true;
        }
        if self.count_from_hessian {
            s.gbdt.count_from_hessian = true;
        }
        // Settings name fields with underscores; the flags with dashes.
        s.validate()
            .map_err(|Invalid(m)| Invalid(format!("--{}", m.replacen('_', "-", 3))))?;
        Ok(s)
    }
}

/// Model selection on the training queries (`rerank::select`).
#[derive(clap::Args, Debug, Clone)]
pub struct SelectArgs {
    /// Choose features and weight decay on the training queries: features are screened by
    /// their training MAP alone, the anchor `first_phase.score` (when trained on) plus the top
    /// k of them (each k of `--select-k`) times each `--select-weight-decay` is trained with
    /// early stopping, and the best validation MAP wins (`rankd cv`: inside each fold, never
    /// reading the held-out fold).
    #[arg(long)]
    pub select: bool,
    /// Numbers of screened features tried by `--select` (a k above the number of non-constant
    /// features means all of them).
    #[arg(long, value_delimiter = ',', default_values_t = SelectionGrid::DEFAULT_TOP_K)]
    pub select_k: Vec<usize>,
    /// Weight decays tried by `--select` (default: `--weight-decay` alone).
    #[arg(long, value_delimiter = ',')]
    pub select_weight_decay: Vec<f64>,
    /// How `--select` picks among the candidates: `one-se`, the simplest candidate within
    /// one standard error (paired over validation queries) of the best validation MAP, or
    /// `best`, the highest validation MAP.
    #[arg(long, value_enum, default_value_t)]
    pub select_rule: SelectionRule,
}

impl SelectArgs {
    /// The grid, when `--select` is on (not with trees, which choose their own features
    /// and have no weight decay).
    pub fn grid(&self, settings: &TrainSettings) -> Result<Option<SelectionGrid>, Invalid> {
        if self.select && settings.model == ModelChoice::Gbdt {
            return Err(Invalid(
                "--select chooses features and weight decay of linear and network models; \
                 trees (--model gbdt) choose their own splits"
                    .into(),
            ));
        }
        Ok(self.select.then(|| SelectionGrid {
            top_k: self.select_k.clone(),
            weight_decay: if self.select_weight_decay.is_empty() {
                vec![settings.network.weight_decay]
            } else {
                self.select_weight_decay.clone()
            },
            anchor: Some("first_phase.score".to_string()),
            rule: self.select_rule,
        }))
    }
}

/// Reads a LETOR/SVMlight file: queries from `groups`, else from `DATA.query` if it exists
/// (LightGBM's convention), else from `qid:`.
pub(crate) fn read_letor(data: &Path, groups: Option<&Path>) -> anyhow::Result<letor::LetorSet> {
    let groups: Option<PathBuf> = groups
        .map(Path::to_path_buf)
        .or_else(|| letor::group_file_for(data));
    Ok(letor::read(data, groups.as_deref())?)
}

/// LETOR sets as [`RankSet`]s over the same feature list `f1..fN`, N the widest of them.
pub(crate) fn rank_sets(sets: &[&letor::LetorSet]) -> anyhow::Result<Vec<RankSet>> {
    let width = sets.iter().map(|s| s.num_features).max().unwrap_or(0);
    sets.iter()
        .map(|s| Ok(RankSet::from_letor_width(s, width)?))
        .collect()
}

/// Runs the trainer with a progress bar (hidden when `quiet`) and one log line per epoch.
pub(crate) fn run_training(
    train: &RankSet,
    valid: Option<&RankSet>,
    config: &TrainConfig,
    quiet: bool,
) -> anyhow::Result<TrainOutcome> {
    if let Some(t) = config.objective.threshold() {
        let c = train.pair_coverage(t);
        if !quiet && (c.only_positives > 0 || c.only_negatives > 0) {
            eprintln!(
                "{} of {} training queries have no relevant/non-relevant pair at grade ≥ {t} \
                 and are skipped by this objective ({} only relevant, {} only non-relevant)",
                c.only_positives + c.only_negatives,
                train.queries.len(),
                c.only_positives,
                c.only_negatives
            );
        }
    }
    let bar = progress(config.epochs() as u64, "epochs", quiet);
    let cancel = AtomicBool::new(false);
    let outcome = rerank::train(
        train,
        valid,
        config,
        &mut |e| {
            let line = format!(
                "epoch {:>3}  loss {:.5}  valid MAP {:.4}  NDCG@10 {:.4}  {:.2}s  {:.0} queries/s  \
                 {:.0} pairs/s{}",
                e.epoch,
                e.train_loss,
                e.valid_map,
                e.valid_ndcg10,
                e.seconds,
                e.queries_per_s,
                e.pairs_per_s,
                if e.best { "  *" } else { "" }
            );
            if !quiet {
                bar.suspend(|| eprintln!("{line}"));
            }
            bar.inc(1);
        },
        &cancel,
    )?;
    bar.finish_and_clear();
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[derive(Parser)]
    struct Learn {
        #[command(flatten)]
        learn: LearnArgs,
    }

    fn help(id: &str) -> String {
        let command = Learn::command();
        let arg = command.get_arguments().find(|a| a.get_id() == id).unwrap();
        arg.get_help().unwrap().to_string()
    }

    #[test]
    fn help_shows_the_presets_values() {
        let (letor, index) = (TrainSettings::letor(), TrainSettings::on_index());
        assert!(help("lr").ends_with(&format!(
            "[default: {} on LETOR files, {} on the index]",
            letor.network.lr, index.network.lr
        )));
        assert!(help("tau").ends_with(&format!("[default: {}]", letor.tau)));
        assert!(
            help("norm").ends_with("[default: zscore]"),
            "{}",
            help("norm")
        );
        // Unset in the presets: the words of the doc comment only.
        assert!(!help("sample_rows").contains("[default"));
    }
}
