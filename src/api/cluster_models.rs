//! A root's model routes: the single node's `GET/POST /admin/models`,
//! `POST /admin/models/{id}/activate`, `POST /admin/models/rollback` and
//! `DELETE /admin/models/{id}`, over the collection's registry that every root of it follows
//! (`crate::cluster::models`). Handlers translate; the registry acts.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::admin::models::{ActivateParams, ModelList, UploadParams};
use super::error::ApiError;
use super::guard::{begin_write, Commitment};
use super::params::Query;
use super::root_state::RootState;
use crate::cluster::models::ModelError;
use crate::db::models::ModelRecord;

impl From<ModelError> for ApiError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::NotFound(m) => ApiError::not_found(m),
            ModelError::Conflict(m) => ApiError::conflict(m),
            ModelError::Unavailable(e) => {
                ApiError::unavailable("registry_unavailable", format!("{e:#}"))
            }
            ModelError::Internal(e) => ApiError::internal(format!("{e:#}")),
        }
    }
}

/// The collection's models, the active one, the one this root serves, and why the active one
/// is not served here if it is not.
#[utoipa::path(
    get, path = "/admin/models", tag = "admin",
    responses(
        (status = 200, description = "the collection's registry; `serving` is the model this root reranks with", body = ModelList),
        (status = 401, description = "missing or wrong admin token"),
        (status = 503, description = "the registry's database cannot be reached"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn list(State(state): State<Arc<RootState>>) -> Result<Json<ModelList>, ApiError> {
    let listing = state.models.list().await?;
    Ok(Json(ModelList {
        active: listing.active,
        serving: state.root.model().map(|m| m.id().to_string()),
        load_error: listing.load_error,
        models: listing.models.iter().map(ModelRecord::view).collect(),
    }))
}

/// Uploads a model to the collection, checked as on a single node (rankd's file, XGBoost
/// JSON, LightGBM text or RankLib XML, bound to the feature set), and registers it inactive
/// with its file.
#[utoipa::path(
    post, path = "/admin/models", tag = "admin",
    params(UploadParams),
    request_body(content = String, description = "the model file's bytes", content_type = "application/octet-stream"),
    responses(
        (status = 201, description = "`{\"model\":ID,\"kind\":..,\"objective\":NAME,\"features\":[NAME..]}`, registered inactive"),
        (status = 400, description = "malformed or unsupported model, or a feature the feature set lacks (named)"),
        (status = 409, description = "a model with the same content is already registered"),
        (status = 413, description = "body over limits.max_body_bytes"),
        (status = 401, description = "missing or wrong admin token"),
        (status = 503, description = "the registry's database cannot be reached"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn upload(
    State(state): State<Arc<RootState>>,
    commitment: Option<Extension<Commitment>>,
    Query(params): Query<UploadParams>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let model = super::admin::models::uploaded(raw, params.format).await?;
    begin_write(commitment)?;
    let record = state.models.register(&model, "upload").await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "model": record.id,
            "kind": model.kind(),
            "objective": record.objective,
            "features": model.feature_names(),
        })),
    ))
}

/// Makes a model the collection's active reranker: this root loads it first (a model it cannot
/// serve is never activated) and serves it at once, the collection's other roots within a
/// second. A root holds no judged queries, so no activation guard runs (`guard: null`);
/// `force` is accepted for the single node's clients.
#[utoipa::path(
    post, path = "/admin/models/{id}/activate", tag = "admin",
    params(("id" = String, Path, description = "model id"), ActivateParams),
    responses(
        (status = 200, description = "`{\"active\":ID,\"previous\":ID|null,\"guard\":null}`"),
        (status = 404, description = "no such model"),
        (status = 409, description = "already active, or its file cannot be served by this root"),
        (status = 401, description = "missing or wrong admin token"),
        (status = 503, description = "the registry's database cannot be reached"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn activate(
    State(state): State<Arc<RootState>>,
    commitment: Option<Extension<Commitment>>,
    Path(id): Path<String>,
    Query(_params): Query<ActivateParams>,
) -> Result<Json<Value>, ApiError> {
    begin_write(commitment)?;
    let previous = state.models.activate(&state.root, &id, "admin").await?;
    Ok(Json(
        json!({"active": id, "previous": previous, "guard": null}),
    ))
}

/// Activates the collection's most recently active model other than the active one.
#[utoipa::path(
    post, path = "/admin/models/rollback", tag = "admin",
    responses(
        (status = 200, description = "`{\"active\":ID,\"previous\":ID}`"),
        (status = 409, description = "no earlier model to roll back to"),
        (status = 401, description = "missing or wrong admin token"),
        (status = 503, description = "the registry's database cannot be reached"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn rollback(
    State(state): State<Arc<RootState>>,
    commitment: Option<Extension<Commitment>>,
) -> Result<Json<Value>, ApiError> {
    begin_write(commitment)?;
    let (active, previous) = state.models.rollback(&state.root, "admin").await?;
    Ok(Json(json!({"active": active, "previous": previous})))
}

/// Deletes an inactive model of the collection (the activation history keeps its id).
#[utoipa::path(
    delete, path = "/admin/models/{id}", tag = "admin",
    params(("id" = String, Path, description = "model id")),
    responses(
        (status = 204, description = "deleted"),
        (status = 404, description = "no such model"),
        (status = 409, description = "the model is active"),
        (status = 401, description = "missing or wrong admin token"),
        (status = 503, description = "the registry's database cannot be reached"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn delete(
    State(state): State<Arc<RootState>>,
    commitment: Option<Extension<Commitment>>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    begin_write(commitment)?;
    state.models.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}
