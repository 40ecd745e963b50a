//! `GET /search` and `GET /doc/{id}`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use axum::{Extension, Json};

use super::error::ApiError;
use super::params::{Query, QueryParams};
use super::search_pool::{is_heavy, SearchPool};
use super::AppState;
use crate::search::{
    budget, Deadline, DocResponse, Ranking, SearchQuery, SearchResponse, SimilarResponse,
};

/// `GET /search`'s parameters: the library's rule book ([`crate::search::request`]).
pub use crate::search::request::SearchRequest as SearchParams;

impl QueryParams for SearchParams {
    const NAMES: &'static [&'static str] = &[
        "q",
        "k",
        "offset",
        "model",
        "inputs",
        "fusion",
        "hybrid_ratio",
        "fusion_k",
        "fusion_norm",
        "fusion_weights",
        "fusion_depth",
        "collapse",
        "sort",
        "field",
        "explain",
        "rerank",
        "window",
        "boost",
        "boost_weight",
        "snippets",
        "fields",
        "lang",
    ];
}

/// Ranked hits with snippets (INTERFACE.md): the parameters become a [`SearchQuery`] and
/// [`crate::search::Engine::search_until`] does the rest on the [`SearchPool`], within
/// `limits.request_timeout_secs`. The answer's impression is logged under its `query_id`
/// (with the `X-Client-Id` header's value, if sent) without waiting. While an interleaving
/// experiment runs (`POST /admin/experiments`), its share of the reranked first pages is
/// answered with the active reranker's and the candidate's rankings interleaved, and the
/// impression records the experiment and each hit's team. A share of the other logged first
/// pages (`events.swap_share`) is shown with rank 1 and a random lower rank swapped
/// (`crate::events::rand_pair`), which the answer's `swapped` names.
#[utoipa::path(
    get, path = "/search", tag = "search",
    params(SearchParams,
        ("X-Client-Id" = Option<String>, Header, description = "the client, stored with the impression")),
    responses(
        (status = 200, description = "ranked hits", body = SearchResponse),
        (status = 400, description = "bad parameter, named in `error.field`; a search over the cost limit (`crate::search::budget`) names `q` or `inputs`"),
        (status = 503, description = "the search did not finish, or find a thread, within `limits.request_timeout_secs`"),
    )
)]
pub async fn search(
    State(state): State<Arc<AppState>>,
    Extension(pool): Extension<SearchPool>,
    client: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Query(p): Query<SearchParams>,
) -> Result<Json<SearchResponse>, ApiError> {
    let deadline = Instant::now() + pool.budget;
    let mut query = p.into_query(state.engine.model().is_some())?;
    query.requester_langs = requester_langs(&headers);
    let lists = budget::check_cost(&query)?;
    let address = client.map(|Extension(ConnectInfo(a))| a.ip());
    let slot = pool
        .slot(address, deadline)
        .await
        .ok_or(crate::search::SearchError::OverBudget(
            "waiting for a search thread",
        ))?;
    // While an experiment runs, the query id is drawn first: it decides whether this search
    // is interleaved, and seeds the interleaving. Without one, this is one atomic load.
    let (query_id, experiment) = match &*state.experiment.load() {
        Some(running) if state.events.settings.log_impressions => {
            let id = crate::events::new_query_id();
            let interleave = running.applies(&state.engine, &id);
            let experiment = interleave.then(|| running.clone());
            (Some(id), experiment)
        }
        _ => (None, None),
    };
    let searching = state.clone();
    let seed = query_id.as_deref().map(crate::interleave::seed_of);
    let (query, response, experiment) = pool
        .run(slot, is_heavy(lists), move || {
            let deadline = Deadline::at(deadline);
            let response = match (&experiment, seed) {
                (Some(running), Some(seed)) => {
                    searching
                        .engine
                        .search_interleaved(&query, deadline, &running.candidate, seed)
                }
                _ => searching.engine.search_until(&query, deadline),
            };
            (query, response, experiment)
        })
        .await
        .ok_or_else(|| ApiError::internal("the search thread failed"))?;
    let mut response = response?;
    observe(&query, &response);
    let experiment = experiment.map(|running| running.id);
    let client = client_id(&headers);
    response.log(&query, &state.events, query_id, experiment, client);
    Ok(Json(response))
}

/// The header naming the client (a browser, a session, an app), stored with the impression.
pub(super) const CLIENT_ID_HEADER: &str = "x-client-id";

/// The requester's `X-Client-Id`, if it sent a usable one.
pub(super) fn client_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(CLIENT_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= crate::events::MAX_ID_LEN)
        .map(str::to_string)
}

/// The languages the requester reads, most wanted first (its `Accept-Language`).
pub(super) fn requester_langs(headers: &HeaderMap) -> Vec<String> {
    headers
        .get(axum::http::header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok())
        .map(crate::corpus::lang::preferences)
        .unwrap_or_default()
}

/// Records a search's phase times in the metrics.
pub(super) fn observe(query: &SearchQuery, response: &SearchResponse) {
    use crate::metrics::{observe_search_phase, SearchPhase};
    let t = response.times;
    observe_search_phase(SearchPhase::Retrieve, t.retrieve);
    if matches!(query.ranking, Ranking::Rerank { .. }) {
        observe_search_phase(SearchPhase::Features, t.features);
        observe_search_phase(SearchPhase::Rerank, t.rerank);
    }
    if !query.collapse.is_empty() {
        observe_search_phase(SearchPhase::Collapse, t.collapse);
    }
}

/// `GET /similar`'s parameters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct SimilarParams {
    /// document id
    doc: String,
    /// 1..=100 (default 10)
    k: Option<usize>,
}

impl QueryParams for SimilarParams {
    const NAMES: &'static [&'static str] = &["doc", "k"];
}

/// `GET /similar?doc=ID&k=10`: documents by SimRank similarity (SPEC §2.4, single-source
/// linearised SimRank with the diagonal `rankd graph` stored; error bound in
/// `crate::graph::simrank`).
#[utoipa::path(
    get, path = "/similar", tag = "search",
    params(SimilarParams),
    responses(
        (status = 200, description = "similar documents", body = SimilarResponse),
        (status = 400, description = "bad parameter, or no link scores"),
        (status = 404, description = "document not in the link graph"),
        (status = 503, description = "the index is a shard of a collection: it holds its part of the link graph only, and SimRank needs the whole graph"),
    )
)]
pub async fn similar(
    State(state): State<Arc<AppState>>,
    Query(p): Query<SimilarParams>,
) -> Result<Json<SimilarResponse>, ApiError> {
    use crate::search::SimilarError;
    let k = p.k.unwrap_or(10);
    state.engine.similar(&p.doc, k).map(Json).map_err(|e| {
        let message = e.to_string();
        match e {
            SimilarError::K(_) => ApiError::bad_request("k", message),
            SimilarError::NoLinkScores => ApiError::bad_request("doc", message),
            SimilarError::ShardedLinkGraph => ApiError::unavailable("sharded_link_graph", message),
            SimilarError::NotInGraph(_) => ApiError::not_found(message),
            SimilarError::Internal(e) => ApiError::internal(format!("{e:#}")),
        }
    })
}

/// A document's stored fields and link scores. Ids may contain `/` (the Rust docs' ids are
/// paths): `/doc/std/vec/struct.Vec.html` asks for `std/vec/struct.Vec.html`.
#[utoipa::path(
    get, path = "/doc/{id}", tag = "search",
    params(("id" = String, Path, description = "document id (may contain `/`)")),
    responses(
        (status = 200, description = "stored fields and `link_scores`", body = DocResponse),
        (status = 404, description = "no such document"),
    )
)]
pub async fn doc(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<DocResponse>, ApiError> {
    match state.engine.document(&id).map_err(ApiError::internal)? {
        Some(d) => Ok(Json(d)),
        None => Err(ApiError::not_found(format!("no document with id {id:?}"))),
    }
}
