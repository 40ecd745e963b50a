//! The first phase: any model of SPEC §1 bound to a query ranks the whole collection (the
//! pipeline around it is `crate::search`), and scores given candidates (the feature-function
//! view of each model).

use std::sync::Arc;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, Score, Searcher, Term};

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
