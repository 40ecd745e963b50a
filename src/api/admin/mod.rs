//! The admin API under `/admin/` (INTERFACE.md): documents, judgments and query texts, jobs,
//! the graph job, the document vectors' progress, TrustRank seeds, evaluation, label batches (SPEC §5), interleaving experiments. Every route, and every unknown path under
//! `/admin/`, passes the bearer-token check first (`auth.rs`).
//!
//! Routes are registered through utoipa's `OpenApiRouter`, so `/openapi.json` lists exactly
//! the routes served (the auth tests walk that list).

pub(super) mod auth;
pub(super) mod body;
pub(super) mod documents;
mod embeddings;
mod evaluate;
pub mod experiments;
pub(super) mod jobs;
pub(super) mod judgments;
pub(super) mod labels;
pub(super) mod models;
mod seeds;

use std::sync::Arc;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiError, AppState};

pub use jobs::{create_error, link_status};

/// The admin routes, relative to `/admin`, behind the token check.
pub fn router(state: Arc<AppState>) -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(documents::upsert))
        .routes(routes!(documents::delete))
        .routes(routes!(judgments::add, judgments::list))
        .routes(routes!(judgments::import_qrels))
        .routes(routes!(judgments::set_queries))
        .routes(routes!(jobs::list))
        .routes(routes!(jobs::get))
        .routes(routes!(jobs::cancel))
        .routes(routes!(jobs::start_graph, jobs::graph_status))
        .routes(routes!(embeddings::status))
        .routes(routes!(seeds::list, seeds::add))
        .routes(routes!(seeds::delete))
        .routes(routes!(evaluate::evaluate))
        .routes(routes!(models::list, models::upload))
        .routes(routes!(models::activate))
        .routes(routes!(models::rollback))
        .routes(routes!(models::delete))
        .routes(routes!(models::start))
        .routes(routes!(experiments::list, experiments::create))
        .routes(routes!(experiments::get))
        .routes(routes!(experiments::stop))
        .routes(routes!(labels::create))
        .routes(routes!(labels::release))
        .routes(routes!(labels::reservations))
        .fallback(|| async { ApiError::not_found("no such admin route") })
        .layer(axum::middleware::from_fn_with_state(
            state,
            auth::require_token,
        ))
}
