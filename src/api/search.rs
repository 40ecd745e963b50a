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

const SEARCH_PARAMS: &[&str] = &[
    "q",
    "k",
    "offset",
    "model",
    "field",
    "explain",
    "rerank",
    "boost",
    "boost_weight",
];
/// The static boost is applied by re-sorting this many first-phase results.
const BOOST_WINDOW: usize = 100;

pub async fn search(
    State(state): State<Arc<AppState>>,
    RawQuery(raw): RawQuery,
) -> Result<Json<crate::text::SearchResults>, ApiError> {
    let p = Params::parse(raw.as_deref(), SEARCH_PARAMS)?;
    let model = match p.str("model") {
        Some(m) => m
            .parse::<ModelKind>()
            .map_err(|e| ApiError::bad_request("model", e))?,
        None => state
            .index
            .config
            .default_model
            .parse()
            .map_err(ApiError::internal)?,
    };
    let k: usize = p.parsed("k", 10usize)?;
    let offset: usize = p.parsed("offset", 0usize)?;
    let boost = match p.str("boost") {
        None | Some("none") => None,
        Some("pagerank") => Some(p.parsed("boost_weight", 1.0f32)?),
        Some(other) => {
            return Err(ApiError::bad_request(
                "boost",
                format!("unknown boost `{other}` (known: none, pagerank)"),
            ))
        }
    };
    if boost.is_some() && state.links.is_none() {
        return Err(ApiError::bad_request(
            "boost",
            "no link scores for this index; run `rankd graph` first",
        ));
    }
    if boost.is_some() && offset.saturating_add(k) > BOOST_WINDOW {
        return Err(ApiError::bad_request(
            "offset",
            format!("with a boost, offset + k must not exceed the window of {BOOST_WINDOW}"),
        ));
    }
    crate::text::search::validate_window(k, offset)?;
    let req = SearchRequest {
        q: p.required("q")?.to_string(),
        k: if boost.is_some() { BOOST_WINDOW } else { k },
        offset: if boost.is_some() { 0 } else { offset },
        model,
        field: p.str("field").map(str::to_string),
        explain: p.parsed("explain", false)?,
        snippets: true,
    };
    // No reranker is loaded yet; the parameter is accepted so clients can pass it already.
    let _rerank: bool = p.parsed("rerank", true)?;
    // Searches take about a millisecond (bounded by the query-length and k limits), so they
    // run on the request's own worker: a hand-off to the blocking pool costs more than it saves.
    let results = (|| {
        let mut results = state.index.search(&req)?;
        if let (Some(weight), Some(links)) = (boost, &state.links) {
            apply_boost(&mut results, links, weight, offset, k);
        }
        if req.explain {
            if let Some(links) = &state.links {
                for hit in &mut results.hits {
                    if let (Some(e), Some(n)) = (hit.explain.as_mut(), links.node(&hit.id)) {
                        e["links"] = links.of(n);
                    }
                }
            }
        }
        Ok::<_, crate::text::SearchError>(results)
    })()?;
    Ok(Json(results))
}

/// SPEC §1.8: `score + λ·ln(ε + pagerank·N)` over the first-phase window, re-sorted (ties by
/// the first-phase order), then cut to `offset..offset + k`.
fn apply_boost(
    results: &mut crate::text::SearchResults,
    links: &crate::links::LinkData,
    weight: f32,
    offset: usize,
    k: usize,
) {
    for hit in &mut results.hits {
        hit.score += links.pagerank_boost(&hit.id, weight);
    }
    results
        .hits
        .sort_by(|a, b| b.score.total_cmp(&a.score).then(a.rank.cmp(&b.rank)));
    results.hits = results.hits.drain(..).skip(offset).take(k).collect();
    for (i, hit) in results.hits.iter_mut().enumerate() {
        hit.rank = offset + i + 1;
    }
}

const SIMILAR_PARAMS: &[&str] = &["doc", "k"];

/// `GET /similar?doc=ID&k=10`: documents by SimRank similarity (SPEC §2.4, Monte Carlo
/// single-source estimate).
pub async fn similar(
    State(state): State<Arc<AppState>>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(raw.as_deref(), SIMILAR_PARAMS)?;
    let id = p.required("doc")?.to_string();
    let k: usize = p.parsed("k", 10usize)?;
    if k == 0 || k > 100 {
        return Err(ApiError::bad_request(
            "k",
            format!("k must be between 1 and 100, got {k}"),
        ));
    }
    let Some(links) = &state.links else {
        return Err(ApiError::bad_request(
            "doc",
            "no link scores for this index; run `rankd graph` first",
        ));
    };
    let Some(node) = links.node(&id) else {
        return Err(ApiError::not_found(format!(
            "no document with id {id:?} in the link graph"
        )));
    };
    let start = std::time::Instant::now();
    let params = crate::graph::simrank::MonteCarloParams::default();
    let similar = crate::graph::simrank::simrank_single_source(&links.graph, node, k, &params)
        .map_err(ApiError::internal)?;
    let hits: Vec<Value> = similar
        .into_iter()
        .enumerate()
        .map(|(i, (n, score))| {
            json!({"rank": i + 1, "id": links.scores.keys[n as usize], "score": score})
        })
        .collect();
    Ok(Json(json!({
        "doc": id,
        "took_ms": start.elapsed().as_secs_f64() * 1e3,
        "hits": hits,
    })))
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
        "links_scores": state.links.as_ref().and_then(|l| Some(l.of(l.node(&d.id)?))),
    })))
}
