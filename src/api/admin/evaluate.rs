//! `POST /admin/evaluate`: SPEC §4 metrics of a first-phase model on the stored judgments.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;

use super::body;
use crate::admin::evaluate::{evaluate as run_evaluation, StoredEvaluation};
use crate::api::{ApiError, AppState};
use crate::text::ModelKind;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluateRequest {
    /// bm25, bm25f, tfidf, f2exp, lm or bm25prox.
    model: String,
    /// The field single-field models rank by (default: the configured `all`).
    field: Option<String>,
    /// Documents ranked per query (default 1000, as trec_eval runs).
    depth: Option<usize>,
}

const MAX_DEPTH: usize = 10_000;

#[utoipa::path(
    post, path = "/evaluate", tag = "admin",
    request_body(content = String, content_type = "application/json",
                 description = "`{\"model\":\"bm25\",\"field\":null,\"depth\":1000}`"),
    responses(
        (status = 200, description = "`{\"model\":..,\"queries\":N,\"map\":..,\"ndcg@10\":..,\"per_query\":..,\"skipped_queries\":[..]}`"),
        (status = 400, description = "unknown model or field, bad depth (named)"),
        (status = 409, description = "no judgments stored, no judged query has a text, or a stored query cannot be run"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn evaluate(
    State(state): State<Arc<AppState>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<StoredEvaluation>, ApiError> {
    let raw = body::bytes(raw)?;
    let request: EvaluateRequest = body::json(&raw)?;
    let model: ModelKind = request
        .model
        .parse()
        .map_err(|e| ApiError::bad_request("model", e))?;
    let depth = request.depth.unwrap_or(1000);
    if !(1..=MAX_DEPTH).contains(&depth) {
        return Err(ApiError::bad_request(
            "depth",
            format!("depth must be between 1 and {MAX_DEPTH}, got {depth}"),
        ));
    }
    if let Some(f) = request.field.as_deref() {
        if state.engine.index.fields.text(f).is_none() {
            return Err(ApiError::bad_request(
                "field",
                format!("unknown field `{f}` (known: title, headings, body, anchor, url, all)"),
            ));
        }
    }
    let judgments = state
        .ops
        .db
        .all_judgments()
        .await
        .map_err(ApiError::internal)?;
    let worker = state.clone();
    let field = request.field;
    let report = tokio::task::spawn_blocking(move || {
        run_evaluation(&worker.engine, &judgments, model, field.as_deref(), depth)
    })
    .await
    .map_err(ApiError::internal)?;
    match report {
        Ok(evaluation) => Ok(Json(evaluation)),
        Err(e) => Err(ApiError::of_kind(
            crate::error::Kinded::kind(&e),
            format!("{e:#}"),
            None,
        )),
    }
}
