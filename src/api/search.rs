//! `GET /search` and `GET /doc/{id}`.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::Json;
use serde_json::{json, Value};
use tantivy::collector::TopDocs;
use tantivy::query::TermQuery;
use tantivy::schema::IndexRecordOption;
use tantivy::{TantivyDocument, Term};

use super::error::ApiError;
use super::params::Params;
use super::AppState;
use crate::text::{ModelKind, SearchRequest};

const SEARCH_PARAMS: &[&str] = &["q", "k", "offset", "model", "field", "explain", "rerank"];

pub async fn search(
    State(state): State<Arc<AppState>>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(raw.as_deref(), SEARCH_PARAMS)?;
    let model = match p.str("model") {
        Some(m) => m.parse::<ModelKind>().map_err(|e| ApiError::bad_request("model", e))?,
        None => state
            .index
            .config
            .default_model
            .parse()
            .map_err(ApiError::internal)?,
    };
    let req = SearchRequest {
        q: p.required("q")?.to_string(),
        k: p.parsed("k", 10usize)?,
        offset: p.parsed("offset", 0usize)?,
        model,
        field: p.str("field").map(str::to_string),
        explain: p.parsed("explain", false)?,
        snippets: true,
    };
    // No reranker is loaded yet; the parameter is accepted so clients can pass it already.
    let _rerank: bool = p.parsed("rerank", true)?;
    let results = tokio::task::spawn_blocking(move || state.index.search(&req))
        .await
        .map_err(ApiError::internal)??;
    let mut body = serde_json::to_value(results).map_err(ApiError::internal)?;
    body["reranker"] = Value::Null;
    Ok(Json(body))
}

pub async fn doc(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let index = &state.index;
    let searcher = index.reader.searcher();
    let query = TermQuery::new(
        Term::from_field_text(index.fields.id, &id),
        IndexRecordOption::Basic,
    );
    let top = searcher
        .search(&query, &TopDocs::with_limit(1).order_by_score())
        .map_err(ApiError::internal)?;
    let Some((_, address)) = top.first() else {
        return Err(ApiError::not_found(format!("no document with id {id:?}")));
    };
    let stored: TantivyDocument = searcher.doc(*address).map_err(ApiError::internal)?;
    let d = index.stored(&stored);
    Ok(Json(json!({
        "id": d.id,
        "url": d.url,
        "title": d.title,
        "headings": d.headings,
        "body": d.body,
        "anchor": d.anchor,
        "links": d.links,
        "published_at": d.published_at,
        "extra": d.extra,
    })))
}
