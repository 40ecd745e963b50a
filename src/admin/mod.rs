//! The operator side of rankd, apart from HTTP: the database, the background job runner, the
//! admin token, and the operations the admin API exposes (document batches, the graph job,
//! evaluation on stored judgments, label batches). `crate::api::admin` maps them to routes.

pub mod auth;
pub mod documents;
pub mod evaluate;
pub mod graph;
pub mod jobs;
pub mod labels;
pub mod models;
pub mod recovery;
pub mod train;

use std::sync::Arc;

use crate::config::Limits;
use crate::db::Db;

pub use auth::AdminToken;
pub use jobs::{Cancelled, JobContext, JobRunner};

/// What the admin API works with, held in the server's state.
pub struct Ops {
    pub db: Db,
    pub jobs: Arc<JobRunner>,
    /// `None`: the admin API is disabled.
    pub token: Option<AdminToken>,
    pub limits: Limits,
    /// Serialises index writes: tantivy allows one writer per index, and a batch waiting
    /// here is better than one failing on the writer lock.
    pub index_writes: tokio::sync::Mutex<()>,
    /// How far the served link scores lag behind the documents.
    pub link_freshness: std::sync::Mutex<graph::Freshness>,
    /// Serialises label-batch selections (SPEC §5), so two requests never offer one pair.
    pub label_batches: tokio::sync::Mutex<()>,
}

impl Ops {
    pub fn new(db: Db, token: Option<&str>, limits: Limits) -> Ops {
        Ops {
            jobs: JobRunner::new(db.clone()),
            db,
            token: token.map(AdminToken::new),
            limits,
            index_writes: tokio::sync::Mutex::new(()),
            link_freshness: std::sync::Mutex::new(graph::Freshness::default()),
            label_batches: tokio::sync::Mutex::new(()),
        }
    }
}
