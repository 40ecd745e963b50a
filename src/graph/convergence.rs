//! When to stop iterating, and how stable the ranking was (SPEC §2 "Convergence"; book ch. 9
//! "rank convergence": only the order is served, so report when the head of the order settled).

use serde::{Deserialize, Serialize};

/// Stopping rule of the power iterations: stop when the L1 error bound of the score vector
/// (for a contraction; the L1 change otherwise) falls below `tol_per_node · N`, or after `max_iter` iterations, or — optionally — once the top-k
/// order has not changed for `stop_when_top_stable_for` consecutive iterations.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Convergence {
    /// Per-node L1 tolerance; SPEC default 1e-9. Zero means "run exactly `max_iter`".
    pub tol_per_node: f64,
    /// SPEC default 200.
    pub max_iter: usize,
    /// Size of the head whose order is tracked (SPEC: top 100). 0 switches tracking off.
    pub top_k: usize,
    /// Stop early once the top-k order is unchanged for this many iterations.
    pub stop_when_top_stable_for: Option<usize>,
}

impl Default for Convergence {
    fn default() -> Self {
        Convergence {
            tol_per_node: 1e-9,
            max_iter: 200,
            top_k: 100,
            stop_when_top_stable_for: None,
        }
    }
}

impl Convergence {
    /// Exactly `iterations` iterations, no tolerance (TrustRank's M_B = 20).
    pub fn fixed(iterations: usize) -> Self {
        Convergence {
            tol_per_node: 0.0,
            max_iter: iterations,
            ..Convergence::default()
        }
    }

    pub(crate) fn check(&self) -> super::Result<()> {
        if !(self.tol_per_node.is_finite() && self.tol_per_node >= 0.0) {
            return Err(super::GraphError::InvalidParameter {
                name: "tolerance",
                message: format!("{} is not a finite non-negative number", self.tol_per_node),
            });
        }
        Ok(())
    }
}

/// How an iteration ended.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct IterationReport {
    pub iterations: usize,
    /// The L1 tolerance was met (false: stopped by `max_iter`, the top-k rule or a time budget).
    pub converged: bool,
    /// What was compared with the tolerance after the last iteration: for PageRank and
    /// TrustRank the L1 error bound `α/(1−α)·‖Δ‖₁` ([`super::pagerank::error_bound`]), for
    /// HITS and SALSA the L1 change `‖Δ‖₁`.
    pub residual: f64,
    /// The iteration at which the top-k order last changed (0: it never changed after the
    /// first iterate). Meaningful only when `top_k > 0`.
    pub top_order_last_changed: usize,
    /// Stopped because a time budget ran out.
    pub timed_out: bool,
}

impl Convergence {
    /// Records a finished iteration (1-based) in `report` and says whether to stop: the L1
    /// change is below `tol_per_node · N`, or the top-k order has held long enough (SPEC §2).
    pub(crate) fn finished_iteration(
        &self,
        report: &mut IterationReport,
        tracker: &mut TopOrderTracker,
        iteration: usize,
        scores: &[f64],
        residual: f64,
    ) -> bool {
        tracker.observe(iteration, scores);
        report.iterations = iteration;
        report.residual = residual;
        report.top_order_last_changed = tracker.last_changed;
        if residual < self.tol_per_node * scores.len() as f64 {
            report.converged = true;
            return true;
        }
        self.stop_when_top_stable_for
            .is_some_and(|r| tracker.stable_for >= r)
    }
}

/// Follows the top-k order from iteration to iteration. Checking that the previous order still
/// holds is one linear pass (is the old list still sorted, does any outsider beat its last
/// entry?); only when it fails is the top k selected again.
pub(crate) struct TopOrderTracker {
    k: usize,
    top: Vec<u32>,
    in_top: Vec<bool>,
    scratch: Vec<u32>,
    pub last_changed: usize,
    pub stable_for: usize,
}

impl TopOrderTracker {
    pub fn new(k: usize) -> Self {
        TopOrderTracker {
            k,
            top: Vec::new(),
            in_top: Vec::new(),
            scratch: Vec::new(),
            last_changed: 0,
            stable_for: 0,
        }
    }

    /// Records the order after iteration `iteration` (1-based).
    pub fn observe(&mut self, iteration: usize, scores: &[f64]) {
        if self.k == 0 {
            return;
        }
        if iteration > 1 && self.still_holds(scores) {
            self.stable_for += 1;
            return;
        }
        let mut fresh = Vec::with_capacity(self.k);
        top_k_into(scores, self.k, &mut self.scratch, &mut fresh);
        if iteration > 1 && fresh != self.top {
            self.last_changed = iteration;
            self.stable_for = 0;
        } else {
            self.stable_for += 1;
        }
        self.in_top.clear();
        self.in_top.resize(scores.len(), false);
        fresh.iter().for_each(|&u| self.in_top[u as usize] = true);
        self.top = fresh;
    }

    fn still_holds(&self, scores: &[f64]) -> bool {
        let better = |a: u32, b: u32| {
            let (sa, sb) = (scores[a as usize], scores[b as usize]);
            sa > sb || (sa == sb && a < b)
        };
        if self.top.windows(2).any(|w| !better(w[0], w[1])) {
            return false;
        }
        match self.top.last() {
            Some(&last) => {
                !(0..scores.len() as u32).any(|u| !self.in_top[u as usize] && better(u, last))
            }
            None => true,
        }
    }
}

/// The `k` best nodes by score, best first, ties broken by lower id (deterministic).
pub fn top_k(scores: &[f64], k: usize) -> Vec<u32> {
    let mut out = Vec::new();
    top_k_into(scores, k, &mut Vec::new(), &mut out);
    out
}

fn top_k_into(scores: &[f64], k: usize, all: &mut Vec<u32>, out: &mut Vec<u32>) {
    let better = |a: &u32, b: &u32| {
        scores[*b as usize]
            .total_cmp(&scores[*a as usize])
            .then(a.cmp(b))
    };
    all.clear();
    all.extend(0..scores.len() as u32);
    let k = k.min(all.len());
    if k > 0 && k < all.len() {
        all.select_nth_unstable_by(k - 1, better);
    }
    all.truncate(k);
    all.sort_unstable_by(better);
    out.clear();
    out.extend_from_slice(all);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_matches_full_sort() {
        let scores = [0.1, 0.5, 0.5, 0.0, 0.9, 0.2];
        assert_eq!(top_k(&scores, 3), vec![4, 1, 2]);
        assert_eq!(top_k(&scores, 10), vec![4, 1, 2, 5, 0, 3]);
        assert!(top_k(&scores, 0).is_empty());
    }

    #[test]
    fn tracker_reports_last_change() {
        let mut t = TopOrderTracker::new(2);
        t.observe(1, &[0.1, 0.2, 0.3]);
        t.observe(2, &[0.1, 0.3, 0.2]);
        t.observe(3, &[0.0, 0.3, 0.2]);
        assert_eq!(t.last_changed, 2);
        assert_eq!(t.stable_for, 1);
        t.observe(4, &[0.5, 0.3, 0.2]); // an outsider enters the top 2
        assert_eq!((t.last_changed, t.stable_for), (4, 0));
        t.observe(5, &[0.5, 0.3, 0.31]); // same members, new order
        assert_eq!((t.last_changed, t.stable_for), (5, 0));
        t.observe(6, &[0.5, 0.1, 0.31]);
        assert_eq!((t.last_changed, t.stable_for), (5, 1));
    }

    /// Oracle: a full top-k selection at every iteration.
    #[test]
    fn tracker_matches_full_recomputation() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for _ in 0..200 {
            let k = rng.random_range(1..6);
            let mut scores: Vec<f64> = (0..12).map(|_| rng.random_range(0..4) as f64).collect();
            let mut tracker = TopOrderTracker::new(k);
            let (mut last_changed, mut previous) = (0, Vec::new());
            for iteration in 1..15 {
                let i = rng.random_range(0..scores.len());
                scores[i] = rng.random_range(0..4) as f64; // ties are frequent on purpose
                tracker.observe(iteration, &scores);
                let top = top_k(&scores, k);
                if iteration > 1 && top != previous {
                    last_changed = iteration;
                }
                previous = top;
                assert_eq!(tracker.last_changed, last_changed);
            }
        }
    }
}
