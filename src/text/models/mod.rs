//! The text scoring models of SPEC §1, one file each.
//!
//! A model is built once per query from collection statistics (`df`, `cf`, `avgdl`, gathered
//! by [`Stats`], `crate::text::stats`) and then scores one document at a time from a [`DocMatch`]: the frequency of
//! every query term in every field the model reads, and the document's field lengths.
//! [`super::scorer`] walks the postings and feeds the model, so every model ranks the whole
//! collection through the inverted index and also serves as a per-(query, doc) feature.
//!
//! Field lengths: tantivy stores them as one-byte `fieldnorm` codes (exact up to 40 tokens,
//! then coarser). Every model here uses those quantised lengths, as Lucene and tantivy do;
//! `avgdl` is exact (total tokens / documents). The brute-force oracle in the tests quantises
//! lengths the same way, through tantivy's own `fieldnorm_to_id`/`id_to_fieldnorm`.

mod bm25;
pub mod bm25f;
mod f2exp;
mod lm;
pub mod proximity;
mod tfidf;

use std::str::FromStr;

use tantivy::query::Explanation;
use tantivy::schema::{Field, IndexRecordOption};

pub use bm25::Bm25;
pub use bm25f::Bm25F;
pub use f2exp::F2Exp;
pub use lm::LmDirichlet;
pub use proximity::Bm25Proximity;
pub use tfidf::TfIdf;

pub use super::stats::Stats;

/// What the scorer saw of one document.
#[derive(Debug)]
pub struct DocMatch<'a> {
    /// `tf[t * n_fields + u]`: frequency of query term `t` in the model's field `u`.
    pub tf: &'a [u32],
    /// Quantised length of each of the model's fields.
    pub len: &'a [u32],
    /// tantivy's one-byte code of each of those lengths (`len[u]` is its decoded value), for
    /// models that tabulate their length normalisation per code.
    pub norm_ids: &'a [u8],
    /// Positions of each query term in the model's first field (only for models that ask).
    pub positions: &'a [Vec<u32>],
}

impl DocMatch<'_> {
    pub fn n_fields(&self) -> usize {
        self.len.len()
    }

    pub fn tf(&self, term: usize, field: usize) -> u32 {
        self.tf[term * self.n_fields() + field]
    }
}

/// A scoring model bound to one query's statistics.
pub trait TextModel: Send + Sync + std::fmt::Debug + 'static {
    fn name(&self) -> &'static str;
    /// The fields the model reads, in the order of [`DocMatch::len`].
    fn fields(&self) -> &[Field];
    /// The query terms, in the order of [`DocMatch::tf`].
    fn terms(&self) -> &[String];
    fn needs_positions(&self) -> bool {
        false
    }
    fn score(&self, m: &DocMatch) -> f32;
    fn explain(&self, m: &DocMatch) -> Explanation;

    /// For a model whose score is a sum of one non-negative contribution per query term: an
    /// upper bound of each term's contribution, in [`TextModel::terms`] order. The first phase
    /// then skips documents that cannot enter the top k (MaxScore, `crate::text::scorer`).
    /// `None` (the default) ranks every matching document.
    fn term_upper_bounds(&self) -> Option<Vec<f32>> {
        None
    }

    /// The record option the postings must be opened with.
    fn record_option(&self) -> IndexRecordOption {
        if self.needs_positions() {
            IndexRecordOption::WithFreqsAndPositions
        } else {
            IndexRecordOption::WithFreqs
        }
    }
}

/// Every first-phase model, by the name `/search?model=`, `rankd eval --model` and the index
/// configuration's `default_model` use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    TfIdf,
    Bm25,
    Bm25F,
    F2Exp,
    Lm,
    Bm25Prox,
}

impl ModelKind {
    pub const ALL: [ModelKind; 6] = [
        ModelKind::TfIdf,
        ModelKind::Bm25,
        ModelKind::Bm25F,
        ModelKind::F2Exp,
        ModelKind::Lm,
        ModelKind::Bm25Prox,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ModelKind::TfIdf => "tfidf",
            ModelKind::Bm25 => "bm25",
            ModelKind::Bm25F => "bm25f",
            ModelKind::F2Exp => "f2exp",
            ModelKind::Lm => "lm",
            ModelKind::Bm25Prox => "bm25prox",
        }
    }
}

impl FromStr for ModelKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ModelKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = ModelKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown model `{s}` (known: {})", names.join(", "))
            })
    }
}

impl std::fmt::Display for ModelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// SPEC §1.3 idf, the Lucene/tantivy form `ln(1 + (N − df + 0.5)/(df + 0.5))`: never negative.
pub fn bm25_idf(df: u64, n: u64) -> f32 {
    let x = (n.saturating_sub(df) as f32 + 0.5) / (df as f32 + 0.5);
    (1.0 + x).ln()
}

/// The query's terms split into parallel vectors (text, qtf).
pub(crate) fn split_terms(terms: &[(String, u32)]) -> (Vec<String>, Vec<f32>) {
    terms.iter().map(|(t, q)| (t.clone(), *q as f32)).unzip()
}

/// The per-term bounds `w·(k1+1)` of a BM25-style saturation, raised by 1e-5 relative so
/// that f32 rounding in the score can never exceed them; `None` unless every weight is a
/// non-negative finite number (a negative idf would make the sum no longer monotone).
fn saturating_bounds(weights: &[f32], k1: f32) -> Option<Vec<f32>> {
    weights
        .iter()
        .map(|&w| {
            let b = w * (k1 + 1.0) * (1.0 + 1e-5);
            (w >= 0.0 && b.is_finite()).then_some(b)
        })
        .collect()
}
