//! Background jobs: list, one job with its log, cancel; and `POST /admin/graph`, which starts
//! the link-score recomputation as a job.

use crate::api::guard::{begin_write, Commitment};
use crate::sync::Recover;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::body;
use crate::admin::graph;
use crate::api::params::{Query, QueryParams};
use crate::api::{ApiError, AppState};
use crate::db::jobs::CreateError;
use crate::db::jobs::{Job, JobView};
use crate::db::{CancelOutcome, JobKind, JobStatus};

/// A job id from the path: a positive integer.
fn job_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>().ok().filter(|&id| id > 0).ok_or_else(|| {
        ApiError::bad_request("id", format!("job id {raw:?} is not a positive integer"))
    })
}

pub fn create_error(e: CreateError) -> ApiError {
    match e {
        CreateError::Busy(_) | CreateError::Refused(_) => ApiError::conflict(e.to_string()),
        CreateError::Db(e) => ApiError::internal(e),
    }
}

/// `GET /admin/jobs`'s parameters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct JobsParams {
    /// train, graph or eval
    kind: Option<String>,
    /// queued, running, succeeded, failed or cancelled
    status: Option<String>,
    /// 1..=1000, default 100
    limit: Option<i64>,
    /// default 0
    offset: Option<i64>,
}

impl QueryParams for JobsParams {
    const NAMES: &'static [&'static str] = &["kind", "status", "limit", "offset"];
}

/// A page of jobs and how many match in all.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct JobList {
    pub total: i64,
    pub jobs: Vec<JobView>,
}

/// Lists jobs, newest first.
#[utoipa::path(
    get, path = "/jobs", tag = "admin",
    params(JobsParams),
    responses(
        (status = 200, description = "a page of jobs", body = JobList),
        (status = 400, description = "bad parameter (named)"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(state): State<Arc<AppState>>,
    Query(p): Query<JobsParams>,
) -> Result<Json<JobList>, ApiError> {
    list_in(&state.ops.db, p).await
}

/// `GET /admin/jobs` over the jobs of `db` (a node's, or a root's).
pub(crate) async fn list_in(db: &crate::db::Db, p: JobsParams) -> Result<Json<JobList>, ApiError> {
    let (limit, offset) = body::page(p.limit, p.offset)?;
    let kind = p
        .kind
        .map(|k| {
            k.parse::<JobKind>()
                .map_err(|e| ApiError::bad_request("kind", e))
        })
        .transpose()?;
    let status = p
        .status
        .map(|s| {
            s.parse::<JobStatus>()
                .map_err(|e| ApiError::bad_request("status", e))
        })
        .transpose()?;
    let (jobs, total) = db
        .jobs(kind, status, limit, offset)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(JobList {
        total,
        jobs: jobs.iter().map(Job::view).collect(),
    }))
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
    get_in(&state.ops.db, &raw).await
}

/// `GET /admin/jobs/{id}` over the jobs of `db`.
pub(crate) async fn get_in(db: &crate::db::Db, raw: &str) -> Result<Json<Value>, ApiError> {
    let id = job_id(raw)?;
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
    commitment: Option<Extension<Commitment>>,
    Path(raw): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    cancel_in(&state.ops.jobs, commitment, &raw).await
}

/// `POST /admin/jobs/{id}/cancel` through `jobs` (a node's runner, or a root's).
pub(crate) async fn cancel_in(
    jobs: &crate::admin::jobs::JobRunner,
    commitment: Option<Extension<Commitment>>,
    raw: &str,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let id = job_id(raw)?;
    begin_write(commitment)?;
    match jobs.cancel(id).await.map_err(ApiError::internal)? {
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
        (status = 409, description = "a graph job is already queued or running, or the server is a leaf of a sharded collection (its link scores come from a root's `POST /admin/graph` or `rankd graph` over every shard)"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn start_graph(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    begin_write(commitment)?;
    let id = start_graph_job(&state).await.map_err(create_error)?;
    Ok((StatusCode::ACCEPTED, Json(json!({"job": id}))))
}

/// Starts the graph job with the stored seeds; `CreateError::Busy` while one is queued or
/// running. Refused on a leaf: its link scores are its part of the whole collection's graph
/// (`crate::links::compute_and_store_sharded`), and a graph of its own shard alone would
/// replace them with wrong ones.
pub async fn start_graph_job(state: &Arc<AppState>) -> Result<i64, CreateError> {
    if state.leaf.is_some() {
        return Err(CreateError::Refused(
            "this server is a leaf of a sharded collection: its link scores are its part of \
             the whole collection's graph; run `POST /admin/graph` on a root, or `rankd graph \
             --data-dir COLLECTION` over every shard, then publish or restart the leaves"
                .into(),
        ));
    }
    let seeds: Vec<String> = state
        .ops
        .db
        .seeds()
        .await?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let seeds = (!seeds.is_empty()).then_some(seeds);
    let params = json!({"seeds": seeds});
    let worker = state.clone();
    state
        .ops
        .jobs
        .start(JobKind::Graph, params, move |ctx| {
            // The job takes the write lock only to snapshot the index and to install the
            // scores (`graph::recompute`): document batches go on meanwhile.
            graph::recompute(
                &worker.engine,
                seeds,
                &worker.ops.index_writes,
                &worker.ops.link_freshness,
                ctx,
            )
        })
        .await
}

/// The served link scores against the index as it is now (SPEC §2): whether they are stale,
/// which documents they miss or still describe, and the last graph job.
#[utoipa::path(
    get, path = "/graph", tag = "admin",
    responses(
        (status = 200, description = "`{\"loaded\":bool,\"stale\":bool,\"nodes\":N,\"documents\":D,\"uncovered_documents\":U,\"removed_documents\":R,\"batches_since\":B,\"documents_changed\":C,\"stale_at_start\":bool,\"stale_since\":TIME|null,\"last_job\":JOB|null}`: `stale` once a document batch was committed after the scores were computed (or the stored scores predate the index at start-up); `uncovered_documents` are live documents without scores, `removed_documents` graph nodes no longer in the index"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn graph_status(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Value>, ApiError> {
    let last_job = state
        .ops
        .db
        .jobs(Some(JobKind::Graph), None, 1, 0)
        .await
        .map_err(ApiError::internal)?
        .0
        .first()
        .map(|j| j.to_json());
    let mut status = link_status(&state).await?;
    status["last_job"] = last_job.unwrap_or(Value::Null);
    Ok(Json(status))
}

/// Freshness and coverage of the served link scores (also behind the `/metrics` gauges).
pub async fn link_status(state: &Arc<AppState>) -> Result<Value, ApiError> {
    let freshness = state.ops.link_freshness.locked().clone();
    let worker = state.clone();
    let coverage = tokio::task::spawn_blocking(move || {
        let searcher = worker.engine.index.reader.searcher();
        match worker.engine.links() {
            Some(links) => links
                .coverage(&searcher)
                .map(|c| (true, links.scores.n(), c)),
            None => Ok((
                false,
                0,
                crate::links::Coverage {
                    documents: searcher.num_docs() as usize,
                    uncovered_documents: searcher.num_docs() as usize,
                    removed_documents: 0,
                },
            )),
        }
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(ApiError::internal)?;
    let (loaded, nodes, c) = coverage;
    let stale =
        loaded && (freshness.is_stale() || c.uncovered_documents > 0 || c.removed_documents > 0);
    crate::metrics::set_link_scores(stale, c.uncovered_documents as u64);
    Ok(json!({
        "loaded": loaded,
        "stale": stale,
        "nodes": nodes,
        "documents": c.documents,
        "uncovered_documents": c.uncovered_documents,
        "removed_documents": c.removed_documents,
        "batches_since": freshness.batches_since,
        "documents_changed": freshness.documents_changed,
        "stale_at_start": freshness.stale_at_start,
        "stale_since": freshness.stale_since.map(crate::db::rfc3339),
    }))
}
