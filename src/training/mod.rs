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
