//! The first phase: any model of SPEC §1 bound to a query ranks the whole collection (the
//! pipeline around it is `crate::search`), and scores given candidates (the feature-function
//! view of each model).

use std::sync::Arc;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, Score, Searcher, Term};

use super::columns::DocColumns;
use super::config::{Bm25Params, TextField};
use super::index::TextIndex;
use super::models::bm25f::Bm25fField;
use super::models::{
    Bm25, Bm25F, Bm25Proximity, F2Exp, LmDirichlet, ModelKind, Stats, TextModel, TfIdf,
};
use super::query::{AnalyzedQuery, QueryError};
use super::scorer::ModelQuery;

/// Why a model cannot rank a query: the query's text or the field named is the caller's
/// fault, the index is not. The search pipeline turns it into its own error, which names the
/// parameter (`crate::search::SearchError`).
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    #[error(transparent)]
    Query(#[from] QueryError),
    /// An unknown field name; the message lists the known ones.
    #[error("{0}")]
    Field(String),
    #[error(transparent)]
    Index(#[from] tantivy::TantivyError),
}

/// A document the first phase found, as every later step carries it (Quickwit's
/// `PartialHit`): the features read it, the second phase reorders it, a shard sends it with
/// its id.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Its address in the searcher that found it.
    pub address: DocAddress,
    /// Its first-phase score (a fusion's fused score).
    pub score: Score,
    /// With `sort=`: its sort key, `None` when it lacks the fields the sort needs.
    pub sort_key: Option<Option<f64>>,
}

impl Candidate {
    /// A candidate ranked by relevance.
    pub fn new(address: DocAddress, score: Score) -> Self {
        Candidate {
            address,
            score,
            sort_key: None,
        }
    }
}

/// A model bound to one query on one searcher, ready to rank or to score candidates.
pub struct BoundModel {
    pub kind: ModelKind,
    pub query: ModelQuery,
    /// tantivy's own BM25 query when it computes exactly this model (block-max WAND).
    native: Option<Box<dyn Query>>,
    /// A single field whose postings hold the model's match set (see [`TextIndex::bind`]),
    /// counted instead of every (term, field) pair.
    count_field: Option<Field>,
    /// Only documents holding this term are ranked and counted (`lang=`; [`BoundModel::only`]).
    filter: Option<Term>,
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

    /// Whether the BM25F `parts` are exactly the fields `all` concatenates, each analysed as
    /// `all` is: then a document holds a query term in some part if and only if it holds
    /// it in `all` (each part's text is indexed into `all` as a separate value, so its
    /// tokens are the same), and BM25F's match set can be counted on `all` alone — one
    /// postings list per term instead of one per (term, part).
    fn parts_make_all(&self, parts: &[Bm25fField]) -> bool {
        let all = self.config.field("all").analyzer;
        super::config::TEXT_FIELDS
            .iter()
            .filter(|&&name| name != "all")
            .all(|&name| {
                self.config.field(name).analyzer == all
                    && parts
                        .iter()
                        .any(|p| Some(p.field) == self.fields.text(name))
            })
            && parts.len() == super::config::TEXT_FIELDS.len() - 1
    }

    /// The field a single-field model ranks by.
    fn model_field(&self, name: Option<&str>) -> Result<(Field, TextField), TextError> {
        let field = match name {
            Some(name) => name.parse::<TextField>().map_err(TextError::Field)?,
            None => self.config.default_field,
        };
        let schema_field = self
            .fields
            .text(field.name())
            .expect("every text field is in the schema");
        Ok((schema_field, field))
    }

    /// Binds `kind` over `q`'s terms (analysed as its field is) to the collection statistics
    /// `stats` (the searcher's own, or the whole collection's when this index is one shard of
    /// it). `None` when the query has no searchable terms (only stop words).
    pub fn bind(
        &self,
        stats: &Stats,
        kind: ModelKind,
        field: Option<&str>,
        q: &AnalyzedQuery,
    ) -> Result<Option<BoundModel>, TextError> {
        let (field, field_name) = self.model_field(field)?;
        let fc = self.config.field(if kind == ModelKind::Bm25F {
            TextField::All.name()
        } else {
            field_name.name()
        });
        let terms = q.terms(fc.analyzer)?;
        if terms.is_empty() {
            return Ok(None);
        }
        let t = &terms.terms;
        let mut native = None;
        let mut count_field = None;
        let model: Arc<dyn TextModel> = match kind {
            ModelKind::Bm25F => {
                let parts = self.bm25f_parts();
                if self.parts_make_all(&parts) {
                    count_field = Some(self.fields.all);
                }
                let k1 = self.config.models.bm25f.k1;
                Arc::new(Bm25F::new(stats, &parts, self.fields.all, t, k1)?)
            }
            _ => {
                if kind == ModelKind::Bm25 && fc.bm25 == Bm25Params::default() {
                    native = Some(native_bm25(field, t));
                }
                self.field_model(stats, kind, field_name, t)?
            }
        };
        if kind == ModelKind::Lm && model.terms().is_empty() {
            // The language model keeps only terms the collection has.
            return Ok(None);
        }
        Ok(Some(BoundModel {
            kind,
            query: ModelQuery::new(model),
            native,
            count_field,
            filter: None,
        }))
    }

    /// The single-field model `kind` of text field `field` over `terms`, with the field's
    /// and the models' configured parameters: the one place a model is built, for the first
    /// phase ([`TextIndex::bind`]) and for the text features alike. BM25F, which reads
    /// several fields, is bound by [`TextIndex::bind`] alone: asking for it here panics.
    pub fn field_model(
        &self,
        stats: &Stats,
        kind: ModelKind,
        field: TextField,
        terms: &[(String, u32)],
    ) -> Result<Arc<dyn TextModel>, TextError> {
        let fc = self.config.field(field.name());
        let field = self
            .fields
            .text(field.name())
            .expect("every text field is in the schema");
        let m = &self.config.models;
        let Bm25Params { k1, b } = fc.bm25;
        Ok(match kind {
            ModelKind::TfIdf => Arc::new(TfIdf::new(stats, field, terms)?),
            ModelKind::Bm25 => Arc::new(Bm25::new(stats, field, terms, k1, b)?),
            ModelKind::F2Exp => Arc::new(F2Exp::new(stats, field, terms, m.f2exp.k, m.f2exp.s)?),
            ModelKind::Lm => Arc::new(LmDirichlet::new(stats, field, terms, m.lm.mu)?),
            ModelKind::Bm25Prox => Arc::new(Bm25Proximity::new(
                Bm25::new(stats, field, terms, k1, b)?,
                m.proximity.alpha,
            )),
            ModelKind::Bm25F => unreachable!("BM25F is bound over its parts by bind"),
        })
    }
}

impl BoundModel {
    pub fn model(&self) -> &Arc<dyn TextModel> {
        self.query.model()
    }

    /// The model restricted to documents holding `term` (none: all documents): a filter, not
    /// a scoring clause — every document keeps the model's score exactly (`+ 0.0`).
    pub fn only(mut self, term: Option<Term>) -> Self {
        self.filter = term;
        self
    }

    /// `query` restricted by the filter, if any.
    fn filtered(&self, query: Box<dyn Query>) -> Box<dyn Query> {
        match &self.filter {
            None => query,
            Some(term) => {
                let filter = TermQuery::new(term.clone(), IndexRecordOption::Basic);
                Box::new(BooleanQuery::new(vec![
                    (Occur::Must, query),
                    (
                        Occur::Must,
                        Box::new(ConstScoreQuery::new(Box::new(filter), 0.0)),
                    ),
                ]))
            }
        }
    }

    /// The query that ranks: the model's, restricted by the filter.
    pub(crate) fn ranking_query(&self) -> Box<dyn Query> {
        self.filtered(Box::new(self.query.clone()))
    }

    /// The top `k` after `offset` in the canonical order: score descending, then document
    /// id ascending. Every shard of a cluster and the root's merge order by the same key, so
    /// a sharded collection cuts its windows and ranks its ties exactly as the single index
    /// does (tantivy alone breaks ties by document address, which differs between the two).
    ///
    /// A tie group crossing the cut is fetched whole: the list is fetched one longer, then
    /// twice as long, until its last score differs from the score at the cut. Ids are read
    /// for tied documents only.
    ///
    /// With tantivy's own BM25 (block-max WAND) the scores returned are the model's own
    /// ([`ModelQuery::score_docs`]): tantivy's union adds the terms' scores in the order its
    /// cursors happen to be in, which depends on the other documents of the segment, so the
    /// same document could score a few ulps apart in a shard and in the single index. Its
    /// list only selects: it is fetched until the last native score, raised by the largest
    /// difference two summation orders can make, lies below the exact score at the cut, so
    /// no unfetched document can belong above the cut.
    pub fn top(
        &self,
        searcher: &Searcher,
        columns: &DocColumns,
        stats: &Stats,
        k: usize,
        offset: usize,
    ) -> tantivy::Result<Vec<Candidate>> {
        let want = offset + k;
        let mut fetch = want + 1;
        let ranking = self.ranking_query();
        let native = self.native.as_ref().map(|n| self.filtered(n.box_clone()));
        let top = loop {
            let collector = TopDocs::with_limit(fetch).order_by_score();
            let Some(native) = &native else {
                let top = searcher.search(ranking.as_ref(), &collector)?;
                if top.len() < fetch || top[fetch - 1].0 != top[want - 1].0 {
                    break top;
                }
                fetch = fetch.saturating_mul(2);
                continue;
            };
            let mut top =
                searcher.search_with_statistics_provider(native.as_ref(), &collector, stats)?;
            let native_last = top.last().map_or(0.0, |t| t.0);
            let addresses: Vec<DocAddress> = top.iter().map(|t| t.1).collect();
            for (t, exact) in top
                .iter_mut()
                .zip(self.query.score_docs(searcher, &addresses)?)
            {
                t.0 = exact;
            }
            top.sort_by(|a, b| b.0.total_cmp(&a.0));
            let slack = 4.0 * (self.model().terms().len() + 1) as f32 * f32::EPSILON;
            if top.len() < fetch || native_last * (1.0 + slack) < top[want - 1].0 {
                break top;
            }
            fetch = fetch.saturating_mul(2);
        };
        let mut top: Vec<Candidate> = top.into_iter().map(|(s, a)| Candidate::new(a, s)).collect();
        canonical_order(columns, &mut top)?;
        top.truncate(want);
        top.drain(..offset.min(top.len()));
        Ok(top)
    }

    /// Documents containing at least one query term in a model field (the model's match set),
    /// counted on tantivy's fast union without scoring.
    pub fn count(&self, searcher: &Searcher) -> tantivy::Result<usize> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut add = |term: Term| {
            clauses.push((
                Occur::Should,
                Box::new(TermQuery::new(term, IndexRecordOption::Basic)),
            ))
        };
        match self.count_field {
            Some(field) => {
                for t in self.model().terms() {
                    add(Term::from_field_text(field, t));
                }
            }
            None => self.query.query_terms(&mut |term, _| add(term.clone())),
        }
        self.filtered(Box::new(BooleanQuery::new(clauses)))
            .count(searcher)
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

/// Orders `top` (best first by score) canonically: score descending by `total_cmp`, equal
/// scores by ascending document id.
pub(crate) fn canonical_order(columns: &DocColumns, top: &mut [Candidate]) -> tantivy::Result<()> {
    top.sort_by(|a, b| b.score.total_cmp(&a.score));
    canonical_order_by(columns, top, |c| c.score.to_bits(), |c| c.address)
}

/// Orders the runs of equal `key` in `top` (already in its final order otherwise) by
/// ascending document id.
///
/// Ids are compared through the `id` fast field: within one segment its dictionary ordinals
/// follow the ids' byte order, so a tie group inside one segment sorts by ordinal without
/// decoding a string (ties are common: the Rust docs hold many identical pages, and decoding
/// their ids doubled the cost of a top 100); a group spanning segments sorts by the ids'
/// ranks over all segments ([`DocColumns::id_rank`]).
pub(crate) fn canonical_order_by<T: Copy, K: PartialEq>(
    columns: &DocColumns,
    top: &mut [T],
    key: impl Fn(&T) -> K,
    address: impl Fn(&T) -> DocAddress,
) -> tantivy::Result<()> {
    let mut start = 0;
    while start < top.len() {
        let first = key(&top[start]);
        let end = start + top[start..].iter().take_while(|t| key(t) == first).count();
        if end - start > 1 {
            let group = &mut top[start..end];
            let segment = address(&group[0]).segment_ord;
            let id_key = if group.iter().all(|t| address(t).segment_ord == segment) {
                |c: &DocColumns, a| c.id_ord(a)
            } else {
                |c: &DocColumns, a| c.id_rank(a).map(u64::from)
            };
            let mut keyed = group
                .iter()
                .map(|&t| Ok((id_key(columns, address(&t))?, t)))
                .collect::<tantivy::Result<Vec<_>>>()?;
            keyed.sort_by_key(|k| k.0);
            for (slot, (_, t)) in group.iter_mut().zip(keyed) {
                *slot = t;
            }
        }
        start = end;
    }
    Ok(())
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
