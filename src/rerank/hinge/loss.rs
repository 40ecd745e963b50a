//! The two rank losses of seed 001 and the one quantity both inference algorithms evaluate:
//! the discrete derivative of the loss-augmented objective of one negative (SPEC §3.4; seed
//! notes §A.2–§A.5).

/// The rank loss Δ(y*, y) a structured hinge upper-bounds. Relevance is binary (seed notes
/// §A.10 d): the algorithm needs a loss that depends only on the ± pattern of the ranking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RankLoss {
    /// `Δ_AP = 1 − (1/P) Σ_k k / ind(k-th positive)` (seed notes §A.2).
    Ap,
    /// `Δ_NDCG = 1 − Σ_{x∈𝒫} D(ind(x)) / Σ_{i≤P} D(i)`, `D(i) = 1/log2(1 + i)`, untruncated:
    /// a cut-off makes D non-convex and breaks condition C2 (seed notes §A.10 d).
    Ndcg,
}

/// `D(i) = 1/log2(1 + i)` for ranks `i ≥ 1`, with a cache the caller may fill: the greedy
/// baseline evaluates D at every rank up to P + N, the quicksort algorithm at a few hundred,
/// so only the former builds a table (kept in the scratch, so it is built once per size).
#[derive(Clone, Debug, Default)]
pub(super) struct Discounts {
    /// `table[i] = D(i)`; `table[0]` is never read.
    table: Vec<f64>,
}

impl Discounts {
    pub(super) fn at(&self, rank: usize) -> f64 {
        match self.table.get(rank) {
            Some(&d) => d,
            None => discount(rank),
        }
    }

    /// Makes `at(rank)` a table lookup for every `rank ≤ max_rank`.
    pub(super) fn cache_up_to(&mut self, max_rank: usize) {
        self.table
            .reserve((max_rank + 1).saturating_sub(self.table.len()));
        while self.table.len() <= max_rank {
            let rank = self.table.len();
            self.table.push(discount(rank));
        }
    }
}

fn discount(rank: usize) -> f64 {
    1.0 / ((rank + 1) as f64).log2()
}

/// One query as the inference algorithms see it: the loss, the positives sorted by
/// descending score, and the scale factors of seed 001 Observation 3.
pub(super) struct Violation<'a> {
    loss: RankLoss,
    /// Scores of the positives, descending.
    pos: &'a [f64],
    /// `2/(P·N)`: a positive–negative pair's weight in the joint feature map, doubled
    /// because swapping a pair flips its sign (Yue et al. 2007, seed 001 Eq. 1).
    pair_scale: f64,
    /// `1/P` for AP (the factor seed 001 Prop. 4 drops, seed notes §A.9 item 7), `1/C` with
    /// `C = Σ_{i≤P} D(i)` for NDCG.
    loss_scale: f64,
    discounts: &'a Discounts,
}

impl<'a> Violation<'a> {
    pub(super) fn new(
        loss: RankLoss,
        pos: &'a [f64],
        num_neg: usize,
        discounts: &'a Discounts,
    ) -> Self {
        let p = pos.len();
        let loss_scale = match loss {
            RankLoss::Ap => 1.0 / p as f64,
            RankLoss::Ndcg => 1.0 / ideal_dcg(p, discounts),
        };
        Violation {
            loss,
            pos,
            pair_scale: 2.0 / (p as f64 * num_neg as f64),
            loss_scale,
            discounts,
        }
    }

    pub(super) fn num_pos(&self) -> usize {
        self.pos.len()
    }

    pub(super) fn pair_scale(&self) -> f64 {
        self.pair_scale
    }

    /// `f_j(i+1) − f_j(i)`: what the objective gains when the `j`-th highest negative (score
    /// `s_neg`, `j` from 1) moves from interleaving rank `i` to `i + 1`, i.e. below the `i`-th
    /// positive (seed 001 Observation 3, eq. (*); seed notes §A.5 `dd`). `1 ≤ i ≤ P`.
    #[inline]
    pub(super) fn step(&self, j: usize, s_neg: f64, i: usize) -> f64 {
        let pair = self.pair_scale * (self.pos[i - 1] - s_neg);
        let loss = match self.loss {
            // (j−1)/(j+i−1) − j/(j+i), written without the cancellation.
            RankLoss::Ap => {
                let (j, i) = (j as f64, i as f64);
                -i / ((j + i - 1.0) * (j + i))
            }
            RankLoss::Ndcg => self.discounts.at(i + j) - self.discounts.at(i + j - 1),
        };
        pair + self.loss_scale * loss
    }
}

/// `C = Σ_{i≤P} D(i)`, the DCG of the ideal binary ranking.
fn ideal_dcg(num_pos: usize, discounts: &Discounts) -> f64 {
    (1..=num_pos).map(|i| discounts.at(i)).sum()
}

/// `Δ(y*, y)` of the ranking in which `negatives_above[k−1]` negatives precede the `k`-th
/// positive (seed notes §A.5 POST): the `k`-th positive sits at rank `k + n_k`. Exactly 0 for
/// the ideal ranking (the two sums are then computed identically).
pub(super) fn rank_loss(loss: RankLoss, negatives_above: &[usize], discounts: &Discounts) -> f64 {
    let p = negatives_above.len();
    if p == 0 {
        return 0.0;
    }
    let ranks = negatives_above.iter().enumerate().map(|(i, &n)| (i + 1, n));
    match loss {
        RankLoss::Ap => {
            let sum: f64 = ranks.map(|(k, n)| k as f64 / (k + n) as f64).sum();
            1.0 - sum / p as f64
        }
        RankLoss::Ndcg => {
            let sum: f64 = ranks.map(|(k, n)| discounts.at(k + n)).sum();
            1.0 - sum / ideal_dcg(p, discounts)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's worked example (seed 001 §2.2, reproduced in seed notes §A.2): positives at
    /// ranks 1, 2, 4, 6 of (x1, x3, x8, x4, x5, x2, x6, x7).
    #[test]
    fn paper_worked_example() {
        let d = Discounts::default();
        let above = [0, 0, 1, 2];
        let ap = rank_loss(RankLoss::Ap, &above, &d);
        assert!((ap - (1.0 - (1.0 + 1.0 + 0.75 + 4.0 / 6.0) / 4.0)).abs() < 1e-15);
        assert!((ap - 0.14583).abs() < 1e-5, "{ap}");
        let ndcg = rank_loss(RankLoss::Ndcg, &above, &d);
        assert!((ndcg - 0.05613).abs() < 1e-5, "{ndcg}");
    }

    #[test]
    fn ideal_ranking_loses_exactly_nothing() {
        let mut d = Discounts::default();
        for cached in [false, true] {
            if cached {
                d.cache_up_to(64);
            }
            for p in 1..40 {
                let above = vec![0; p];
                assert_eq!(rank_loss(RankLoss::Ap, &above, &d), 0.0);
                assert_eq!(rank_loss(RankLoss::Ndcg, &above, &d), 0.0);
            }
        }
    }

    #[test]
    fn cached_discounts_equal_computed_ones() {
        let mut d = Discounts::default();
        d.cache_up_to(100);
        for rank in 1..=200 {
            assert_eq!(d.at(rank), 1.0 / ((rank + 1) as f64).log2());
        }
    }

    /// The AP step is the printed difference `(1/P)((j−1)/(j+i−1) − j/(j+i))` (with the 1/P of
    /// seed notes §A.9 item 7), and both steps are differences of the δ_j of seed 001 Props.
    /// 3–4 computed from their definitions as sums.
    #[test]
    fn steps_are_differences_of_the_per_negative_losses() {
        let pos = vec![0.0; 5];
        let d = Discounts::default();
        let p = pos.len();
        for loss in [RankLoss::Ap, RankLoss::Ndcg] {
            let v = Violation::new(loss, &pos, 7, &d);
            for j in 1..=7usize {
                for i in 1..=p {
                    let delta = |i: usize| -> f64 {
                        match loss {
                            RankLoss::Ap => {
                                (i..=p)
                                    .map(|k| {
                                        let (j, k) = (j as f64, k as f64);
                                        j / (j + k) - (j - 1.0) / (j + k - 1.0)
                                    })
                                    .sum::<f64>()
                                    / p as f64
                            }
                            RankLoss::Ndcg => {
                                (discount(i + j - 1) - discount(p + j)) / ideal_dcg(p, &d)
                            }
                        }
                    };
                    let expected = delta(i + 1) - delta(i);
                    assert!((v.step(j, 0.0, i) - expected).abs() < 1e-14);
                    if loss == RankLoss::Ap {
                        let (jf, i_f) = (j as f64, i as f64);
                        let printed = ((jf - 1.0) / (jf + i_f - 1.0) - jf / (jf + i_f)) / p as f64;
                        assert!((v.step(j, 0.0, i) - printed).abs() < 1e-15);
                    }
                }
            }
        }
    }
}
