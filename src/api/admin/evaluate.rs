//! `POST /admin/evaluate`: SPEC §4 metrics of a ranking on the stored judgments. The body is
//! an [`EvalRequest`], bound by `GET /search`'s rules.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;

use super::body;
use crate::admin::evaluate::{evaluate as run_evaluation, EvaluateError, StoredEvaluation};
use crate::api::{ApiError, AppState};
use crate::search::request::EvalRequest;

#[utoipa::path(
    post, path = "/evaluate", tag = "admin",
    request_body(content = String, content_type = "application/json",
                 description = "`{\"model\":\"bm25\",\"field\":null,\"depth\":1000}`; also `GET /search`'s `inputs`, `fusion`, `fusion_k`, `fusion_norm`, `fusion_weights`, `fusion_depth` (with `\"model\":\"fusion\"`), `rerank` (the active reranker; default false), `window`, `boost`, `boost_weight`"),
    responses(
        (status = 200, description = "`{\"model\":..,\"queries\":N,\"map\":..,\"ndcg@10\":..,\"per_query\":..,\"failed_queries\":[..],\"skipped_queries\":[..],\"depth\":N}`"),
        (status = 400, description = "unknown model or field, bad depth, a combination `GET /search` refuses, no reranker or link scores for what is asked (named)"),
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
    let query = body::json::<EvalRequest>(&raw)?.into_query()?;
    let judgments = state
        .ops
        .db
        .all_judgments()
        .await
        .map_err(ApiError::internal)?;
    let worker = state.clone();
    let report =
        tokio::task::spawn_blocking(move || run_evaluation(&worker.engine, &judgments, &query))
            .await
            .map_err(ApiError::internal)?;
    match report {
        Ok(evaluation) => Ok(Json(evaluation)),
        Err(EvaluateError::Run(e)) => Err(e.source.into()),
        Err(e) => Err(ApiError::of_kind(
            crate::error::Kinded::kind(&e),
            format!("{e:#}"),
            None,
        )),
    }
}
