//! First-phase search over the whole collection with any model of SPEC §1, plus snippets,
//! explanations and per-candidate scoring (the feature-function view of each model).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Value};
use tantivy::snippet::SnippetGenerator;
use tantivy::{DocAddress, Score, Searcher, TantivyDocument, Term};

use super::columns::DocColumns;
use super::config::Bm25Params;
use super::index::TextIndex;
use super::models::bm25f::Bm25fField;
use super::models::{
    Bm25, Bm25F, Bm25Proximity, F2Exp, LmDirichlet, ModelKind, Stats, TextModel, TfIdf,
};
use super::query::{QueryError, QueryTerms};
use super::scorer::ModelQuery;

/// Largest `k` one request may ask for.
pub const MAX_K: usize = 1000;
/// Deepest result (offset + k) one request may reach.
pub const MAX_DEPTH: usize = 10_000;
/// Characters in a snippet.
const SNIPPET_CHARS: usize = 200;
/// Only the start of a long body is searched for the snippet: tokenising a whole 1 MB API
/// page per hit would cost more than the search itself.
const SNIPPET_SOURCE_BYTES: usize = 32 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error("{field}: {message}")]
    Param {
        field: &'static str,
        message: String,
    },
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<tantivy::TantivyError> for SearchError {
    fn from(e: tantivy::TantivyError) -> Self {
        SearchError::Internal(e.into())
    }
}

#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub q: String,
    pub k: usize,
    pub offset: usize,
    pub model: ModelKind,
    /// The field single-field models rank by; `None` = the configured default (`all`).
    pub field: Option<String>,
    pub explain: bool,
    pub snippets: bool,
}

impl SearchRequest {
    pub fn new(q: impl Into<String>, model: ModelKind, k: usize) -> Self {
        SearchRequest {
            q: q.into(),
            k,
            offset: 0,
            model,
            field: None,
            explain: false,
            snippets: false,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub rank: usize,
    pub id: String,
    pub url: Option<String>,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    pub score: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<serde_json::Value>,
    #[serde(skip)]
    pub address: DocAddress,
}

#[derive(Debug, Clone, Serialize)]
pub struct SearchResults {
    pub query: String,
    pub model: String,
    /// The second-phase model that reranked the hits; `None` for first-phase results.
    pub reranker: Option<String>,
    pub total_hits: usize,
    pub took_ms: f64,
    pub hits: Vec<Hit>,
}

/// A model bound to one query on one searcher, ready to rank or to score candidates.
pub struct BoundModel {
    pub kind: ModelKind,
    pub query: ModelQuery,
    /// tantivy's own BM25 query when it computes exactly this model (block-max WAND).
    native: Option<Box<dyn Query>>,
}

impl TextIndex {
    /// The fields taking part in BM25F (SPEC §1.4), with their configured weight and b.
    pub fn bm25f_parts(&self) -> Vec<Bm25fField> {
        super::config::TEXT_FIELDS
            .iter()
            .filter_map(|name| {
                let p = self.config.field(name).bm25f?;
                Some(Bm25fField {
                    field: self.fields.text(name)?,
                    weight: p.weight,
                    b: p.b,
                })
            })
            .collect()
    }

    /// The field a single-field model ranks by.
    fn model_field(&self, name: Option<&str>) -> Result<(Field, String), SearchError> {
        let name = name.unwrap_or(&self.config.default_field).to_string();
        match self.fields.text(&name) {
            Some(f) => Ok((f, name)),
            None => Err(SearchError::Param {
                field: "field",
                message: format!(
                    "unknown field `{name}` (known: title, headings, body, anchor, url, all)"
                ),
            }),
        }
    }

    /// Analyses `q` for `kind` and binds the model to `searcher`'s statistics. `None` when
    /// the query has no searchable terms (only stop words).
    pub fn bind(
        &self,
        searcher: &Searcher,
        kind: ModelKind,
        field: Option<&str>,
        q: &str,
    ) -> Result<Option<BoundModel>, SearchError> {
        let stats = Stats::new(searcher);
        let (field, field_name) = self.model_field(field)?;
        let fc = self.config.field(if kind == ModelKind::Bm25F {
            "all"
        } else {
            &field_name
        });
        let terms = QueryTerms::analyze(q, fc.analyzer)?;
        if terms.is_empty() {
            return Ok(None);
        }
        let t = &terms.terms;
        let m = &self.config.models;
        let Bm25Params { k1, b } = fc.bm25;
        let mut native = None;
        let model: Arc<dyn TextModel> = match kind {
            ModelKind::TfIdf => Arc::new(TfIdf::new(&stats, field, t)?),
            ModelKind::Bm25 => {
                if fc.bm25 == Bm25Params::default() {
                    native = Some(native_bm25(field, t));
                }
                Arc::new(Bm25::new(&stats, field, t, k1, b)?)
            }
            ModelKind::Bm25F => {
                let parts = self.bm25f_parts();
                Arc::new(Bm25F::new(&stats, &parts, self.fields.all, t, m.bm25f.k1)?)
            }
            ModelKind::F2Exp => Arc::new(F2Exp::new(&stats, field, t, m.f2exp.k, m.f2exp.s)?),
            ModelKind::Lm => {
                let lm = LmDirichlet::new(&stats, field, t, m.lm.mu)?;
                if lm.terms().is_empty() {
                    return Ok(None);
                }
                Arc::new(lm)
            }
            ModelKind::Bm25Prox => Arc::new(Bm25Proximity::new(
                Bm25::new(&stats, field, t, k1, b)?,
                m.proximity.alpha,
            )),
        };
        Ok(Some(BoundModel {
            kind,
            query: ModelQuery::new(model),
            native,
        }))
    }

    /// Ranks the whole collection with the requested model.
    pub fn search(&self, req: &SearchRequest) -> Result<SearchResults, SearchError> {
        let start = Instant::now();
        validate_window(req.k, req.offset)?;
        let searcher = self.reader.searcher();
        let Some(bound) = self.bind(&searcher, req.model, req.field.as_deref(), &req.q)? else {
            return Ok(SearchResults {
                query: req.q.clone(),
                model: req.model.to_string(),
                reranker: None,
                total_hits: 0,
                took_ms: start.elapsed().as_secs_f64() * 1e3,
                hits: Vec::new(),
            });
        };
        let top = bound.top(&searcher, req.k, req.offset)?;
        let total_hits = bound.count(&searcher)?;
        let hits = self.hits(&searcher, &bound, req, &top, req.offset)?;
        Ok(SearchResults {
            query: req.q.clone(),
            model: req.model.to_string(),
            reranker: None,
            total_hits,
            took_ms: start.elapsed().as_secs_f64() * 1e3,
            hits,
        })
    }

    /// Turns ranked `(score, address)` pairs into hits ranked from `offset + 1`: id, title
    /// and URL from the fast-field columns, the snippet (when `req.snippets`) from the stored
    /// body, and `bound`'s explanation (when `req.explain`).
    pub fn hits(
        &self,
        searcher: &Searcher,
        bound: &BoundModel,
        req: &SearchRequest,
        ranked: &[(Score, DocAddress)],
        offset: usize,
    ) -> Result<Vec<Hit>, SearchError> {
        // One weight for every explained hit; explaining is opt-in and off the hot path.
        let explainer = if req.explain {
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
        let snippets = if req.snippets {
            Some(self.snippet_generator(searcher, &req.q)?)
        } else {
            None
        };
        let columns = DocColumns::new(searcher)?;
        let mut hits = Vec::with_capacity(ranked.len());
        for (i, &(score, address)) in ranked.iter().enumerate() {
            let head = columns.head(address)?;
            let snippet = match &snippets {
                Some(g) => {
                    let doc: TantivyDocument = searcher.doc(address)?;
                    let body = doc
                        .get_first(self.fields.body)
                        .and_then(|v| v.as_str())
                        .unwrap_or("");
                    let s = g.snippet(prefix(body, SNIPPET_SOURCE_BYTES));
                    Some(if s.fragment().is_empty() {
                        html_escape(&body.chars().take(SNIPPET_CHARS).collect::<String>())
                    } else {
                        s.to_html()
                    })
                }
                None => None,
            };
            let explain = match &explainer {
                Some(w) => {
                    let e =
                        w.explain(searcher.segment_reader(address.segment_ord), address.doc_id)?;
                    Some(serde_json::to_value(&e).map_err(anyhow::Error::from)?)
                }
                None => None,
            };
            hits.push(Hit {
                rank: offset + i + 1,
                id: head.id,
                url: head.url,
                title: head.title,
                snippet,
                score,
                explain,
                address,
            });
        }
        Ok(hits)
    }

    /// Highlights the query's terms in the body field.
    fn snippet_generator(
        &self,
        searcher: &Searcher,
        q: &str,
    ) -> Result<SnippetGenerator, SearchError> {
        let field = self.fields.body;
        let analyzer = self.config.field("body").analyzer;
        let mut weights = BTreeMap::new();
        for (term, _) in QueryTerms::analyze(q, analyzer)?.terms {
            let df = searcher.doc_freq(&Term::from_field_text(field, &term))?;
            weights.insert(term, 1.0 / (1.0 + df as Score));
        }
        Ok(SnippetGenerator::new(
            weights,
            super::schema::analyzer(analyzer),
            field,
            SNIPPET_CHARS,
        ))
    }
}

impl BoundModel {
    pub fn model(&self) -> &Arc<dyn TextModel> {
        self.query.model()
    }

    /// The top `k` after `offset`, ties broken by ascending document address.
    pub fn top(
        &self,
        searcher: &Searcher,
        k: usize,
        offset: usize,
    ) -> tantivy::Result<Vec<(Score, DocAddress)>> {
        let collector = TopDocs::with_limit(k).and_offset(offset).order_by_score();
        match &self.native {
            Some(q) => searcher.search(q.as_ref(), &collector),
            None => searcher.search(&self.query, &collector),
        }
    }

    /// Documents containing at least one query term in a model field (the model's match set),
    /// counted on tantivy's fast union without scoring.
    pub fn count(&self, searcher: &Searcher) -> tantivy::Result<usize> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        self.query.query_terms(&mut |term, _| {
            clauses.push((
                Occur::Should,
                Box::new(TermQuery::new(term.clone(), IndexRecordOption::Basic)),
            ));
        });
        BooleanQuery::new(clauses).count(searcher)
    }

    /// Scores the given documents (any order) with the model, matching or not: the model as a
    /// per-(query, doc) feature. Postings are opened once per segment and walked forward.
    pub fn score_docs(
        &self,
        searcher: &Searcher,
        docs: &[DocAddress],
    ) -> tantivy::Result<Vec<Score>> {
        self.query.score_docs(searcher, docs)
    }
}

/// tantivy's BM25 (k1 = 1.2, b = 0.75 hard-coded) over one field: a disjunction of term
/// queries, each boosted by its qtf, which tantivy evaluates with block-max WAND.
fn native_bm25(field: Field, terms: &[(String, u32)]) -> Box<dyn Query> {
    let clauses = terms
        .iter()
        .map(|(t, qtf)| {
            let tq: Box<dyn Query> = Box::new(TermQuery::new(
                Term::from_field_text(field, t),
                IndexRecordOption::WithFreqs,
            ));
            let q: Box<dyn Query> = if *qtf == 1 {
                tq
            } else {
                Box::new(BoostQuery::new(tq, *qtf as Score))
            };
            (Occur::Should, q)
        })
        .collect();
    Box::new(BooleanQuery::new(clauses))
}

/// Checks `k` and `offset` against the limits.
pub fn validate_window(k: usize, offset: usize) -> Result<(), SearchError> {
    if k == 0 || k > MAX_K {
        return Err(SearchError::Param {
            field: "k",
            message: format!("k must be between 1 and {MAX_K}, got {k}"),
        });
    }
    if offset.saturating_add(k) > MAX_DEPTH {
        return Err(SearchError::Param {
            field: "offset",
            message: format!(
                "offset + k must not exceed {MAX_DEPTH}, got {}",
                offset.saturating_add(k)
            ),
        });
    }
    Ok(())
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
