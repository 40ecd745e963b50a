//! The one search pipeline: first phase (one model, a fusion of several, or a sort by a
//! static score) → (boost | features → rerank) → collapse → page → hits.
//!
//! Every front end ranks through [`Engine::search`]: `GET /search`, `rankd eval`,
//! `POST /admin/evaluate`, and the training windows ([`Engine::window`] is the first phase and
//! feature extraction of the rerank path), so one policy holds everywhere: the same window,
//! the same tie-breaking, the same boost. Front ends translate their parameters into a
//! [`SearchQuery`] and render the [`SearchResponse`]; the explanation is a typed value
//! ([`Explanation`]) until it is serialised.
//!
//! Hits cost what they show: id, title, URL and the snippet's encoded prose passages come from
//! one fast-field value per hit (`crate::text::columns`); no stored document is read.

pub mod budget;
pub mod collapse;
#[cfg(test)]
mod dense_tests;
pub mod document;
pub mod error;
pub mod evaluate;
pub mod fusion;
pub mod model;
pub mod request;
pub mod sort;

use crate::sync::RecoverRw;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwapOption;
use serde::Serialize;
use tantivy::query::Query;
use tantivy::{DocAddress, Searcher};

use crate::events::Impression;
use crate::features::{self, Candidate, FeatureMatrix, FeatureSet};
use crate::links::{LinkData, NodeScores};
use crate::text::columns::MeanRating;
use crate::text::query::AnalyzedQuery;
use crate::text::search::BoundModel;
use crate::text::snippet::SnippetQuery;
use crate::text::stats::Stats;
use crate::text::{ModelKind, TextIndex};

pub use budget::Deadline;
pub use collapse::CollapseKey;
pub use document::{DocResponse, SimilarError, SimilarHit, SimilarResponse};
pub use error::SearchError;
pub use fusion::{Fusion, FusionError};
pub use model::{ActiveModel, RerankExplanation, DEFAULT_WINDOW, MAX_WINDOW};
use request::validate_window;
pub use sort::SortMode;

/// How deep each input list of a fusion goes when the request does not say.
pub(crate) const DEFAULT_FUSION_DEPTH: usize = 100;

/// The window a static boost re-sorts when the request does not say (SPEC §1.8).
pub(crate) const DEFAULT_BOOST_WINDOW: usize = 100;

/// How the first phase's ranking becomes the returned one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ranking {
    /// The first-phase model's order.
    FirstPhase,
    /// SPEC §1.8's PageRank boost `λ·ln(ε + PageRank·N)` added to the first-phase scores of
    /// the top `window`, which are re-sorted (ties keep the first-phase order).
    Boost { weight: f32, window: usize },
    /// The active reranker reorders the first-phase top `window` (SPEC §3; ties keep the
    /// first-phase order).
    Rerank { window: usize },
    /// Every matching document ordered by a static or social score (SPEC §1.8), relevance
    /// breaking ties ([`sort`]).
    Sort(SortMode),
}

/// What ranks one input list of a fusion: a text model, or the dense similarity of the
/// query's and the documents' vectors (SPEC §10, `crate::dense`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retriever {
    Text(ModelKind),
    Dense,
}

impl Retriever {
    /// The text model, for an input that is one.
    pub fn text(self) -> Option<ModelKind> {
        match self {
            Retriever::Text(kind) => Some(kind),
            Retriever::Dense => None,
        }
    }
}

impl std::fmt::Display for Retriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Retriever::Text(kind) => f.write_str(kind.name()),
            Retriever::Dense => f.write_str("dense"),
        }
    }
}

impl std::str::FromStr for Retriever {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dense" => Ok(Retriever::Dense),
            _ => s.parse::<ModelKind>().map(Retriever::Text).map_err(|_| {
                let mut names: Vec<&str> = ModelKind::ALL.iter().map(|k| k.name()).collect();
                names.push("dense");
                format!("unknown model `{s}` (known: {})", names.join(", "))
            }),
        }
    }
}

/// A first phase fused from several models' lists (SPEC §6), or `model=hybrid`'s fusion of a
/// text model's list with the dense one (SPEC §10).
#[derive(Debug, Clone, PartialEq)]
pub struct FusionQuery {
    /// The models whose lists are fused, each at most once.
    pub inputs: Vec<Retriever>,
    pub fusion: Fusion,
    /// How many of each model's top documents are fused.
    pub depth: usize,
    /// Asked for as `model=hybrid` (which the answer says).
    pub hybrid: bool,
}

impl FusionQuery {
    /// Whether an input is the dense similarity.
    pub fn uses_dense(&self) -> bool {
        self.inputs.contains(&Retriever::Dense)
    }

    /// Fuses one list per input (each in rank order, keyed by document), and reports each
    /// input's agreement with the fused list: one index's lists, or a root's lists merged over
    /// the shards.
    pub fn fuse<K: Clone + Eq + std::hash::Hash>(
        &self,
        lists: &[Vec<(K, f64)>],
    ) -> Result<(Vec<(K, f64)>, FusionReport), SearchError> {
        let fused = self.fusion.fuse(lists).map_err(|e| SearchError::Param {
            field: "fusion",
            message: e.to_string(),
        })?;
        let report = FusionReport {
            method: self.fusion.method,
            inputs: self
                .inputs
                .iter()
                .zip(lists)
                .map(|(kind, list)| FusionInputAgreement {
                    model: kind.to_string(),
                    kendall_tau_b: fusion::agreement(list, &fused),
                })
                .collect(),
        };
        Ok((fused, report))
    }
}

/// What each hit carries besides its rank, id and score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Returns {
    pub url: bool,
    pub title: bool,
    pub snippet: bool,
}

impl Returns {
    /// URL, title and snippet: what a result page shows.
    pub const ALL: Returns = Returns {
        url: true,
        title: true,
        snippet: true,
    };
    /// Ids and scores only (evaluation, training, API clients that render nothing).
    pub const IDS: Returns = Returns {
        url: false,
        title: false,
        snippet: false,
    };
}

/// One search, as every front end asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    pub text: String,
    /// The first-phase model; `None` = the index configuration's default.
    pub model: Option<ModelKind>,
    /// The field single-field models rank by; `None` = the configured default (`all`).
    pub field: Option<String>,
    pub ranking: Ranking,
    /// The page: hits `offset + 1 ..= offset + k` of the final ranking.
    pub offset: usize,
    pub k: usize,
    pub explain: bool,
    pub returns: Returns,
    /// Fuse several models instead of ranking by `model`.
    pub fusion: Option<FusionQuery>,
    /// `model=dense`: the first phase is the documents nearest to the query's vector
    /// (SPEC §10), not `model`'s ranking.
    pub dense: bool,
    /// Keep one hit per group of these keys (empty: no collapsing; [`collapse`]).
    pub collapse: Vec<CollapseKey>,
    /// The window collapsing walks when neither a boost nor a reranker sets one.
    pub collapse_window: usize,
    /// The clock (Unix seconds) the social sorts and the freshness features measure ages
    /// at; `None`: the time the search starts (a root sends its own to every shard).
    pub now: Option<i64>,
    /// `lang=`: only documents in this language (a `crate::corpus::lang::normalize`d tag)
    /// are ranked and counted.
    pub lang: Option<String>,
    /// The requester's languages, most wanted first (its `Accept-Language`): which version
    /// of a page stands for it when collapsing by page ([`SearchQuery::preferred_langs`]).
    pub requester_langs: Vec<String>,
}

impl SearchQuery {
    /// The first-phase top `k` of `text` with the default model, ids and scores only.
    pub fn new(text: impl Into<String>, k: usize) -> Self {
        SearchQuery {
            text: text.into(),
            model: None,
            field: None,
            ranking: Ranking::FirstPhase,
            offset: 0,
            k,
            explain: false,
            returns: Returns::IDS,
            fusion: None,
            dense: false,
            collapse: Vec::new(),
            collapse_window: DEFAULT_WINDOW,
            now: None,
            lang: None,
            requester_langs: Vec::new(),
        }
    }

    /// The languages whose versions of a page stand for the page when collapsing
    /// (`collapse::collapse`), most preferred first: `lang=` alone, else the requester's,
    /// then the index configuration's default; as `crate::corpus::lang::code`s.
    pub fn preferred_langs(&self, config: &crate::text::IndexConfig) -> Vec<u64> {
        let langs: Vec<&String> = match &self.lang {
            Some(lang) => vec![lang],
            None => self
                .requester_langs
                .iter()
                .chain([&config.language.default])
                .collect(),
        };
        let mut codes: Vec<u64> = Vec::with_capacity(langs.len());
        for code in langs.into_iter().map(|l| crate::corpus::lang::code(l)) {
            if !codes.contains(&code) {
                codes.push(code);
            }
        }
        codes
    }

    /// `kind` bound to this search's query over `view`: its field, and its `lang=` filter.
    fn bind(
        &self,
        view: &features::View,
        kind: ModelKind,
    ) -> Result<Option<BoundModel>, SearchError> {
        let index = view.index;
        let filter = self.lang.as_deref().map(|lang| {
            tantivy::Term::from_field_u64(index.fields.lang, crate::corpus::lang::code(lang))
        });
        let bound = index.bind(view.stats, kind, self.field.as_deref(), view.query)?;
        Ok(bound.map(|b| b.only(filter)))
    }

    /// The first phase an answer names: `hybrid`, `fusion`, `dense`, or the text model `kind`
    /// (the request's, else the index's default); a single index and a root alike.
    pub fn first_phase_name(&self, kind: ModelKind) -> String {
        match &self.fusion {
            Some(f) if f.hybrid => "hybrid".to_string(),
            Some(_) => "fusion".to_string(),
            None if self.dense => "dense".to_string(),
            None => kind.to_string(),
        }
    }

    /// Whether the first-phase scores are BM25F's own when `kind` ranks, so the features take
    /// them instead of scoring BM25F again.
    pub fn scores_are_bm25f(&self, kind: ModelKind) -> bool {
        kind == ModelKind::Bm25F && self.fusion.is_none() && !self.dense
    }

    pub fn model(mut self, model: ModelKind) -> Self {
        self.model = Some(model);
        self
    }

    pub fn ranking(mut self, ranking: Ranking) -> Self {
        self.ranking = ranking;
        self
    }

    /// Checks the page and window against the limits, naming the parameter at fault.
    pub fn validate(&self) -> Result<(), SearchError> {
        validate_window(self.k, self.offset)?;
        let page_end = self.offset + self.k;
        let param = |field: &'static str, message: String| SearchError::Param { field, message };
        if let Some(f) = &self.fusion {
            for (i, m) in f.inputs.iter().enumerate() {
                if f.inputs[..i].contains(m) {
                    return Err(param("inputs", format!("model `{m}` is given twice")));
                }
            }
            if f.depth == 0 || f.depth > MAX_WINDOW {
                return Err(param(
                    "fusion_depth",
                    format!(
                        "fusion_depth must be between 1 and {MAX_WINDOW}, got {}",
                        f.depth
                    ),
                ));
            }
            if let Ranking::Sort(_) = self.ranking {
                return Err(param(
                    "sort",
                    "sort orders one model's matching documents; it does not apply to a fusion"
                        .into(),
                ));
            }
        }
        if self.dense {
            if self.fusion.is_some() {
                return Err(param(
                    "model",
                    "model=dense is one first phase; it is not also a fusion".into(),
                ));
            }
            if let Ranking::Sort(_) = self.ranking {
                return Err(param(
                    "sort",
                    "sort orders a text model's matching documents; it does not apply to model=dense"
                        .into(),
                ));
            }
        }
        if !self.collapse.is_empty() {
            let window = match self.ranking {
                Ranking::Boost { window, .. } | Ranking::Rerank { window } => window,
                Ranking::FirstPhase | Ranking::Sort(_) => {
                    check_window(self.collapse_window)?;
                    self.collapse_window
                }
            };
            if page_end > window {
                return Err(param(
                    "offset",
                    format!(
                        "collapsing walks a window of {window} hits; offset + k = {page_end} must not exceed it (ask for a larger window)"
                    ),
                ));
            }
        }
        match self.ranking {
            Ranking::FirstPhase | Ranking::Sort(_) => Ok(()),
            Ranking::Boost { weight, window } => {
                if !weight.is_finite() || weight.abs() > 1e6 {
                    return Err(param(
                        "boost_weight",
                        format!(
                            "boost_weight must be a finite number in [-1e6, 1e6], got {weight}"
                        ),
                    ));
                }
                check_window(window)?;
                if page_end > window {
                    return Err(param(
                        "offset",
                        format!(
                            "with a boost, offset + k = {page_end} must not exceed the window of {window}"
                        ),
                    ));
                }
                Ok(())
            }
            Ranking::Rerank { window } => {
                check_window(window)?;
                if page_end > window {
                    return Err(param(
                        "offset",
                        format!(
                            "offset + k = {page_end} exceeds the rerank window of {window}; ask for a larger window or rerank=false"
                        ),
                    ));
                }
                Ok(())
            }
        }
    }
}

/// Checks a rerank or boost window against its limit (1..=[`MAX_WINDOW`]).
pub(crate) fn check_window(window: usize) -> Result<(), SearchError> {
    if window == 0 || window > MAX_WINDOW {
        return Err(SearchError::Param {
            field: "window",
            message: format!("window must be between 1 and {MAX_WINDOW}, got {window}"),
        });
    }
    Ok(())
}

/// The answer to a [`SearchQuery`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SearchResponse {
    /// The impression's id for `POST /events` (26 characters, ULID layout: see
    /// `crate::events::new_query_id`); set by the server, which logs the impression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_id: Option<String>,
    pub query: String,
    /// The first-phase model.
    pub model: String,
    /// The second-phase model that reranked the hits; `null` for first-phase results.
    pub reranker: Option<String>,
    /// Documents matching at least one query term.
    pub total_hits: usize,
    pub took_ms: f64,
    pub hits: Vec<Hit>,
    /// For `model=fusion`: the method and each input's agreement with the fused list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fusion: Option<FusionReport>,
    /// On a sharded collection: whether shards are missing from this answer (their
    /// documents are absent, and the statistics are those of the shards that answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial: Option<bool>,
    /// On a sharded collection: which shards answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardsReport>,
    /// Seconds per phase, for the metrics.
    #[serde(skip)]
    pub times: PhaseTimes,
    /// For an interleaved answer ([`Engine::search_interleaved`]): the team of each hit.
    #[serde(skip)]
    pub teams: Option<Vec<crate::interleave::Team>>,
    /// On a randomised first page ([`SearchResponse::rand_pair`]): the rank whose hit
    /// changed places with rank 1's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swapped: Option<usize>,
}

impl SearchResponse {
    /// What the event log keeps of this answer to `q` (`crate::events`), under `query_id`:
    /// the hits in the order shown, each at its 1-based rank in the whole list.
    fn impression(
        &self,
        q: &SearchQuery,
        query_id: String,
        client_id: Option<String>,
    ) -> Impression {
        Impression {
            query_id,
            created_at: crate::db::now_ms(),
            query: self.query.clone(),
            model: self.model.clone(),
            reranker: self.reranker.clone(),
            client_id,
            offset: q.offset,
            page_size: q.k,
            shown: self
                .hits
                .iter()
                .map(|h| (h.id.clone(), h.rank as i64))
                .collect(),
            interleaved: None,
        }
    }

    /// Logs this answer to `q` as an impression in `events` (unless `log_impressions` is
    /// off), under `query_id` (drawn earlier when it decided an interleaving) or a new one,
    /// which the answer then carries. A share of first pages is randomised first
    /// (`swap_share`, [`SearchResponse::rand_pair`]); an answer interleaved for `experiment`
    /// records each hit's team. Never waits. A single node and a root log through this.
    pub fn log(
        &mut self,
        q: &SearchQuery,
        events: &crate::events::EventStore,
        query_id: Option<String>,
        experiment: Option<i64>,
        client_id: Option<String>,
    ) {
        if !events.settings.log_impressions {
            return;
        }
        let query_id = query_id.unwrap_or_else(crate::events::new_query_id);
        if self
            .rand_pair(q, &query_id, events.settings.swap_share)
            .is_some()
        {
            crate::metrics::count_swapped_impression();
        }
        let mut impression = self.impression(q, query_id.clone(), client_id);
        if let (Some(experiment_id), Some(teams)) = (experiment, self.teams.take()) {
            crate::metrics::count_interleaved(experiment_id);
            impression.interleaved = Some(crate::events::Interleaved {
                experiment_id,
                teams,
            });
        }
        events.log_impression(impression);
        self.query_id = Some(query_id);
    }

    /// RandPair on a first page (`crate::events::rand_pair`): when the page of `q` answered
    /// under `query_id` is drawn, with probability `share`, its hit at rank 1 and the one at
    /// a uniformly drawn lower rank change places (their `rank`s follow the order shown;
    /// scores stay with their documents), and [`SearchResponse::swapped`] says which rank.
    /// Later pages, sorted answers and interleaved answers are left as ranked: a later page
    /// would repeat or skip the first page's documents, a sort is an order the requester
    /// asked for, and an interleaved page varies its ranks already. Returns the swapped rank.
    pub fn rand_pair(&mut self, q: &SearchQuery, query_id: &str, share: f64) -> Option<usize> {
        let page = q.offset == 0 && self.teams.is_none() && !matches!(q.ranking, Ranking::Sort(_));
        let k = crate::events::rand_pair(query_id, share, self.hits.len()).filter(|_| page)?;
        self.hits.swap(0, k);
        self.hits[0].rank = 1;
        self.hits[k].rank = k + 1;
        self.swapped = Some(k + 1);
        Some(k + 1)
    }
}

/// Which shards of a sharded collection answered a search (Elasticsearch's `_shards`).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ShardsReport {
    pub total: usize,
    pub successful: usize,
    pub failed: usize,
    pub failures: Vec<ShardFailure>,
}

/// A shard missing from an answer, and why.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ShardFailure {
    pub shard: usize,
    /// What its last replica tried answered (or did not).
    pub reason: String,
}

/// One ranked document.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Hit {
    pub rank: usize,
    pub id: String,
    /// `null` for a document without a URL; absent when not asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub url: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The best-matching passage of the document's prose, query terms in `<b>` (HTML).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// The score the hit is ranked by (reranker, boosted, fused or first-phase score; with
    /// `sort`, the first-phase score).
    pub score: f32,
    /// With `sort`: the hit's sort key, `null` when the document lacks the fields it needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<f64>)]
    pub sort_key: Option<Option<f64>>,
    /// With `collapse`: how many lower hits of the window this hit hides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collapsed: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub explain: Option<Explanation>,
    #[serde(skip)]
    pub address: DocAddress,
}

/// Why a hit has its rank: the first phase's score breakdown, and what the boost or the
/// reranker did with it.
#[derive(Clone, Serialize)]
pub struct Explanation {
    /// The first-phase model's score, term by term (tantivy's explanation tree); absent for
    /// a fusion, whose inputs are listed instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_phase: Option<tantivy::query::Explanation>,
    /// For a fusion: the document's rank and score in each input list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fusion_inputs: Option<Vec<FusionInputRank>>,
    pub first_phase_rank: usize,
    pub first_phase_score: f32,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub rerank: Option<RerankExplanation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boost: Option<BoostExplanation>,
    /// The document's stored link scores (when `rankd graph` has run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub links: Option<NodeScores>,
}

impl std::fmt::Debug for Explanation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Explanation")
            .field(
                "first_phase",
                &self.first_phase.as_ref().map(|e| e.to_pretty_json()),
            )
            .field("fusion_inputs", &self.fusion_inputs)
            .field("first_phase_rank", &self.first_phase_rank)
            .field("rerank", &self.rerank)
            .field("boost", &self.boost)
            .finish()
    }
}

/// How a fused list came about (SPEC §6).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FusionReport {
    /// rrf, combsum, combmnz, borda or condorcet.
    #[schema(value_type = String)]
    pub method: fusion::Method,
    pub inputs: Vec<FusionInputAgreement>,
}

/// One input of a fusion and its agreement with the fused list.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FusionInputAgreement {
    pub model: String,
    /// Kendall τ_b between the input's order and the fused list over the fused documents
    /// (book §23.3.10); `null` where undefined.
    pub kendall_tau_b: Option<f64>,
}

/// A fused hit's place in one input list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FusionInputRank {
    pub model: String,
    /// 1-based; `null` when the input's list (its top `fusion_depth`) misses the document.
    pub rank: Option<usize>,
    pub score: Option<f32>,
}

/// The static boost's share of a hit's score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BoostExplanation {
    pub weight: f32,
    /// `λ·ln(ε + PageRank·N)`, added to the first-phase score.
    pub added: f32,
}

/// Seconds spent in each phase of one search.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseTimes {
    pub retrieve: f64,
    pub features: f64,
    pub rerank: f64,
    pub collapse: f64,
    pub hits: f64,
}

/// A first-phase window with its feature vectors (the rerank path and the training windows).
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureWindow {
    pub candidates: Vec<Candidate>,
    pub features: FeatureMatrix,
}

/// A first-phase candidate as the second phase ranks it.
#[derive(Clone)]
struct Ranked {
    /// What the first phase found (its score is the first-phase score).
    candidate: Candidate,
    /// The score the page is ranked by (boosted, reranked, or the first phase's).
    score: f32,
    first_rank: usize,
    boost: Option<BoostExplanation>,
    collapsed: Option<usize>,
    /// In an interleaved answer, the ranker that put it there.
    team: Option<crate::interleave::Team>,
}

/// A candidate reranker to interleave with the active one, and the seed of the coins.
#[derive(Clone, Copy)]
struct Interleave<'a> {
    candidate: &'a ActiveModel,
    seed: u64,
}

impl Interleave<'_> {
    /// Whether `q` is interleaved: a reranked first page (a later page would be drawn
    /// afresh, and repeat or skip documents of the first).
    fn applies(q: &SearchQuery) -> bool {
        matches!(q.ranking, Ranking::Rerank { .. }) && q.offset == 0
    }
}

/// The top `len` of team-draft interleaving `a` (the active reranker's order, team A) with
/// `b` (the candidate's order of the same window, team B; ties in first-phase order as in
/// `a`), each hit marked with its team and carrying what the picking team's list said of
/// it (its collapsed count).
fn interleaved(a: Vec<Ranked>, b: Vec<Ranked>, len: usize, seed: u64) -> Vec<Ranked> {
    let ids = |list: &[Ranked]| list.iter().map(|r| r.first_rank).collect::<Vec<_>>();
    let drafted = crate::interleave::team_draft(&ids(&a), &ids(&b), len, seed);
    let slots = |list: Vec<Ranked>| -> HashMap<usize, Ranked> {
        list.into_iter().map(|r| (r.first_rank, r)).collect()
    };
    let (mut a, mut b) = (slots(a), slots(b));
    drafted
        .into_iter()
        .map(|(rank, team)| {
            let picked = match team {
                crate::interleave::Team::A => a.remove(&rank),
                crate::interleave::Team::B => b.remove(&rank),
            };
            let mut r = picked.expect("a team picks from its own list");
            r.team = Some(team);
            r
        })
        .collect()
}

/// What a dense or hybrid search (or a reranker reading the dense similarity) holds for its
/// whole run: the vectors, the searcher's row tables and the query's vector.
pub struct DenseQuery {
    dense: Arc<crate::dense::Dense>,
    rows: Arc<crate::dense::Rows>,
    vector: Vec<f32>,
}

impl DenseQuery {
    /// The query's similarity to any document of the searcher (the `dense.similarity`
    /// feature).
    pub fn similarity(&self) -> crate::dense::Similarity<'_> {
        crate::dense::Similarity {
            index: &self.dense.index,
            rows: &self.rows,
            query: &self.vector,
        }
    }

    /// The nearest `limit` documents after `skip` in `q`'s language, and how many were ranked.
    fn nearest(&self, q: &SearchQuery, limit: usize, skip: usize) -> (Vec<Candidate>, usize) {
        let lang = q.lang.as_deref().map(crate::corpus::lang::code);
        let (top, ranked) = self
            .dense
            .index
            .nearest(&self.rows, &self.vector, limit, skip, lang);
        let top = top
            .into_iter()
            .map(|(address, score)| Candidate::new(address, score))
            .collect();
        (top, ranked)
    }
}

/// What the first phase found: the ranked candidates and what explains them.
struct FirstPhase {
    /// Best first.
    top: Vec<Candidate>,
    total_hits: usize,
    /// The model that ranked (none for a fusion).
    bound: Option<BoundModel>,
    fused: Option<Fused>,
}

/// A fusion's inputs, for the report and the explanations.
struct Fused {
    report: FusionReport,
    /// Per input: its model and each listed document's (rank, score).
    inputs: Vec<(Retriever, InputRanks)>,
}

/// Each document an input listed: its 1-based rank and its score.
type InputRanks = HashMap<DocAddress, (usize, f32)>;

/// What a hit shows besides its rank and score ([`Engine::hit_fields`]).
#[derive(Debug, Clone, PartialEq)]
pub struct HitFields {
    pub id: String,
    /// Asked for: the URL or `None` for a document without one.
    pub url: Option<Option<String>>,
    pub title: Option<String>,
    pub snippet: Option<String>,
}

/// One shard's first phase in a sharded collection (`crate::cluster`).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardTop {
    /// This shard's documents matching at least one query term.
    pub total_hits: usize,
    /// This shard's top in the canonical order (score descending, then id ascending; with
    /// a sort, its key first).
    pub hits: Vec<ShardHit>,
    /// With a sort: some document of this shard has the fields the sort needs.
    pub sortable: bool,
}

/// A document of a shard's first phase: the candidate, with its id (the shards' lists are
/// merged by id).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardHit {
    pub id: String,
    /// Its address is in the searcher the shard answered from.
    pub candidate: Candidate,
}

impl ShardHit {
    /// `top` with each candidate's id.
    fn of(
        columns: &crate::text::columns::DocColumns,
        top: Vec<Candidate>,
    ) -> tantivy::Result<Vec<ShardHit>> {
        let addresses: Vec<DocAddress> = top.iter().map(|c| c.address).collect();
        let ids = columns.ids(&addresses)?;
        Ok(top
            .into_iter()
            .zip(ids)
            .map(|(candidate, id)| ShardHit { id, candidate })
            .collect())
    }
}

/// The index with what serves it: link scores and the active reranker, each swapped
/// atomically while searches run (a search keeps the versions it started with).
pub struct Engine {
    pub index: TextIndex,
    links: ArcSwapOption<LinkData>,
    model: ArcSwapOption<ActiveModel>,
    /// Held for writing while a replica switches index generations
    /// ([`Engine::switch_generation`]), for reading while a [`Engine::snapshot`] is taken.
    switching: std::sync::RwLock<()>,
    /// The generation from a store this index follows (`crate::cluster::generation`); 0
    /// when it follows none.
    store_generation: std::sync::atomic::AtomicU64,
    /// The embedder and document vectors of dense and hybrid search, once computed.
    dense: ArcSwapOption<crate::dense::Dense>,
    /// Where the document vectors stand.
    pub dense_status: crate::dense::Status,
}

/// The first-phase score of each document at `addresses`, term by term (tantivy's
/// explanation tree), as `bound` scores it with `stats`: what `explain=true` shows, on one
/// index and on each shard of a sharded page (`crate::cluster::leaf::hits`).
pub(crate) fn explain_first_phase(
    searcher: &Searcher,
    stats: &Stats,
    bound: &crate::text::search::BoundModel,
    addresses: &[DocAddress],
) -> Result<Vec<tantivy::query::Explanation>, SearchError> {
    // One weight for every explained hit.
    let weight = bound
        .query
        .weight(tantivy::query::EnableScoring::enabled_from_statistics_provider(stats, searcher))?;
    addresses
        .iter()
        .enumerate()
        .map(|(i, a)| {
            match weight.explain(searcher.segment_reader(a.segment_ord), a.doc_id) {
                Ok(e) => Ok(e),
                // A document the query does not match has no score to explain: a caller's
                // mistake (a leaf's `hits` call naming it), not the server's; the fuzzer
                // found it answered 500.
                Err(tantivy::TantivyError::InvalidArgument(why)) => Err(SearchError::Param {
                    field: "docs",
                    message: format!(
                        "document {i} cannot be explained: {why}; only documents the query \
                         matches are"
                    ),
                }),
                Err(e) => Err(e.into()),
            }
        })
        .collect()
}

/// An engine is its own: where an `AsRef<Engine>` is asked for (an in-process shard,
/// `crate::cluster::root::transport::LocalShard`), an engine or a server state holding one.
impl AsRef<Engine> for Engine {
    fn as_ref(&self) -> &Engine {
        self
    }
}

impl Engine {
    pub fn new(index: TextIndex) -> Self {
        Engine {
            index,
            links: ArcSwapOption::empty(),
            model: ArcSwapOption::empty(),
            switching: std::sync::RwLock::new(()),
            store_generation: std::sync::atomic::AtomicU64::new(0),
            dense: ArcSwapOption::empty(),
            dense_status: crate::dense::Status::default(),
        }
    }

    /// The embedder and vectors dense and hybrid search use, if any.
    pub fn dense(&self) -> Option<Arc<crate::dense::Dense>> {
        self.dense.load_full()
    }

    /// Serves `dense` from the next search on.
    /// The engine with the index's stored vectors, searched with `embedder` (else the one
    /// that computed them), when it has any: the command line's training and feature
    /// extraction, where the dense similarity is a feature like any other.
    pub fn with_stored_vectors(
        self,
        embedder: Option<&std::path::Path>,
    ) -> Result<Self, crate::dense::DenseError> {
        let dense = crate::dense::load(&self.index, embedder)?;
        self.set_dense(dense.map(Arc::new));
        Ok(self)
    }

    pub fn set_dense(&self, dense: Option<Arc<crate::dense::Dense>>) {
        self.dense.store(dense);
    }

    /// The query's vector and the vectors of `searcher`'s documents, for a search that
    /// needs them; unavailable (503) while they are being computed or when there are none.
    fn dense_query(&self, text: &str, searcher: &Searcher) -> Result<DenseQuery, SearchError> {
        let Some(dense) = self.dense() else {
            let why = match self.dense_status.get() {
                crate::dense::Progress::Off => {
                    "dense and hybrid search need document vectors: run `rankd embed` on this \
                     data directory (or start the server with --embed)"
                        .to_string()
                }
                crate::dense::Progress::Loading => "the embedder is loading".to_string(),
                crate::dense::Progress::Embedding { done, total } => format!(
                    "the documents' vectors are being computed ({done} of {total}); text \
                     models serve meanwhile"
                ),
                crate::dense::Progress::Ready { .. } => "no document vectors".to_string(),
                crate::dense::Progress::Failed { message } => {
                    format!("computing the documents' vectors failed: {message}")
                }
            };
            return Err(SearchError::Unavailable(why));
        };
        let vector = dense
            .embed_query(text)
            .map_err(|e| SearchError::Internal(anyhow::anyhow!("embedding the query: {e}")))?;
        let rows = dense.index.rows(searcher)?;
        Ok(DenseQuery {
            dense,
            rows,
            vector,
        })
    }

    /// `text`'s vector against `searcher`'s documents when the index has vectors (for the
    /// dense similarity feature) and, when `embedder` names one, they were computed by that
    /// embedder ([`ActiveModel::reads_dense_of`]); else `None`.
    pub fn query_vector(
        &self,
        text: &str,
        searcher: &Searcher,
        embedder: Option<&str>,
    ) -> Result<Option<DenseQuery>, SearchError> {
        match self.dense() {
            Some(d) if embedder.is_none_or(|e| e == d.index.vectors.model) => {
                Ok(Some(self.dense_query(text, searcher)?))
            }
            _ => Ok(None),
        }
    }

    /// Whether `model` reads the dense similarity and this index's vectors can give it
    /// ([`ActiveModel::reads_dense_of`]).
    pub fn dense_serves(&self, model: &ActiveModel) -> bool {
        self.dense()
            .is_some_and(|d| model.reads_dense_of(&d.index.vectors.model))
    }

    /// The generation from a store being served, if the index follows one.
    pub fn store_generation(&self) -> Option<u64> {
        match self
            .store_generation
            .load(std::sync::atomic::Ordering::Acquire)
        {
            0 => None,
            g => Some(g),
        }
    }

    /// Records the store generation the index holds when serving starts.
    pub fn set_store_generation(&self, generation: u64) {
        self.store_generation
            .store(generation, std::sync::atomic::Ordering::Release);
    }

    /// The current searcher with the link scores of the same index generation (a switch in
    /// between is waited for).
    pub fn snapshot(&self) -> (Searcher, Option<Arc<LinkData>>) {
        let _reading = self.switching.read_locked();
        (self.index.reader.searcher(), self.links())
    }

    /// Switches to the store's index generation `generation`: `replace` puts its files in
    /// place and returns the generation's link scores, then the reader is reloaded and the
    /// scores served, all while no [`Engine::snapshot`] can be taken, so no snapshot pairs one
    /// generation's documents with another's link scores; [`Engine::store_generation`] says
    /// `generation` once it serves.
    pub fn switch_generation<T>(
        &self,
        generation: u64,
        replace: impl FnOnce() -> anyhow::Result<(T, Option<LinkData>)>,
    ) -> anyhow::Result<T> {
        let _writing = self.switching.write_locked();
        let (done, links) = replace()?;
        self.index.reader.reload()?;
        self.links.store(links.map(Arc::new));
        self.set_store_generation(generation);
        Ok(done)
    }

    /// The index back, for a caller that is done searching it.
    pub fn into_index(self) -> TextIndex {
        self.index
    }

    pub fn with_links(self, links: Option<LinkData>) -> Self {
        self.links.store(links.map(Arc::new));
        self
    }

    pub fn with_model(self, model: Option<ActiveModel>) -> Self {
        self.model.store(model.map(Arc::new));
        self
    }

    pub fn links(&self) -> Option<Arc<LinkData>> {
        self.links.load_full()
    }

    pub fn set_links(&self, links: Option<Arc<LinkData>>) {
        self.links.store(links);
    }

    /// The active reranker.
    pub fn model(&self) -> Option<Arc<ActiveModel>> {
        self.model.load_full()
    }

    pub fn set_model(&self, model: Option<Arc<ActiveModel>>) {
        self.model.store(model);
    }

    /// One search's view of this index: `query` over `searcher` with `stats` and the link
    /// scores `links` of the searcher's generation.
    pub fn view<'a>(
        &'a self,
        query: &'a AnalyzedQuery,
        searcher: &'a Searcher,
        stats: &'a Stats<'a>,
        links: Option<&'a LinkData>,
    ) -> features::View<'a> {
        features::View {
            query,
            index: &self.index,
            searcher,
            stats,
            links,
            dense: None,
        }
    }

    /// Runs one search.
    pub fn search(&self, q: &SearchQuery) -> Result<SearchResponse, SearchError> {
        self.search_until(q, Deadline::NONE)
    }

    /// Runs one search, giving up with [`SearchError::OverBudget`] at the first step that
    /// ends after `deadline` ([`budget`]).
    pub fn search_until(
        &self,
        q: &SearchQuery,
        deadline: Deadline,
    ) -> Result<SearchResponse, SearchError> {
        self.search_with(q, deadline, None)
    }

    /// [`Engine::search_until`], the page interleaved (`crate::interleave::team_draft`) from
    /// the active reranker's ranking of the window (team A) and `candidate`'s ranking of the
    /// same window (team B), with the coins of `seed`; [`SearchResponse::teams`] says which
    /// ranker put each hit there, and each hit keeps the active reranker's score. With
    /// collapsing, each ranker's list is collapsed before the draft. Only a reranked first
    /// page is interleaved ([`Interleave::applies`]);
    /// another search is answered as by [`Engine::search_until`], without teams.
    pub fn search_interleaved(
        &self,
        q: &SearchQuery,
        deadline: Deadline,
        candidate: &ActiveModel,
        seed: u64,
    ) -> Result<SearchResponse, SearchError> {
        self.search_with(q, deadline, Some(Interleave { candidate, seed }))
    }

    /// The query a search that names no first phase runs: `model=hybrid` when `model`, the
    /// reranker that will rerank, reads the dense similarity and the index has vectors (on
    /// the demo that ranks best on every development set: docs/EVALUATION.md, "The dense
    /// similarity as a feature"); `None`: `q` as it is (the index's default model).
    fn default_first_phase(
        &self,
        q: &SearchQuery,
        model: Option<&ActiveModel>,
    ) -> Option<SearchQuery> {
        let names_none = q.model.is_none() && q.fusion.is_none() && !q.dense;
        let reranks = matches!(q.ranking, Ranking::Rerank { .. });
        (names_none && reranks && model.is_some_and(|m| self.dense_serves(m))).then(|| {
            SearchQuery {
                fusion: Some(request::default_hybrid()),
                ..q.clone()
            }
        })
    }

    fn search_with(
        &self,
        q: &SearchQuery,
        deadline: Deadline,
        interleave: Option<Interleave>,
    ) -> Result<SearchResponse, SearchError> {
        let start = Instant::now();
        q.validate()?;
        let interleave = interleave.filter(|_| Interleave::applies(q));
        let kind = match q.model {
            Some(m) => m,
            None => self.index.config.default_model,
        };
        // One version of each part for the whole search.
        let links = self.links.load_full();
        let model = match q.ranking {
            Ranking::Rerank { .. } => Some(self.model.load_full().ok_or(SearchError::Param {
                field: "rerank",
                message: "no reranker is active; pass rerank=false or activate a model".into(),
            })?),
            _ => None,
        };
        let defaulted = self.default_first_phase(q, model.as_deref());
        let q = defaulted.as_ref().unwrap_or(q);
        if let (Ranking::Boost { .. }, None) = (q.ranking, &links) {
            return Err(SearchError::Param {
                field: "boost",
                message: "no link scores for this index; run `rankd graph` first".into(),
            });
        }
        let mut response = SearchResponse {
            query_id: None,
            query: q.text.clone(),
            model: q.first_phase_name(kind),
            reranker: model.as_ref().map(|m| m.id().to_string()),
            total_hits: 0,
            took_ms: 0.0,
            hits: Vec::new(),
            fusion: None,
            partial: None,
            shards: None,
            times: PhaseTimes::default(),
            teams: None,
            swapped: None,
        };
        let searcher = self.index.reader.searcher();
        let stats = Stats::new(&searcher);
        let now = q.now.unwrap_or_else(features::social::unix_now);
        // The first phase: the page itself, or the window the boost, the reranker or
        // collapsing reorders.
        let windowed = matches!(q.ranking, Ranking::Boost { .. } | Ranking::Rerank { .. });
        let (limit, skip) = match q.ranking {
            Ranking::Boost { window, .. } | Ranking::Rerank { window } => (window, 0),
            _ if !q.collapse.is_empty() => (q.collapse_window, 0),
            _ => (q.k, q.offset),
        };
        let query = AnalyzedQuery::new(q.text.as_str());
        // A reranker that reads the dense similarity has the query embedded even after a
        // lexical first phase, when the index has vectors of the embedder it was trained
        // on (else the feature keeps its default, as for a document without a vector, even
        // when a dense first phase embedded the query).
        let reads_dense = matches!(q.ranking, Ranking::Rerank { .. })
            && (model.as_deref().is_some_and(|m| self.dense_serves(m))
                || interleave.is_some_and(|i| self.dense_serves(i.candidate)));
        let dense = match (&q.fusion, q.dense) {
            (_, true) => Some(self.dense_query(&q.text, &searcher)?),
            (Some(f), _) if f.uses_dense() => Some(self.dense_query(&q.text, &searcher)?),
            _ if reads_dense => Some(self.dense_query(&q.text, &searcher)?),
            _ => None,
        };
        let mismatched = model
            .as_deref()
            .is_some_and(|m| m.reads_dense() && !self.dense_serves(m));
        let view = features::View {
            dense: dense
                .as_ref()
                .filter(|_| !mismatched)
                .map(DenseQuery::similarity),
            ..self.view(&query, &searcher, &stats, links.as_deref())
        };
        let first = match (&q.fusion, &dense) {
            (Some(f), _) => {
                self.fused_first_phase(view, q, f, dense.as_ref(), limit, skip, deadline)?
            }
            (None, Some(d)) if q.dense => Self::dense_first_phase(q, d, limit, skip),
            (None, _) => self.first_phase(view, q, kind, limit, skip, now)?,
        };
        deadline.check("first phase")?;
        let Some(first) = first else {
            response.took_ms = start.elapsed().as_secs_f64() * 1e3;
            return Ok(response);
        };
        response.total_hits = first.total_hits;
        response.fusion = first.fused.as_ref().map(|f| f.report.clone());
        let top = &first.top;
        response.times.retrieve = start.elapsed().as_secs_f64();
        let mut ranked: Vec<Ranked> = top
            .iter()
            .enumerate()
            .map(|(i, &candidate)| Ranked {
                candidate,
                score: candidate.score,
                first_rank: skip + i + 1,
                boost: None,
                collapsed: None,
                team: None,
            })
            .collect();
        // The reranker's inputs and scores, kept for the explanations.
        let mut reranked = None;
        // The candidate's scores of the window, when interleaving.
        let mut candidate_scores: Option<Vec<f32>> = None;
        match q.ranking {
            Ranking::FirstPhase | Ranking::Sort(_) => {}
            Ranking::Boost { weight, .. } => {
                let links = links.as_deref().expect("checked above");
                let addresses: Vec<DocAddress> = top.iter().map(|c| c.address).collect();
                for (r, node) in ranked
                    .iter_mut()
                    .zip(links.nodes_of(&searcher, &addresses)?)
                {
                    let added = links.pagerank_boost_of(node, weight);
                    r.score += added;
                    r.boost = Some(BoostExplanation { weight, added });
                }
            }
            Ranking::Rerank { .. } => {
                let active = model.as_deref().expect("checked above");
                let t = Instant::now();
                let prf = match interleave {
                    Some(i) if i.candidate.prf() == features::Prf::Compute => i.candidate.prf(),
                    _ => active.prf(),
                };
                let how = features::Extraction {
                    prf,
                    scores_are_bm25f: q.scores_are_bm25f(kind),
                    now,
                    rating: MeanRating::OfIndex,
                };
                let w = Self::features(view, top, how)?;
                response.times.features = t.elapsed().as_secs_f64();
                deadline.check("features")?;
                let t = Instant::now();
                let scores = active.score(&w.features).map_err(|e| {
                    SearchError::Internal(anyhow::anyhow!("reranker {}: {e}", active.id()))
                })?;
                for (r, &s) in ranked.iter_mut().zip(&scores) {
                    r.score = s;
                }
                if let Some(i) = interleave {
                    let candidate = i.candidate.score(&w.features).map_err(|e| {
                        SearchError::Internal(anyhow::anyhow!(
                            "candidate reranker {}: {e}",
                            i.candidate.id()
                        ))
                    })?;
                    candidate_scores = Some(candidate);
                }
                response.times.rerank = t.elapsed().as_secs_f64();
                deadline.check("rerank")?;
                reranked = Some((active, w.features, scores));
            }
        }
        if windowed {
            // Re-sorted by the new score, ties in first-phase order.
            let t = Instant::now();
            ranked.sort_by(|a, b| {
                b.score
                    .total_cmp(&a.score)
                    .then(a.first_rank.cmp(&b.first_rank))
            });
            response.times.rerank += t.elapsed().as_secs_f64();
        }
        let collapsing = !q.collapse.is_empty();
        let t = (collapsing || candidate_scores.is_some()).then(Instant::now);
        if let (Some(i), Some(scores)) = (interleave, &candidate_scores) {
            // Each ranker's order collapsed on its own, then drafted; a group both lists
            // show through different hits is shown once (the collapse of the drafted list).
            let mut b = ranked.clone();
            b.sort_by(|x, y| {
                let score = |r: &Ranked| scores[r.first_rank - 1];
                score(y)
                    .total_cmp(&score(x))
                    .then(x.first_rank.cmp(&y.first_rank))
            });
            if collapsing {
                ranked = self.collapse(&searcher, q, ranked, true)?;
                b = self.collapse(&searcher, q, b, true)?;
            }
            ranked = interleaved(ranked, b, q.offset + q.k, i.seed);
            if collapsing {
                ranked = self.collapse(&searcher, q, ranked, false)?;
            }
            response.teams = Some(Vec::new());
        } else if collapsing {
            ranked = self.collapse(&searcher, q, ranked, true)?;
        }
        if let Some(t) = t.filter(|_| collapsing) {
            response.times.collapse = t.elapsed().as_secs_f64();
        }
        if windowed || !q.collapse.is_empty() {
            // The page is cut from the window.
            ranked.truncate(q.offset + q.k);
            ranked.drain(..q.offset.min(ranked.len()));
        }
        deadline.check("hits")?;
        let t = Instant::now();
        // A window's row is its first-phase rank − 1.
        let explain_rerank = |r: &Ranked| {
            let (active, features, scores) = reranked.as_ref()?;
            let row = r.first_rank - 1;
            Some(active.explain(features, row, scores[row]))
        };
        if let Some(teams) = &mut response.teams {
            teams.extend(ranked.iter().filter_map(|r| r.team));
        }
        response.hits = self.hits(view, &first, q, &ranked, explain_rerank, deadline)?;
        response.times.hits = t.elapsed().as_secs_f64();
        response.took_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(response)
    }

    /// `ranked` collapsed by `q.collapse` (SPEC §8): the kept hits in group order, each with
    /// the number of hits it hides when `count` (else keeping the count it had).
    fn collapse(
        &self,
        searcher: &Searcher,
        q: &SearchQuery,
        ranked: Vec<Ranked>,
        count: bool,
    ) -> Result<Vec<Ranked>, SearchError> {
        let columns = self.index.doc_columns(searcher)?;
        let keys: Vec<_> = ranked
            .iter()
            .map(|r| columns.collapse_keys(r.candidate.address))
            .collect();
        let mut slots: Vec<Option<Ranked>> = ranked.into_iter().map(Some).collect();
        let prefer = q.preferred_langs(&self.index.config);
        Ok(collapse::collapse(&keys, &q.collapse, &prefer)
            .into_iter()
            .map(|(i, hidden)| {
                let mut r = slots[i].take().expect("each hit is kept at most once");
                if count {
                    r.collapsed = Some(hidden);
                }
                r
            })
            .collect())
    }

    /// The first phase of an unfused `q`: the top `limit` after `skip` of its model or its
    /// sort. `None` when the query has no searchable term.
    fn first_phase(
        &self,
        view: features::View,
        q: &SearchQuery,
        kind: ModelKind,
        limit: usize,
        skip: usize,
        now: i64,
    ) -> Result<Option<FirstPhase>, SearchError> {
        let (searcher, stats) = (view.searcher, view.stats);
        let Some(bound) = q.bind(&view, kind)? else {
            return Ok(None);
        };
        let top = match q.ranking {
            Ranking::Sort(mode) => {
                let columns = self.index.doc_columns(searcher)?;
                if !mode.possible(columns.signals_present()) {
                    return Err(SearchError::Param {
                        field: "sort",
                        message: format!(
                            "sort={mode} orders by {}, which no document of this index has",
                            mode.needs()
                        ),
                    });
                }
                let by = sort::SortBy {
                    mode,
                    params: self.index.config.social,
                    now,
                    global_rating: columns.rating_sum(searcher).mean(),
                };
                sort::top_sorted(searcher, &columns, &bound, by, limit, skip)?
            }
            _ => bound.top(
                searcher,
                self.index.doc_columns(searcher)?.as_ref(),
                stats,
                limit,
                skip,
            )?,
        };
        Ok(Some(FirstPhase {
            top,
            total_hits: bound.count(searcher)?,
            bound: Some(bound),
            fused: None,
        }))
    }

    /// `model=dense`'s first phase: the nearest `limit` documents after `skip`. `None` for a
    /// query with no text or no known word.
    fn dense_first_phase(
        q: &SearchQuery,
        dense: &DenseQuery,
        limit: usize,
        skip: usize,
    ) -> Option<FirstPhase> {
        // No text, or (static embeddings) no word the embedder knows: nothing to compare.
        if q.text.trim().is_empty() || dense.vector.iter().all(|&x| x == 0.0) {
            return None;
        }
        let (top, ranked) = dense.nearest(q, limit, skip);
        Some(FirstPhase {
            top,
            total_hits: ranked,
            bound: None,
            fused: None,
        })
    }

    /// A fused first phase (SPEC §6): each input's top `depth`, fused, then `skip`/`limit`.
    /// The dense input's list is `dense`'s nearest documents.
    #[allow(clippy::too_many_arguments)]
    fn fused_first_phase(
        &self,
        view: features::View,
        q: &SearchQuery,
        f: &FusionQuery,
        dense: Option<&DenseQuery>,
        limit: usize,
        skip: usize,
        deadline: Deadline,
    ) -> Result<Option<FirstPhase>, SearchError> {
        let mut lists: Vec<Vec<(DocAddress, f64)>> = Vec::with_capacity(f.inputs.len());
        let (searcher, stats) = (view.searcher, view.stats);
        let mut total_hits = None;
        let mut dense_ranked = None;
        for &input in &f.inputs {
            let kind = match (input, dense) {
                (Retriever::Text(kind), _) => kind,
                (Retriever::Dense, Some(d)) => {
                    let Some(first) = Self::dense_first_phase(q, d, f.depth, 0) else {
                        lists.push(Vec::new());
                        continue;
                    };
                    dense_ranked = Some(first.total_hits);
                    let list = first.top.into_iter();
                    lists.push(list.map(|c| (c.address, f64::from(c.score))).collect());
                    continue;
                }
                (Retriever::Dense, None) => unreachable!("a dense input has its query vector"),
            };
            match q.bind(&view, kind)? {
                Some(bound) => {
                    if total_hits.is_none() {
                        total_hits = Some(bound.count(searcher)?);
                    }
                    let top = bound.top(
                        searcher,
                        self.index.doc_columns(searcher)?.as_ref(),
                        stats,
                        f.depth,
                        0,
                    )?;
                    let list = top.into_iter().map(|c| (c.address, f64::from(c.score)));
                    lists.push(list.collect());
                }
                None => lists.push(Vec::new()),
            }
            deadline.check("first phase")?;
        }
        // A query whose words are all stopwords still has a meaning.
        let Some(total_hits) = total_hits.or(dense_ranked) else {
            return Ok(None);
        };
        let (fused, report) = f.fuse(&lists)?;
        deadline.check("fusion")?;
        let inputs = if q.explain {
            f.inputs
                .iter()
                .zip(&lists)
                .map(|(&kind, list)| {
                    let listed = list
                        .iter()
                        .enumerate()
                        .map(|(r, &(a, s))| (a, (r + 1, s as f32)))
                        .collect();
                    (kind, listed)
                })
                .collect()
        } else {
            Vec::new()
        };
        let top = fused
            .into_iter()
            .skip(skip)
            .take(limit)
            .map(|(address, score)| Candidate::new(address, score as f32))
            .collect();
        Ok(Some(FirstPhase {
            top,
            total_hits,
            bound: None,
            fused: Some(Fused { report, inputs }),
        }))
    }

    /// The view's index as one shard of a collection: the top `limit` of `q`'s model (over
    /// the view's query) scored with the collection's statistics, in the canonical order, with the documents' ids
    /// (the root merges the shards' lists by score and id). With `sort=`, the top `limit` in
    /// the sort's order (its key, then score, then id), the key computed at `q.now` with the
    /// collection's mean rating `rating`; a shard whose documents lack the sort's fields
    /// answers their relevance order (all keys missing) and says so, and the root refuses the
    /// sort only when no shard has them. A fusion's inputs are asked for one by one.
    pub fn shard_top(
        view: features::View,
        q: &SearchQuery,
        kind: ModelKind,
        limit: usize,
        rating: MeanRating,
    ) -> Result<Option<ShardTop>, SearchError> {
        if q.fusion.is_some() {
            return Err(SearchError::Param {
                field: "model",
                message: "a shard ranks one model at a time (the root fuses)".into(),
            });
        }
        let (index, searcher, stats) = (view.index, view.searcher, view.stats);
        let Some(bound) = q.bind(&view, kind)? else {
            return Ok(None);
        };
        let columns = index.doc_columns(searcher)?;
        let (top, sortable) = match q.ranking {
            Ranking::Sort(mode) => {
                let by = sort::SortBy {
                    mode,
                    params: index.config.social,
                    now: q.now.unwrap_or_else(features::social::unix_now),
                    global_rating: rating.resolve(&columns, searcher),
                };
                let top = sort::top_sorted(searcher, &columns, &bound, by, limit, 0)?;
                (top, mode.possible(columns.signals_present()))
            }
            _ => (bound.top(searcher, &columns, stats, limit, 0)?, false),
        };
        let hits = ShardHit::of(&columns, top)?;
        Ok(Some(ShardTop {
            total_hits: bound.count(searcher)?,
            hits,
            sortable,
        }))
    }

    /// The view's index as one shard of a collection, for `model=dense`: its `limit`
    /// documents nearest to `q`'s vector in `searcher`, with their ids, in the canonical order
    /// (similarity descending, then id ascending: the root merges the shards' lists as the
    /// single index's scan orders them). `None` for a query with no text.
    pub fn shard_dense_top(
        &self,
        q: &SearchQuery,
        searcher: &Searcher,
        limit: usize,
    ) -> Result<Option<ShardTop>, SearchError> {
        let dense = self.dense_query(&q.text, searcher)?;
        let Some(first) = Self::dense_first_phase(q, &dense, limit, 0) else {
            return Ok(None);
        };
        let hits = ShardHit::of(&*self.index.doc_columns(searcher)?, first.top)?;
        Ok(Some(ShardTop {
            total_hits: first.total_hits,
            hits,
            sortable: false,
        }))
    }

    /// Feature rows of this shard's members of a sharded window: `docs` are (address,
    /// first-phase score, 1-based rank in the whole window), and the rows follow their order.
    /// Text features score with the collection's statistics `stats`, so each row equals the
    /// single index's row of the same document, except for the window features, which need
    /// the whole window's link subgraph: they keep their defaults, and each document's share
    /// of the subgraph is returned instead (its out-links that end in `window`, the whole
    /// window's graph nodes, ascending; `crate::features::link::window_columns`).
    ///
    /// The RM3 features use `rm3`, the relevance model estimated from the whole window's
    /// feedback documents (`crate::features::prf::estimate`); `stats` must then hold its
    /// expansion terms too. `links` are the link scores of `searcher`'s generation.
    pub fn shard_features(
        view: features::View,
        docs: &[(DocAddress, f32, usize)],
        window: &[u32],
        rm3: Option<&features::prf::Rm3Query>,
        how: features::Extraction,
    ) -> Result<(FeatureMatrix, Vec<Vec<u32>>), SearchError> {
        let (searcher, links) = (view.searcher, view.links);
        let candidates: Vec<Candidate> = docs
            .iter()
            .map(|&(address, score, _)| Candidate::new(address, score))
            .collect();
        let mut m = features::extract_part(
            view,
            FeatureSet::current(),
            &candidates,
            true,
            features::Rm3Source::Given(rm3),
            how,
        )?;
        let ranks: Vec<usize> = docs.iter().map(|&(_, _, rank)| rank).collect();
        m.set_ranks(FeatureSet::current(), &ranks);
        let out_links = match links {
            Some(links) => {
                let addresses: Vec<DocAddress> = docs.iter().map(|d| d.0).collect();
                links
                    .nodes_of(searcher, &addresses)?
                    .into_iter()
                    .map(|node| node.map_or_else(Vec::new, |u| links.window_links(u, window)))
                    .collect()
            }
            None => vec![Vec::new(); docs.len()],
        };
        Ok((m, out_links))
    }

    /// The first-phase top `window` of `text` with its feature vectors: the rerank path's
    /// input, and a training window (`crate::training`). `None` when the query has no
    /// searchable term (only stop words).
    pub fn window(
        &self,
        searcher: &Searcher,
        text: &str,
        kind: ModelKind,
        window: usize,
        prf: features::Prf,
    ) -> Result<Option<FeatureWindow>, SearchError> {
        let stats = Stats::new(searcher);
        let query = AnalyzedQuery::new(text);
        let Some(bound) = self.index.bind(&stats, kind, None, &query)? else {
            return Ok(None);
        };
        let top = bound.top(
            searcher,
            self.index.doc_columns(searcher)?.as_ref(),
            &stats,
            window,
            0,
        )?;
        let links = self.links.load_full();
        let how = features::Extraction {
            scores_are_bm25f: kind == ModelKind::Bm25F,
            ..features::Extraction::full(prf)
        };
        // Every feature, the dense similarity too when the index has vectors.
        let dense = self.query_vector(text, searcher, None)?;
        let view = features::View {
            dense: dense.as_ref().map(DenseQuery::similarity),
            ..self.view(&query, searcher, &stats, links.as_deref())
        };
        Self::features(view, &top, how).map(Some)
    }

    fn features(
        view: features::View,
        candidates: &[Candidate],
        how: features::Extraction,
    ) -> Result<FeatureWindow, SearchError> {
        let features = features::extract(view, FeatureSet::current(), candidates, how)?;
        Ok(FeatureWindow {
            candidates: candidates.to_vec(),
            features,
        })
    }

    /// Turns the page into hits: id, title, URL and snippet passages from one `hit` column
    /// value each, the explanation when asked.
    fn hits(
        &self,
        view: features::View,
        first: &FirstPhase,
        q: &SearchQuery,
        page: &[Ranked],
        rerank_explanation: impl Fn(&Ranked) -> Option<RerankExplanation>,
        deadline: Deadline,
    ) -> Result<Vec<Hit>, SearchError> {
        let (searcher, stats, links) = (view.searcher, view.stats, view.links);
        let addresses: Vec<DocAddress> = page.iter().map(|r| r.candidate.address).collect();
        // Explaining is opt-in and off the hot path.
        let mut first_phase = match (&first.bound, q.explain) {
            (Some(bound), true) => explain_first_phase(searcher, stats, bound, &addresses)?,
            _ => Vec::new(),
        }
        .into_iter();
        deadline.check("explain")?;
        let nodes = match (q.explain, links) {
            (true, Some(links)) => Some(links.nodes_of(searcher, &addresses)?),
            _ => None,
        };
        let shown = self.hit_fields(searcher, stats, view.query, q.returns, &addresses)?;
        let mut hits = Vec::with_capacity(page.len());
        for (i, (r, shown)) in page.iter().zip(shown).enumerate() {
            let explain = match q.explain {
                true => Some(Explanation {
                    first_phase: first_phase.next(),
                    fusion_inputs: first.fused.as_ref().map(|f| {
                        f.inputs
                            .iter()
                            .map(|(model, listed)| {
                                let found = listed.get(&r.candidate.address);
                                FusionInputRank {
                                    model: model.to_string(),
                                    rank: found.map(|&(rank, _)| rank),
                                    score: found.map(|&(_, score)| score),
                                }
                            })
                            .collect()
                    }),
                    first_phase_rank: r.first_rank,
                    first_phase_score: r.candidate.score,
                    rerank: rerank_explanation(r),
                    boost: r.boost,
                    links: match (links, &nodes) {
                        (Some(l), Some(n)) => l.scores_of(n[i]),
                        _ => None,
                    },
                }),
                false => None,
            };
            hits.push(Hit {
                rank: q.offset + i + 1,
                id: shown.id,
                url: shown.url,
                title: shown.title,
                snippet: shown.snippet,
                score: r.score,
                sort_key: r.candidate.sort_key,
                collapsed: r.collapsed,
                explain,
                address: r.candidate.address,
            });
        }
        Ok(hits)
    }

    /// What the hits at `addresses` show, as `returns` asks: id, title, URL and snippet
    /// passages from one `hit` column value each (also a shard's part of a sharded page).
    pub fn hit_fields(
        &self,
        searcher: &Searcher,
        stats: &Stats,
        query: &AnalyzedQuery,
        returns: Returns,
        addresses: &[DocAddress],
    ) -> Result<Vec<HitFields>, SearchError> {
        let mut snippets = if returns.snippet {
            Some((
                self.snippet_query(stats, query)?,
                crate::text::schema::analyzer(self.index.config.field("body").analyzer),
            ))
        } else {
            None
        };
        let columns = self.index.doc_columns(searcher)?;
        let mut buf = Vec::new();
        addresses
            .iter()
            .map(|&address| {
                let value = columns.hit(address, &mut buf)?;
                let head = value.head();
                let snippet = snippets.as_mut().map(|(query, analyzer)| {
                    query.snippet(value.passages, analyzer).unwrap_or_default()
                });
                Ok(HitFields {
                    id: head.id,
                    url: returns.url.then_some(head.url),
                    title: returns.title.then_some(head.title),
                    snippet,
                })
            })
            .collect()
    }

    /// The query's body terms weighted as tantivy's snippet generator weighs them,
    /// `1 / (1 + df)`: the rarest term's passage wins.
    fn snippet_query(
        &self,
        stats: &Stats,
        query: &AnalyzedQuery,
    ) -> Result<SnippetQuery, SearchError> {
        let field = self.index.fields.body;
        let analyzer = self.index.config.field("body").analyzer;
        let mut terms = Vec::new();
        for (term, _) in &query.terms(analyzer)?.terms {
            let df = stats.df(field, term)?;
            terms.push((term.clone(), 1.0 / (1.0 + df as f32)));
        }
        Ok(SnippetQuery::new(terms))
    }
}
