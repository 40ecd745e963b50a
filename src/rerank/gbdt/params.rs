//! The trees' hyperparameters, in their own file because the trainer (`train`), the model
//! file (`model`, which records how its trees were made) and the training settings
//! (`crate::training::TrainSettings`, whose tree section this is) all need them. The field
//! names are the ones `rankd train`'s flags and `POST /admin/train` use; each is checked in
//! [`GbdtParams::validate`] and nowhere else.

use serde::{Deserialize, Serialize};

use super::forest::{MAX_FOREST_NODES, MAX_TREE_DEPTH};
use crate::rerank::objective::StableApHessian;
use crate::rerank::RerankError;

/// The trees' hyperparameters (LightGBM's meaning and, where it has one, its default).
/// Absent fields take the defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GbdtParams {
    /// Boosting rounds (trees) at most.
    pub trees: usize,
    /// Leaves per tree (leaf-wise growth).
    pub leaves: usize,
    /// Shrinkage η, folded into every leaf value.
    pub tree_lr: f64,
    /// Depth limit (0: none but [`MAX_TREE_DEPTH`], the deepest tree a model may hold).
    pub max_depth: usize,
    /// Quantile bins per feature, at most 255 (plus one for missing values).
    pub max_bins: usize,
    /// Rows a bin holds at least when it closes (LightGBM's `min_data_in_bin`; 1: every
    /// distinct value its own bin while there are bins enough).
    pub min_data_in_bin: usize,
    pub min_data_in_leaf: usize,
    /// Check `min_data_in_leaf` against LightGBM's estimate of a child's rows (each bin's
    /// hessian times the leaf's rows per unit of hessian, rounded; LightGBM's histograms
    /// keep no counts) instead of the true count: for parity runs against LightGBM.
    pub count_from_hessian: bool,
    pub min_sum_hessian: f64,
    /// λ: L2 penalty on leaf values.
    pub lambda_l2: f64,
    /// γ: a split must gain more than this.
    pub min_split_gain: f64,
    /// Fraction of rows each tree is grown on (bagging, a new sample every round; 1: all).
    pub row_fraction: f64,
    /// Fraction of features each tree may split on (1: all).
    pub feature_fraction: f64,
    /// Stop after this many rounds without a better validation MAP, keeping the best round
    /// (0: run every round and keep them all).
    pub early_stopping_rounds: usize,
    /// Stable AP only: the Newton step's curvature (SPEC §3.6).
    pub stable_ap_hessian: StableApHessian,
}

impl Default for GbdtParams {
    fn default() -> Self {
        GbdtParams {
            trees: 100,
            leaves: 31,
            tree_lr: 0.1,
            max_depth: 0,
            max_bins: 255,
            min_data_in_bin: 3,
            min_data_in_leaf: 20,
            count_from_hessian: false,
            min_sum_hessian: 1e-3,
            lambda_l2: 0.0,
            min_split_gain: 0.0,
            row_fraction: 1.0,
            feature_fraction: 1.0,
            early_stopping_rounds: 0,
            stable_ap_hessian: StableApHessian::Bound,
        }
    }
}

/// What model files written before the names followed the flags call `trees`, `leaves` and
/// `tree_lr` (they also recorded the seed here, which is the training record's `seed`).
const STORED_NAMES: [(&str, &str); 3] = [
    ("rounds", "trees"),
    ("num_leaves", "leaves"),
    ("learning_rate", "tree_lr"),
];

/// A model file's parameters (`deserialize_with`), under either names: a file keeps
/// loading whichever rankd wrote it.
pub(crate) fn deserialize_stored<'de, D>(d: D) -> Result<Option<GbdtParams>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::Error;
    let Some(mut fields) = Option::<serde_json::Map<String, serde_json::Value>>::deserialize(d)?
    else {
        return Ok(None);
    };
    for (stored, name) in STORED_NAMES {
        if let Some(v) = fields.remove(stored) {
            fields.entry(name).or_insert(v);
        }
    }
    serde_json::from_value(serde_json::Value::Object(fields))
        .map(Some)
        .map_err(D::Error::custom)
}

impl GbdtParams {
    /// The depth a tree may grow to: `max_depth`, or [`MAX_TREE_DEPTH`] for none.
    pub fn depth_limit(&self) -> usize {
        if self.max_depth > 0 {
            self.max_depth
        } else {
            MAX_TREE_DEPTH
        }
    }

    /// Checks every value, naming the first one out of range.
    pub fn validate(&self) -> Result<(), RerankError> {
        let bad = |m: String| Err(RerankError::invalid(m));
        for (name, v, range) in [
            ("trees", self.trees, 1..=10_000),
            ("leaves", self.leaves, 2..=131_072),
            ("max_bins", self.max_bins, 2..=255),
            ("max_depth", self.max_depth, 0..=MAX_TREE_DEPTH),
        ] {
            if !range.contains(&v) {
                return bad(format!("{name} must be in {range:?}, got {v}"));
            }
        }
        // The model must load: its largest possible forest within the forest's node limit.
        let nodes = self.trees * (2 * self.leaves - 1);
        if nodes > MAX_FOREST_NODES {
            return bad(format!(
                "trees × (2·leaves − 1) must be at most {MAX_FOREST_NODES} (the nodes a model \
                 may hold), got {} × {} nodes",
                self.trees,
                2 * self.leaves - 1
            ));
        }
        if self.min_data_in_bin == 0 {
            return bad("min_data_in_bin must be at least 1, got 0".into());
        }
        if !(self.tree_lr.is_finite() && self.tree_lr > 0.0) {
            return bad(format!(
                "tree_lr must be a positive number, got {}",
                self.tree_lr
            ));
        }
        for (name, v) in [
            ("min_sum_hessian", self.min_sum_hessian),
            ("lambda_l2", self.lambda_l2),
            ("min_split_gain", self.min_split_gain),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{name} must be a finite number ≥ 0, got {v}"));
            }
        }
        for (name, v) in [
            ("row_fraction", self.row_fraction),
            ("feature_fraction", self.feature_fraction),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return bad(format!("{name} must be in (0, 1], got {v}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_named_with_their_range() {
        for (bad, says) in [
            (
                GbdtParams {
                    trees: 0,
                    ..GbdtParams::default()
                },
                "trees must be in 1..=10000, got 0",
            ),
            (
                GbdtParams {
                    max_bins: 300,
                    ..GbdtParams::default()
                },
                "max_bins must be in 2..=255, got 300",
            ),
            (
                GbdtParams {
                    min_data_in_bin: 0,
                    ..GbdtParams::default()
                },
                "min_data_in_bin must be at least 1, got 0",
            ),
            (
                GbdtParams {
                    tree_lr: f64::NAN,
                    ..GbdtParams::default()
                },
                "tree_lr must be a positive number",
            ),
            (
                GbdtParams {
                    row_fraction: 0.0,
                    ..GbdtParams::default()
                },
                "row_fraction must be in (0, 1]",
            ),
            (
                GbdtParams {
                    max_depth: 1_000_000,
                    ..GbdtParams::default()
                },
                "max_depth must be in 0..=2048, got 1000000",
            ),
            (
                GbdtParams {
                    trees: 10_000,
                    leaves: 1_000,
                    ..GbdtParams::default()
                },
                "trees × (2·leaves − 1) must be at most 4194304",
            ),
        ] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.starts_with(says), "{e}");
        }
        GbdtParams::default().validate().unwrap();
    }

    /// A model file's parameters as written before the names followed the flags.
    #[test]
    fn reads_the_older_names() {
        let old = r#"{"rounds": 7, "learning_rate": 0.3, "num_leaves": 5, "max_depth": 0,
            "max_bins": 255, "min_data_in_leaf": 20, "min_sum_hessian": 0.001,
            "lambda_l2": 0.0, "min_split_gain": 0.0, "row_fraction": 1.0,
            "feature_fraction": 1.0, "early_stopping_rounds": 0,
            "stable_ap_hessian": "bound", "seed": 1}"#;
        let p = deserialize_stored(&mut serde_json::Deserializer::from_str(old))
            .unwrap()
            .unwrap();
        assert_eq!(
            p,
            GbdtParams {
                trees: 7,
                tree_lr: 0.3,
                leaves: 5,
                ..GbdtParams::default()
            }
        );
        let now = serde_json::to_string(&p).unwrap();
        let again = deserialize_stored(&mut serde_json::Deserializer::from_str(&now)).unwrap();
        assert_eq!(again, Some(p));
    }
}
