//! A root's jobs: `POST /admin/graph`, the collection's link scores computed over its shards
//! (`crate::cluster::root::graph`) as a job, and the single node's `GET /admin/jobs`,
//! `GET /admin/jobs/{id}` and `POST /admin/jobs/{id}/cancel` over the root's own jobs.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::admin::jobs::{cancel_in, create_error, get_in, list_in, JobList, JobsParams};
use super::error::ApiError;
use super::guard::{begin_write, Commitment};
use super::params::Query;
use super::root_state::RootState;
use crate::admin::jobs::Cancelled;
use crate::db::JobKind;
use crate::graph::GraphError;

/// `POST /admin/graph` on a root: optional TrustRank seeds.
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GraphRequest {
    /// TrustRank seeds by document id (default: the top inverse-PageRank candidates)
    seeds: Option<Vec<String>>,
}

/// Starts recomputing the collection's link scores (SPEC §2) as a job: every shard's
/// documents are gathered, the scores computed once on the root, and each shard's part stored
/// on the replicas that take its writes (a primary publishes it). The parts equal the single
/// index's. Seeds that are no document are refused before the job starts.
#[utoipa::path(
    post, path = "/admin/graph", tag = "admin",
    request_body(content = Option<GraphRequest>, content_type = "application/json",
                 description = "`{\"seeds\":[\"doc-1\",..]}`, optional"),
    responses(
        (status = 202, description = "`{\"job\":ID}`: follow it at /admin/jobs/{id}; its result says what was computed and where each shard's part is stored", body = Object),
        (status = 400, description = "a seed that is no document of the collection (named), or a malformed body"),
        (status = 409, description = "a graph job is already queued or running"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn graph(
    State(state): State<Arc<RootState>>,
    commitment: Option<Extension<Commitment>>,
    raw: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body = super::admin::body::bytes(raw)?;
    let request: GraphRequest = if body.iter().all(u8::is_ascii_whitespace) {
        GraphRequest::default()
    } else {
        super::admin::body::json(&body)?
    };
    if let Some(seeds) = &request.seeds {
        if seeds.is_empty() {
            return Err(ApiError::bad_request(
                "seeds",
                "no seed given: name at least one document, or leave `seeds` out",
            ));
        }
        if let Some((_, id)) = state.root.first_missing(seeds).await? {
            return Err(ApiError::bad_request(
                "seeds",
                format!("TrustRank seed {id:?} is not a document of the collection"),
            ));
        }
    }
    begin_write(commitment)?;
    let (root, seeds) = (state.root.clone(), request.seeds);
    let params = json!({"seeds": seeds});
    let id = state
        .jobs
        .start(JobKind::Graph, params, move |ctx| {
            let runtime = tokio::runtime::Handle::current();
            let outcome = root.recompute_links(
                &runtime,
                seeds,
                &mut |p| ctx.progress(p.step as f64 / p.steps.max(1) as f64, p.stage),
                ctx.cancel_flag(),
            );
            match outcome {
                Err(e) if matches!(e.downcast_ref::<GraphError>(), Some(GraphError::Cancelled)) => {
                    ctx.log("cancelled between algorithms; no shard's scores changed");
                    Err(Cancelled.into())
                }
                Err(e) => Err(e),
                Ok(report) => {
                    ctx.log(&format!(
                        "{} nodes, {} links, {:.2}s; stored on every shard",
                        report.nodes, report.edges, report.seconds
                    ));
                    Ok(serde_json::to_value(report)?)
                }
            }
        })
        .await
        .map_err(create_error)?;
    Ok((StatusCode::ACCEPTED, Json(json!({"job": id}))))
}

/// The root's jobs, newest first.
#[utoipa::path(
    get, path = "/admin/jobs", tag = "admin",
    params(JobsParams),
    responses(
        (status = 200, description = "a page of jobs", body = JobList),
        (status = 400, description = "bad parameter (named)"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn list(
    State(state): State<Arc<RootState>>,
    Query(p): Query<JobsParams>,
) -> Result<Json<JobList>, ApiError> {
    list_in(&state.events.db, p).await
}

/// One of the root's jobs with its progress, result or error, and log lines.
#[utoipa::path(
    get, path = "/admin/jobs/{id}", tag = "admin",
    params(("id" = i64, Path, description = "job id")),
    responses(
        (status = 200, description = "the job, with `logs`: [{ts, line}]"),
        (status = 400, description = "the id is not a positive integer"),
        (status = 404, description = "no such job"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn get(
    State(state): State<Arc<RootState>>,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    get_in(&state.events.db, &raw).await
}

/// Asks one of the root's jobs to stop (a graph job stops between algorithms, before any
/// shard stores its part).
#[utoipa::path(
    post, path = "/admin/jobs/{id}/cancel", tag = "admin",
    params(("id" = i64, Path, description = "job id")),
    responses(
        (status = 200, description = "the queued job is cancelled"),
        (status = 202, description = "the running job will stop at its next check"),
        (status = 400, description = "the id is not a positive integer"),
        (status = 404, description = "no such job"),
        (status = 409, description = "already finished, or already being cancelled"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn cancel(
    State(state): State<Arc<RootState>>,
    commitment: Option<Extension<Commitment>>,
    Path(raw): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    cancel_in(&state.jobs, commitment, &raw).await
}
