//! The rule book of a search request: the parameters a front end receives
//! ([`SearchRequest`], `GET /search`'s on a single node and a root alike) and the
//! cross-parameter rules that turn them into a [`SearchQuery`] (`fusion` options only with
//! `model=fusion`, `sort` without `boost` or `rerank=true`, `window` only where a window is
//! reordered, `fields` and `snippets`...). A parameter's own range is
//! [`SearchQuery::validate`]'s. Errors name the parameter (`SearchError::Param`), which the
//! HTTP API answers as a 400.

use super::{
    CollapseKey, Fusion, FusionError, FusionQuery, Ranking, Returns, SearchQuery, SortMode,
    DEFAULT_BOOST_WINDOW, DEFAULT_FUSION_DEPTH, DEFAULT_WINDOW,
};
use crate::text::search::SearchError;
use crate::text::ModelKind;

/// A parameter error.
fn bad(field: &'static str, message: impl Into<String>) -> SearchError {
    SearchError::Param {
        field,
        message: message.into(),
    }
}

/// A search as front ends receive it: `GET /search`'s parameters (and a root's), named and
/// typed, each optional; [`SearchRequest::into_query`] applies the rules that bind them.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SearchRequest {
    /// query text (at most 16 KB, 1024 distinct terms)
    pub q: String,
    /// hits to return, 1..=1000 (default 10)
    pub k: Option<usize>,
    /// hits to skip (default 0)
    pub offset: Option<usize>,
    /// bm25, bm25f, tfidf, f2exp, lm, bm25prox, or fusion (with `inputs` and `fusion`;
    /// default: the index's, bm25f)
    pub model: Option<String>,
    /// with model=fusion: the fused models, comma-separated, each once (e.g. bm25f,lm,bm25prox)
    pub inputs: Option<String>,
    /// with model=fusion: rrf, combsum, combmnz, borda or condorcet (SPEC §6)
    pub fusion: Option<String>,
    /// RRF's k, finite, ≥ 0 (default 60)
    pub fusion_k: Option<f64>,
    /// how combsum and combmnz normalise scores: minmax (default) or zscore
    pub fusion_norm: Option<String>,
    /// one positive weight per input, comma-separated (default all 1)
    pub fusion_weights: Option<String>,
    /// how many of each input's top documents are fused, 1..=1000 (default 100)
    pub fusion_depth: Option<usize>,
    /// keep the best hit of each group: page, site, group, near_duplicate, comma-separated
    /// (a hit is hidden when it shares any with a hit above it), or none (default)
    pub collapse: Option<String>,
    /// relevance (default), or order the matching documents by hot, gravity, best, fresh or
    /// rating (SPEC §1.8; documents without the needed fields come last)
    pub sort: Option<String>,
    /// field of single-field models: title, headings, body, anchor, url, all
    pub field: Option<String>,
    /// add each hit's score breakdown
    pub explain: Option<bool>,
    /// apply the active reranker (default true)
    pub rerank: Option<bool>,
    /// the reranked, boosted or collapsed first-phase window, 1..=1000 (default 100)
    pub window: Option<usize>,
    /// none or pagerank
    pub boost: Option<String>,
    /// λ of the PageRank boost, finite, |λ| ≤ 1e6 (default 1)
    pub boost_weight: Option<f32>,
    /// return snippets (default true)
    pub snippets: Option<bool>,
    /// what each hit carries besides rank, id and score: a comma-separated subset of url,
    /// title, snippet (default all three)
    pub fields: Option<String>,
}

impl SearchRequest {
    /// The [`SearchQuery`] these parameters ask for, checked; `reranker_active` says whether
    /// reranking is on by default.
    pub fn into_query(self, reranker_active: bool) -> Result<SearchQuery, SearchError> {
        let p = self;
        let (model, fusion) = match p.model.as_deref() {
            Some("fusion") => (None, Some(fusion_query(&p)?)),
            Some(m) => (
                Some(m.parse::<ModelKind>().map_err(|e| bad("model", e))?),
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
                    return Err(bad(name, format!("{name} applies to model=fusion")));
                }
            }
        }
        let collapse = match &p.collapse {
            Some(list) => CollapseKey::parse_list(list).map_err(|e| bad("collapse", e))?,
            None => Vec::new(),
        };
        let sort = match p.sort.as_deref() {
            None | Some("relevance") => None,
            Some(s) => Some(s.parse::<SortMode>().map_err(|e| bad("sort", e))?),
        };
        if sort.is_some() && (p.boost.is_some() || p.rerank == Some(true)) {
            return Err(bad(
            "sort",
            "sort orders the matching documents by a static score; it excludes boost and rerank=true",
        ));
        }
        let boost = match p.boost.as_deref() {
            None | Some("none") => None,
            Some("pagerank") => Some(p.boost_weight.unwrap_or(1.0)),
            Some(other) => {
                return Err(bad(
                    "boost",
                    format!("unknown boost `{other}` (known: none, pagerank)"),
                ))
            }
        };
        if boost.is_none() && p.boost_weight.is_some() {
            return Err(bad(
                "boost_weight",
                "boost_weight sets the weight of boost=pagerank; no boost was asked for",
            ));
        }
        // The static boost re-sorts the first phase; a reranker would re-sort it again and
        // ignore it, so a boost turns reranking off unless both are asked for (an error).
        let rerank = match (p.rerank, boost) {
            (Some(true), Some(_)) => {
                return Err(bad(
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
            return Err(bad(
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
                            return Err(bad(
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
            now: None,
        })
    }
}

/// The fusion `model=fusion` asks for, checked.
fn fusion_query(p: &SearchRequest) -> Result<FusionQuery, SearchError> {
    let inputs: Vec<ModelKind> = p
        .inputs
        .as_deref()
        .ok_or_else(|| bad("inputs", "model=fusion needs inputs=MODEL,MODEL,..."))?
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| m.parse::<ModelKind>().map_err(|e| bad("inputs", e)))
        .collect::<Result<_, _>>()?;
    let method = p.fusion.as_deref().ok_or_else(|| {
        bad(
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
                        bad(
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
        bad(field, e.to_string())
    })?;
    Ok(FusionQuery {
        inputs,
        fusion,
        depth: p.fusion_depth.unwrap_or(DEFAULT_FUSION_DEPTH),
    })
}
