//! Reranker features (SPEC §3.1): the named, versioned feature set and its batched extraction
//! for a whole first-phase candidate window.
//!
//! Every feature has a name and a declared default for a missing value (a document outside the
//! link graph, a field the query has no terms for). Models store the names they were trained
//! on, so a model trained on this set keeps working when a later version adds features.

pub mod link;
pub mod name;
pub mod prf;
mod set;
pub mod social;
mod text;

use tantivy::{DocAddress, Searcher};

use crate::links::LinkData;
use crate::text::columns::{DocColumns, MeanRating};
use crate::text::query::AnalyzedQuery;
use crate::text::search::TextError;
use crate::text::stats::Stats;
use crate::text::TextIndex;

pub use set::{FeatureSet, DENSE_SIMILARITY, FEATURE_SET_VERSION};

pub use crate::text::search::Candidate;

/// Feature vectors of a candidate window: row `i` belongs to candidate `i`, columns follow
/// [`FeatureSet::names`].
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureMatrix {
    pub rows: usize,
    pub cols: usize,
    pub values: Vec<f32>,
}

impl FeatureMatrix {
    /// No rows of `cols` features.
    pub fn empty(cols: usize) -> Self {
        FeatureMatrix {
            rows: 0,
            cols,
            values: Vec::new(),
        }
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.values[i * self.cols..(i + 1) * self.cols]
    }

    /// Overwrites the `first_phase.rank` column: row `i` gets `ranks[i]` (a shard's rows of a
    /// window spread over several shards).
    pub fn set_ranks(&mut self, set: &FeatureSet, ranks: &[usize]) {
        let col = set.col("first_phase.rank");
        for (row, &rank) in ranks.iter().enumerate() {
            self.set(row, col, rank as f32);
        }
    }

    fn set(&mut self, row: usize, col: usize, value: f32) {
        self.values[row * self.cols + col] = value;
    }
}

/// Computes every feature of `set` for `candidates` (given in first-phase rank order: their
/// position is the rank feature) of query `q`.
///
/// Batched as SPEC §3.1 requires: per field, each query term's postings are opened once per
/// segment and the candidates are visited in doc-id order; link features are array lookups.
/// The RM3 features also read the stored text of the first-phase top `fb_docs` candidates.
/// Whether [`extract`] computes the RM3 features (`prf.rs`). They re-read and re-analyse the
/// stored text of the feedback documents, which costs milliseconds per query on long web
/// pages, so serving computes them only for a model that uses them; skipped, they keep their
/// declared defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prf {
    Compute,
    Skip,
}

/// What [`extract`] computes and what it may take from the candidates instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extraction {
    pub prf: Prf,
    /// The candidates' scores are the `bm25f` feature itself (the first phase was BM25F,
    /// which always reads its configured fields): the feature is copied from them instead of
    /// walking every field's postings again, bit for bit the same value.
    pub scores_are_bm25f: bool,
    /// The time the freshness features measure ages at (Unix seconds): the search's start,
    /// one instant for every candidate and every shard of a cluster.
    pub now: i64,
    /// Where the Bayesian average's C comes from (the collection's, on a shard).
    pub rating: MeanRating,
}

impl Extraction {
    /// Computes everything but what `prf` skips, ages measured from now.
    pub fn full(prf: Prf) -> Self {
        Extraction {
            prf,
            scores_are_bm25f: false,
            now: social::unix_now(),
            rating: MeanRating::OfIndex,
        }
    }
}

/// One search's query and what it reads of the collection, passed whole to its steps: the
/// query analysed once, the index, the searcher it pinned, the collection statistics its
/// models score with (the searcher's own, or the whole collection's when the index is one
/// shard of it), the link scores of the searcher's generation, and the query's vector
/// against the documents' when the search embedded it (else `dense.similarity` keeps its
/// default).
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub query: &'a AnalyzedQuery,
    pub index: &'a TextIndex,
    pub searcher: &'a Searcher,
    pub stats: &'a Stats<'a>,
    pub links: Option<&'a LinkData>,
    pub dense: Option<crate::dense::Similarity<'a>>,
}

/// The feature rows of `candidates` (the whole window) for the view's query.
pub fn extract(
    view: View,
    set: &FeatureSet,
    candidates: &[Candidate],
    how: Extraction,
) -> Result<FeatureMatrix, TextError> {
    extract_part(view, set, candidates, false, Rm3Source::Candidates, how)
}

/// Where [`extract_part`] takes the RM3 relevance model from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Rm3Source<'a> {
    /// Estimated from the candidates' top `fb_docs` (the candidates are the whole window).
    Candidates,
    /// Estimated from the whole window's feedback documents elsewhere (a cluster root);
    /// `None`: there is no model (no feedback text), the features keep their defaults.
    Given(Option<&'a prf::Rm3Query>),
}

/// [`extract`], or with `part_of_window` for some candidates of a larger window (one shard's
/// rows of a window spread over shards): then the window features (HITS, SALSA and in-links
/// on the window's link subgraph) keep their defaults, to be filled where the window is whole
/// ([`link::window_columns`], from the out-links [`crate::links::LinkData::window_links`]
/// gives on each shard).
pub(crate) fn extract_part(
    view: View,
    set: &FeatureSet,
    candidates: &[Candidate],
    part_of_window: bool,
    rm3: Rm3Source,
    how: Extraction,
) -> Result<FeatureMatrix, TextError> {
    let View {
        query: q,
        index,
        searcher,
        stats,
        links,
        dense,
    } = view;
    let mut m = FeatureMatrix {
        rows: candidates.len(),
        cols: set.len(),
        values: Vec::with_capacity(candidates.len() * set.len()),
    };
    for _ in candidates {
        m.values.extend_from_slice(set.defaults());
    }
    if candidates.is_empty() {
        return Ok(m);
    }
    let (score_col, rank_col) = (set.col("first_phase.score"), set.col("first_phase.rank"));
    for (row, c) in candidates.iter().enumerate() {
        m.set(row, score_col, c.score);
        m.set(row, rank_col, (row + 1) as f32);
    }
    text::extract(index, searcher, stats, set, q, candidates, &mut m)?;
    name::extract(searcher, set, q.text(), candidates, &mut m)?;
    let bm25f_col = set.col("bm25f");
    if how.scores_are_bm25f {
        for (row, c) in candidates.iter().enumerate() {
            m.set(row, bm25f_col, c.score);
        }
    } else {
        text::bm25f(index, searcher, stats, bm25f_col, q, candidates, &mut m)?;
    }
    if let Some(dense) = dense {
        let col = set.col(DENSE_SIMILARITY);
        for (row, c) in candidates.iter().enumerate() {
            if let Some(similarity) = dense.of(c.address) {
                m.set(row, col, similarity);
            }
        }
    }
    if how.prf == Prf::Compute {
        match rm3 {
            Rm3Source::Candidates => {
                prf::extract(index, searcher, stats, set, q, candidates, &mut m)?
            }
            Rm3Source::Given(Some(rm)) => {
                prf::score(index, searcher, stats, set, rm, candidates, &mut m)?
            }
            Rm3Source::Given(None) => {}
        }
    }
    columns(index, searcher, set, candidates, how, &mut m)?;
    if let Some(links) = links {
        let docs: Vec<DocAddress> = candidates.iter().map(|c| c.address).collect();
        let nodes = links.nodes_of(searcher, &docs)?;
        link::extract(links, set, &nodes, !part_of_window, &mut m);
    }
    name::exact_links(set, &mut m);
    Ok(m)
}

/// The candidates' document ids (for judgments and logs; serving never needs them).
pub fn candidate_ids(
    searcher: &Searcher,
    candidates: &[Candidate],
) -> tantivy::Result<Vec<String>> {
    let addresses: Vec<tantivy::DocAddress> = candidates.iter().map(|c| c.address).collect();
    DocColumns::new(searcher)?.ids(&addresses)
}

/// Features read from fast-field columns: URL shape (computed at indexing) and SPEC §1.8's
/// freshness and social scores (`social.rs`) where documents carry the fields.
fn columns(
    index: &TextIndex,
    searcher: &Searcher,
    set: &FeatureSet,
    candidates: &[Candidate],
    how: Extraction,
    m: &mut FeatureMatrix,
) -> Result<(), TextError> {
    let columns = index.doc_columns(searcher)?;
    let params = index.config.social;
    let (now, global_rating) = (how.now, how.rating.resolve(&columns, searcher));
    let (depth_col, length_col) = (set.col("url.depth"), set.col("url.length"));
    let (dated_col, age_col, decay_col) = (
        set.col("fresh.has_date"),
        set.col("fresh.age_days"),
        set.col("fresh.decay"),
    );
    let social_cols = set::SOCIAL_FEATURES.map(|f| set.col(f));
    for (row, c) in candidates.iter().enumerate() {
        let shape = columns.shape(c.address);
        m.set(row, depth_col, shape.url_depth as f32);
        m.set(row, length_col, shape.url_length as f32);
        let signals = columns.social(c.address);
        let s = social::SocialScores::of(&signals, &params, now, global_rating);
        if let (Some(age), Some(decay)) = (s.age_days, s.decay) {
            m.set(row, dated_col, 1.0);
            m.set(row, age_col, age as f32);
            m.set(row, decay_col, decay as f32);
        }
        let values = [
            s.net_votes.map(|_| 1.0),
            s.net_votes,
            s.hot,
            s.gravity,
            s.wilson,
            s.bayes.map(|_| 1.0),
            s.bayes,
        ];
        for (&col, v) in social_cols.iter().zip(values) {
            if let Some(v) = v {
                m.set(row, col, v as f32);
            }
        }
    }
    Ok(())
}
