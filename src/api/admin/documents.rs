//! `POST /admin/documents` (NDJSON batch add/update) and `POST /admin/documents/delete`.
//! A batch is one commit: a bad record rejects the whole batch, naming its line, and the
//! index stays as it was. The serving searcher sees a committed batch at once.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::body;
use crate::admin::documents::{first_missing, parse_batch};
use crate::api::{ApiError, AppState};

/// Adds or replaces (same `id`) the NDJSON documents of the body, one JSON object per line
/// with the fields of `rankd ingest --format jsonl`.
#[utoipa::path(
    post, path = "/documents", tag = "admin",
    request_body(content = String, content_type = "application/x-ndjson",
                 description = "one JSON document per line: id, url, title, headings, body, anchor, links, published_at"),
    responses(
        (status = 200, description = "`{\"indexed\":N,\"documents\":TOTAL}`"),
        (status = 400, description = "a bad record (its line is named); nothing indexed"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn upsert(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = body::bytes(body)?;
    let docs = parse_batch(&body).map_err(|e| {
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
    let _writing = state.ops.index_writes.lock().await;
    let writer = state.clone();
    let indexed = tokio::task::spawn_blocking(move || writer.index.upsert(docs))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| ApiError::internal(format!("{e:#}")))?;
    Ok(Json(
        json!({"indexed": indexed, "documents": state.index.num_docs()}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteRequest {
    ids: Vec<String>,
}

/// Deletes documents by id, all or none: an unknown id rejects the request.
#[utoipa::path(
    post, path = "/documents/delete", tag = "admin",
    request_body(content = String, content_type = "application/json",
                 description = "`{\"ids\":[\"doc-1\",\"doc-2\"]}`"),
    responses(
        (status = 200, description = "`{\"deleted\":N,\"documents\":TOTAL}`"),
        (status = 400, description = "not a list of ids"),
        (status = 404, description = "an id is not a document (named in `field`); nothing deleted"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn delete(
    State(state): State<Arc<AppState>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let raw = body::bytes(raw)?;
    let request: DeleteRequest = body::json(&raw)?;
    if request.ids.is_empty() {
        return Err(ApiError::bad_request("ids", "`ids` is empty"));
    }
    let ids = request
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| body::id(&format!("ids[{i}]"), id))
        .collect::<Result<Vec<_>, _>>()?;
    let _writing = state.ops.index_writes.lock().await;
    if let Some((i, id)) =
        first_missing(&state.index, ids.iter().map(String::as_str)).map_err(ApiError::internal)?
    {
        let mut e = ApiError::not_found(format!("no document with id {id:?}; nothing was deleted"));
        e.field = Some(format!("ids[{i}]"));
        return Err(e);
    }
    let writer = state.clone();
    let deleted = tokio::task::spawn_blocking(move || writer.index.delete(&ids))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| ApiError::internal(format!("{e:#}")))?;
    Ok(Json(
        json!({"deleted": deleted, "documents": state.index.num_docs()}),
    ))
}
