//! The learned reranker (SPEC §3): datasets of judged feature vectors, models with
//! hand-written backward passes, ranking objectives, the optimiser, the trainer and model
//! files. Nothing here knows about the index: features arrive as row-major `f32` matrices
//! with names, so the same code trains on LETOR files and on index-derived features.
//!
//! How the pieces fit:
//! - [`RankSet`] holds rows grouped by query; [`Normalizer`] is fitted on training rows.
//! - [`Net`] is a linear model or an MLP over normalised features (forward and backward).
//! - [`Objective`] turns one query's scores and labels into a loss and `∂loss/∂score`;
//!   adding a pure per-query objective is one more match arm in `objective/mod.rs`.
//! - [`UnifiedMomentum`] is SPEC §3.3's corrected stochastic unified momentum.
//! - [`TrainConfig`] decides a training run: the objective, the seed, and a network's
//!   ([`NetworkParams`]) or trees' (`gbdt::params::GbdtParams`) settings.
//! - [`train`] runs epochs over shuffled query batches with early stopping on validation MAP.
//! - [`Reranker`] is what a server loads: normalisation + network + metadata, one JSON file.
//! - [`select`] chooses features and weight decay from a declared grid on training queries.
//! - [`hinge`] holds seed 001's structured hinge losses (AP, NDCG) with quicksort inference.
//! - [`gbdt`] holds gradient-boosted trees: their scorer, importers (XGBoost, LightGBM,
//!   RankLib), exporter and histogram trainer; a [`Reranker`] holds networks or trees.

mod config;
mod dataset;
mod error;
pub mod gbdt;
pub mod hinge;
mod metrics;
mod model_file;
mod net;
mod normalize;
pub mod objective;
mod optimizer;
pub mod select;
mod trainer;

#[cfg(test)]
pub(crate) mod testutil;

pub use config::{NetworkParams, TrainConfig};
pub use dataset::{PairCoverage, QueryGroup, RankSet};
pub use error::RerankError;
pub use metrics::{evaluate_scores, MetricConvention, RankMetrics};
pub use model_file::{
    map_features, ModelMetrics, Reranker, TrainingInfo, FORMAT_NAME, FORMAT_VERSION,
    FORMAT_VERSION_GBDT,
};
pub use net::{Activation, Net};
pub use normalize::{NormKind, Normalizer};
pub use objective::{Objective, ObjectiveKind, ObjectiveName};
pub use optimizer::UnifiedMomentum;
pub use trainer::{train, EpochLog, TrainOutcome};
