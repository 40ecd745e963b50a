//! Reranker features (SPEC §3.1): the named, versioned feature set and its batched extraction
//! for a whole first-phase candidate window.
//!
//! Every feature has a name and a declared default for a missing value (a document outside the
//! link graph, a field the query has no terms for). Models store the names they were trained
//! on, so a model trained on this set keeps working when a later version adds features.

mod link;
pub mod prf;
mod set;
mod text;

use std::time::{SystemTime, UNIX_EPOCH};

use tantivy::{DocAddress, Searcher};

use crate::links::LinkData;
use crate::text::columns::DocColumns;
use crate::text::search::SearchError;
use crate::text::TextIndex;

pub use set::{FeatureSet, FEATURE_SET_VERSION};

/// One first-phase candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub address: DocAddress,
    /// Its first-phase score.
    pub score: f32,
}

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

pub fn extract(
    index: &TextIndex,
    searcher: &Searcher,
    links: Option<&LinkData>,
    set: &FeatureSet,
    q: &str,
    candidates: &[Candidate],
    prf: Prf,
) -> Result<FeatureMatrix, SearchError> {
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
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (score_col, rank_col) = (set.col("first_phase.score"), set.col("first_phase.rank"));
    for (row, c) in candidates.iter().enumerate() {
        m.set(row, score_col, c.score);
        m.set(row, rank_col, (row + 1) as f32);
    }
    text::extract(index, searcher, set, q, candidates, &mut m)?;
    if prf == Prf::Compute {
        prf::extract(index, searcher, set, q, candidates, &mut m)?;
    }
    columns(searcher, set, candidates, now, &mut m)?;
    if let Some(links) = links {
        let docs: Vec<DocAddress> = candidates.iter().map(|c| c.address).collect();
        let nodes = links.nodes_of(searcher, &docs)?;
        link::extract(links, set, &nodes, &mut m);
    }
    Ok(m)
}

/// The candidates' document ids (for judgments and logs; serving never needs them).
pub fn candidate_ids(
    searcher: &Searcher,
    candidates: &[Candidate],
) -> tantivy::Result<Vec<String>> {
    let columns = DocColumns::new(searcher)?;
    candidates
        .iter()
        .map(|c| Ok(columns.head(c.address)?.id))
        .collect()
}

/// Features read from fast-field columns: URL shape (computed at indexing) and SPEC §1.8
/// freshness, `exp(−ln 2 · age / half-life)` from `published_at` where it exists.
fn columns(
    searcher: &Searcher,
    set: &FeatureSet,
    candidates: &[Candidate],
    now: i64,
    m: &mut FeatureMatrix,
) -> Result<(), SearchError> {
    const HALF_LIFE_DAYS: f64 = 365.0;
    let (depth_col, length_col) = (set.col("url.depth"), set.col("url.length"));
    let (dated_col, age_col, decay_col) = (
        set.col("fresh.has_date"),
        set.col("fresh.age_days"),
        set.col("fresh.decay"),
    );
    let mut per_segment = Vec::new();
    for r in searcher.segment_readers() {
        let ff = r.fast_fields();
        per_segment.push((
            ff.u64("url_depth")?,
            ff.u64("url_length")?,
            ff.i64("published_at").ok(),
        ));
    }
    for (row, c) in candidates.iter().enumerate() {
        let (depth, length, published) = &per_segment[c.address.segment_ord as usize];
        let doc = c.address.doc_id;
        m.set(row, depth_col, depth.first(doc).unwrap_or(0) as f32);
        m.set(row, length_col, length.first(doc).unwrap_or(0) as f32);
        if let Some(published) = published.as_ref().and_then(|p| p.first(doc)) {
            let age_days = ((now - published).max(0) as f64) / 86_400.0;
            m.set(row, dated_col, 1.0);
            m.set(row, age_col, age_days as f32);
            m.set(
                row,
                decay_col,
                (-(std::f64::consts::LN_2) * age_days / HALF_LIFE_DAYS).exp() as f32,
            );
        }
    }
    Ok(())
}
