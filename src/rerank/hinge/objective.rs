//! One query's structured hinge loss and its gradient w.r.t. every score (SPEC §3.4; seed 001
//! Eqs. 4–6, Lemma 8; seed notes §A.5 POST).
//!
//! `J = max_y [Δ(y*, y) + F(y) − F(y*)]` with the joint feature map of Yue et al. 2007,
//! `F(y) = 1/(P·N) Σ_{x∈𝒫} Σ_{z∈𝒩} y_{xz} (s_x − s_z)`. At the most violating ranking ŷ,
//! `F(ŷ) − F(y*)` is linear in the scores (Lemma 8), with coefficients
//! `∂J/∂s⁺_k = −2·n_k/(P·N)` (n_k negatives above the k-th positive) and
//! `∂J/∂s⁻_j = 2·(P + 1 − opt_j)/(P·N)` (P + 1 − opt_j positives below the negative), so
//! `J = Δ(y*, ŷ) + Σ_i grad_i · s_i`.

use super::key::{self, key};
use super::loss::{rank_loss, Discounts, RankLoss, Violation};
use super::quicksort::Block;
use super::{greedy, quicksort, HingeError, Inference};

/// Buffers reused across queries, so a training loop allocates only while its queries grow.
/// Results do not depend on what the scratch held before.
#[derive(Clone, Debug, Default)]
pub struct HingeScratch {
    /// Positives as keys (`key.rs`), sorted: descending score, ties by index.
    pub(super) pos: Vec<u64>,
    /// Their scores, in the same order.
    pos_scores: Vec<f64>,
    /// Negatives as keys; after inference, `opt[m]` is the rank of `neg[m]`.
    pub(super) neg: Vec<u64>,
    pub(super) opt: Vec<u32>,
    /// `negatives_above[k − 1] = n_k`.
    pub(super) negatives_above: Vec<usize>,
    stack: Vec<Block>,
    discounts: Discounts,
}

impl HingeScratch {
    pub fn new() -> Self {
        Self::default()
    }

    /// AP structured hinge with quicksort inference; see [`super::ap_hinge`].
    pub fn ap_hinge(
        &mut self,
        scores: &[f32],
        relevant: &[bool],
        grad: &mut [f64],
    ) -> Result<f64, HingeError> {
        self.hinge(RankLoss::Ap, Inference::Quicksort, scores, relevant, grad)
    }

    /// NDCG structured hinge with quicksort inference; see [`super::ndcg_hinge`].
    pub fn ndcg_hinge(
        &mut self,
        scores: &[f32],
        labels: &[i32],
        grad: &mut [f64],
    ) -> Result<f64, HingeError> {
        super::check_len("labels", labels.len(), scores.len())?;
        self.run(RankLoss::Ndcg, Inference::Quicksort, scores, grad, |i| {
            labels[i] >= super::RELEVANT_GRADE
        })
    }

    /// The structured hinge of `loss` with either inference algorithm (the two agree; the
    /// greedy baseline exists for tests and benchmarks). Writes `∂J/∂s_i` to `grad[i]` for
    /// every document and returns J ≥ 0. A query without both a relevant and a non-relevant
    /// document has no violating ranking: J = 0 and a zero gradient.
    pub fn hinge(
        &mut self,
        loss: RankLoss,
        inference: Inference,
        scores: &[f32],
        relevant: &[bool],
        grad: &mut [f64],
    ) -> Result<f64, HingeError> {
        super::check_len("relevant", relevant.len(), scores.len())?;
        self.run(loss, inference, scores, grad, |i| relevant[i])
    }

    fn run(
        &mut self,
        loss: RankLoss,
        inference: Inference,
        scores: &[f32],
        grad: &mut [f64],
        is_relevant: impl Fn(usize) -> bool,
    ) -> Result<f64, HingeError> {
        super::check_len("grad", grad.len(), scores.len())?;
        super::check_scores(scores)?;
        grad.fill(0.0);
        self.split(scores, is_relevant);
        self.negatives_above.clear();
        let (p, n) = (self.pos.len(), self.neg.len());
        if p == 0 || n == 0 {
            return Ok(0.0);
        }
        self.pos.sort_unstable();
        self.pos_scores.clear();
        let scores_of = self.pos.iter().map(|&k| f64::from(key::score(k)));
        self.pos_scores.extend(scores_of);
        if loss == RankLoss::Ndcg && inference == Inference::Greedy {
            self.discounts.cache_up_to(p + n);
        }
        let v = Violation::new(loss, &self.pos_scores, n, &self.discounts);
        self.opt.clear();
        self.opt.resize(n, 0);
        match inference {
            Inference::Quicksort => {
                quicksort::opt_ranks(&v, &mut self.neg, &mut self.opt, &mut self.stack)
            }
            Inference::Greedy => greedy::opt_ranks(&v, &mut self.neg, &mut self.opt),
        }

        // n_k from a histogram of the interleaving ranks: no sort of the negatives needed.
        self.negatives_above.resize(p + 1, 0);
        for &rank in &self.opt {
            self.negatives_above[rank as usize - 1] += 1;
        }
        self.negatives_above.pop(); // rank P + 1: below every positive
        let mut above = 0;
        for count in &mut self.negatives_above {
            above += *count;
            *count = above;
        }

        let pair_scale = v.pair_scale();
        let mut linear = 0.0;
        let positives = self.pos.iter().zip(&self.pos_scores);
        for ((&positive, &score), &n_k) in positives.zip(&self.negatives_above) {
            let g = -pair_scale * n_k as f64;
            grad[key::index(positive) as usize] = g;
            linear += g * score;
        }
        for (&negative, &rank) in self.neg.iter().zip(&self.opt) {
            let g = pair_scale * f64::from(p as u32 + 1 - rank);
            grad[key::index(negative) as usize] = g;
            linear += g * f64::from(key::score(negative));
        }
        // J ≥ J(y*) = 0 exactly; the max only guards against a rounding-level negative.
        Ok((rank_loss(loss, &self.negatives_above, &self.discounts) + linear).max(0.0))
    }

    /// Splits the query into positives and negatives, as keys.
    fn split(&mut self, scores: &[f32], is_relevant: impl Fn(usize) -> bool) {
        self.pos.clear();
        self.neg.clear();
        for (i, &s) in scores.iter().enumerate() {
            let entry = key(s, i as u32);
            if is_relevant(i) {
                self.pos.push(entry);
            } else {
                self.neg.push(entry);
            }
        }
    }
}
