//! Judgments: `POST /admin/judgments` (JSON), `POST /admin/judgments/qrels` (TREC qrels text),
//! `GET /admin/judgments` (by query, paginated), and `POST /admin/queries` (query texts, which
//! qrels do not carry).
//!
//! A judgment must name a live document of the index: one for an unknown document rejects the
//! whole request (with `skip_unknown=true`, a qrels import stores the others and reports the
//! skipped count), so stored judgments always refer to something evaluation can retrieve.

use std::collections::HashSet;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::body;
use crate::admin::documents::exists;
use crate::api::guard::{begin_write, Commitment};
use crate::api::params::{Query, QueryParams};
use crate::api::{ApiError, AppState};
use crate::db::judgments::{JudgmentView, StoredJudgment};
use crate::db::{Judgment, JudgmentFilter};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JudgmentIn {
    query_id: String,
    /// The query's text; required the first time a query id is seen.
    query: Option<String>,
    doc_id: String,
    grade: i32,
    source: Option<String>,
}

/// Adds judgments: one JSON object or an array of them, stored together or not at all.
#[utoipa::path(
    post, path = "/judgments", tag = "admin",
    request_body(content = String, content_type = "application/json",
                 description = "`{\"query_id\":\"q1\",\"query\":\"text\",\"doc_id\":\"d\",\"grade\":2,\"source\":\"api\"}` or an array of such objects; `query` is required for a query id not seen before"),
    responses(
        (status = 200, description = "`{\"stored\":N}`"),
        (status = 400, description = "wrong type, missing field, unknown document or query without text (named in `field`); nothing stored"),
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
    let value: Value = body::json(&raw)?;
    let (items, prefix): (Vec<Value>, bool) = match value {
        Value::Array(items) => (items, true),
        object @ Value::Object(_) => (vec![object], false),
        _ => {
            return Err(ApiError::bad_request(
                "body",
                "expected a judgment object or an array of them",
            ))
        }
    };
    if items.is_empty() {
        return Err(ApiError::bad_request(
            "body",
            "the array holds no judgments",
        ));
    }
    let mut queries: Vec<(String, String)> = Vec::new();
    let mut texts_known: HashSet<String> = HashSet::new();
    let mut judgments = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let at = |f: &str| {
            if prefix {
                format!("[{i}].{f}")
            } else {
                f.to_string()
            }
        };
        let j: JudgmentIn = serde_path_to_error::deserialize(item).map_err(|e| {
            let path = e.path().to_string();
            let field = match (path.as_str(), prefix) {
                (".", true) => format!("[{i}]"),
                (".", false) => "body".to_string(),
                (p, _) => at(p),
            };
            ApiError::bad_request(field, format!("invalid judgment: {}", e.inner()))
        })?;
        // Grades are 0 (not relevant) or more. TREC qrels files may carry negative grades
        // (ClueWeb's -2 for spam) and `/admin/judgments/qrels` keeps them as trec_eval does;
        // a judgment entered through this API has no such convention to follow.
        if j.grade < 0 {
            return Err(ApiError::bad_request(
                at("grade"),
                format!("grade {} is negative; grades are 0 or more", j.grade),
            ));
        }
        let query_id = body::id(&at("query_id"), &j.query_id)?;
        let doc_id = body::id(&at("doc_id"), &j.doc_id)?;
        if !exists(&state.engine.index, &doc_id).map_err(ApiError::internal)? {
            return Err(ApiError::bad_request(
                at("doc_id"),
                format!("no document with id {doc_id:?} in the index; nothing was stored"),
            ));
        }
        match j.query.as_deref().map(str::trim) {
            Some(text) if !text.is_empty() => {
                queries.push((query_id.clone(), text.to_string()));
                texts_known.insert(query_id.clone());
            }
            Some(_) => return Err(ApiError::bad_request(at("query"), "`query` is empty")),
            None => {
                if !texts_known.contains(&query_id)
                    && state
                        .ops
                        .db
                        .query_text(&query_id)
                        .await
                        .map_err(ApiError::internal)?
                        .is_none()
                {
                    return Err(ApiError::bad_request(
                        at("query"),
                        format!("query {query_id:?} is new: give its text in `query`"),
                    ));
                }
                texts_known.insert(query_id.clone());
            }
        }
        let source = match j.source {
            Some(s) => body::id(&at("source"), &s)?,
            None => "api".to_string(),
        };
        judgments.push(Judgment {
            query_id,
            doc_id,
            grade: j.grade,
            source,
        });
    }
    begin_write(commitment)?;
    state
        .ops
        .db
        .store_judgments(&queries, &judgments)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(json!({"stored": judgments.len()})))
}

/// `POST /admin/judgments/qrels`'s parameters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct QrelsParams {
    /// store the judgments of known documents and skip the others (default false: reject the
    /// import)
    skip_unknown: Option<bool>,
}

impl QueryParams for QrelsParams {
    const NAMES: &'static [&'static str] = &["skip_unknown"];
}

/// Imports TREC qrels (`qid iter docid grade` per line), all or none.
#[utoipa::path(
    post, path = "/judgments/qrels", tag = "admin",
    params(QrelsParams),
    request_body(content = String, content_type = "text/plain", description = "TREC qrels"),
    responses(
        (status = 200, description = "`{\"stored\":N,\"skipped_unknown\":M,\"queries\":Q,\"queries_without_text\":[..]}`"),
        (status = 400, description = "a malformed line (named) or an unknown document; nothing stored"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn import_qrels(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    Query(p): Query<QrelsParams>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let raw = body::bytes(raw)?;
    let skip_unknown = p.skip_unknown.unwrap_or(false);
    let text = body::text(&raw)?;
    let qrels = crate::eval::trec::parse_qrels(text.as_bytes(), std::path::Path::new("qrels"))
        .map_err(|e| ApiError::bad_request("body", format!("{e}; nothing was stored")))?;
    if qrels.is_empty() {
        return Err(ApiError::bad_request(
            "body",
            "the body holds no qrels lines",
        ));
    }
    let mut judgments = Vec::with_capacity(qrels.num_judgments());
    let mut skipped = 0usize;
    for (qid, docs) in qrels.iter() {
        for (doc, &grade) in docs {
            if !exists(&state.engine.index, doc).map_err(ApiError::internal)? {
                if skip_unknown {
                    skipped += 1;
                    continue;
                }
                return Err(ApiError::bad_request(
                    "body",
                    format!(
                        "query {qid}: no document with id {doc:?} in the index; nothing was \
                         stored (pass skip_unknown=true to skip such lines)"
                    ),
                ));
            }
            judgments.push(Judgment {
                query_id: qid.to_string(),
                doc_id: doc.clone(),
                grade,
                source: "qrels".into(),
            });
        }
    }
    begin_write(commitment)?;
    state
        .ops
        .db
        .store_judgments(&[], &judgments)
        .await
        .map_err(ApiError::internal)?;
    let mut without_text = Vec::new();
    for (qid, _) in qrels.iter() {
        if state
            .ops
            .db
            .query_text(qid)
            .await
            .map_err(ApiError::internal)?
            .is_none()
        {
            without_text.push(qid.to_string());
        }
    }
    Ok(Json(json!({
        "stored": judgments.len(),
        "skipped_unknown": skipped,
        "queries": qrels.num_queries(),
        "queries_without_text": without_text,
    })))
}

/// `GET /admin/judgments`'s parameters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct JudgmentsParams {
    /// only this query's judgments
    query_id: Option<String>,
    /// 1..=1000, default 100
    limit: Option<i64>,
    /// default 0
    offset: Option<i64>,
}

impl QueryParams for JudgmentsParams {
    const NAMES: &'static [&'static str] = &["query_id", "limit", "offset"];
}

/// A page of judgments and how many match in all.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct JudgmentList {
    pub total: i64,
    pub judgments: Vec<JudgmentView>,
}

/// Lists judgments in (query, document) order, optionally of one query.
#[utoipa::path(
    get, path = "/judgments", tag = "admin",
    params(JudgmentsParams),
    responses(
        (status = 200, description = "a page of judgments", body = JudgmentList),
        (status = 400, description = "bad parameter (named)"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(state): State<Arc<AppState>>,
    Query(p): Query<JudgmentsParams>,
) -> Result<Json<JudgmentList>, ApiError> {
    let (limit, offset) = body::page(p.limit, p.offset)?;
    let filter = JudgmentFilter {
        query_id: p.query_id,
        limit,
        offset,
    };
    let (list, total) = state
        .ops
        .db
        .judgments(&filter)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(JudgmentList {
        total,
        judgments: list.iter().map(StoredJudgment::view).collect(),
    }))
}

/// Sets query texts: one `qid text` per line (the `rankd eval --format trec` queries file).
#[utoipa::path(
    post, path = "/queries", tag = "admin",
    request_body(content = String, content_type = "text/plain", description = "`qid<whitespace>query text` per line"),
    responses(
        (status = 200, description = "`{\"stored\":N}`"),
        (status = 400, description = "a line without text (named); nothing stored"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn set_queries(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let raw = body::bytes(raw)?;
    let text = body::text(&raw)?;
    let mut queries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some((qid, q)) = line.split_once(char::is_whitespace) else {
            return Err(ApiError::bad_request(
                "body",
                format!("line {}: expected `qid text`; nothing was stored", i + 1),
            ));
        };
        queries.push((qid.to_string(), q.trim().to_string()));
    }
    if queries.is_empty() {
        return Err(ApiError::bad_request("body", "the body holds no queries"));
    }
    begin_write(commitment)?;
    state
        .ops
        .db
        .store_judgments(&queries, &[])
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(json!({"stored": queries.len()})))
}
