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
    "window",
];
/// The static boost is applied by re-sorting this many first-phase results.
const BOOST_WINDOW: usize = 100;

/// Ranked hits with snippets (INTERFACE.md).
#[utoipa::path(
    get, path = "/search", tag = "search",
    params(
        ("q" = String, Query, description = "query text (at most 2048 bytes)"),
        ("k" = Option<usize>, Query, description = "hits to return, 1..=1000 (default 10)"),
        ("offset" = Option<usize>, Query, description = "hits to skip (default 0)"),
        ("model" = Option<String>, Query, description = "bm25, bm25f, tfidf, f2exp, lm, bm25prox"),
        ("field" = Option<String>, Query, description = "field of single-field models"),
        ("explain" = Option<bool>, Query, description = "add each hit's score breakdown"),
        ("rerank" = Option<bool>, Query, description = "apply the active reranker (default true)"),
        ("boost" = Option<String>, Query, description = "none or pagerank"),
        ("boost_weight" = Option<f32>, Query, description = "λ of the PageRank boost (default 1)"),
    ),
    responses(
        (status = 200, description = "`{query,model,total_hits,took_ms,hits:[{rank,id,url,title,snippet,score}]}`"),
        (status = 400, description = "bad parameter, named in `error.field`"),
    )
)]
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
    let links = state.links.load_full();
    if boost.is_some() && links.is_none() {
        return Err(ApiError::bad_request(
            "boost",
            "no link scores for this index; run `rankd graph` first",
        ));
    }
    // The static boost re-sorts the first phase; a reranker would re-sort it again and
    // ignore it, so a boost turns reranking off unless both are asked for (an error).
    let reranker = state.reranker.load_full();
    let rerank = match (p.str("rerank"), boost) {
        (None, Some(_)) => false,
        (_, Some(_)) if p.parsed("rerank", false)? => {
            return Err(ApiError::bad_request(
                "boost",
                "boost applies to first-phase results; pass rerank=false with it",
            ))
        }
        _ => p.parsed("rerank", true)?,
    };
    let reranker = reranker.filter(|_| rerank);
    let window: usize = p.parsed("window", crate::second_phase::DEFAULT_WINDOW)?;
    if p.str("window").is_some() && reranker.is_none() {
        return Err(ApiError::bad_request(
            "window",
            "window sets the rerank window; no reranker is active for this request",
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
    // Searches take about a millisecond (bounded by the query-length, k and window limits),
    // so they run on the request's own worker: a hand-off to the blocking pool costs more
    // than it saves.
    let results = (|| {
        use crate::metrics::{observe_search_phase, SearchPhase};
        let mut results = match &reranker {
            Some(active) => {
                let (results, times) = crate::second_phase::search(
                    &state.index,
                    links.as_deref(),
                    active,
                    &req,
                    window,
                )?;
                observe_search_phase(SearchPhase::Retrieve, times.retrieve);
                observe_search_phase(SearchPhase::Features, times.features);
                observe_search_phase(SearchPhase::Rerank, times.rerank);
                results
            }
            None => {
                let retrieve = std::time::Instant::now();
                let results = state.index.search(&req)?;
                observe_search_phase(SearchPhase::Retrieve, retrieve.elapsed().as_secs_f64());
                results
            }
        };
        if let (Some(weight), Some(links)) = (boost, &links) {
            crate::links::apply_boost(&mut results, links, weight, offset, k);
        }
        if req.explain {
            if let Some(links) = &links {
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

const SIMILAR_PARAMS: &[&str] = &["doc", "k"];

/// `GET /similar?doc=ID&k=10`: documents by SimRank similarity (SPEC §2.4, single-source
/// linearised SimRank with the diagonal `rankd graph` stored; error bound in
/// `crate::graph::simrank`).
#[utoipa::path(
    get, path = "/similar", tag = "search",
    params(
        ("doc" = String, Query, description = "document id"),
        ("k" = Option<usize>, Query, description = "1..=100 (default 10)"),
    ),
    responses(
        (status = 200, description = "`{doc,took_ms,hits:[{rank,id,score,error_bound}]}`: `score` is within `error_bound` of SimRank with probability ≥ 0.999"),
        (status = 400, description = "bad parameter, or no link scores"),
        (status = 404, description = "document not in the link graph"),
    )
)]
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
    let links = state.links.load_full();
    let Some(links) = &links else {
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
    let query = crate::graph::simrank::QueryParams::default();
    let similar = links
        .simrank
        .top_k(&links.graph, node, k, &query)
        .map_err(ApiError::internal)?;
    let hits: Vec<Value> = similar
        .into_iter()
        .enumerate()
        .map(|(i, (n, score))| {
            json!({
                "rank": i + 1,
                "id": links.scores.keys[n as usize],
                "score": score,
                "error_bound": links.simrank.error_bound(&query, score),
            })
        })
        .collect();
    Ok(Json(json!({
        "doc": id,
        "took_ms": start.elapsed().as_secs_f64() * 1e3,
        "hits": hits,
    })))
}

/// A document's stored fields and link scores.
#[utoipa::path(
    get, path = "/doc/{id}", tag = "search",
    params(("id" = String, Path, description = "document id")),
    responses(
        (status = 200, description = "stored fields and `links_scores`"),
        (status = 404, description = "no such document"),
    )
)]
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
        "links_scores": state.links.load().as_ref().and_then(|l| Some(l.of(l.node(&d.id)?))),
    })))
}
