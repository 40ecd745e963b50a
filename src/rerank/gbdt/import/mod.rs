//! Tree ensembles trained by other libraries, read with their exact decision rules.
//!
//! Each importer converts the library's split test into the one form of [`Forest`] (left
//! iff `x ≤ t` in `f32`, a per-node side for missing values) so that every row reaches the
//! same leaf as in the library itself, including rows exactly on a threshold:
//!
//! | library | split test | missing value | leaf values |
//! |---|---|---|---|
//! | XGBoost JSON (`save_model`) | `x < t`, `f32` | NaN → `default_left` | `split_conditions` of leaves; plus `base_score` |
//! | LightGBM text, v4 | `x ≤ t`, `f64` | by `decision_type`: None (NaN → 0.0), Zero (NaN and \|x\| ≤ 1e-35 → default side), NaN (NaN → default side) | `leaf_value`, shrinkage included |
//! | RankLib LambdaMART XML | `x ≤ t`, `f32`, feature ids 1-based | none (NaN compares false → right) | `output × tree weight` |
//!
//! `x < t` over `f32` values is `x ≤ t⁻` with `t⁻` the largest `f32` below `t`; `x ≤ t`
//! with an `f64` threshold is, for an `f32` value `x`, `x ≤ ⌊t⌋₃₂` with `⌊t⌋₃₂` the largest
//! `f32` not above `t` ([`f32_at_or_below`]). Both rewritings are exact, so the scores
//! differ from the library's only by the order and width of the final additions.
//!
//! What is refused, with the tree and node named: categorical splits (rankd's features are
//! numeric), LightGBM linear trees and multi-class or multi-output models, XGBoost boosters
//! other than `gbtree` and objectives whose base score transform rankd does not know.
//!
//! **Features.** A model that names its inputs (XGBoost `feature_names`, LightGBM
//! `feature_names=` other than its automatic `Column_0, Column_1, …`) is bound to a feature
//! set by name, and a name the set does not have is an error naming it; a model without
//! names is bound by position (column `i`, RankLib id `i + 1`, is the set's feature `i`).
//! The bound model lists only the features its splits read.

pub mod lightgbm;
pub mod ranklib;
pub mod xgboost;

use super::forest::Forest;

/// The most features a model may read. rankd's feature sets have hundreds and public LETOR
/// sets at most 700; a count far beyond that is a corrupt file, and believing it would
/// allocate per-feature tables of that size (found by the `model` fuzz target: a LightGBM
/// `max_feature_idx` of 9.5e12 aborted the process on a 152 TB allocation).
pub(crate) const MAX_FEATURES: usize = 1 << 16;

/// Refuses a feature count (or a largest feature id) beyond [`MAX_FEATURES`].
pub(crate) fn check_feature_count(n: u64, what: &str) -> Result<usize, String> {
    if n > MAX_FEATURES as u64 {
        return Err(format!(
            "{what} {n} is beyond the {MAX_FEATURES} features a model may read"
        ));
    }
    Ok(n as usize)
}

/// Which library wrote a model.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Library {
    Xgboost,
    Lightgbm,
    Ranklib,
}

impl Library {
    pub fn name(self) -> &'static str {
        match self {
            Library::Xgboost => "xgboost",
            Library::Lightgbm => "lightgbm",
            Library::Ranklib => "ranklib",
        }
    }

    /// The library whose file format `bytes` look like: XGBoost JSON (an object with a
    /// `learner`), LightGBM text (`tree` and `version=` lines before the first tree),
    /// RankLib XML (an `<ensemble>` element). Nothing else is guessed.
    pub fn detect(bytes: &[u8]) -> Option<Library> {
        let text = std::str::from_utf8(bytes).ok()?;
        let start = text.trim_start();
        if start.starts_with('{') {
            let value: serde_json::Value = serde_json::from_str(start).ok()?;
            return value.get("learner").is_some().then_some(Library::Xgboost);
        }
        let head: Vec<&str> = start.lines().take(8).map(str::trim).collect();
        if head.first() == Some(&"tree") && head.iter().any(|l| l.starts_with("version=")) {
            return Some(Library::Lightgbm);
        }
        start.contains("<ensemble>").then_some(Library::Ranklib)
    }

    /// Reads a model file of this library (the error says what is wrong, no file name).
    pub fn parse(self, bytes: &[u8]) -> Result<Imported, String> {
        let text = || {
            std::str::from_utf8(bytes)
                .map_err(|e| format!("the {} model is not UTF-8: {e}", self.name()))
        };
        match self {
            Library::Xgboost => xgboost::parse(bytes),
            Library::Lightgbm => lightgbm::parse(text()?),
            Library::Ranklib => ranklib::parse(text()?),
        }
    }
}

/// A model read from another library's file, over that model's own input columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub library: Library,
    /// The objective the file names (e.g. `lambdarank`, `rank:ndcg`), if any.
    pub objective: Option<String>,
    /// The model's names for its input columns, if it has real ones.
    pub feature_names: Option<Vec<String>>,
    pub forest: Forest,
}

impl Imported {
    /// Binds the model to `feature_set` (see the module doc): returns the names of the
    /// features the splits read and the forest over exactly those, in that order.
    pub fn bind(&self, feature_set: &[String]) -> Result<(Vec<String>, Forest), String> {
        let columns = self.forest.num_features;
        let set_index: std::collections::HashMap<&str, usize> = feature_set
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        // The feature-set index of every column of the model.
        let column_feature: Vec<Option<usize>> = match &self.feature_names {
            Some(names) => {
                let unknown: Vec<&str> = names
                    .iter()
                    .filter(|n| !set_index.contains_key(n.as_str()))
                    .map(String::as_str)
                    .collect();
                if !unknown.is_empty() {
                    return Err(format!(
                        "the {} model names feature{} {} which the feature set does not have",
                        self.library.name(),
                        if unknown.len() == 1 { "" } else { "s" },
                        unknown.join(", ")
                    ));
                }
                names.iter().map(|n| Some(set_index[n.as_str()])).collect()
            }
            None => (0..columns)
                .map(|c| (c < feature_set.len()).then_some(c))
                .collect(),
        };
        let used = self.forest.used_features();
        let mut names = Vec::with_capacity(used.len());
        let mut remap = vec![usize::MAX; columns];
        for (new, &column) in used.iter().enumerate() {
            let feature = column_feature[column].ok_or_else(|| {
                format!(
                    "the {} model splits on column {} ({}), but the feature set has only {} \
                     features",
                    self.library.name(),
                    column,
                    match self.library {
                        Library::Ranklib => format!("RankLib feature id {}", column + 1),
                        _ => "unnamed, bound by position".to_string(),
                    },
                    feature_set.len()
                )
            })?;
            names.push(feature_set[feature].clone());
            remap[column] = new;
        }
        let mut forest = self.forest.clone();
        forest.remap_features(&remap, used.len().max(1));
        if used.is_empty() {
            // A forest of leaves only still needs one input column to be a valid model.
            names.push(
                feature_set
                    .first()
                    .cloned()
                    .ok_or("the feature set is empty")?,
            );
        }
        Ok((names, forest))
    }
}

/// The largest `f32` not above `t` (−∞ below `−f32::MAX`, `f32::MAX` for `t ≥ f32::MAX`):
/// for every `f32` value `x`, `x as f64 ≤ t ⇔ x ≤ f32_at_or_below(t)`.
pub(crate) fn f32_at_or_below(t: f64) -> f32 {
    let nearest = t as f32;
    if f64::from(nearest) > t {
        nearest.next_down()
    } else {
        nearest
    }
}

/// The largest `f32` below `t`: for every `f32` value `x`, `x < t ⇔ x ≤ f32_below(t)`.
/// `None` for `t = −∞` (no `f32` is below it; such a split sends every value right).
pub(crate) fn f32_below(t: f32) -> Option<f32> {
    (t != f32::NEG_INFINITY).then(|| t.next_down())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The threshold rewritings against the comparisons they replace, on values around
    /// thresholds in every binade (brute force over neighbours).
    #[test]
    fn threshold_rewritings_are_exact() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut specials = vec![0.0f64, -0.0, 1e-35, -1e-35, 1e300, -1e300, 0.1, 1.0 / 3.0];
        specials.extend([f64::from(f32::MAX), f64::from(f32::MIN_POSITIVE)]);
        for trial in 0..20_000 {
            let t: f64 = if trial < specials.len() {
                specials[trial]
            } else {
                let mantissa = rng.random_range(-1.0..1.0);
                mantissa * 10f64.powi(rng.random_range(-40..40))
            };
            let below = f32_at_or_below(t);
            let near = t as f32;
            for x in [
                near.next_down().next_down(),
                near.next_down(),
                near,
                near.next_up(),
                near.next_up().next_up(),
                below,
            ] {
                assert_eq!(f64::from(x) <= t, x <= below, "t {t:e} x {x:e}");
            }
            let t32 = near;
            if t32.is_finite() {
                let b = f32_below(t32).unwrap();
                for x in [
                    t32.next_down().next_down(),
                    t32.next_down(),
                    t32,
                    t32.next_up(),
                ] {
                    assert_eq!(x < t32, x <= b, "t {t32:e} x {x:e}");
                }
            }
        }
        assert_eq!(f32_below(f32::NEG_INFINITY), None);
        assert_eq!(f32_at_or_below(f64::INFINITY), f32::INFINITY);
        assert_eq!(f32_at_or_below(1e300), f32::MAX);
        assert_eq!(f32_at_or_below(-1e300), f32::NEG_INFINITY);
    }

    fn imported(names: Option<Vec<&str>>) -> Imported {
        use super::super::forest::{Node, Tree};
        Imported {
            library: Library::Lightgbm,
            objective: None,
            feature_names: names.map(|n| n.into_iter().map(String::from).collect()),
            forest: Forest {
                num_features: 3,
                base_score: 0.0,
                trees: vec![Tree {
                    nodes: vec![
                        Node::Split {
                            feature: 2,
                            threshold: 0.5,
                            nan_left: false,
                            zero_missing: false,
                            left: 1,
                            right: 2,
                        },
                        Node::Leaf { value: 1.0 },
                        Node::Leaf { value: 2.0 },
                    ],
                    cover: Vec::new(),
                }],
            },
        }
    }

    #[test]
    fn binding_by_name_and_position() {
        let set: Vec<String> = ["bm25", "pagerank", "url.depth", "bm25f"]
            .map(String::from)
            .to_vec();
        let (names, forest) = imported(Some(vec!["pagerank", "bm25", "bm25f"]))
            .bind(&set)
            .unwrap();
        assert_eq!(names, ["bm25f"]);
        assert_eq!(forest.num_features, 1);
        assert_eq!(forest.predict_row(&[0.7]), 2.0);
        let err = imported(Some(vec!["pagerank", "clicks", "spam"]))
            .bind(&set)
            .unwrap_err();
        assert_eq!(
            err,
            "the lightgbm model names features clicks, spam which the feature set does not have"
        );
        let (names, _) = imported(None).bind(&set).unwrap();
        assert_eq!(names, ["url.depth"]);
        let err = imported(None).bind(&set[..2]).unwrap_err();
        assert!(err.contains("splits on column 2"), "{err}");
    }
}
