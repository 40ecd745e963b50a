//! The one search pipeline: first phase → (boost | features → rerank) → page → hits.
//!
//! Every front end ranks through [`Engine::search`]: `GET /search`, `rankd eval`,
//! `POST /admin/evaluate`, and the training windows ([`Engine::window`] is the first phase and
//! feature extraction of the rerank path), so one policy holds everywhere: the same window,
//! the same tie-breaking, the same boost. Front ends translate their parameters into a
//! [`SearchQuery`] and render the [`SearchResponse`]; the explanation is a typed value
//! ([`Explanation`]) until it is serialised.
//!
//! Hits cost what they show: id, title and URL come from fast-field columns, the snippet from
//! the encoded prose passages of `crate::text::snippet`; no stored document is read.

pub mod model;

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwapOption;
use serde::Serialize;
use tantivy::query::Query;
use tantivy::{DocAddress, Score, Searcher, Term};

use crate::eval::Run;
use crate::features::{self, Candidate, FeatureMatrix, FeatureSet};
use crate::links::{LinkData, NodeScores};
use crate::text::columns::DocColumns;
use crate::text::query::QueryTerms;
use crate::text::search::{validate_window, BoundModel, SearchError};
use crate::text::snippet::SnippetQuery;
use crate::text::{ModelKind, TextIndex};

pub use model::{ActiveModel, RerankExplanation, DEFAULT_WINDOW, MAX_WINDOW};

/// The window a static boost re-sorts when the request does not say (SPEC §1.8).
pub const DEFAULT_BOOST_WINDOW: usize = 100;

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
}

/// What each hit carries besides its rank, id and score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
        }
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
        match self.ranking {
            Ranking::FirstPhase => Ok(()),
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
pub fn check_window(window: usize) -> Result<(), SearchError> {
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
    pub query: String,
    /// The first-phase model.
    pub model: String,
    /// The second-phase model that reranked the hits; `null` for first-phase results.
    pub reranker: Option<String>,
    /// Documents matching at least one query term.
    pub total_hits: usize,
    pub took_ms: f64,
    pub hits: Vec<Hit>,
    /// Seconds per phase, for the metrics.
    #[serde(skip)]
    pub times: PhaseTimes,
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
    /// The score the hit is ranked by (reranker, boosted or first-phase score).
    pub score: f32,
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
    /// The first-phase model's score, term by term (tantivy's explanation tree).
    pub first_phase: tantivy::query::Explanation,
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
            .field("first_phase", &self.first_phase.to_pretty_json())
            .field("first_phase_rank", &self.first_phase_rank)
            .field("rerank", &self.rerank)
            .field("boost", &self.boost)
            .finish()
    }
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
    pub hits: f64,
}

/// A first-phase window with its feature vectors (the rerank path and the training windows).
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureWindow {
    pub candidates: Vec<Candidate>,
    pub features: FeatureMatrix,
}

/// A query of a batch that could not be run, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedQuery {
    pub qid: String,
    pub error: String,
}

/// One entry of the final page before it becomes a hit.
struct Ranked {
    address: DocAddress,
    score: f32,
    first_rank: usize,
    first_score: f32,
    boost: Option<BoostExplanation>,
}

/// The index with what serves it: link scores and the active reranker, each swapped
/// atomically while searches run (a search keeps the versions it started with).
pub struct Engine {
    pub index: TextIndex,
    links: ArcSwapOption<LinkData>,
    model: ArcSwapOption<ActiveModel>,
}

impl Engine {
    pub fn new(index: TextIndex) -> Self {
        Engine {
            index,
            links: ArcSwapOption::empty(),
            model: ArcSwapOption::empty(),
        }
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

    /// The configured default first-phase model.
    pub fn default_model(&self) -> Result<ModelKind, SearchError> {
        self.index
            .config
            .default_model
            .parse()
            .map_err(|e: String| SearchError::Internal(anyhow::anyhow!("index configuration: {e}")))
    }

    /// Runs one search.
    pub fn search(&self, q: &SearchQuery) -> Result<SearchResponse, SearchError> {
        let start = Instant::now();
        q.validate()?;
        let kind = match q.model {
            Some(m) => m,
            None => self.default_model()?,
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
        if let (Ranking::Boost { .. }, None) = (q.ranking, &links) {
            return Err(SearchError::Param {
                field: "boost",
                message: "no link scores for this index; run `rankd graph` first".into(),
            });
        }
        let mut response = SearchResponse {
            query: q.text.clone(),
            model: kind.to_string(),
            reranker: model.as_ref().map(|m| m.id().to_string()),
            total_hits: 0,
            took_ms: 0.0,
            hits: Vec::new(),
            times: PhaseTimes::default(),
        };
        let searcher = self.index.reader.searcher();
        let Some(bound) = self
            .index
            .bind(&searcher, kind, q.field.as_deref(), &q.text)?
        else {
            response.took_ms = start.elapsed().as_secs_f64() * 1e3;
            return Ok(response);
        };
        // The first phase: the page itself, or the window the boost or the reranker reorders.
        let (limit, skip) = match q.ranking {
            Ranking::FirstPhase => (q.k, q.offset),
            Ranking::Boost { window, .. } | Ranking::Rerank { window } => (window, 0),
        };
        let top = bound.top(&searcher, limit, skip)?;
        response.total_hits = bound.count(&searcher)?;
        response.times.retrieve = start.elapsed().as_secs_f64();
        let mut ranked: Vec<Ranked> = top
            .iter()
            .enumerate()
            .map(|(i, &(score, address))| Ranked {
                address,
                score,
                first_rank: skip + i + 1,
                first_score: score,
                boost: None,
            })
            .collect();
        // The reranker's inputs and scores, kept for the explanations.
        let mut reranked = None;
        match q.ranking {
            Ranking::FirstPhase => {}
            Ranking::Boost { weight, .. } => {
                let links = links.as_deref().expect("checked above");
                let addresses: Vec<DocAddress> = top.iter().map(|&(_, a)| a).collect();
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
                let w = self.features(&searcher, links.as_deref(), &q.text, &top, active.prf())?;
                response.times.features = t.elapsed().as_secs_f64();
                let t = Instant::now();
                let scores = active.score(&w.features).map_err(|e| {
                    SearchError::Internal(anyhow::anyhow!("reranker {}: {e}", active.id()))
                })?;
                for (r, &s) in ranked.iter_mut().zip(&scores) {
                    r.score = s;
                }
                response.times.rerank = t.elapsed().as_secs_f64();
                reranked = Some((active, w.features, scores));
            }
        }
        if q.ranking != Ranking::FirstPhase {
            // Re-sorted by the new score, ties in first-phase order, then the page is cut.
            let t = Instant::now();
            ranked.sort_by(|a, b| {
                b.score
                    .total_cmp(&a.score)
                    .then(a.first_rank.cmp(&b.first_rank))
            });
            ranked.truncate(q.offset + q.k);
            ranked.drain(..q.offset.min(ranked.len()));
            response.times.rerank += t.elapsed().as_secs_f64();
        }
        let t = Instant::now();
        // A window's row is its first-phase rank − 1.
        let explain_rerank = |r: &Ranked| {
            let (active, features, scores) = reranked.as_ref()?;
            let row = r.first_rank - 1;
            Some(active.explain(features, row, scores[row]))
        };
        response.hits = self.hits(
            &searcher,
            &bound,
            q,
            &ranked,
            links.as_deref(),
            explain_rerank,
        )?;
        response.times.hits = t.elapsed().as_secs_f64();
        response.took_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(response)
    }

    /// Runs every `(qid, text)` as `template` with that text and collects the rankings as a
    /// TREC run (what `rankd eval` and `POST /admin/evaluate` score). A query the engine
    /// refuses (bad input: too many terms, say) is listed in the second value and left out of
    /// the run, unless `strict`, which stops at it; an internal failure always stops. The
    /// error names the query. `on_query` is called after each query.
    pub fn run_queries(
        &self,
        queries: &[(String, String)],
        template: &SearchQuery,
        strict: bool,
        on_query: &dyn Fn(),
    ) -> anyhow::Result<(Run, Vec<FailedQuery>)> {
        let mut run = Run::new();
        let mut failed = Vec::new();
        let mut query = template.clone();
        for (qid, text) in queries {
            query.text.clone_from(text);
            match self.search(&query) {
                Ok(results) => {
                    for hit in results.hits {
                        run.push(qid, hit.id, f64::from(hit.score));
                    }
                }
                Err(e) if strict || matches!(e, SearchError::Internal(_)) => {
                    return Err(anyhow::Error::from(e).context(format!("query {qid}")))
                }
                Err(e) => failed.push(FailedQuery {
                    qid: qid.clone(),
                    error: e.to_string(),
                }),
            }
            on_query();
        }
        Ok((run, failed))
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
        let Some(bound) = self.index.bind(searcher, kind, None, text)? else {
            return Ok(None);
        };
        let top = bound.top(searcher, window, 0)?;
        let links = self.links.load_full();
        self.features(searcher, links.as_deref(), text, &top, prf)
            .map(Some)
    }

    fn features(
        &self,
        searcher: &Searcher,
        links: Option<&LinkData>,
        text: &str,
        top: &[(Score, DocAddress)],
        prf: features::Prf,
    ) -> Result<FeatureWindow, SearchError> {
        let candidates: Vec<Candidate> = top
            .iter()
            .map(|&(score, address)| Candidate { address, score })
            .collect();
        let features = features::extract(
            &self.index,
            searcher,
            links,
            FeatureSet::current(),
            text,
            &candidates,
            prf,
        )?;
        Ok(FeatureWindow {
            candidates,
            features,
        })
    }

    /// Turns the page into hits: id, title and URL from the columns, the snippet from the
    /// encoded passages, the explanation when asked.
    fn hits(
        &self,
        searcher: &Searcher,
        bound: &BoundModel,
        q: &SearchQuery,
        page: &[Ranked],
        links: Option<&LinkData>,
        rerank_explanation: impl Fn(&Ranked) -> Option<RerankExplanation>,
    ) -> Result<Vec<Hit>, SearchError> {
        let index = &self.index;
        // One weight for every explained hit; explaining is opt-in and off the hot path.
        let explainer = if q.explain {
            Some(
                bound
                    .query
                    .weight(tantivy::query::EnableScoring::enabled_from_searcher(
                        searcher,
                    ))?,
            )
        } else {
            None
        };
        let mut snippets = if q.returns.snippet {
            Some((
                self.snippet_query(searcher, &q.text)?,
                crate::text::schema::analyzer(index.config.field("body").analyzer),
                Vec::new(),
            ))
        } else {
            None
        };
        let nodes = match (q.explain, links) {
            (true, Some(links)) => {
                let addresses: Vec<DocAddress> = page.iter().map(|r| r.address).collect();
                Some(links.nodes_of(searcher, &addresses)?)
            }
            _ => None,
        };
        let columns = DocColumns::new(searcher)?;
        let mut hits = Vec::with_capacity(page.len());
        for (i, r) in page.iter().enumerate() {
            let head = columns.head(r.address)?;
            let snippet = match &mut snippets {
                Some((query, analyzer, buf)) => {
                    columns.snippet(r.address, buf)?;
                    Some(query.snippet(buf, analyzer).unwrap_or_default())
                }
                None => None,
            };
            let explain = match &explainer {
                Some(w) => Some(Explanation {
                    first_phase: w.explain(
                        searcher.segment_reader(r.address.segment_ord),
                        r.address.doc_id,
                    )?,
                    first_phase_rank: r.first_rank,
                    first_phase_score: r.first_score,
                    rerank: rerank_explanation(r),
                    boost: r.boost,
                    links: match (links, &nodes) {
                        (Some(l), Some(n)) => l.scores_of(n[i]),
                        _ => None,
                    },
                }),
                None => None,
            };
            hits.push(Hit {
                rank: q.offset + i + 1,
                id: head.id,
                url: q.returns.url.then_some(head.url),
                title: q.returns.title.then_some(head.title),
                snippet,
                score: r.score,
                explain,
                address: r.address,
            });
        }
        Ok(hits)
    }

    /// The query's body terms weighted as tantivy's snippet generator weighs them,
    /// `1 / (1 + df)`: the rarest term's passage wins.
    fn snippet_query(&self, searcher: &Searcher, text: &str) -> Result<SnippetQuery, SearchError> {
        let field = self.index.fields.body;
        let analyzer = self.index.config.field("body").analyzer;
        let mut terms = Vec::new();
        for (term, _) in QueryTerms::analyze(text, analyzer)?.terms {
            let df = searcher.doc_freq(&Term::from_field_text(field, &term))?;
            terms.push((term, 1.0 / (1.0 + df as f32)));
        }
        Ok(SnippetQuery::new(terms))
    }
}
