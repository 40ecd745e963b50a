//! The next batch to label (SPEC §5): `POST /admin/label-batch` picks and reserves a batch,
//! `GET /admin/reservations` lists live reservations, `DELETE /admin/label-batch/{id}`
//! releases what is left of a batch. Storing a judgment of a reserved pair releases it.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::body;
use crate::active::loss::LossParams;
use crate::active::DEFAULT_LAMBDA;
use crate::admin::labels::{self, BatchStrategy, Picked, PoolSpec};
use crate::api::guard::{begin_write, Commitment};
use crate::api::params::{Query, QueryParams};
use crate::api::{ApiError, AppState};
use crate::db::labels::{NewBatch, Reservation, ReservationFilter, ReservationView, Reserved};
use crate::db::{now_ms, rfc3339};
use crate::search::model::{DEFAULT_WINDOW, MAX_WINDOW};
use crate::text::ModelKind;

/// The largest batch one request may ask for.
pub(crate) const MAX_BATCH: usize = 1000;
/// Reservations last an hour unless asked otherwise, at most a week.
pub(crate) const DEFAULT_TTL_SECS: u64 = 3600;
pub(crate) const MAX_TTL_SECS: u64 = 7 * 24 * 3600;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LabelBatchIn {
    /// Stored query ids whose windows form the pool (default: every stored query).
    query_ids: Option<Vec<String>>,
    k: Option<u64>,
    /// "angle" (default) or "loss".
    strategy: Option<String>,
    lambda: Option<f64>,
    /// The loss-based batch's α, β and ε.
    alpha: Option<f64>,
    beta: Option<f64>,
    balance: Option<f64>,
    window: Option<u64>,
    first_phase: Option<String>,
    assessor: String,
    ttl_secs: Option<u64>,
}

fn in_range(field: &str, value: Option<u64>, default: u64, max: u64) -> Result<u64, ApiError> {
    let v = value.unwrap_or(default);
    if v == 0 || v > max {
        return Err(ApiError::bad_request(
            field,
            format!("{field} must be between 1 and {max}, got {v}"),
        ));
    }
    Ok(v)
}

/// Picks the next batch of (query, document) pairs to label and reserves them for `assessor`.
#[utoipa::path(
    post, path = "/label-batch", tag = "admin",
    request_body(content = String, content_type = "application/json",
                 description = "`{\"assessor\":\"ann\",\"k\":50,\"lambda\":0.5,\"window\":100,\"ttl_secs\":3600,\"first_phase\":\"bm25f\",\"query_ids\":[\"q1\"]}`; only `assessor` is required. The pool: unjudged, unreserved pairs in the first-phase windows of the stored queries (`query_ids`, default all), scored by the active reranker (else the first-phase score). Criterion (SPEC §5): argmin λ·g + (1−λ)·max|cos| with g the normalised neighbor gap, k times; or with `\"strategy\":\"loss\"` (and `alpha`, `beta`, `balance` instead of `lambda`) the loss-based batch of seed 002 ch. 4"),
    responses(
        (status = 200, description = "`{\"batch_id\":ID|null,\"assessor\",\"expires_at\",\"k\",\"lambda\",\"window\",\"first_phase\",\"scored_by\":\"reranker\"|\"first_phase\",\"model\":ID|null,\"pool_size\":N,\"queries\":Q,\"skipped_queries\":[..],\"items\":[{pos,query_id,query,doc_id,score,first_phase_rank,margin,max_cos,objective}]}`; an empty pool gives `items: []`, `batch_id: null` and reserves nothing; a pool smaller than k gives all of it"),
        (status = 400, description = "bad parameter, unknown field or unknown query id (named in `field`); nothing reserved"),
        (status = 409, description = "no stored query texts, or a concurrent batch reserved one of the pairs (ask again)"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn create(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let raw = body::bytes(raw)?;
    let request: LabelBatchIn = body::json(&raw)?;
    let assessor = body::id("assessor", &request.assessor)?;
    if assessor.len() > 200 {
        return Err(ApiError::bad_request(
            "assessor",
            "assessor is longer than 200 bytes",
        ));
    }
    let k = in_range("k", request.k, 50, MAX_BATCH as u64)? as usize;
    let window = in_range(
        "window",
        request.window,
        DEFAULT_WINDOW as u64,
        MAX_WINDOW as u64,
    )? as usize;
    let ttl_secs = in_range("ttl_secs", request.ttl_secs, DEFAULT_TTL_SECS, MAX_TTL_SECS)?;
    let lambda = request.lambda.unwrap_or(DEFAULT_LAMBDA);
    if !(0.0..=1.0).contains(&lambda) {
        return Err(ApiError::bad_request(
            "lambda",
            format!("lambda must be in [0, 1], got {lambda}"),
        ));
    }
    let strategy = match request.strategy.as_deref().unwrap_or("angle") {
        "angle" => {
            let loss_fields = [
                ("alpha", request.alpha),
                ("beta", request.beta),
                ("balance", request.balance),
            ];
            if let Some((field, _)) = loss_fields.iter().find(|(_, v)| v.is_some()) {
                return Err(ApiError::bad_request(
                    *field,
                    format!("{field} applies to strategy \"loss\""),
                ));
            }
            BatchStrategy::Angle { lambda }
        }
        "loss" => {
            if request.lambda.is_some() {
                return Err(ApiError::bad_request(
                    "lambda",
                    "lambda applies to strategy \"angle\"",
                ));
            }
            let defaults = LossParams::default();
            let params = LossParams {
                alpha: request.alpha.unwrap_or(defaults.alpha),
                beta: request.beta.unwrap_or(defaults.beta),
                balance: request.balance.unwrap_or(defaults.balance),
                ..defaults
            };
            for (field, value, ok) in [
                (
                    "alpha",
                    params.alpha,
                    params.alpha >= 0.0 && params.alpha.is_finite(),
                ),
                (
                    "beta",
                    params.beta,
                    params.beta >= 0.0 && params.beta.is_finite(),
                ),
                (
                    "balance",
                    params.balance,
                    (0.0..=0.5).contains(&params.balance),
                ),
            ] {
                if !ok {
                    let range = if field == "balance" {
                        "[0, 0.5]"
                    } else {
                        "[0, ∞)"
                    };
                    return Err(ApiError::bad_request(
                        field,
                        format!("{field} must be in {range}, got {value}"),
                    ));
                }
            }
            BatchStrategy::Loss(params)
        }
        other => {
            return Err(ApiError::bad_request(
                "strategy",
                format!("strategy must be \"angle\" or \"loss\", got {other:?}"),
            ))
        }
    };
    let first_phase: ModelKind = request
        .first_phase
        .as_deref()
        .unwrap_or("bm25f")
        .parse()
        .map_err(|e: String| ApiError::bad_request("first_phase", e))?;

    // One selection at a time per server: two overlapping requests would offer the same pairs
    // (the database's primary key still refuses a double reservation across servers).
    let _selecting = state.ops.label_batches.lock().await;
    let db = &state.ops.db;
    let stored = db.query_texts().await.map_err(ApiError::internal)?;
    let queries: Vec<(String, String)> = match &request.query_ids {
        None => stored,
        Some(ids) => {
            if ids.is_empty() {
                return Err(ApiError::bad_request("query_ids", "`query_ids` is empty"));
            }
            let mut chosen = Vec::with_capacity(ids.len());
            for (i, id) in ids.iter().enumerate() {
                let field = format!("query_ids[{i}]");
                let id = body::id(&field, id)?;
                match stored.iter().find(|(q, _)| *q == id) {
                    Some(q) => {
                        if !chosen.contains(q) {
                            chosen.push(q.clone());
                        }
                    }
                    None => {
                        return Err(ApiError::bad_request(
                            field,
                            format!(
                                "no stored text for query {id:?}: POST /admin/queries or \
                                 /admin/judgments with its text first"
                            ),
                        ))
                    }
                }
            }
            chosen.sort();
            chosen
        }
    };
    if queries.is_empty() {
        return Err(ApiError::conflict(
            "no stored query texts to draw a pool from: POST /admin/queries or /admin/judgments \
             with query texts first",
        ));
    }
    let unavailable = db.unavailable_pairs().await.map_err(ApiError::internal)?;
    let grades: HashMap<(String, String), i32> = match strategy {
        BatchStrategy::Loss(_) => db
            .all_judgments()
            .await
            .map_err(ApiError::internal)?
            .into_iter()
            .map(|s| ((s.judgment.query_id, s.judgment.doc_id), s.judgment.grade))
            .collect(),
        BatchStrategy::Angle { .. } => HashMap::new(),
    };
    let worker = state.clone();
    let selection = tokio::task::spawn_blocking(move || {
        let spec = PoolSpec {
            queries: &queries,
            unavailable: &unavailable,
            first_phase,
            window,
            k,
            strategy,
            grades: &grades,
        };
        labels::select(&worker.engine, &spec)
    })
    .await
    .map_err(ApiError::internal)??;

    let expires_at = now_ms() + (ttl_secs as i64) * 1000;
    let strategy_json = match strategy {
        BatchStrategy::Angle { lambda } => json!({"strategy": "angle", "lambda": lambda}),
        BatchStrategy::Loss(p) => json!({
            "strategy": "loss", "alpha": p.alpha, "beta": p.beta, "balance": p.balance,
        }),
    };
    let mut params = json!({
        "k": k, "window": window, "first_phase": first_phase.to_string(),
        "ttl_secs": ttl_secs, "query_ids": request.query_ids,
    });
    for (key, value) in strategy_json.as_object().into_iter().flatten() {
        params[key] = value.clone();
    }
    let batch_id = if selection.items.is_empty() {
        None
    } else {
        let batch = NewBatch {
            batch_id: format!("lb-{:016x}", rand::random::<u64>()),
            assessor: assessor.clone(),
            params: params.clone(),
            model: selection.model.clone(),
            pool_size: selection.pool_size,
            expires_at,
            pairs: selection
                .items
                .iter()
                .map(|c| (c.query_id.clone(), c.doc_id.clone()))
                .collect(),
        };
        begin_write(commitment)?;
        match db.reserve_batch(&batch).await.map_err(ApiError::internal)? {
            Reserved::Done => Some(batch.batch_id),
            Reserved::Conflict => {
                return Err(ApiError::conflict(
                    "another batch reserved some of these pairs meanwhile; nothing was \
                     reserved, ask again",
                ))
            }
        }
    };
    let items: Vec<Value> = selection
        .items
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut item = json!({
                "pos": i + 1,
                "query_id": c.query_id,
                "query": c.query,
                "doc_id": c.doc_id,
                "score": c.score,
                "first_phase_rank": c.first_phase_rank,
            });
            match c.pick {
                Picked::Angle(p) => {
                    item["margin"] = json!(p.margin);
                    item["max_cos"] = json!(p.max_cos);
                    item["objective"] = json!(p.objective);
                }
                Picked::Loss(p) => {
                    item["weight"] = json!(p.weight);
                    item["p_correct"] = json!(p.p_correct);
                    item["entropy"] = json!(p.entropy);
                }
            }
            item
        })
        .collect();
    let scored_by = if selection.model.is_some() {
        "reranker"
    } else {
        "first_phase"
    };
    let mut out = json!({
        "batch_id": batch_id,
        "assessor": assessor,
        "expires_at": batch_id.as_ref().map(|_| rfc3339(expires_at)),
        "k": k,
        "window": window,
        "first_phase": first_phase.to_string(),
        "scored_by": scored_by,
        "model": selection.model,
        "pool_size": selection.pool_size,
        "queries": selection.queries,
        "skipped_queries": selection.skipped_queries,
        "items": items,
    });
    for (key, value) in strategy_json.as_object().into_iter().flatten() {
        out[key] = value.clone();
    }
    Ok(Json(out))
}

/// `GET /admin/reservations`'s parameters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ReservationsParams {
    /// only this assessor's
    assessor: Option<String>,
    /// only this batch's
    batch_id: Option<String>,
    /// 1..=1000, default 100
    limit: Option<i64>,
    /// default 0
    offset: Option<i64>,
}

impl QueryParams for ReservationsParams {
    const NAMES: &'static [&'static str] = &["assessor", "batch_id", "limit", "offset"];
}

/// A page of live reservations and how many there are in all.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ReservationList {
    pub total: i64,
    pub reservations: Vec<ReservationView>,
}

/// Lists live (unexpired) reservations, oldest batch first.
#[utoipa::path(
    get, path = "/reservations", tag = "admin",
    params(ReservationsParams),
    responses(
        (status = 200, description = "a page of live reservations", body = ReservationList),
        (status = 400, description = "bad parameter (named)"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn reservations(
    State(state): State<Arc<AppState>>,
    Query(p): Query<ReservationsParams>,
) -> Result<Json<ReservationList>, ApiError> {
    let (limit, offset) = body::page(p.limit, p.offset)?;
    let filter = ReservationFilter {
        assessor: p.assessor,
        batch_id: p.batch_id,
        limit,
        offset,
    };
    let (list, total) = state
        .ops
        .db
        .reservations(&filter)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(ReservationList {
        total,
        reservations: list.iter().map(Reservation::view).collect(),
    }))
}

/// Releases the pairs of a batch that are still reserved, so later batches may offer them.
#[utoipa::path(
    delete, path = "/label-batch/{id}", tag = "admin",
    params(("id" = String, Path, description = "the batch id `POST /admin/label-batch` returned")),
    responses(
        (status = 200, description = "`{\"batch_id\":ID,\"released\":N}`"),
        (status = 404, description = "no such batch"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn release(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    Path(batch_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    begin_write(commitment)?;
    match state
        .ops
        .db
        .release_batch(&batch_id)
        .await
        .map_err(ApiError::internal)?
    {
        Some(released) => Ok(Json(json!({"batch_id": batch_id, "released": released}))),
        None => Err(ApiError::not_found(format!(
            "no label batch with id {batch_id:?}"
        ))),
    }
}
