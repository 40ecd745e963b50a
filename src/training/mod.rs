//! Training a reranker on the index: the judged first-phase windows as a data set (SPEC §3.1,
//! §3.5; built through the search engine's own rerank path, so training sees what serving
//! reranks), the server's logged clicks as inverse-propensity weighted groups over the same
//! windows ([`clicks`]), both as one pair of training and validation sets ([`index_sets`]),
//! the settings every front end starts from ([`TrainSettings`]), cross-validation as a report
//! value ([`cv`]) and the activation guard ([`guard`]). Front ends (`rankd train`, `rankd cv`,
//! `POST /admin/train`, the demo) fill in settings and print or log; the work happens here.

pub mod clicks;
pub mod cv;
mod dataset;
pub mod guard;
mod sets;
pub mod settings;

pub use dataset::{
    judged_windows, project, rank_set, rank_set_columns, rank_set_named, train_on_windows,
    JudgedQuery, Window, WindowStats, DEFAULT_FIRST_PHASE,
};
pub use sets::{index_sets, IndexSets, SetOptions, SetsReport, Sources};
pub use settings::{ModelChoice, TrainSettings};

/// The fingerprint of the embedder that computed `engine`'s vectors, if it has any: what a
/// model trained on its windows records ([`record_embedder`]).
pub fn embedder_of(engine: &crate::search::Engine) -> Option<String> {
    engine.dense().map(|d| d.index.vectors.model.clone())
}

/// `model` recording `embedder` ([`embedder_of`] the engine its windows came from) when it
/// reads the dense similarity, whose values depend on the embedder; serving then computes
/// that feature only from vectors of the same embedder (`Engine::dense_serves`).
pub fn record_embedder(
    model: crate::rerank::Reranker,
    embedder: Option<&str>,
) -> crate::rerank::Reranker {
    let reads = model
        .feature_names()
        .iter()
        .any(|n| n == crate::features::DENSE_SIMILARITY);
    match embedder {
        Some(fingerprint) if reads => model.with_embedder(fingerprint.to_string()),
        _ => model,
    }
}
