//! `GET /search` and `GET /doc/{id}`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;

use super::error::ApiError;
use super::params::{Query, QueryParams};
use super::AppState;
use crate::search::{
    CollapseKey, Fusion, FusionError, FusionQuery, Ranking, Returns, SearchQuery, SearchResponse,
    SortMode, DEFAULT_BOOST_WINDOW, DEFAULT_FUSION_DEPTH, DEFAULT_WINDOW,
};
use crate::search::{DocResponse, SimilarResponse};
use crate::text::ModelKind;

/// `GET /search`'s parameters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SearchParams {
    /// query text (at most 16 KB, 1024 distinct terms)
    q: String,
    /// hits to return, 1..=1000 (default 10)
    k: Option<usize>,
    /// hits to skip (default 0)
    offset: Option<usize>,
    /// bm25, bm25f, tfidf, f2exp, lm, bm25prox, or fusion (with `inputs` and `fusion`;
    /// default: the index's, bm25f)
    model: Option<String>,
    /// with model=fusion: the fused models, comma-separated, each once (e.g. bm25f,lm,bm25prox)
    inputs: Option<String>,
    /// with model=fusion: rrf, combsum, combmnz, borda or condorcet (SPEC §6)
    fusion: Option<String>,
    /// RRF's k, finite, ≥ 0 (default 60)
    fusion_k: Option<f64>,
    /// how combsum and combmnz normalise scores: minmax (default) or zscore
    fusion_norm: Option<String>,
    /// one positive weight per input, comma-separated (default all 1)
    fusion_weights: Option<String>,
    /// how many of each input's top documents are fused, 1..=1000 (default 100)
    fusion_depth: Option<usize>,
    /// keep the best hit of each group: page, site, group, near_duplicate, comma-separated
    /// (a hit is hidden when it shares any with a hit above it), or none (default)
    collapse: Option<String>,
    /// relevance (default), or order the matching documents by hot, gravity, best, fresh or
    /// rating (SPEC §1.8; documents without the needed fields come last)
    sort: Option<String>,
    /// field of single-field models: title, headings, body, anchor, url, all
    field: Option<String>,
    /// add each hit's score breakdown
    explain: Option<bool>,
    /// apply the active reranker (default true)
    rerank: Option<bool>,
    /// the reranked, boosted or collapsed first-phase window, 1..=1000 (default 100)
    window: Option<usize>,
    /// none or pagerank
    boost: Option<String>,
    /// λ of the PageRank boost, finite, |λ| ≤ 1e6 (default 1)
    boost_weight: Option<f32>,
    /// return snippets (default true)
    snippets: Option<bool>,
    /// what each hit carries besides rank, id and score: a comma-separated subset of url,
    /// title, snippet (default all three)
    fields: Option<String>,
}

impl QueryParams for SearchParams {
    const NAMES: &'static [&'static str] = &[
        "q",
        "k",
        "offset",
        "model",
        "inputs",
        "fusion",
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
    ];
}

/// Ranked hits with snippets (INTERFACE.md): the parameters become a [`SearchQuery`] and
/// [`crate::search::Engine::search`] does the rest.
#[utoipa::path(
    get, path = "/search", tag = "search",
    params(SearchParams),
    responses(
        (status = 200, description = "ranked hits", body = SearchResponse),
        (status = 400, description = "bad parameter, named in `error.field`"),
    )
)]
pub async fn search(
    State(state): State<Arc<AppState>>,
    Query(p): Query<SearchParams>,
) -> Result<Json<SearchResponse>, ApiError> {
    let query = search_query(p, state.engine.model().is_some())?;
    // Searches take about a millisecond (bounded by the query-length, k and window limits),
    // so they run on the request's own worker: a hand-off to the blocking pool costs more
    // than it saves.
    let response = state.engine.search(&query)?;
    observe(&query, &response);
    Ok(Json(response))
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

/// The [`SearchQuery`] `GET /search`'s parameters ask for, checked; `reranker_active` says
/// whether reranking is on by default.
pub(super) fn search_query(
    p: SearchParams,
    reranker_active: bool,
) -> Result<SearchQuery, ApiError> {
    let (model, fusion) = match p.model.as_deref() {
        Some("fusion") => (None, Some(fusion_query(&p)?)),
        Some(m) => (
            Some(
                m.parse::<ModelKind>()
                    .map_err(|e| ApiError::bad_request("model", e))?,
            ),
            None,
        ),
        None => (None, None),
    };
    if fusion.is_none() {
        for (name, given) in [
            ("inputs", p.inputs.is_some()),
            ("fusion", p.fusion.is_some()),
            ("fusion_k", p.fusion_k.is_some()),
            ("fusion_norm", p.fusion_norm.is_some()),
            ("fusion_weights", p.fusion_weights.is_some()),
            ("fusion_depth", p.fusion_depth.is_some()),
        ] {
            if given {
                return Err(ApiError::bad_request(
                    name,
                    format!("{name} applies to model=fusion"),
                ));
            }
        }
    }
    let collapse = match &p.collapse {
        Some(list) => {
            CollapseKey::parse_list(list).map_err(|e| ApiError::bad_request("collapse", e))?
        }
        None => Vec::new(),
    };
    let sort = match p.sort.as_deref() {
        None | Some("relevance") => None,
        Some(s) => Some(
            s.parse::<SortMode>()
                .map_err(|e| ApiError::bad_request("sort", e))?,
        ),
    };
    if sort.is_some() && (p.boost.is_some() || p.rerank == Some(true)) {
        return Err(ApiError::bad_request(
            "sort",
            "sort orders the matching documents by a static score; it excludes boost and rerank=true",
        ));
    }
    let boost = match p.boost.as_deref() {
        None | Some("none") => None,
        Some("pagerank") => Some(p.boost_weight.unwrap_or(1.0)),
        Some(other) => {
            return Err(ApiError::bad_request(
                "boost",
                format!("unknown boost `{other}` (known: none, pagerank)"),
            ))
        }
    };
    if boost.is_none() && p.boost_weight.is_some() {
        return Err(ApiError::bad_request(
            "boost_weight",
            "boost_weight sets the weight of boost=pagerank; no boost was asked for",
        ));
    }
    // The static boost re-sorts the first phase; a reranker would re-sort it again and
    // ignore it, so a boost turns reranking off unless both are asked for (an error).
    let rerank = match (p.rerank, boost) {
        (Some(true), Some(_)) => {
            return Err(ApiError::bad_request(
                "boost",
                "boost applies to first-phase results; pass rerank=false with it",
            ))
        }
        (_, Some(_)) => false,
        (r, None) => r.unwrap_or(true),
    };
    let ranking = match boost {
        _ if sort.is_some() => Ranking::Sort(sort.expect("checked")),
        Some(weight) => Ranking::Boost {
            weight,
            window: p.window.unwrap_or(DEFAULT_BOOST_WINDOW),
        },
        None if rerank && reranker_active => Ranking::Rerank {
            window: p.window.unwrap_or(DEFAULT_WINDOW),
        },
        None => Ranking::FirstPhase,
    };
    if p.window.is_some()
        && matches!(ranking, Ranking::FirstPhase | Ranking::Sort(_))
        && collapse.is_empty()
    {
        return Err(ApiError::bad_request(
            "window",
            "window sets the rerank, boost or collapse window; this request has none",
        ));
    }
    let mut returns = match &p.fields {
        None => Returns::ALL,
        Some(list) => {
            let mut r = Returns::IDS;
            for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                match name {
                    "url" => r.url = true,
                    "title" => r.title = true,
                    "snippet" => r.snippet = true,
                    other => {
                        return Err(ApiError::bad_request(
                            "fields",
                            format!("unknown hit field `{other}` (known: url, title, snippet)"),
                        ))
                    }
                }
            }
            r
        }
    };
    if p.snippets == Some(false) {
        returns.snippet = false;
    }
    Ok(SearchQuery {
        text: p.q,
        model,
        field: p.field,
        ranking,
        offset: p.offset.unwrap_or(0),
        k: p.k.unwrap_or(10),
        explain: p.explain.unwrap_or(false),
        returns,
        fusion,
        collapse,
        collapse_window: p.window.unwrap_or(DEFAULT_WINDOW),
    })
}

/// The fusion `model=fusion` asks for, checked.
fn fusion_query(p: &SearchParams) -> Result<FusionQuery, ApiError> {
    let inputs: Vec<ModelKind> = p
        .inputs
        .as_deref()
        .ok_or_else(|| {
            ApiError::bad_request("inputs", "model=fusion needs inputs=MODEL,MODEL,...")
        })?
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| {
            m.parse::<ModelKind>()
                .map_err(|e| ApiError::bad_request("inputs", e))
        })
        .collect::<Result<_, _>>()?;
    let method = p.fusion.as_deref().ok_or_else(|| {
        ApiError::bad_request(
            "fusion",
            "model=fusion needs fusion=rrf|combsum|combmnz|borda|condorcet",
        )
    })?;
    let weights = p
        .fusion_weights
        .as_deref()
        .map(|w| {
            w.split(',')
                .map(|x| {
                    x.trim().parse::<f64>().map_err(|_| {
                        ApiError::bad_request(
                            "fusion_weights",
                            format!("`{x}` is not a number; give one positive weight per input"),
                        )
                    })
                })
                .collect::<Result<Vec<f64>, _>>()
        })
        .transpose()?;
    let fusion = Fusion::from_names(
        method,
        inputs.len(),
        p.fusion_k,
        p.fusion_norm.as_deref(),
        weights,
    )
    .map_err(|e| {
        let field = match e {
            FusionError::TooFewInputs(_) => "inputs",
            FusionError::WeightCount { .. } | FusionError::BadWeight { .. } => "fusion_weights",
            FusionError::BadK(_) | FusionError::KWithoutRrf(_) => "fusion_k",
            FusionError::NormWithRanks(_) | FusionError::UnknownNorm(_) => "fusion_norm",
            _ => "fusion",
        };
        ApiError::bad_request(field, e.to_string())
    })?;
    Ok(FusionQuery {
        inputs,
        fusion,
        depth: p.fusion_depth.unwrap_or(DEFAULT_FUSION_DEPTH),
    })
}

/// `GET /similar`'s parameters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SimilarParams {
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
