//! What `rankd train` and `rankd eval-letor` share: the learning options (objective, model,
//! every hyperparameter), reading LETOR files into [`RankSet`]s, and running the trainer with
//! a progress bar and a per-epoch log on stderr.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::{progress, BadInput};
use crate::corpus::letor;
use crate::rerank::objective::{Soprc, StableAp};
use crate::rerank::select::{SelectionGrid, SelectionRule};
use crate::rerank::{
    self, Activation, MetricConvention, NormKind, Objective, ObjectiveKind, RankSet, TrainConfig,
    TrainOutcome, UnifiedMomentum,
};

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelArg {
    Linear,
    Mlp,
}

/// Objective, model and optimiser options (SPEC §3.2–3.3 names and defaults).
#[derive(clap::Args, Debug, Clone)]
pub struct LearnArgs {
    #[arg(long, value_enum, default_value = "stable-ap")]
    pub objective: ObjectiveKind,
    #[arg(long, value_enum, default_value = "mlp")]
    pub model: ModelArg,
    /// Hidden layer widths of the MLP, comma-separated (one or two layers).
    #[arg(long, value_delimiter = ',', default_value = "32")]
    pub hidden: Vec<usize>,
    #[arg(long, value_enum, default_value = "relu")]
    pub activation: Activation,
    #[arg(long, value_enum, default_value = "zscore")]
    pub norm: NormKind,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, default_value_t = 100)]
    pub epochs: usize,
    /// Learning rate α (0.01: the value tuned for both AP objectives on LETOR, EVALUATION.md).
    #[arg(long, default_value_t = 0.01)]
    pub lr: f64,
    /// Queries per batch.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Early stopping: epochs without a better validation MAP.
    #[arg(long, default_value_t = 15)]
    pub patience: usize,
    /// Train this many networks from different initialisation seeds (same data and
    /// validation split) and score with their mean; linear members fold into one model.
    #[arg(long, default_value_t = 1)]
    pub ensemble: usize,
    /// Tail averaging: early-stop on and keep the mean of the parameters at the end of the
    /// last this-many epochs (1: the parameters themselves).
    #[arg(long, default_value_t = 1)]
    pub average_epochs: usize,
    /// Halve the learning rate after every run of this many epochs without a better
    /// validation MAP (0: constant learning rate).
    #[arg(long, default_value_t = 0)]
    pub lr_halve_after: usize,
    /// Train on a fresh uniform sample of at most this many rows of a query each time it is
    /// in a batch (default: every row).
    #[arg(long, value_parser = parse_sample_rows)]
    pub sample_rows: Option<usize>,
    /// Seed 000's deep feature mixup on the input features: each visit adds, per grade with
    /// two or more rows in the query, one row per row, `u·x + (1 − u)·` a random convex
    /// combination of that grade's rows (the paper's u: 0.9).
    #[arg(long, value_parser = parse_mixup)]
    pub mixup: Option<f32>,
    /// Huber margin τ (stable AP, smoothed AP, SOPRC's τ₁), on sigmoid scores.
    #[arg(long, default_value_t = 0.1)]
    pub tau: f32,
    /// ε of stable AP's outer function h.
    #[arg(long, default_value_t = 0.01)]
    pub epsilon: f64,
    /// a and t of stable AP's weighting ((1 + a)/(r + a))^t.
    #[arg(long, default_value_t = 0.1)]
    pub weight_a: f64,
    #[arg(long, default_value_t = 2.0)]
    pub weight_t: f64,
    /// λ of stable AP's μ̂ moving average.
    #[arg(long, default_value_t = 0.01)]
    pub lambda: f64,
    /// SOPRC (seed 003): temperature τ₂ of the TPR surrogate (τ₁ is --tau).
    #[arg(long, default_value_t = 0.001)]
    pub soprc_tau2: f64,
    /// SOPRC: rate β of the per-query quantile state's moving average.
    #[arg(long, default_value_t = 0.1)]
    pub soprc_beta: f64,
    /// SOPRC: length K of the per-query quantile state.
    #[arg(long, default_value_t = 100)]
    pub soprc_quantiles: usize,
    /// SOPRC: weights λ₁ (positives below their mean) and λ₂ (negatives above theirs) of the
    /// semi-variance regulariser.
    #[arg(long, default_value_t = 1.0)]
    pub soprc_var_pos: f64,
    #[arg(long, default_value_t = 5.0)]
    pub soprc_var_neg: f64,
    /// RankNet's σ.
    #[arg(long, default_value_t = 1.0)]
    pub sigma: f32,
    /// Grades at or above this are relevant (binary objectives).
    #[arg(long, default_value_t = 1)]
    pub threshold: i32,
    /// AP objectives: average the loss over every relevance level of a query (graded AP)
    /// instead of the single `--threshold` split.
    #[arg(long)]
    pub graded: bool,
    /// Momentum β of the unified momentum optimiser.
    #[arg(long, default_value_t = 0.9)]
    pub beta: f64,
    /// s of the unified momentum: 1 Nesterov, 0 heavy ball.
    #[arg(long, default_value_t = 1.0)]
    pub momentum_s: f64,
    #[arg(long, default_value_t = 4e-5)]
    pub weight_decay: f64,
    /// Fraction of the training queries held out for early stopping when no validation
    /// file is given.
    #[arg(long, default_value_t = 0.2)]
    pub valid_fraction: f64,
}

/// `--sample-rows`: a whole number of at least 2 (a sample needs room for a positive and a
/// negative).
fn parse_sample_rows(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 2 => Ok(n),
        _ => Err(format!(
            "{text:?} is not a row count of at least 2 (a sample needs a positive and a negative)"
        )),
    }
}

/// `--mixup`: u in [0, 1].
fn parse_mixup(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(u) if (0.0..=1.0).contains(&u) => Ok(u),
        _ => Err(format!("{text:?} is not a mixup weight u in [0, 1]")),
    }
}

impl LearnArgs {
    /// The command-line defaults, for callers without a command line (the demo).
    pub fn defaults() -> Self {
        #[derive(clap::Parser)]
        struct Only {
            #[command(flatten)]
            learn: LearnArgs,
        }
        <Only as clap::Parser>::parse_from(["rankd"]).learn
    }

    pub fn objective(&self) -> Objective {
        match self.objective {
            ObjectiveKind::StableAp => Objective::StableAp(StableAp {
                tau: self.tau,
                epsilon: self.epsilon,
                a: self.weight_a,
                t: self.weight_t,
                lambda: self.lambda,
                threshold: self.threshold,
                graded: self.graded,
            }),
            ObjectiveKind::Ranknet => Objective::Ranknet { sigma: self.sigma },
            ObjectiveKind::ApHingeQs => Objective::ApHingeQs {
                threshold: self.threshold,
            },
            ObjectiveKind::NdcgHingeQs => Objective::NdcgHingeQs {
                threshold: self.threshold,
            },
            ObjectiveKind::SmoothAp => Objective::SmoothAp {
                tau: self.tau,
                threshold: self.threshold,
                graded: self.graded,
            },
            ObjectiveKind::Soprc => Objective::Soprc(Soprc {
                tau1: self.tau,
                tau2: self.soprc_tau2,
                beta: self.soprc_beta,
                quantiles: self.soprc_quantiles,
                lambda_pos: self.soprc_var_pos,
                lambda_neg: self.soprc_var_neg,
                threshold: self.threshold,
                graded: self.graded,
            }),
        }
    }

    pub fn config(&self, source: String) -> TrainConfig {
        TrainConfig {
            objective: self.objective(),
            hidden: match self.model {
                ModelArg::Linear => Vec::new(),
                ModelArg::Mlp => self.hidden.clone(),
            },
            activation: self.activation,
            normalization: self.norm,
            optimizer: UnifiedMomentum::new(self.lr, self.beta, self.momentum_s, self.weight_decay),
            epochs: self.epochs,
            batch_queries: self.batch,
            patience: self.patience,
            seed: self.seed,
            ensemble: self.ensemble,
            average_epochs: self.average_epochs,
            lr_halve_after: self.lr_halve_after,
            sample_rows: self.sample_rows,
            mixup: self.mixup,
            convention: MetricConvention::Letor,
            source,
            parent: None,
        }
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
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,100")]
    pub select_k: Vec<usize>,
    /// Weight decays tried by `--select` (default: `--weight-decay` alone).
    #[arg(long, value_delimiter = ',')]
    pub select_weight_decay: Vec<f64>,
    /// How `--select` picks among the candidates: `one-se`, the simplest candidate within
    /// one standard error (paired over validation queries) of the best validation MAP, or
    /// `best`, the highest validation MAP.
    #[arg(long, value_enum, default_value = "one-se")]
    pub select_rule: SelectionRule,
}

impl SelectArgs {
    /// The grid, when `--select` is on.
    pub fn grid(&self, learn: &LearnArgs) -> Option<SelectionGrid> {
        self.select.then(|| SelectionGrid {
            top_k: self.select_k.clone(),
            weight_decay: if self.select_weight_decay.is_empty() {
                vec![learn.weight_decay]
            } else {
                self.select_weight_decay.clone()
            },
            anchor: Some("first_phase.score".to_string()),
            rule: self.select_rule,
        })
    }
}

/// Reads a LETOR/SVMlight file: queries from `groups`, else from `DATA.query` if it exists
/// (LightGBM's convention), else from `qid:`.
pub fn read_letor(data: &Path, groups: Option<&Path>) -> anyhow::Result<letor::LetorSet> {
    let groups: Option<PathBuf> = groups
        .map(Path::to_path_buf)
        .or_else(|| letor::group_file_for(data));
    Ok(letor::read(data, groups.as_deref()).map_err(|e| BadInput(e.to_string()))?)
}

/// LETOR sets as [`RankSet`]s over the same feature list `f1..fN`, N the widest of them.
pub fn rank_sets(sets: &[&letor::LetorSet]) -> anyhow::Result<Vec<RankSet>> {
    let width = sets.iter().map(|s| s.num_features).max().unwrap_or(0);
    sets.iter()
        .map(|s| Ok(RankSet::from_letor_width(s, width).map_err(|e| BadInput(e.to_string()))?))
        .collect()
}

/// Runs the trainer with a progress bar (hidden when `quiet`) and one log line per epoch.
pub fn run_training(
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
    let bar = progress(config.epochs as u64, "epochs", quiet);
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
    )
    .map_err(|e| match e {
        rerank::RerankError::Invalid(m) => anyhow::Error::from(BadInput(m)),
        other => other.into(),
    })?;
    bar.finish_and_clear();
    Ok(outcome)
}
