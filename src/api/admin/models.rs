//! The model registry and training over HTTP: list models with their metrics, upload one
//! (rankd's or another library's trees), activate one (hot swap: requests in flight finish
//! with the model they started with), roll back to the previously active one, delete
//! inactive ones, and start a training job.
//!
//! The registry's active model and the served one differ only when the active model's file
//! could not be loaded at start-up: `GET /admin/models` then shows `serving: null` and the
//! `load_error`, and activating that same model again (after fixing its file) reloads it.

use crate::db::events::Pages;
use crate::sync::Recover;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::body;
use crate::admin::models::{guard_queries, read_upload, UploadFormat};
use crate::admin::train::{self, TrainParams};
use crate::api::guard::{begin_write, Commitment};
use crate::api::params::{Query, QueryParams};
use crate::api::{ApiError, AppState};
use crate::db::models::{Activation, Deletion, ModelRecord, ModelView};
use crate::db::JobKind;
use crate::error::Invalid;
use crate::search::model::ActiveModel;
use crate::training::guard;

/// The registry: every model and which one serves.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ModelList {
    /// the registry's active model
    pub active: Option<String>,
    /// the model reranking searches
    pub serving: Option<String>,
    /// why the active model is not served, if it is not
    pub load_error: Option<String>,
    pub models: Vec<ModelView>,
}

/// Every model that is not deleted, newest first, with its metrics and training log.
#[utoipa::path(
    get, path = "/models", tag = "admin",
    responses(
        (status = 200, description = "the registry; `serving` is the model reranking searches, `load_error` why the active one is not served", body = ModelList),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn list(State(state): State<Arc<AppState>>) -> Result<Json<ModelList>, ApiError> {
    let models = state
        .ops
        .db
        .registry()
        .models()
        .await
        .map_err(ApiError::internal)?;
    let active = models
        .iter()
        .find(|m| m.status == "active")
        .map(|m| m.id.clone());
    let serving = state.engine.model().as_ref().map(|m| m.id().to_string());
    let load_error = state.reranker_error.locked().clone();
    Ok(Json(ModelList {
        active,
        serving,
        load_error,
        models: models.iter().map(ModelRecord::view).collect(),
    }))
}

/// Swaps in a registered model: `loaded` when the caller has loaded its file already, else
/// loaded from the registry's file.
async fn swap_in(state: &AppState, id: &str, loaded: Option<ActiveModel>) -> Result<(), ApiError> {
    let model = match loaded {
        Some(model) => model,
        None => {
            let record = state
                .ops
                .db
                .registry()
                .model(id)
                .await
                .map_err(ApiError::internal)?
                .ok_or_else(|| ApiError::not_found(format!("no model with id {id:?}")))?;
            let path = std::path::PathBuf::from(&record.file_path);
            tokio::task::spawn_blocking(move || ActiveModel::load(&path))
                .await
                .map_err(ApiError::internal)?
                .map_err(|e| ApiError::conflict(format!("model {id} cannot be served: {e}")))?
        }
    };
    state.engine.set_model(Some(Arc::new(model)));
    *state.reranker_error.locked() = None;
    crate::metrics::set_active_model(Some(id));
    Ok(())
}

/// `POST /admin/models/{id}/activate`'s parameters.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ActivateParams {
    /// activate even when the activation guard refuses (logged)
    #[serde(default)]
    force: bool,
}

impl QueryParams for ActivateParams {
    const NAMES: &'static [&'static str] = &["force"];
}

/// Makes a model the active reranker, if the activation guard lets it: the model is compared
/// on held-out judged queries of every class (those its training held out, else every stored
/// judged query) with the first phase and the active model, and refused (409, with the
/// comparison in `guard`) when it is worse on a class beyond the 95% interval, unless
/// `force=true`. The file is loaded and checked before the database changes, so a model that
/// cannot be served is never marked active.
#[utoipa::path(
    post, path = "/models/{id}/activate", tag = "admin",
    params(("id" = String, Path, description = "model id"), ActivateParams),
    responses(
        (status = 200, description = "`{\"active\":ID,\"previous\":ID|null,\"guard\":{...}}`"),
        (status = 404, description = "no such model"),
        (status = 409, description = "already active, its file cannot be served, or the activation guard refuses it (the message says why; `guard` holds the comparison)"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn activate(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    Path(id): Path<String>,
    Query(params): Query<ActivateParams>,
) -> Result<Response, ApiError> {
    let db = &state.ops.db;
    let record = db
        .registry()
        .model(&id)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::not_found(format!("no model with id {id:?}")))?;
    let served = state.engine.model().as_ref().is_some_and(|m| m.id() == id);
    if served {
        return Err(ApiError::conflict(format!("model {id} is already active")));
    }
    let stored = db.all_judgments().await.map_err(ApiError::internal)?;
    // The click log is read only for a model that held out click queries, and only its
    // clicked pages: the guard's labels are a query's clicked documents.
    let clicked = if crate::admin::models::held_out_clicks(&record) {
        state.events.settle().await;
        db.first_page_sessions(Pages::Clicked, state.events.settings.max_training_pages)
            .await
            .map_err(ApiError::internal)?
    } else {
        Vec::new()
    };
    let held_out = guard_queries(
        &record,
        train::judged_queries(&stored),
        crate::training::clicks::click_queries(clicked),
    );
    let path = std::path::PathBuf::from(&record.file_path);
    let worker = state.clone();
    let (candidate, comparison) = tokio::task::spawn_blocking(move || {
        let candidate = ActiveModel::load(&path).map_err(|e| e.to_string())?;
        let active = worker.engine.model();
        let comparison =
            guard::compare_on_index(&worker.engine, &held_out, &candidate, active.as_deref())
                .map_err(|e| e.to_string())?;
        Ok::<_, String>((candidate, comparison))
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(|e| ApiError::conflict(format!("model {id} cannot be served: {e}")))?;
    if let Some(reason) = &comparison.refused {
        if !params.force {
            let message = format!(
                "{reason}; it stays inactive (POST /admin/models/{id}/activate?force=true \
                 activates it anyway)"
            );
            let body =
                json!({"error": {"code": "conflict", "message": message}, "guard": comparison});
            return Ok((StatusCode::CONFLICT, Json(body)).into_response());
        }
        tracing::warn!("model {id} activated with force despite the activation guard: {reason}");
    }
    begin_write(commitment)?;
    let Json(mut out) = activate_id(&state, &id, Some(candidate)).await?;
    out["guard"] = json!(comparison);
    Ok(Json(out).into_response())
}

/// Activates a registered model (`loaded`: its file, when the caller loaded it already).
pub(super) async fn activate_id(
    state: &AppState,
    id: &str,
    loaded: Option<ActiveModel>,
) -> Result<Json<Value>, ApiError> {
    let current = state
        .ops
        .db
        .registry()
        .active_model()
        .await
        .map_err(ApiError::internal)?;
    if current.as_ref().is_some_and(|m| m.id == id) {
        let served = state.engine.model().as_ref().is_some_and(|m| m.id() == id);
        if served {
            return Err(ApiError::conflict(format!("model {id} is already active")));
        }
        // Active in the registry but not served (its file failed to load): load it again.
        swap_in(state, id, loaded).await?;
        return Ok(Json(json!({"active": id, "previous": id})));
    }
    swap_in(state, id, loaded).await?;
    match state.ops.db.registry().activate(id, "admin").await {
        Ok(Activation::Activated { previous }) => {
            Ok(Json(json!({"active": id, "previous": previous})))
        }
        Ok(Activation::AlreadyActive) => {
            Err(ApiError::conflict(format!("model {id} is already active")))
        }
        Ok(Activation::NotFound) => Err(ApiError::not_found(format!("no model with id {id:?}"))),
        Err(e) => Err(ApiError::internal(e)),
    }
}

/// Re-activates the most recently active model other than the current one.
#[utoipa::path(
    post, path = "/models/rollback", tag = "admin",
    responses(
        (status = 200, description = "`{\"active\":ID,\"previous\":ID}`"),
        (status = 409, description = "no earlier model to roll back to"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn rollback(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
) -> Result<Json<Value>, ApiError> {
    let target = state
        .ops
        .db
        .registry()
        .rollback_target()
        .await
        .map_err(ApiError::internal)?;
    match target {
        Some(id) => {
            begin_write(commitment)?;
            activate_id(&state, &id, None).await
        }
        None => Err(ApiError::conflict("no earlier model to roll back to")),
    }
}

/// Deletes an inactive model (its file too; the activation history keeps its id) that is not
/// the running interleaving experiment's candidate.
#[utoipa::path(
    delete, path = "/models/{id}", tag = "admin",
    params(("id" = String, Path, description = "model id")),
    responses(
        (status = 204, description = "deleted"),
        (status = 404, description = "no such model"),
        (status = 409, description = "the model is active, or the candidate of the running interleaving experiment"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn delete(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    if let Some(running) = &*state.experiment.load() {
        if running.candidate.id() == id {
            return Err(ApiError::conflict(format!(
                "model {id} is the candidate of the running experiment {}; stop it first \
                 (POST /admin/experiments/{}/stop)",
                running.id, running.id
            )));
        }
    }
    begin_write(commitment)?;
    match state
        .ops
        .db
        .registry()
        .delete(&id)
        .await
        .map_err(ApiError::internal)?
    {
        Deletion::Deleted { file_path } => {
            if let Err(e) = std::fs::remove_file(&file_path) {
                tracing::warn!("model {id} deleted but its file {file_path} stays: {e}");
            }
            Ok(StatusCode::NO_CONTENT)
        }
        Deletion::Active => Err(ApiError::conflict(format!(
            "model {id} is active; activate another model first"
        ))),
        Deletion::NotFound => Err(ApiError::not_found(format!("no model with id {id:?}"))),
    }
}

/// The model an upload's body holds, checked and bound to the feature set
/// ([`read_upload`], on the blocking pool): a 400 naming `body` when it is none.
pub(crate) async fn uploaded(
    raw: Result<Bytes, BytesRejection>,
    format: Option<UploadFormat>,
) -> Result<crate::rerank::Reranker, ApiError> {
    let raw = body::bytes(raw)?;
    if raw.is_empty() {
        return Err(ApiError::bad_request(
            "body",
            "the body is empty: send the model file",
        ));
    }
    tokio::task::spawn_blocking(move || read_upload(&raw, format))
        .await
        .map_err(ApiError::internal)?
        .map_err(|Invalid(m)| ApiError::bad_request("body", m))
}

/// `POST /admin/models`' parameters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct UploadParams {
    /// rankd, xgboost, lightgbm or ranklib (default: detected from the body)
    pub(crate) format: Option<UploadFormat>,
}

impl QueryParams for UploadParams {
    const NAMES: &'static [&'static str] = &["format"];
}

/// Uploads a model: a rankd model file, XGBoost JSON (`save_model`), LightGBM text (v4) or
/// RankLib LambdaMART XML. It is validated and bound to rankd's feature set by feature name
/// (unnamed columns by position, in the order `rankd features --out` writes), stored, and
/// registered inactive; activate it as any model. Bad input registers nothing.
#[utoipa::path(
    post, path = "/models", tag = "admin",
    params(UploadParams),
    request_body(content = String, description = "the model file's bytes", content_type = "application/octet-stream"),
    responses(
        (status = 201, description = "`{\"model\":ID,\"kind\":\"gbdt\"|\"linear\"|\"mlp\",\"objective\":NAME,\"features\":[NAME..],\"file\":PATH}`, registered inactive"),
        (status = 400, description = "malformed or unsupported model, unknown format version, a feature the feature set lacks (named), bad tree structure or values"),
        (status = 409, description = "a model with the same content is already registered"),
        (status = 413, description = "body over limits.max_body_bytes"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn upload(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    Query(params): Query<UploadParams>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let model = uploaded(raw, params.format).await?;
    let id = model.id().to_string();
    if state
        .ops
        .db
        .registry()
        .model(&id)
        .await
        .map_err(ApiError::internal)?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "model {id} (the same content) is already registered"
        )));
    }
    begin_write(commitment)?;
    let dir = state.engine.index.dir.clone();
    let stored = model.clone();
    let path = tokio::task::spawn_blocking(move || crate::search::model::store(&dir, &stored))
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::internal)?;
    let record = ModelRecord::of(&model, &path, Vec::new());
    state
        .ops
        .db
        .registry()
        .register(&record, None)
        .await
        .map_err(ApiError::internal)?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "model": id,
            "kind": model.kind(),
            "objective": record.objective,
            "features": model.feature_names(),
            "file": path,
        })),
    ))
}

/// Starts training a reranker on the stored judgments, the logged clicks, or both (SPEC §3.5);
/// the model is registered inactive when the job succeeds.
#[utoipa::path(
    post, path = "/train", tag = "admin",
    request_body(content = String, description = "JSON object of training settings, each optional (defaults: those of `rankd train` on judgments): model (linear|mlp|gbdt), objective, lr, epochs, batch, seed, tau, hidden, patience, …; for gbdt trees, leaves, tree_lr, min_data_in_leaf, max_depth, lambda_l2, row_fraction, feature_fraction, early_stopping_rounds, …; first_phase (the model whose window is reranked); source (\"judgments\", the default, \"clicks\", or [\"judgments\", \"clicks\"]) and, with clicks, debias (ips|pairwise|none), click_labels (graded|binary, with ips or none), noise_floor (estimate|none, with ips and binary labels) and propensity_clip. The names are those of the `rankd train` flags with underscores", content_type = "application/json"),
    responses(
        (status = 202, description = "`{\"job\":ID}`: follow it at /admin/jobs/{id}"),
        (status = 400, description = "bad parameter (named), or no judged query (`judgments`) or clicked query (`source`) to train on"),
        (status = 409, description = "a training job is already queued or running"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn start(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    raw: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let params: TrainParams = if raw.is_empty() {
        TrainParams::default()
    } else {
        body::json(&raw)?
    };
    let request = params
        .request()
        .map_err(|(field, message)| ApiError::bad_request(field, message))?;
    let db = &state.ops.db;
    let queries = if request.source.judgments {
        let stored = db.all_judgments().await.map_err(ApiError::internal)?;
        train::judged_queries(&stored)
    } else {
        Vec::new()
    };
    let clicks = match request.source.clicks {
        Some(options) => {
            state.events.settle().await;
            let pages = db
                .first_page_sessions(Pages::All, state.events.settings.max_training_pages)
                .await
                .map_err(ApiError::internal)?;
            let logged = crate::training::clicks::click_queries(pages);
            let clicked = logged.iter().filter(|q| q.clicks() > 0).count();
            if clicked < 2 {
                return Err(ApiError::bad_request(
                    "source",
                    format!(
                        "training on clicks needs logged first pages with clicks on at least \
                         two queries; {clicked} of {} logged queries have one (serve searches \
                         with [events] log_impressions on, and post their clicks to /events)",
                        logged.len()
                    ),
                ));
            }
            Some((logged, options))
        }
        None => None,
    };
    let usable = queries
        .iter()
        .filter(|q| q.grades.values().any(|&g| g >= 1))
        .count();
    if request.source.judgments && usable < 2 {
        return Err(ApiError::bad_request(
            "judgments",
            format!(
                "training needs judged queries with a stored text and a relevant document; \
                 {usable} of {} stored queries qualify",
                queries.len()
            ),
        ));
    }
    let worker = state.clone();
    let params_json = serde_json::to_value(&params).map_err(ApiError::internal)?;
    begin_write(commitment)?;
    let id = state
        .ops
        .jobs
        .start(JobKind::Train, params_json, move |ctx| {
            let trained = train::run(
                &worker.engine,
                &worker.ops.db,
                queries,
                clicks,
                request.settings,
                request.first_phase,
                ctx,
            )?;
            let mut out = serde_json::to_value(&trained)?;
            if request.activate {
                let activate = match &trained.guard.refused {
                    None => true,
                    Some(reason) if request.force => {
                        tracing::warn!(
                            "model {} activated with force despite the activation guard: {reason}",
                            trained.model
                        );
                        ctx.log(&format!("activated with force despite the guard: {reason}"));
                        true
                    }
                    Some(reason) => {
                        ctx.log(&format!("not activated: {reason}"));
                        false
                    }
                };
                if activate {
                    let Json(activated) = tokio::runtime::Handle::current()
                        .block_on(activate_id(&worker, &trained.model, None))
                        .map_err(|e| anyhow::anyhow!(e.message))?;
                    out["previous"] = activated["previous"].clone();
                }
                out["activated"] = json!(activate);
            }
            Ok(out)
        })
        .await
        .map_err(super::create_error)?;
    Ok((StatusCode::ACCEPTED, Json(json!({"job": id}))))
}
