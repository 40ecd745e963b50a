//! What decides a training run ([`TrainConfig`]): the objective, the seed, and the model's
//! own settings, a network's ([`NetworkParams`]) or trees' ([`GbdtParams`]). The trainers
//! (`trainer.rs` for networks, `gbdt::train` for trees) take it as it is; the training
//! settings every front end fills in (`crate::training::TrainSettings`) hold the same
//! sections under the same names.

use serde::{Deserialize, Serialize};

use super::gbdt::params::GbdtParams;
use super::{Activation, MetricConvention, NormKind, Objective, RerankError, UnifiedMomentum};

/// The network's and its optimiser's settings (SPEC §3.2–3.3; the names of `rankd train`'s
/// flags and `POST /admin/train`'s fields), each checked in [`NetworkParams::validate`] and
/// nowhere else. Absent fields take the defaults: an MLP of 32 ReLU units on z-scored
/// features, stable AP's tuned rate on the LETOR example (EVALUATION.md) and the paper's
/// momentum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NetworkParams {
    /// Hidden layer widths: empty = linear model; at most two layers.
    pub hidden: Vec<usize>,
    pub activation: Activation,
    /// Input normalisation, fitted on the training rows.
    pub norm: NormKind,
    pub epochs: usize,
    /// Learning rate α.
    pub lr: f64,
    /// Queries per batch.
    pub batch: usize,
    /// Early stopping: stop after this many epochs without a better validation MAP.
    pub patience: usize,
    /// Networks trained from different initialisation (and shuffle) seeds, same data and
    /// validation split; the model scores with their mean. Linear members are folded into
    /// one linear model. 1: a single network.
    pub ensemble: usize,
    /// Tail averaging: evaluate and keep the mean of the parameters at the end of the last
    /// this-many epochs instead of the current ones. 1: no averaging.
    pub average_epochs: usize,
    /// Learning-rate schedule: halve the learning rate after every run of this many epochs
    /// without a better validation MAP (0: constant learning rate).
    pub lr_halve_after: usize,
    /// Each time a query is in a batch, train on a fresh uniform sample of at most this many
    /// of its rows (None: every row). Objectives that know the query's own positive rate
    /// (SOPRC) take it from the whole query; the others see only the sample.
    pub sample_rows: Option<usize>,
    /// Deep feature mixup of seed 000 §7.1.1.2, on the input features: each visit adds, per
    /// grade with two or more of the query's rows, as many rows `u·x_i + (1 − u)·Σ_j w_j x_j`
    /// (random convex weights w over that grade's rows), labelled with the grade.
    pub mixup: Option<f32>,
    /// Momentum β of the unified momentum optimiser.
    pub beta: f64,
    /// The unified momentum's s: 1 Nesterov, 0 heavy ball.
    pub momentum_s: f64,
    pub weight_decay: f64,
}

impl Default for NetworkParams {
    fn default() -> Self {
        NetworkParams {
            hidden: vec![32],
            activation: Activation::Relu,
            norm: NormKind::ZScore,
            epochs: 100,
            lr: 0.01,
            batch: 16,
            patience: 15,
            ensemble: 1,
            average_epochs: 1,
            lr_halve_after: 0,
            sample_rows: None,
            mixup: None,
            beta: 0.9,
            momentum_s: 1.0,
            weight_decay: 4e-5,
        }
    }
}

/// The widest hidden layer a request may ask for: 32 × the default width; two layers of
/// it hold 1M weights, kept four times over (parameters, gradient, two moments).
pub const MAX_HIDDEN: usize = 1_024;
/// The most networks an ensemble may train (each is a full training run).
pub const MAX_ENSEMBLE: usize = 64;
/// The most epochs whose parameters tail averaging keeps (one copy of the network each).
pub const MAX_AVERAGE_EPOCHS: usize = 100;

impl NetworkParams {
    /// Checks every value, naming the first one out of range. The upper bounds keep what
    /// a request can make a training job allocate within what a server holds.
    pub fn validate(&self) -> Result<(), RerankError> {
        let bad = |m: String| Err(RerankError::invalid(m));
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return bad(format!("lr must be a positive number, got {}", self.lr));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad(format!(
                "weight_decay must be a finite number ≥ 0, got {}",
                self.weight_decay
            ));
        }
        if !(0.0..1.0).contains(&self.beta) {
            return bad(format!("beta must be in [0, 1), got {}", self.beta));
        }
        if !(0.0..=1.0).contains(&self.momentum_s) {
            return bad(format!(
                "momentum_s must be in [0, 1], got {}",
                self.momentum_s
            ));
        }
        if !(1..=10_000).contains(&self.epochs) {
            return bad(format!("epochs must be in 1..=10000, got {}", self.epochs));
        }
        for (name, v) in [("batch", self.batch), ("patience", self.patience)] {
            if v == 0 {
                return bad(format!("{name} must be at least 1, got 0"));
            }
        }
        for (name, v, max) in [
            ("ensemble", self.ensemble, MAX_ENSEMBLE),
            ("average_epochs", self.average_epochs, MAX_AVERAGE_EPOCHS),
        ] {
            if !(1..=max).contains(&v) {
                return bad(format!("{name} must be in 1..={max}, got {v}"));
            }
        }
        if self.hidden.len() > 2 || self.hidden.contains(&0) {
            return bad(format!(
                "hidden must be one or two positive layer widths, got {:?}",
                self.hidden
            ));
        }
        if let Some(&w) = self.hidden.iter().find(|&&w| w > MAX_HIDDEN) {
            return bad(format!(
                "hidden layer widths must be at most {MAX_HIDDEN}, got {w}"
            ));
        }
        if let Some(n) = self.sample_rows.filter(|&n| n < 2) {
            return bad(format!(
                "sample_rows must be at least 2 (a sample needs a positive and a negative), got {n}"
            ));
        }
        if let Some(u) = self.mixup.filter(|u| !(0.0..=1.0).contains(u)) {
            return bad(format!("mixup must be in [0, 1], got {u}"));
        }
        Ok(())
    }

    /// A fresh optimiser with these settings.
    pub fn optimizer(&self) -> UnifiedMomentum {
        UnifiedMomentum::new(self.lr, self.beta, self.momentum_s, self.weight_decay)
    }
}

/// Everything that decides a training run: the objective, the model's own settings (a
/// network's, or trees' when `gbdt` is given) and where the run comes from.
#[derive(Debug, Clone)]
pub struct TrainConfig {
    pub objective: Objective,
    /// The network to train (unused with `gbdt`).
    pub network: NetworkParams,
    /// Train gradient-boosted trees with these parameters instead of a network
    /// ([`super::gbdt::train`]).
    pub gbdt: Option<GbdtParams>,
    /// Initialisation, shuffles, bagging and feature sampling.
    pub seed: u64,
    pub convention: MetricConvention,
    /// Where the data came from (stored in the model file).
    pub source: String,
    pub parent: Option<String>,
    /// Trees only: the training groups that learn from their logged result lists by
    /// unbiased LambdaMART instead of from their labels ([`super::gbdt::train::unbiased`]).
    pub click_lists: Option<std::sync::Arc<super::gbdt::train::unbiased::ClickLists>>,
}

impl TrainConfig {
    /// Epochs a run goes through at most: boosting rounds with trees (what progress counts).
    pub fn epochs(&self) -> usize {
        self.gbdt.as_ref().map_or(self.network.epochs, |p| p.trees)
    }
}
