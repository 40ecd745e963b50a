//! The trees' hyperparameters, in their own file because both the trainer (`train`) and the
//! model file (`model`, which records how its trees were made) need them.

use serde::{Deserialize, Serialize};

use crate::rerank::objective::StableApHessian;
use crate::rerank::RerankError;

/// The trees' hyperparameters (LightGBM's meaning and, where it has one, its default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GbdtParams {
    /// Boosting rounds (trees) at most.
    pub rounds: usize,
    /// Shrinkage η, folded into every leaf value.
    pub learning_rate: f64,
    /// Leaves per tree (leaf-wise growth).
    pub num_leaves: usize,
    /// Depth limit (0: none).
    pub max_depth: usize,
    /// Quantile bins per feature, at most 255 (plus one for missing values).
    pub max_bins: usize,
    /// Rows a bin holds at least when it closes (LightGBM's `min_data_in_bin`; 1: every
    /// distinct value its own bin while there are bins enough).
    #[serde(default = "default_min_data_in_bin")]
    pub min_data_in_bin: usize,
    pub min_data_in_leaf: usize,
    /// Check `min_data_in_leaf` against LightGBM's hessian-based estimate of the rows
    /// instead of the true count (for parity runs against LightGBM; see `train::grow`).
    #[serde(default)]
    pub count_from_hessian: bool,
    pub min_sum_hessian: f64,
    /// λ: L2 penalty on leaf values.
    pub lambda_l2: f64,
    /// γ: a split must gain more than this.
    pub min_split_gain: f64,
    /// Fraction of rows each tree is grown on (bagging; 1: all).
    pub row_fraction: f64,
    /// Fraction of features each tree may split on (1: all).
    pub feature_fraction: f64,
    /// Stop after this many rounds without a better validation MAP, keeping the best round
    /// (0: run every round and keep them all).
    pub early_stopping_rounds: usize,
    /// Stable AP only: the Newton step's curvature.
    pub stable_ap_hessian: StableApHessian,
    pub seed: u64,
}

/// LightGBM's `min_data_in_bin` (parameter sets written before it existed read as this).
fn default_min_data_in_bin() -> usize {
    3
}

impl Default for GbdtParams {
    fn default() -> Self {
        GbdtParams {
            rounds: 100,
            learning_rate: 0.1,
            num_leaves: 31,
            max_depth: 0,
            max_bins: 255,
            min_data_in_bin: default_min_data_in_bin(),
            min_data_in_leaf: 20,
            count_from_hessian: false,
            min_sum_hessian: 1e-3,
            lambda_l2: 0.0,
            min_split_gain: 0.0,
            row_fraction: 1.0,
            feature_fraction: 1.0,
            early_stopping_rounds: 0,
            stable_ap_hessian: StableApHessian::Bound,
            seed: 1,
        }
    }
}

impl GbdtParams {
    pub fn validate(&self) -> Result<(), RerankError> {
        let fraction = |v: f64| v > 0.0 && v <= 1.0;
        let checks = [
            ("rounds", self.rounds as f64, self.rounds >= 1),
            (
                "learning_rate",
                self.learning_rate,
                self.learning_rate.is_finite() && self.learning_rate > 0.0,
            ),
            ("num_leaves", self.num_leaves as f64, self.num_leaves >= 2),
            (
                "min_data_in_bin",
                self.min_data_in_bin as f64,
                self.min_data_in_bin >= 1,
            ),
            (
                "max_bins",
                self.max_bins as f64,
                (2..=255).contains(&self.max_bins),
            ),
            (
                "min_sum_hessian",
                self.min_sum_hessian,
                self.min_sum_hessian >= 0.0,
            ),
            ("lambda_l2", self.lambda_l2, self.lambda_l2 >= 0.0),
            (
                "min_split_gain",
                self.min_split_gain,
                self.min_split_gain >= 0.0,
            ),
            (
                "row_fraction",
                self.row_fraction,
                fraction(self.row_fraction),
            ),
            (
                "feature_fraction",
                self.feature_fraction,
                fraction(self.feature_fraction),
            ),
        ];
        match checks.iter().find(|c| !c.2) {
            None => Ok(()),
            Some((name, value, _)) => Err(RerankError::invalid(format!(
                "tree parameter {name} = {value} is out of range"
            ))),
        }
    }
}
