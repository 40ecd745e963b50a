//! TrustRank seeds (SPEC §2.5): list, add, remove. Only live documents can be seeds.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::body;
use crate::admin::documents::first_missing;
use crate::api::guard::{begin_write, Commitment};
use crate::api::{ApiError, AppState};

/// One TrustRank seed.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct Seed {
    pub doc_id: String,
    /// when it was added (RFC 3339)
    pub added_at: String,
}

/// Every seed.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SeedList {
    pub seeds: Vec<Seed>,
}

#[utoipa::path(
    get, path = "/seeds", tag = "admin",
    responses(
        (status = 200, description = "every TrustRank seed", body = SeedList),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn list(State(state): State<Arc<AppState>>) -> Result<Json<SeedList>, ApiError> {
    let seeds = state
        .ops
        .db
        .seeds()
        .await
        .map_err(ApiError::internal)?
        .into_iter()
        .map(|(doc_id, added_at)| Seed { doc_id, added_at })
        .collect();
    Ok(Json(SeedList { seeds }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddSeeds {
    ids: Vec<String>,
}

#[utoipa::path(
    post, path = "/seeds", tag = "admin",
    request_body(content = String, content_type = "application/json", description = "`{\"ids\":[..]}`"),
    responses(
        (status = 200, description = "`{\"added\":N,\"seeds\":TOTAL}`"),
        (status = 400, description = "not a list of ids, or an id that is not a document (named); nothing added"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn add(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let raw = body::bytes(raw)?;
    let request: AddSeeds = body::json(&raw)?;
    if request.ids.is_empty() {
        return Err(ApiError::bad_request("ids", "`ids` is empty"));
    }
    let ids = request
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| body::id(&format!("ids[{i}]"), id))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some((i, id)) = first_missing(&state.engine.index, ids.iter().map(String::as_str))
        .map_err(ApiError::internal)?
    {
        return Err(ApiError::bad_request(
            format!("ids[{i}]"),
            format!("no document with id {id:?} in the index; nothing was added"),
        ));
    }
    let db = &state.ops.db;
    begin_write(commitment)?;
    let added = db.add_seeds(&ids).await.map_err(ApiError::internal)?;
    let total = db.seeds().await.map_err(ApiError::internal)?.len();
    Ok(Json(json!({"added": added, "seeds": total})))
}

#[utoipa::path(
    delete, path = "/seeds/{doc_id}", tag = "admin",
    params(("doc_id" = String, Path, description = "the seed's document id")),
    responses(
        (status = 200, description = "`{\"deleted\":\"doc_id\"}`"),
        (status = 404, description = "not a seed"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn delete(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    Path(doc_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    begin_write(commitment)?;
    if !state
        .ops
        .db
        .delete_seed(&doc_id)
        .await
        .map_err(ApiError::internal)?
    {
        return Err(ApiError::not_found(format!(
            "{doc_id:?} is not a TrustRank seed"
        )));
    }
    Ok(Json(json!({"deleted": doc_id})))
}
