//! Quicksort-flavoured loss-augmented inference: seed 001 Algorithm 1 (`OptRanks`), with the
//! corrections of seed notes §A.9 items 4 and 7 (SPEC §3.4).
//!
//! The most violating ranking interleaves the sorted positives with the negatives in
//! descending score order; it is fixed by `opt_j`, the interleaving rank (1 + positives
//! above) of the `j`-th highest negative. `opt` is non-decreasing in `j` (Observation 2), so
//! once the median negative of a block is placed, the negatives above it can only take ranks
//! up to its own, those below only ranks from it on. A block whose rank range has shrunk to
//! one value is assigned without looking at it: the negatives are never fully sorted, which
//! is where O(N log P) instead of O(N log N + N·P) comes from.

use super::key;
use super::loss::Violation;

/// A block of the negative array still to be placed: positions `start..end` hold exactly the
/// negatives with global descending ranks `start + 1 ..= end`, whose interleaving ranks are
/// known to lie in `lowest..=highest`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Block {
    start: usize,
    end: usize,
    lowest: u32,
    highest: u32,
}

/// Fills `opt[m]` with the interleaving rank of the negative left at `neg[m]`, for every `m`,
/// reordering `neg` (keys, see `key.rs`) in place (partitioned, not sorted). `stack` is scratch space: an explicit
/// stack instead of recursion, its depth O(log N) since every split is at the median.
pub(super) fn opt_ranks(
    v: &Violation<'_>,
    neg: &mut [u64],
    opt: &mut [u32],
    stack: &mut Vec<Block>,
) {
    debug_assert_eq!(neg.len(), opt.len());
    stack.clear();
    stack.push(Block {
        start: 0,
        end: neg.len(),
        lowest: 1,
        highest: v.num_pos() as u32 + 1,
    });
    while let Some(Block {
        start,
        end,
        lowest,
        highest,
    }) = stack.pop()
    {
        if start >= end {
            continue;
        }
        if lowest == highest {
            opt[start..end].fill(lowest);
            continue;
        }
        // Select, larger scores to the left (seed notes §A.9 item 4): afterwards neg[mid] is
        // the (mid + 1)-th highest negative overall and the block is partitioned around it.
        let mid = start + (end - start) / 2;
        neg[start..end].select_nth_unstable(mid - start);
        let rank = best_rank(v, mid + 1, f64::from(key::score(neg[mid])), lowest, highest);
        opt[mid] = rank;
        stack.push(Block {
            start,
            end: mid,
            lowest,
            highest: rank,
        });
        stack.push(Block {
            start: mid + 1,
            end,
            lowest: rank,
            highest,
        });
    }
}

/// The largest maximiser of `f_j` over ranks `lowest..=highest`, from its discrete
/// derivatives alone (seed 001 Observation 3). Ties in `f_j` need one rule applied to every
/// negative, so that the ranks stay monotone (Observation 2); this is the paper's,
/// `opt_j = max argmax f_j` (`>=`). The greedy baseline shares it, so the two agree exactly.
pub(super) fn best_rank(v: &Violation<'_>, j: usize, s_neg: f64, lowest: u32, highest: u32) -> u32 {
    let mut gain = 0.0;
    let mut best_gain = 0.0;
    let mut best = lowest;
    for i in lowest..highest {
        gain += v.step(j, s_neg, i as usize);
        if gain >= best_gain {
            best_gain = gain;
            best = i + 1;
        }
    }
    best
}
