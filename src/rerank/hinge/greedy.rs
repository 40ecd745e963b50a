//! The baseline loss-augmented inference the seed compares against (SPEC §3.4; seed notes
//! §A.6, §A.8): sort every negative, then place each one independently by trying all P + 1
//! interleaving ranks — O(N log N + N·P).
//!
//! For AP this is Yue et al. 2007 (SVM-MAP), Algorithm 2: negatives sorted by score, for each
//! `opt_j = argmax_i f_j(i)` over all ranks. For NDCG the seed times Chakrabarti et al. 2008's
//! greedy, whose complexity it gives as the same O(N·P + N log N) (seed 001 App. §6); we run
//! the same independent per-negative maximisation with the full, convex NDCG discount, for
//! which it is exact (seed 001 App. §6 shows Chakrabarti's own discount breaks it). The
//! discounts are tabulated before the scan, so the baseline pays no logarithm per step.

use super::key;
use super::loss::Violation;
use super::quicksort::best_rank;

/// Fills `opt[m]` with the interleaving rank of `neg[m]`, sorting `neg` by descending score.
pub(super) fn opt_ranks(v: &Violation<'_>, neg: &mut [u64], opt: &mut [u32]) {
    debug_assert_eq!(neg.len(), opt.len());
    neg.sort_unstable();
    let all_ranks = v.num_pos() as u32 + 1;
    for (m, (&negative, rank)) in neg.iter().zip(opt.iter_mut()).enumerate() {
        *rank = best_rank(v, m + 1, f64::from(key::score(negative)), 1, all_ranks);
    }
}
