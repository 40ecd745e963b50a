//! `GET /admin/embeddings`: where the document vectors of dense and hybrid search stand (the
//! embedding job's progress, `crate::dense::job`) and how well the served vectors cover the
//! index as it is now.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::api::{ApiError, AppState};

/// The embedding job's state and the served vectors' coverage.
#[utoipa::path(
    get, path = "/embeddings", tag = "admin",
    responses(
        (status = 200, description = "`{\"state\":\"off|loading|embedding|ready|failed\",\"done\":N,\"total\":N,\"vectors\":N,\"message\":S,\"served\":{\"vectors\":V,\"documents_with_vector\":D,\"documents_without_vector\":M,\"model_dir\":DIR,\"text\":T,\"dim\":N}|null}`: `done`/`total` while embedding, `served` the vectors searches use now (documents added since the last run have none until it has run again)"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn status(State(state): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    let mut body = serde_json::to_value(state.engine.dense_status.get()).map_err(|e| {
        ApiError::internal(anyhow::anyhow!("serialising the embedding status: {e}"))
    })?;
    let worker = state.clone();
    let served = tokio::task::spawn_blocking(move || -> anyhow::Result<Value> {
        let Some(dense) = worker.engine.dense() else {
            return Ok(Value::Null);
        };
        let searcher = worker.engine.index.reader.searcher();
        let rows = dense.index.rows(&searcher)?;
        let v = &dense.index.vectors;
        Ok(json!({
            "vectors": v.len(),
            "documents_with_vector": rows.live(),
            "documents_without_vector": rows.missing(),
            "model_dir": v.model_dir,
            "text": v.text,
            "dim": v.dim,
        }))
    })
    .await
    .map_err(|e| ApiError::internal(anyhow::anyhow!("embedding status task: {e}")))?
    .map_err(ApiError::internal)?;
    body["served"] = served;
    Ok(Json(body))
}
