//! Training a reranker on judgments: the judged first-phase windows of the index as a data
//! set (SPEC §3.1, §3.5; built through the search engine's own rerank path, so training sees
//! what serving reranks), the settings every front end starts from ([`TrainSettings`]),
//! cross-validation as a report value ([`cv`]), and "train on the index"
//! ([`train_on_index`]). Front ends (`rankd train`, `rankd cv`, `POST /admin/train`, the
//! demo) fill in settings and print or log; the work happens here.

pub mod cv;
mod dataset;
pub mod guard;
pub mod settings;

pub use dataset::{
    judged_windows, project, rank_set, rank_set_columns, rank_set_named, train_on_windows,
    JudgedQuery, Window, WindowStats, DEFAULT_FIRST_PHASE,
};
pub use settings::{ModelChoice, TrainSettings};
