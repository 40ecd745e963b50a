//! The rule book of a search request: the parameters a front end receives
//! ([`SearchRequest`], `GET /search`'s on a single node and a root alike; [`EvalRequest`],
//! `rankd eval`'s and `POST /admin/evaluate`'s) and the cross-parameter rules that turn them
//! into a [`SearchQuery`] (`fusion` options only with `model=fusion`, `sort` without `boost` or
//! `rerank=true`, `window` only where a window is reordered, `fields` and `snippets`...). An
//! evaluation's ranking options are a search's, bound by the same rules: its request becomes a
//! [`SearchRequest`] and goes through [`SearchRequest::into_query`]. A parameter's own range is
//! [`SearchQuery::validate`]'s. Errors name the parameter (`SearchError::Param`), which the
//! HTTP API answers as a 400 and the command line as a usage error.

use super::fusion::Method;
use super::Retriever;
use super::SearchError;
use super::{
    check_window, CollapseKey, Fusion, FusionError, FusionQuery, Ranking, Returns, SearchQuery,
    SortMode, DEFAULT_BOOST_WINDOW, DEFAULT_FUSION_DEPTH, DEFAULT_WINDOW, MAX_WINDOW,
};
use crate::text::config::TextField;
use crate::text::ModelKind;

/// `model=hybrid`'s fusion when the request does not say (docs/EVALUATION.md, "Dense and
/// hybrid retrieval").
pub(crate) const DEFAULT_HYBRID_FUSION: &str = "rrf";
/// `model=hybrid`'s weight of the dense list when the request does not say (same section).
pub(crate) const DEFAULT_HYBRID_RATIO: f64 = 0.5;

/// Largest `k` one request may ask for.
pub(crate) const MAX_K: usize = 1000;
/// Deepest result (offset + k) one request may reach.
pub(crate) const MAX_DEPTH: usize = 10_000;

/// What `GET /search` collapses when the request does not say: the page key, which the
/// versions of a page in several languages share (the configured page rules, `hreflang`),
/// so a page is one hit, shown in the preferred language (`super::collapse`).
pub const DEFAULT_COLLAPSE: [CollapseKey; 1] = [CollapseKey::Page];

/// How many documents an evaluation ranks per query when the request does not say: as many
/// as trec_eval's runs hold.
pub(crate) const DEFAULT_EVAL_DEPTH: usize = 1000;

/// Checks `k` and `offset` against the limits.
pub(crate) fn validate_window(k: usize, offset: usize) -> Result<(), SearchError> {
    if k == 0 || k > MAX_K {
        return Err(bad(
            "k",
            format!("k must be between 1 and {MAX_K}, got {k}"),
        ));
    }
    if offset.saturating_add(k) > MAX_DEPTH {
        return Err(bad(
            "offset",
            format!(
                "offset + k must not exceed {MAX_DEPTH}, got {}",
                offset.saturating_add(k)
            ),
        ));
    }
    Ok(())
}

/// A parameter error.
fn bad(field: &'static str, message: impl Into<String>) -> SearchError {
    SearchError::Param {
        field,
        message: message.into(),
    }
}

/// A search as front ends receive it: `GET /search`'s parameters (and a root's), named and
/// typed, each optional; [`SearchRequest::into_query`] applies the rules that bind them.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SearchRequest {
    /// query text (at most 16 KB, 1024 distinct terms)
    pub q: String,
    /// hits to return, 1..=1000 (default 10)
    pub k: Option<usize>,
    /// hits to skip (default 0)
    pub offset: Option<usize>,
    /// bm25, bm25f, tfidf, f2exp, lm, bm25prox, dense (the documents nearest in meaning,
    /// SPEC §10), hybrid (bm25f fused with dense), or fusion (with `inputs` and `fusion`;
    /// default: hybrid when the active reranker reads the dense similarity and the index has
    /// document vectors, else the index's, bm25f)
    pub model: Option<String>,
    /// with model=fusion: the fused models, comma-separated, each once (e.g. bm25f,lm,dense)
    pub inputs: Option<String>,
    /// with model=fusion: rrf, combsum, combmnz, borda or condorcet (SPEC §6); with
    /// model=hybrid: rrf or linear (a convex combination of normalised scores)
    pub fusion: Option<String>,
    /// with model=hybrid: the dense list's weight α in [0, 1], the text model's 1 − α
    /// (Meilisearch's `semanticRatio`)
    pub hybrid_ratio: Option<f64>,
    /// RRF's k, in [0, 1e6] (default 60)
    pub fusion_k: Option<f64>,
    /// how combsum, combmnz and hybrid's linear fusion normalise scores: minmax (default),
    /// zscore or l2
    pub fusion_norm: Option<String>,
    /// one positive weight per input, comma-separated (default all 1)
    pub fusion_weights: Option<String>,
    /// how many of each input's top documents are fused, 1..=1000 (default 100)
    pub fusion_depth: Option<usize>,
    /// keep the best hit of each group: page, site, group, near_duplicate, comma-separated
    /// (a hit is hidden when it shares any with a hit above it), or none alone; default: page
    /// (a page's translations are one hit, in the preferred language) where the page lies
    /// within the window, none beyond it
    pub collapse: Option<String>,
    /// only documents in this language (a language tag, e.g. en or pt-BR: its primary
    /// subtag is matched); it is also the language preferred among a page's versions
    /// (default: the request's Accept-Language, else the index configuration's, en)
    pub lang: Option<String>,
    /// relevance (default), or order the matching documents by hot, gravity, best, fresh or
    /// rating (SPEC §1.8; documents without the needed fields come last)
    pub sort: Option<String>,
    /// field of single-field models: title, name, headings, body, anchor, url, all
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
        let (model, fusion, dense) = match p.model.as_deref() {
            Some("fusion") => (None, Some(fusion_query(&p)?), false),
            Some("hybrid") => (None, Some(hybrid_query(&p)?), false),
            Some("dense") => (None, None, true),
            Some(m) => (
                Some(m.parse::<ModelKind>().map_err(|e| bad("model", e))?),
                None,
                false,
            ),
            None => (None, None, false),
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
                    return Err(bad(
                        name,
                        format!("{name} applies to model=fusion and model=hybrid"),
                    ));
                }
            }
        }
        if p.hybrid_ratio.is_some() && p.model.as_deref() != Some("hybrid") {
            return Err(bad("hybrid_ratio", "hybrid_ratio applies to model=hybrid"));
        }
        if let Some(field) = &p.field {
            field.parse::<TextField>().map_err(|e| bad("field", e))?;
        }
        let lang = match &p.lang {
            Some(tag) => Some(crate::corpus::lang::normalize(tag).ok_or_else(|| {
                bad(
                    "lang",
                    format!("`{tag}` is not a language tag (e.g. en, ja, pt-BR)"),
                )
            })?),
            None => None,
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
        let collapse_window = p.window.unwrap_or(DEFAULT_WINDOW);
        let collapse = match &p.collapse {
            Some(list) => CollapseKey::parse_list(list).map_err(|e| bad("collapse", e))?,
            // Translations are one hit by default, where the page lies within the window
            // collapsing walks (deep pages are not refused for it).
            None => {
                let window = match ranking {
                    Ranking::Boost { window, .. } | Ranking::Rerank { window } => window,
                    Ranking::FirstPhase | Ranking::Sort(_) => collapse_window,
                };
                let page_end = p.offset.unwrap_or(0).saturating_add(p.k.unwrap_or(10));
                if page_end <= window.min(MAX_WINDOW) {
                    DEFAULT_COLLAPSE.to_vec()
                } else {
                    Vec::new()
                }
            }
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
            if p.fields.is_some() && returns.snippet {
                return Err(bad(
                    "snippets",
                    "snippets=false contradicts fields=snippet: give one of them",
                ));
            }
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
            dense,
            collapse,
            collapse_window,
            now: None,
            lang,
            requester_langs: Vec::new(),
        })
    }
}

/// An evaluation as front ends receive it: `POST /admin/evaluate`'s body, and `rankd eval`'s
/// flags translated. The ranking options are `GET /search`'s, named alike, with the same
/// defaults and rules; what an evaluation adds or does otherwise:
/// - it names its model (the report says what was evaluated);
/// - each query's ranking is `depth` documents deep (a fusion's inputs too, unless
///   `fusion_depth` says otherwise); a boosted or reranked one holds its `window`;
/// - it reranks when asked to (`rerank: true`), not because a reranker is active: a
///   first phase is what is evaluated unless said otherwise.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EvalRequest {
    /// bm25, bm25f, tfidf, f2exp, lm, bm25prox, or fusion (with `inputs` and `fusion`)
    pub model: String,
    /// with model=fusion: the fused models, comma-separated, each once
    pub inputs: Option<String>,
    /// with model=fusion: rrf, combsum, combmnz, borda or condorcet (SPEC §6); with
    /// model=hybrid: rrf or linear
    pub fusion: Option<String>,
    /// with model=hybrid: the dense list's weight in [0, 1]
    pub hybrid_ratio: Option<f64>,
    /// RRF's k (default 60)
    pub fusion_k: Option<f64>,
    /// how combsum and combmnz normalise scores: minmax (default) or zscore
    pub fusion_norm: Option<String>,
    /// one positive weight per input, comma-separated (default all 1)
    pub fusion_weights: Option<String>,
    /// how many of each input's top documents are fused (default: `depth`)
    pub fusion_depth: Option<usize>,
    /// field of single-field models: title, name, headings, body, anchor, url, all
    pub field: Option<String>,
    /// rerank each first-phase window with the reranker at hand (default false)
    pub rerank: Option<bool>,
    /// the reranked or boosted window, 1..=1000 (default 100)
    pub window: Option<usize>,
    /// none or pagerank
    pub boost: Option<String>,
    /// λ of the PageRank boost (default 1)
    pub boost_weight: Option<f32>,
    /// documents ranked per query, 1..=1000 (default 1000)
    pub depth: Option<usize>,
}

impl EvalRequest {
    /// The [`SearchQuery`] every judged query runs as (its text left empty, ids and scores
    /// only), checked as `GET /search` checks its parameters.
    pub fn into_query(self) -> Result<SearchQuery, SearchError> {
        let depth = self.depth.unwrap_or(DEFAULT_EVAL_DEPTH);
        if depth == 0 || depth > MAX_K {
            return Err(bad(
                "depth",
                format!("depth must be between 1 and {MAX_K}, got {depth}"),
            ));
        }
        let fusion_depth = match self.model.as_str() {
            "fusion" | "hybrid" => Some(self.fusion_depth.unwrap_or(depth.min(MAX_WINDOW))),
            _ => self.fusion_depth,
        };
        // Asked for, the reranker reranks; without one at hand the engine refuses, as for a
        // search.
        let rerank = self.rerank.unwrap_or(false);
        let mut query = SearchRequest {
            q: String::new(),
            k: None,
            offset: None,
            model: Some(self.model),
            inputs: self.inputs,
            fusion: self.fusion,
            hybrid_ratio: self.hybrid_ratio,
            fusion_k: self.fusion_k,
            fusion_norm: self.fusion_norm,
            fusion_weights: self.fusion_weights,
            fusion_depth,
            // An evaluation ranks every document; collapsing would hide judged ones.
            collapse: Some("none".into()),
            lang: None,
            sort: None,
            field: self.field,
            explain: None,
            rerank: Some(rerank),
            window: self.window,
            boost: self.boost,
            boost_weight: self.boost_weight,
            snippets: None,
            fields: None,
        }
        .into_query(rerank)?;
        query.returns = Returns::IDS;
        query.k = match query.ranking {
            Ranking::Boost { window, .. } | Ranking::Rerank { window } => {
                check_window(window)?;
                window
            }
            Ranking::FirstPhase | Ranking::Sort(_) => depth,
        };
        query.validate()?;
        Ok(query)
    }
}

/// The fusion `model=fusion` asks for, checked.
fn fusion_query(p: &SearchRequest) -> Result<FusionQuery, SearchError> {
    let inputs: Vec<Retriever> = p
        .inputs
        .as_deref()
        .ok_or_else(|| bad("inputs", "model=fusion needs inputs=MODEL,MODEL,..."))?
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| m.parse::<Retriever>().map_err(|e| bad("inputs", e)))
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
        inputs: inputs.into_iter().collect(),
        fusion,
        depth: p.fusion_depth.unwrap_or(DEFAULT_FUSION_DEPTH),
        hybrid: false,
    })
}

/// `model=hybrid` with every default: the first phase of a search that names no model when
/// the active reranker reads the dense similarity and the index has vectors
/// (`crate::search::Engine`, docs/EVALUATION.md "The dense similarity as a feature").
pub(crate) fn default_hybrid() -> FusionQuery {
    hybrid_query(&SearchRequest::default()).expect("the defaults are valid")
}

/// `model=hybrid` (SPEC §10): BM25F's list and the dense list, fused by weighted RRF or by a
/// convex combination of normalised scores (CombSUM with weights 1 − α and α), checked.
fn hybrid_query(p: &SearchRequest) -> Result<FusionQuery, SearchError> {
    for (name, given) in [
        ("inputs", p.inputs.is_some()),
        ("fusion_weights", p.fusion_weights.is_some()),
    ] {
        if given {
            return Err(bad(
                name,
                format!(
                    "model=hybrid fuses bm25f with dense, weighted by hybrid_ratio; {name} applies to model=fusion"
                ),
            ));
        }
    }
    let ratio = p.hybrid_ratio.unwrap_or(DEFAULT_HYBRID_RATIO);
    if !(0.0..=1.0).contains(&ratio) {
        return Err(bad(
            "hybrid_ratio",
            format!("hybrid_ratio must be a number in [0, 1], got {ratio}"),
        ));
    }
    let method = match p.fusion.as_deref().unwrap_or(DEFAULT_HYBRID_FUSION) {
        "rrf" => Method::Rrf,
        "linear" => Method::CombSum,
        other => {
            return Err(bad(
                "fusion",
                format!("model=hybrid fuses by rrf or linear, not `{other}`"),
            ))
        }
    };
    if method == Method::Rrf && p.fusion_norm.is_some() {
        return Err(bad(
            "fusion_norm",
            "fusion_norm applies to fusion=linear, which reads scores; rrf reads ranks",
        ));
    }
    if method == Method::CombSum && p.fusion_k.is_some() {
        return Err(bad(
            "fusion_k",
            "fusion_k is RRF's k; it does not apply to fusion=linear",
        ));
    }
    // Weights are checked as any fusion's (two positive ones), then set to 1 − α and α,
    // which may be 0: the ends of the ratio are one list alone.
    let mut fusion =
        Fusion::from_names(method.name(), 2, p.fusion_k, p.fusion_norm.as_deref(), None).map_err(
            |e| {
                let field = match e {
                    FusionError::BadK(_) => "fusion_k",
                    FusionError::UnknownNorm(_) => "fusion_norm",
                    _ => "fusion",
                };
                bad(field, e.to_string())
            },
        )?;
    fusion.weights = vec![1.0 - ratio, ratio];
    Ok(FusionQuery {
        inputs: vec![Retriever::Text(ModelKind::Bm25F), Retriever::Dense],
        fusion,
        depth: p.fusion_depth.unwrap_or(DEFAULT_FUSION_DEPTH),
        hybrid: true,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    /// `options` as `GET /search` parameters (with a reranker active; checked as the engine
    /// checks them) and as an evaluation request (with `depth`, which a search has not): the
    /// query each asks for, or the error.
    fn both(options: Value) -> [Result<SearchQuery, SearchError>; 2] {
        let mut search = json!({"q": "x"});
        let mut eval = json!({});
        for (name, value) in options.as_object().unwrap() {
            if name != "depth" {
                search[name] = value.clone();
            }
            eval[name] = value.clone();
        }
        let search: SearchRequest = serde_json::from_value(search).unwrap();
        let eval: EvalRequest = serde_json::from_value(eval).unwrap();
        let search = search
            .into_query(true)
            .and_then(|q| q.validate().map(|()| q));
        [search, eval.into_query()]
    }

    fn refusal(result: Result<SearchQuery, SearchError>) -> (&'static str, String) {
        match result {
            Err(SearchError::Param { field, message }) => (field, message),
            other => panic!("not a parameter error: {other:?}"),
        }
    }

    #[test]
    fn an_evaluation_refuses_what_a_search_refuses_in_the_same_words() {
        for (options, field) in [
            (json!({"model": "bm99"}), "model"),
            (json!({"model": "bm25", "inputs": "bm25,lm"}), "inputs"),
            (json!({"model": "bm25", "fusion_depth": 5}), "fusion_depth"),
            (json!({"model": "fusion", "fusion": "rrf"}), "inputs"),
            (json!({"model": "fusion", "inputs": "bm25,lm"}), "fusion"),
            (
                json!({"model": "fusion", "inputs": "bm25,lm", "fusion": "borda", "fusion_k": 5.0}),
                "fusion_k",
            ),
            (
                json!({"model": "fusion", "inputs": "bm25,lm", "fusion": "rrf", "fusion_weights": "1,x"}),
                "fusion_weights",
            ),
            (
                json!({"model": "fusion", "inputs": "bm25,bm25", "fusion": "rrf"}),
                "inputs",
            ),
            (
                json!({"model": "fusion", "inputs": "bm25,lm", "fusion": "rrf", "fusion_depth": 0}),
                "fusion_depth",
            ),
            (json!({"model": "bm25", "field": "colour"}), "field"),
            (json!({"model": "bm25", "boost": "hits"}), "boost"),
            (
                json!({"model": "bm25", "boost_weight": 2.0}),
                "boost_weight",
            ),
            (
                json!({"model": "bm25", "boost": "pagerank", "boost_weight": 1e9}),
                "boost_weight",
            ),
            (
                json!({"model": "bm25", "boost": "pagerank", "rerank": true}),
                "boost",
            ),
            (
                json!({"model": "bm25", "boost": "pagerank", "window": 5000}),
                "window",
            ),
            (
                json!({"model": "bm25", "rerank": true, "window": 0}),
                "window",
            ),
        ] {
            let [search, eval] = both(options.clone());
            let (search, eval) = (refusal(search), refusal(eval));
            assert_eq!(search.0, field, "{options}: {search:?}");
            assert_eq!(eval, search, "{options}");
        }
        // A window without a reranker or a boost: the evaluation does not rerank unless asked.
        let [_, eval] = both(json!({"model": "bm25", "window": 50}));
        assert_eq!(refusal(eval).0, "window");
        // Nor does it collapse; a search collapses by default, and the window is that of
        // collapsing unless collapse=none.
        let options = json!({"model": "bm25", "rerank": false, "window": 50});
        let [search, eval] = both(options.clone());
        assert_eq!(refusal(eval).0, "window");
        let search = search.unwrap();
        assert_eq!(
            (search.collapse.as_slice(), search.collapse_window),
            (&DEFAULT_COLLAPSE[..], 50)
        );
        let mut none = options;
        none["q"] = json!("x");
        none["collapse"] = json!("none");
        let none: SearchRequest = serde_json::from_value(none).unwrap();
        assert_eq!(refusal(none.into_query(true)).0, "window");
    }

    #[test]
    fn an_evaluation_has_a_searchs_defaults_and_ranks_depth_documents() {
        let query = |options: Value| {
            let [_, eval] = both(options);
            eval.unwrap()
        };
        let q = query(json!({"model": "bm25", "field": "body"}));
        assert_eq!(q.model, Some(ModelKind::Bm25));
        assert_eq!(q.field.as_deref(), Some("body"));
        assert_eq!(q.ranking, Ranking::FirstPhase);
        assert_eq!((q.k, q.offset), (DEFAULT_EVAL_DEPTH, 0));
        assert_eq!(q.returns, Returns::IDS);
        assert!(q.collapse.is_empty() && !q.explain);
        assert_eq!(query(json!({"model": "lm", "depth": 20})).k, 20);

        // A boost and a reranker as on /search; the run holds the window.
        let [search, eval] = both(json!({"model": "bm25", "boost": "pagerank"}));
        assert_eq!(eval.as_ref().unwrap().ranking, search.unwrap().ranking);
        assert_eq!(
            eval.unwrap().ranking,
            Ranking::Boost {
                weight: 1.0,
                window: DEFAULT_BOOST_WINDOW
            }
        );
        let q = query(json!({"model": "bm25f", "rerank": true, "window": 30, "depth": 5}));
        assert_eq!((q.ranking, q.k), (Ranking::Rerank { window: 30 }, 30));

        // A fusion: the search's options, its inputs as deep as the run unless said.
        let fused = json!({"model": "fusion", "inputs": "bm25f,lm", "fusion": "rrf", "depth": 200});
        let [search, eval] = both(fused.clone());
        let (search, eval) = (
            search.unwrap().fusion.unwrap(),
            eval.unwrap().fusion.unwrap(),
        );
        assert_eq!((search.inputs, search.fusion), (eval.inputs, eval.fusion));
        assert_eq!((search.depth, eval.depth), (DEFAULT_FUSION_DEPTH, 200));
        let mut deep = fused;
        deep["fusion_depth"] = json!(50);
        assert_eq!(query(deep).fusion.unwrap().depth, 50);
    }

    /// Issue 30, N16: parameters that mean nothing, or contradict each other, are refused
    /// naming the parameter (they were accepted and ignored).
    #[test]
    fn meaningless_parameters_are_refused() {
        let search = |options: Value| {
            let mut request = json!({"q": "x"});
            for (name, value) in options.as_object().unwrap() {
                request[name] = value.clone();
            }
            let request: SearchRequest = serde_json::from_value(request).unwrap();
            request.into_query(true)
        };
        for (options, field, says) in [
            (
                json!({"model": "fusion", "inputs": "bm25,lm", "fusion": "rrf", "fusion_k": 1e308}),
                "fusion_k",
                "k must be a number in [0, 1000000], got 1000000000",
            ),
            (
                json!({"collapse": "none,page"}),
                "collapse",
                "`none` (no collapsing) cannot be combined",
            ),
            (
                json!({"snippets": false, "fields": "url,snippet"}),
                "snippets",
                "snippets=false contradicts fields=snippet",
            ),
        ] {
            let (f, message) = refusal(search(options.clone()));
            assert_eq!(f, field, "{options}");
            assert!(message.starts_with(says), "{options}: {message}");
        }
        assert!(search(json!({"snippets": false, "fields": "url"})).is_ok());
        assert!(search(json!({"snippets": false})).is_ok());
        assert!(search(json!({"collapse": "none"})).is_ok());
        let rrf = json!({"model": "fusion", "inputs": "bm25,lm", "fusion": "rrf", "fusion_k": 1e6});
        assert!(search(rrf).is_ok());
    }

    /// Without `collapse=`, a search collapses a page's versions where the page lies within
    /// the window, and is not refused beyond it; `lang=` is a language tag.
    #[test]
    fn a_search_collapses_by_page_by_default_and_filters_by_language() {
        let search = |options: Value| {
            let mut request = json!({"q": "x"});
            for (name, value) in options.as_object().unwrap() {
                request[name] = value.clone();
            }
            let request: SearchRequest = serde_json::from_value(request).unwrap();
            request
                .into_query(true)
                .and_then(|q| q.validate().map(|()| q))
        };
        let q = search(json!({})).unwrap();
        assert_eq!(q.collapse, DEFAULT_COLLAPSE);
        assert_eq!(q.lang, None);
        assert!(search(json!({"collapse": "none"}))
            .unwrap()
            .collapse
            .is_empty());
        let deep = search(json!({"rerank": false, "offset": 100})).unwrap();
        assert!(deep.collapse.is_empty());
        assert_eq!(
            search(json!({"rerank": false, "offset": 90}))
                .unwrap()
                .collapse,
            DEFAULT_COLLAPSE
        );
        assert_eq!(
            search(json!({"lang": "pt-BR"})).unwrap().lang.as_deref(),
            Some("pt")
        );
        assert_eq!(refusal(search(json!({"lang": "portuguese"}))).0, "lang");
    }

    #[test]
    fn an_evaluations_depth_is_a_pages_size() {
        for depth in [0, MAX_K + 1] {
            let eval: EvalRequest =
                serde_json::from_value(json!({"model": "bm25", "depth": depth})).unwrap();
            let (field, message) = refusal(eval.into_query());
            assert_eq!(field, "depth");
            assert!(message.contains(&format!("got {depth}")), "{message}");
        }
    }
}
