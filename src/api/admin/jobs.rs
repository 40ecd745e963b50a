//! Background jobs: list, one job with its log, cancel; and `POST /admin/graph`, which starts
//! the link-score recomputation as a job.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::body;
use crate::admin::graph;
use crate::api::params::Params;
use crate::api::{ApiError, AppState};
use crate::db::jobs::CreateError;
use crate::db::{CancelOutcome, JobKind, JobStatus};

/// A job id from the path: a positive integer.
fn job_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>().ok().filter(|&id| id > 0).ok_or_else(|| {
        ApiError::bad_request("id", format!("job id {raw:?} is not a positive integer"))
    })
}

pub fn create_error(e: CreateError) -> ApiError {
    match e {
        CreateError::Busy(_) => ApiError::conflict(e.to_string()),
        CreateError::Db(e) => ApiError::internal(e),
    }
}

/// Lists jobs, newest first.
#[utoipa::path(
    get, path = "/jobs", tag = "admin",
    params(
        ("kind" = Option<String>, Query, description = "train, graph or eval"),
        ("status" = Option<String>, Query, description = "queued, running, succeeded, failed or cancelled"),
        ("limit" = Option<i64>, Query, description = "1..=1000, default 100"),
        ("offset" = Option<i64>, Query, description = "default 0"),
    ),
    responses(
        (status = 200, description = "`{\"total\":N,\"jobs\":[..]}`"),
        (status = 400, description = "bad parameter (named)"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(state): State<Arc<AppState>>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(raw.as_deref(), &["kind", "status", "limit", "offset"])?;
    let (limit, offset) = body::page(&p)?;
    let kind = p
        .str("kind")
        .map(|k| {
            k.parse::<JobKind>()
                .map_err(|e| ApiError::bad_request("kind", e))
        })
        .transpose()?;
    let status = p
        .str("status")
        .map(|s| {
            s.parse::<JobStatus>()
                .map_err(|e| ApiError::bad_request("status", e))
        })
        .transpose()?;
    let (jobs, total) = state
        .ops
        .db
        .jobs(kind, status, limit, offset)
        .await
        .map_err(ApiError::internal)?;
    let jobs: Vec<Value> = jobs.iter().map(|j| j.to_json()).collect();
    Ok(Json(json!({"total": total, "jobs": jobs})))
}

/// One job with its progress, result or error, and log lines.
#[utoipa::path(
    get, path = "/jobs/{id}", tag = "admin",
    params(("id" = i64, Path, description = "job id")),
    responses(
        (status = 200, description = "the job, with `logs`: [{ts, line}]"),
        (status = 400, description = "the id is not a positive integer"),
        (status = 404, description = "no such job"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn get(
    State(state): State<Arc<AppState>>,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = job_id(&raw)?;
    let db = &state.ops.db;
    let Some(job) = db.job(id).await.map_err(ApiError::internal)? else {
        return Err(ApiError::not_found(format!("no job with id {id}")));
    };
    let logs: Vec<Value> = db
        .job_logs(id)
        .await
        .map_err(ApiError::internal)?
        .into_iter()
        .map(|(ts, line)| json!({"ts": crate::db::rfc3339(ts), "line": line}))
        .collect();
    let mut value = job.to_json();
    value["logs"] = Value::Array(logs);
    Ok(Json(value))
}

/// Asks a job to stop. 202 when a running job is asked, 200 when a queued job is cancelled;
/// 409 when it already finished or its cancellation was already requested.
#[utoipa::path(
    post, path = "/jobs/{id}/cancel", tag = "admin",
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
pub async fn cancel(
    State(state): State<Arc<AppState>>,
    Path(raw): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let id = job_id(&raw)?;
    match state
        .ops
        .jobs
        .cancel(id)
        .await
        .map_err(ApiError::internal)?
    {
        CancelOutcome::Cancelled => Ok((
            StatusCode::OK,
            Json(json!({"id": id, "status": "cancelled"})),
        )),
        CancelOutcome::Requested => Ok((
            StatusCode::ACCEPTED,
            Json(json!({"id": id, "status": "running", "cancel_requested": true})),
        )),
        CancelOutcome::AlreadyRequested => Err(ApiError::conflict(format!(
            "job {id}: cancellation was already requested"
        ))),
        CancelOutcome::Finished(status) => Err(ApiError::conflict(format!(
            "job {id} already finished ({}); nothing to cancel",
            status.as_str()
        ))),
        CancelOutcome::NotFound => Err(ApiError::not_found(format!("no job with id {id}"))),
    }
}

/// Starts recomputing the link scores (SPEC §2) with the stored TrustRank seeds (or, with
/// none stored, the top inverse-PageRank candidates); the new scores are served once stored.
#[utoipa::path(
    post, path = "/graph", tag = "admin",
    responses(
        (status = 202, description = "`{\"job\":ID}`: follow it at /admin/jobs/{id}"),
        (status = 409, description = "a graph job is already queued or running"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn start_graph(
    State(state): State<Arc<AppState>>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let seeds: Vec<String> = state
        .ops
        .db
        .seeds()
        .await
        .map_err(ApiError::internal)?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let seeds = (!seeds.is_empty()).then_some(seeds);
    let params = json!({"seeds": seeds});
    let worker = state.clone();
    let id = state
        .ops
        .jobs
        .start(JobKind::Graph, params, move |ctx| {
            // Holding the write lock keeps the index (and so the scores' generation) fixed
            // while the graph is built from it.
            let _writing = worker.ops.index_writes.blocking_lock();
            graph::recompute(&worker.index, seeds, &worker.links, ctx)
        })
        .await
        .map_err(create_error)?;
    Ok((StatusCode::ACCEPTED, Json(json!({"job": id}))))
}
