//! `POST /admin/documents` (NDJSON batch add/update) and `POST /admin/documents/delete`.
//! A batch is one commit: a bad record rejects the whole batch, naming its line, and the
//! index stays as it was. The serving searcher sees a committed batch at once.
//!
//! Link scores are computed over the whole graph and do not follow a batch by themselves:
//! every committed batch marks them stale (`GET /admin/graph`, `rankd_link_scores_stale`), and
//! `?recompute_links=true` starts the graph job once the batch is committed.

use crate::sync::Recover;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::body;
use crate::admin::documents::{first_missing, parse_batch};
use crate::api::guard::{begin_write, Commitment};
use crate::api::params::{Query, QueryParams};
use crate::api::{ApiError, AppState};
use crate::db::jobs::CreateError;

/// The parameters of a document batch or deletion.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct BatchParams {
    /// start the graph job (`POST /admin/graph`) once the batch is committed (default false)
    recompute_links: Option<bool>,
    /// deletion only: ids that are no document count as deleted already instead of rejecting
    /// the request, so resending a deletion is safe (default false)
    missing_ok: Option<bool>,
}

impl QueryParams for BatchParams {
    const NAMES: &'static [&'static str] = &["recompute_links", "missing_ok"];
}

/// Why this node takes no writes, if it does not ([`AppState::takes_writes`]: a replica
/// following a store, a primary another one fenced or whose lease ran out): checked under the
/// index's write lock, before anything is committed.
fn fenced(state: &AppState) -> Result<(), ApiError> {
    state.takes_writes().map_err(|why| {
        ApiError::unavailable("no_writes", format!("this leaf takes no writes: {why}"))
    })
}

/// On a shard's primary, publishes the committed write before it is acknowledged
/// (`crate::cluster::primary`): the generation holding it, or why it is not acknowledged.
pub(crate) async fn publish(state: &Arc<AppState>) -> Result<Option<u64>, ApiError> {
    let Some(primary) = state.primary.load_full() else {
        return Ok(None);
    };
    primary
        .publish(state.clone())
        .await
        .map(Some)
        .map_err(|e| ApiError::unavailable("not_published", e.to_string()))
}

/// On a leaf that knows its shard, the first document whose id routes to another shard: a
/// write that only a root (which routes) may send.
fn misrouted(state: &AppState, ids: &[&str]) -> Result<(), ApiError> {
    let Some((shard, shards)) = state.shard else {
        return Ok(());
    };
    for (i, id) in ids.iter().enumerate() {
        let to = crate::cluster::routing::shard_of(id, shards);
        if to != shard {
            return Err(ApiError::bad_request(
                "body",
                format!(
                    "record {}: document {id:?} routes to shard {to} of {shards}, and this \
                     leaf serves shard {shard}: write through a root; nothing was written",
                    i + 1
                ),
            ));
        }
    }
    Ok(())
}

/// Marks the link scores stale after a committed batch of `documents`. Called while the
/// index write lock is held, so a graph job cannot slip between the commit and the mark.
fn mark_stale(state: &AppState, documents: u64) {
    state.ops.link_freshness.locked().batch(documents);
}

/// After a committed batch: starts the graph job if asked. The answer's `links` object says
/// whether the served scores are stale and which job recomputes them.
async fn after_batch(state: &Arc<AppState>, recompute: bool) -> Value {
    let loaded = state.engine.links().is_some();
    if !recompute {
        return json!({"stale": loaded, "recompute_job": null});
    }
    match super::jobs::start_graph_job(state).await {
        Ok(id) => json!({"stale": loaded, "recompute_job": id}),
        Err(CreateError::Busy(_)) => json!({
            "stale": loaded,
            "recompute_job": null,
            "message": "a graph job is already queued or running; GET /admin/graph says \
                        whether its scores cover this batch",
        }),
        Err(CreateError::Refused(why)) => {
            json!({"stale": loaded, "recompute_job": null, "message": why})
        }
        Err(CreateError::Db(e)) => {
            tracing::error!("cannot start the graph job after a batch: {e}");
            json!({"stale": loaded, "recompute_job": null, "message": e.to_string()})
        }
    }
}

/// Adds or replaces (same `id`) the NDJSON documents of the body, one JSON object per line
/// with the fields of `rankd ingest --format jsonl`.
#[utoipa::path(
    post, path = "/documents", tag = "admin",
    params(BatchParams),
    request_body(content = String, content_type = "application/x-ndjson",
                 description = "one JSON document per line: id, url, title, name, headings, body, anchor, links, published_at"),
    responses(
        (status = 200, description = "`{\"indexed\":N,\"documents\":TOTAL,\"links\":{\"stale\":bool,\"recompute_job\":ID|null}}`: served link scores are stale after any batch until the graph job has run"),
        (status = 400, description = "a bad record (its line is named); nothing indexed"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn upsert(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    Query(p): Query<BatchParams>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let recompute = p.recompute_links.unwrap_or(false);
    let body = body::bytes(body)?;
    // Parsing up to `limits.max_body_bytes` takes a while: not on an async worker.
    let parsed = tokio::task::spawn_blocking(move || parse_batch(&body))
        .await
        .map_err(ApiError::internal)?;
    let docs = parsed.map_err(|e| {
        ApiError::bad_request(
            "body",
            format!(
                "line {}: {}; nothing was indexed",
                e.line.unwrap_or(0),
                e.message
            ),
        )
    })?;
    if docs.is_empty() {
        return Err(ApiError::bad_request(
            "body",
            "the batch holds no documents (one JSON object per line)",
        ));
    }
    misrouted(
        &state,
        &docs.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
    )?;
    let writing = state.ops.index_writes.lock().await;
    fenced(&state)?;
    begin_write(commitment)?;
    let writer = state.clone();
    let indexed = tokio::task::spawn_blocking(move || writer.engine.index.upsert(docs))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| ApiError::of_error(&e))?;
    mark_stale(&state, indexed);
    let generation = publish(&state).await?;
    drop(writing);
    let links = after_batch(&state, recompute).await;
    let mut answer =
        json!({"indexed": indexed, "documents": state.engine.index.num_docs(), "links": links});
    if let Some(g) = generation {
        answer["generation"] = json!(g);
    }
    Ok(Json(answer))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteRequest {
    ids: Vec<String>,
}

impl DeleteRequest {
    /// The ids, checked: at least one, none empty.
    pub(in crate::api) fn ids(&self) -> Result<Vec<String>, ApiError> {
        if self.ids.is_empty() {
            return Err(ApiError::bad_request("ids", "`ids` is empty"));
        }
        self.ids
            .iter()
            .enumerate()
            .map(|(i, id)| body::id(&format!("ids[{i}]"), id))
            .collect()
    }
}

/// Deletes documents by id, all or none: an unknown id rejects the request (unless
/// `missing_ok`).
#[utoipa::path(
    post, path = "/documents/delete", tag = "admin",
    params(BatchParams),
    request_body(content = String, content_type = "application/json",
                 description = "`{\"ids\":[\"doc-1\",\"doc-2\"]}`"),
    responses(
        (status = 200, description = "`{\"deleted\":N,\"documents\":TOTAL,\"links\":{\"stale\":bool,\"recompute_job\":ID|null}}`"),
        (status = 400, description = "not a list of ids"),
        (status = 404, description = "an id is not a document (named in `field`), and `missing_ok` is not set; nothing deleted"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn delete(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    Query(p): Query<BatchParams>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let recompute = p.recompute_links.unwrap_or(false);
    let raw = body::bytes(raw)?;
    let request: DeleteRequest = body::json(&raw)?;
    let ids = request.ids()?;
    misrouted(&state, &ids.iter().map(String::as_str).collect::<Vec<_>>())?;
    let writing = state.ops.index_writes.lock().await;
    fenced(&state)?;
    if !p.missing_ok.unwrap_or(false) {
        if let Some((i, id)) = first_missing(&state.engine.index, ids.iter().map(String::as_str))
            .map_err(ApiError::internal)?
        {
            let mut e =
                ApiError::not_found(format!("no document with id {id:?}; nothing was deleted"));
            e.field = Some(format!("ids[{i}]"));
            return Err(e);
        }
    }
    begin_write(commitment)?;
    let writer = state.clone();
    let deleted = tokio::task::spawn_blocking(move || writer.engine.index.delete(&ids))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| ApiError::of_error(&e))?;
    mark_stale(&state, deleted);
    let generation = publish(&state).await?;
    drop(writing);
    let links = after_batch(&state, recompute).await;
    let mut answer =
        json!({"deleted": deleted, "documents": state.engine.index.num_docs(), "links": links});
    if let Some(g) = generation {
        answer["generation"] = json!(g);
    }
    Ok(Json(answer))
}
