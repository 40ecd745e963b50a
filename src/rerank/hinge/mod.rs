//! Structured hinge losses for AP and NDCG with the quicksort loss-augmented inference of
//! seed 001 (Mohapatra et al. 2018; SPEC §3.4; seed notes §A.1–§A.10).
//!
//! For one query with P relevant and N non-relevant documents, the loss is
//! `J = max_y [Δ(y*, y) + F(y) − F(y*)]`, an upper bound on the rank loss Δ of the ranking
//! the scores produce, and its gradient w.r.t. the scores is `∇(F(ŷ) − F(y*))` at the most
//! violating ranking ŷ. Finding ŷ ("loss-augmented inference") is the costly step:
//!
//! - `quicksort.rs`: seed 001 Algorithm 1, O(N log P + P log P) — what [`ap_hinge`] and
//!   [`ndcg_hinge`] use;
//! - `greedy.rs`: the O(N log N + N·P) baseline the seed compares against (Yue et al. 2007
//!   for AP; the same greedy for NDCG), kept for the tests and `benches/hinge.rs`;
//! - `loss.rs`: Δ_AP and Δ_NDCG and the discrete derivative both algorithms maximise;
//! - `objective.rs`: the hinge value and gradient around either algorithm;
//! - `key.rs`: a score and its index packed into one integer that sorts in ranking order.
//!
//! Conventions: scores are f32 (as models produce them), arithmetic is f64. Ties in score
//! are broken by index, so results are deterministic. Relevance is binary: for NDCG, labels
//! `≥ 1` are relevant (SPEC §3.3's default threshold). A query without both a relevant and a
//! non-relevant document returns J = 0 and a zero gradient. Non-finite scores and
//! inconsistent lengths are errors.

mod greedy;
mod key;
mod loss;
mod objective;
mod quicksort;

#[cfg(test)]
mod exhaustive;
#[cfg(test)]
mod tests;

pub use loss::RankLoss;
pub use objective::HingeScratch;

/// Labels at or above this grade count as relevant in [`ndcg_hinge`] (SPEC §3.3).
pub(crate) const RELEVANT_GRADE: i32 = 1;

/// Which loss-augmented inference algorithm finds the most violating ranking. Both return
/// the same ranking (up to ties in the objective); they differ only in cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Inference {
    /// Seed 001 Algorithm 1: O(N log P + P log P).
    Quicksort,
    /// The seed's baseline (Yue et al. 2007 for AP): O(N log N + N·P).
    Greedy,
}

/// What was wrong with a query given to a hinge loss.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HingeError {
    #[error("{what} has length {got}, expected {expected} (one per score)")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("score[{index}] is {value}, expected a finite number")]
    NonFiniteScore { index: usize, value: f32 },
    #[error("a query of {0} documents is too long: documents are indexed by u32")]
    TooManyDocuments(usize),
}

/// AP structured hinge loss of one query (SPEC §3.4): returns
/// `J = max_y [Δ_AP(y*, y) + F(y) − F(y*)]` and writes `∂J/∂scores[i]` to `grad[i]`.
/// `relevant[i]` says whether document `i` is relevant. Allocates its buffers; a training
/// loop should keep a [`HingeScratch`] and call [`HingeScratch::ap_hinge`].
pub fn ap_hinge(scores: &[f32], relevant: &[bool], grad: &mut [f64]) -> Result<f64, HingeError> {
    HingeScratch::new().ap_hinge(scores, relevant, grad)
}

/// NDCG structured hinge loss of one query (SPEC §3.4), full untruncated binary NDCG with
/// `D(i) = 1/log2(1 + i)`: documents with `labels[i] ≥ 1` are relevant. Returns J and writes
/// `∂J/∂scores[i]` to `grad[i]`, as [`ap_hinge`].
pub fn ndcg_hinge(scores: &[f32], labels: &[i32], grad: &mut [f64]) -> Result<f64, HingeError> {
    HingeScratch::new().ndcg_hinge(scores, labels, grad)
}

fn check_len(what: &'static str, got: usize, expected: usize) -> Result<(), HingeError> {
    if got == expected {
        Ok(())
    } else {
        Err(HingeError::LengthMismatch {
            what,
            expected,
            got,
        })
    }
}

fn check_scores(scores: &[f32]) -> Result<(), HingeError> {
    if let Some(index) = scores.iter().position(|s| !s.is_finite()) {
        return Err(HingeError::NonFiniteScore {
            index,
            value: scores[index],
        });
    }
    if u32::try_from(scores.len()).is_err() {
        return Err(HingeError::TooManyDocuments(scores.len()));
    }
    Ok(())
}
