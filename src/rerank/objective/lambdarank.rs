//! LambdaMART's lambdas (SPEC §3.6; Burges 2010), with LightGBM's formulas
//! (`src/objective/rank_objective.hpp`, `LambdarankNDCG::GetGradientsForOneQuery`, read from
//! the lightgbm 4.7.0 sdist) so that rankd's trees can be compared with LightGBM's
//! `lambdarank` on equal terms:
//!
//! - rows are sorted by score, descending, ties kept in row order (`std::stable_sort`);
//! - pairs `(i, j)`, `i` among the first `truncation` positions (NDCG; AP: any position)
//!   and `j` below it, with different labels; `high` is the one with the larger label;
//! - `|ΔZ|` is, for NDCG, `(gain_high − gain_low)·|1/log2(2 + r_high) − 1/log2(2 + r_low)|
//!   / maxDCG@truncation` with gain `2^l − 1` (a query whose maxDCG is 0 gets no lambdas);
//!   for AP (XGBoost's `rank:map`), the change of average precision when the two rows swap
//!   places (binary relevance: grade ≥ `threshold`);
//! - with `norm`, and when not all scores are equal, `|ΔZ|` is divided by `0.01 + |s_high − s_low|`;
//! - `ρ = 1/(1 + exp(σ(s_high − s_low)))`; `λ_high −= σ|ΔZ|ρ`, `λ_low += σ|ΔZ|ρ`,
//!   both hessians `+= σ²|ΔZ|ρ(1 − ρ)`;
//! - with `norm`, all lambdas and hessians of the query are scaled by `log2(1 + Σ)/Σ`, where
//!   `Σ = Σ_pairs 2σ|ΔZ|ρ`.
//!
//! The lambdas are gradients of the loss (the trees step against them). LightGBM evaluates
//! the sigmoid from a lookup table of 2²⁰ entries; rankd computes it exactly, so the two
//! differ in the sixth or so significant digit of a lambda, not in any formula. As an
//! objective for networks ([`super::Objective::LambdaNdcg`]), the reported loss is the metric
//! the lambdas follow, `1 − NDCG@truncation` or `1 − AP`; the lambdas are not its gradient
//! (LambdaRank's defining shortcut).

use serde::{Deserialize, Serialize};

use super::QueryLoss;

/// LambdaMART's hyperparameters (LightGBM's names and defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LambdaParams {
    /// σ of the pairwise sigmoid (`sigmoid`, 1).
    pub sigma: f64,
    /// NDCG: pairs have at least one row among the first this many
    /// (`lambdarank_truncation_level`, 30), and the ideal DCG is taken at this depth. AP
    /// ignores it and uses every pair.
    pub truncation: usize,
    /// LightGBM's `lambdarank_norm` (true): the score-distance and per-query normalisations.
    pub norm: bool,
    /// AP only: grades at or above this are relevant.
    pub threshold: i32,
}

impl Default for LambdaParams {
    fn default() -> Self {
        LambdaParams {
            sigma: 1.0,
            truncation: 30,
            norm: true,
            threshold: 1,
        }
    }
}

/// Which metric's swap change weighs the pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LambdaMetric {
    Ndcg,
    Ap,
}

/// DCG discount of 0-based position `i`: `1/log2(2 + i)`.
fn discount(i: usize) -> f64 {
    1.0 / (2.0 + i as f64).log2()
}

fn gain(label: i32) -> f64 {
    (2f64).powi(label) - 1.0
}

/// LightGBM's `CalMaxDCGAtK`: the DCG of the best ordering, first `k` positions.
pub fn max_dcg_at(labels: &[i32], k: usize) -> f64 {
    let mut sorted = labels.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, &l)| gain(l) * discount(i))
        .sum()
}

/// Average-precision bookkeeping for one ranking: the change of AP when the rows at
/// 0-based positions `a` (relevant) and `b` (not relevant) swap, in O(1).
struct ApSwap {
    /// `count[k]` = relevant rows among positions `0..k`.
    count: Vec<f64>,
    /// `inv[k]` = Σ 1/(p + 1) over relevant positions `p < k`.
    inv: Vec<f64>,
    relevant: f64,
}

impl ApSwap {
    fn new(relevant_in_order: &[bool]) -> Self {
        let n = relevant_in_order.len();
        let mut count = vec![0.0; n + 1];
        let mut inv = vec![0.0; n + 1];
        for (p, &r) in relevant_in_order.iter().enumerate() {
            count[p + 1] = count[p] + f64::from(u8::from(r));
            inv[p + 1] = inv[p] + if r { 1.0 / (p + 1) as f64 } else { 0.0 };
        }
        ApSwap {
            relevant: count[n],
            count,
            inv,
        }
    }

    /// |ΔAP| for swapping relevant position `a` with non-relevant position `b`.
    fn delta(&self, a: usize, b: usize) -> f64 {
        let (ra, rb) = ((a + 1) as f64, (b + 1) as f64);
        let change = if a < b {
            // The relevant row moves down to b: it counts the relevant rows of 0..=b (itself
            // included: count[b + 1]); every relevant row strictly between loses one.
            self.count[b + 1] / rb - self.count[a + 1] / ra - (self.inv[b] - self.inv[a + 1])
        } else {
            // It moves up to b: relevant rows above b, plus itself; those between gain one.
            (self.count[b] + 1.0) / rb - self.count[a + 1] / ra + (self.inv[a] - self.inv[b + 1])
        };
        (change / self.relevant).abs()
    }
}

/// Unbiased LambdaMART's position bias on one logged list (SPEC §11, "Unbiased
/// LambdaMART"; Hu et al. 2019, XGBoost's `lambdarank_unbiased`). The list's rows are in the
/// order they were shown, so a row's index is its 0-based rank: the pair (clicked `i`,
/// unclicked `j`) has its lambda and hessian divided by `t⁺[i]·t⁻[j]`, and its cost
/// `L_ij = |ΔZ|·ln(1 + e^{−σ(s_i − s_j)})` (the pairwise logistic loss weighted as the lambda
/// is) is added to `loss_plus[i]` divided by `t⁻[j]` and to `loss_minus[j]` divided by `t⁺[i]`:
/// the sums eq. 30 and 31 of the paper re-estimate the bias from. Pairs at a rank beyond the
/// vectors, or where a bias is 0, are left unweighted and uncounted (as XGBoost does).
pub struct PairDebias<'a> {
    /// t⁺ by rank (index 0: rank 1).
    pub t_plus: &'a [f64],
    /// t⁻ by rank.
    pub t_minus: &'a [f64],
    /// Σ_j L_ij / t⁻_j by the clicked row's rank, added to.
    pub loss_plus: &'a mut [f64],
    /// Σ_i L_ij / t⁺_i by the unclicked row's rank, added to.
    pub loss_minus: &'a mut [f64],
}

/// The lambdas and hessians of one query (see the module doc), written into `grad` and
/// `hess` (overwritten). Returns the metric the lambdas follow (NDCG@truncation or AP of
/// the current scores; `None` when the query has nothing to learn: no pair of different
/// labels, or no gain).
pub fn lambda_grad_hess(
    scores: &[f64],
    labels: &[i32],
    metric: LambdaMetric,
    p: &LambdaParams,
    grad: &mut [f64],
    hess: &mut [f64],
) -> Option<f64> {
    debiased_lambda_grad_hess(scores, labels, metric, p, None, grad, hess)
}

/// [`lambda_grad_hess`] on a logged list whose pairs are divided by their position bias
/// ([`PairDebias`]; `None`: every bias 1, the plain lambdas).
pub fn debiased_lambda_grad_hess(
    scores: &[f64],
    labels: &[i32],
    metric: LambdaMetric,
    p: &LambdaParams,
    mut debias: Option<&mut PairDebias>,
    grad: &mut [f64],
    hess: &mut [f64],
) -> Option<f64> {
    let n = scores.len();
    grad.fill(0.0);
    hess.fill(0.0);
    let mut order: Vec<usize> = (0..n).collect();
    // Descending, ties in row order (a stable sort, as LightGBM's std::stable_sort).
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let (best, worst) = (scores[order[0]], scores[order[n - 1]]);
    let relevant: Vec<bool> = order.iter().map(|&r| labels[r] >= p.threshold).collect();
    let (scale, ap, value) = match metric {
        LambdaMetric::Ndcg => {
            let max_dcg = max_dcg_at(labels, p.truncation);
            if max_dcg <= 0.0 {
                return None;
            }
            let dcg: f64 = order
                .iter()
                .take(p.truncation)
                .enumerate()
                .map(|(i, &r)| gain(labels[r]) * discount(i))
                .sum();
            (1.0 / max_dcg, None, dcg / max_dcg)
        }
        LambdaMetric::Ap => {
            let swap = ApSwap::new(&relevant);
            if swap.relevant == 0.0 || swap.relevant == n as f64 {
                return None;
            }
            let ap = (0..n)
                .filter(|&k| relevant[k])
                .map(|k| swap.count[k + 1] / (k + 1) as f64)
                .sum::<f64>()
                / swap.relevant;
            (1.0, Some(swap), ap)
        }
    };
    let mut sum_lambdas = 0.0;
    let mut pairs = 0usize;
    let top = match metric {
        LambdaMetric::Ndcg => p.truncation,
        LambdaMetric::Ap => n,
    };
    // Gains and discounts by position, computed once (the pair loop is the hot part).
    let gains: Vec<f64> = order.iter().map(|&r| gain(labels[r])).collect();
    let discounts: Vec<f64> = (0..n).map(discount).collect();
    for i in 0..n.saturating_sub(1).min(top) {
        for j in i + 1..n {
            let (li, lj) = (labels[order[i]], labels[order[j]]);
            let delta = match &ap {
                None if li == lj => continue,
                None => {
                    let (gh, gl) = if li > lj {
                        (gains[i], gains[j])
                    } else {
                        (gains[j], gains[i])
                    };
                    (gh - gl) * (discounts[i] - discounts[j]).abs() * scale
                }
                Some(swap) => match (relevant[i], relevant[j]) {
                    (true, false) => swap.delta(i, j),
                    (false, true) => swap.delta(j, i),
                    _ => continue,
                },
            };
            // The higher-labelled row of the pair (for AP: the relevant one).
            let i_high = match &ap {
                None => li > lj,
                Some(_) => relevant[i],
            };
            let (high, low) = if i_high {
                (order[i], order[j])
            } else {
                (order[j], order[i])
            };
            let delta_score = scores[high] - scores[low];
            let mut delta = delta;
            if p.norm && best != worst {
                delta /= 0.01 + delta_score.abs();
            }
            let rho = 1.0 / (1.0 + (p.sigma * delta_score).exp());
            let mut lambda = -p.sigma * delta * rho;
            let mut h = p.sigma * p.sigma * delta * rho * (1.0 - rho);
            if let Some(b) = debias.as_deref_mut() {
                if high < b.t_plus.len() && low < b.t_minus.len() {
                    let (t_plus, t_minus) = (b.t_plus[high], b.t_minus[low]);
                    if t_plus > f64::EPSILON && t_minus > f64::EPSILON {
                        // ln(1 + e^{−x}), x = σ(s_high − s_low), without overflow.
                        let x = p.sigma * delta_score;
                        let cost = delta * ((-x).max(0.0) + (-x.abs()).exp().ln_1p());
                        b.loss_plus[high] += cost / t_minus;
                        b.loss_minus[low] += cost / t_plus;
                        lambda /= t_plus * t_minus;
                        h /= t_plus * t_minus;
                    }
                }
            }
            grad[low] -= lambda;
            grad[high] += lambda;
            hess[low] += h;
            hess[high] += h;
            sum_lambdas -= 2.0 * lambda;
            pairs += 1;
        }
    }
    if pairs == 0 {
        return None;
    }
    if p.norm && sum_lambdas > 0.0 {
        let factor = (1.0 + sum_lambdas).log2() / sum_lambdas;
        grad.iter_mut().for_each(|g| *g *= factor);
        hess.iter_mut().for_each(|h| *h *= factor);
    }
    Some(value)
}

/// One query as a [`super::Objective`] for networks: loss `1 − metric`, gradient the lambdas.
pub(super) fn lambda_query_loss(
    scores: &[f32],
    labels: &[i32],
    metric: LambdaMetric,
    p: &LambdaParams,
) -> Option<QueryLoss> {
    let wide: Vec<f64> = scores.iter().map(|&s| f64::from(s)).collect();
    let mut grad = vec![0.0; scores.len()];
    let mut hess = vec![0.0; scores.len()];
    let value = lambda_grad_hess(&wide, labels, metric, p, &mut grad, &mut hess)?;
    let pairs = labels
        .iter()
        .map(|a| labels.iter().filter(|&b| a > b).count())
        .sum();
    Some(QueryLoss {
        loss: 1.0 - value,
        grad,
        pairs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// AP of a ranking (0-based positions in rank order), by its definition.
    fn ap(relevant: &[bool]) -> f64 {
        let mut hits = 0.0;
        let mut sum = 0.0;
        for (k, &r) in relevant.iter().enumerate() {
            if r {
                hits += 1.0;
                sum += hits / (k + 1) as f64;
            }
        }
        sum / hits
    }

    /// The O(1) swap change against swapping and recomputing AP, every pair of many rankings.
    #[test]
    fn ap_swap_delta_by_brute_force() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for _ in 0..300 {
            let n = rng.random_range(2..14);
            let rel: Vec<bool> = (0..n).map(|_| rng.random_bool(0.4)).collect();
            if rel.iter().all(|&r| r) || rel.iter().all(|&r| !r) {
                continue;
            }
            let swap = ApSwap::new(&rel);
            let base = ap(&rel);
            for a in 0..n {
                for b in 0..n {
                    if rel[a] && !rel[b] {
                        let mut s = rel.clone();
                        s.swap(a, b);
                        let want = (ap(&s) - base).abs();
                        assert!((swap.delta(a, b) - want).abs() < 1e-12, "{rel:?} {a} {b}");
                    }
                }
            }
        }
    }

    /// LightGBM's loop written out literally (its variable names, its order of operations),
    /// as the oracle for the NDCG lambdas.
    fn lightgbm_reference(score: &[f64], label: &[i32], p: &LambdaParams) -> (Vec<f64>, Vec<f64>) {
        let cnt = score.len();
        let mut lambdas = vec![0.0; cnt];
        let mut hessians = vec![0.0; cnt];
        let mut inverse_max_dcg = max_dcg_at(label, p.truncation);
        if inverse_max_dcg > 0.0 {
            inverse_max_dcg = 1.0 / inverse_max_dcg;
        }
        let mut sorted_idx: Vec<usize> = (0..cnt).collect();
        sorted_idx.sort_by(|&a, &b| score[b].partial_cmp(&score[a]).unwrap());
        let best_score = score[sorted_idx[0]];
        let worst_score = score[sorted_idx[cnt - 1]];
        let mut sum_lambdas = 0.0;
        let mut i = 0;
        while i < cnt - 1 && i < p.truncation {
            for j in i + 1..cnt {
                if label[sorted_idx[i]] == label[sorted_idx[j]] {
                    continue;
                }
                let (high_rank, low_rank) = if label[sorted_idx[i]] > label[sorted_idx[j]] {
                    (i, j)
                } else {
                    (j, i)
                };
                let high = sorted_idx[high_rank];
                let low = sorted_idx[low_rank];
                let high_label_gain = 2f64.powi(label[high]) - 1.0;
                let low_label_gain = 2f64.powi(label[low]) - 1.0;
                let high_discount = 1.0 / (2.0 + high_rank as f64).log2();
                let low_discount = 1.0 / (2.0 + low_rank as f64).log2();
                let delta_score = score[high] - score[low];
                let dcg_gap = high_label_gain - low_label_gain;
                let paired_discount = (high_discount - low_discount).abs();
                let mut delta_pair_ndcg = dcg_gap * paired_discount * inverse_max_dcg;
                if p.norm && best_score != worst_score {
                    delta_pair_ndcg /= 0.01 + delta_score.abs();
                }
                let mut p_lambda = 1.0 / (1.0 + (delta_score * p.sigma).exp());
                let mut p_hessian = p_lambda * (1.0 - p_lambda);
                p_lambda *= -p.sigma * delta_pair_ndcg;
                p_hessian *= p.sigma * p.sigma * delta_pair_ndcg;
                lambdas[low] -= p_lambda;
                hessians[low] += p_hessian;
                lambdas[high] += p_lambda;
                hessians[high] += p_hessian;
                sum_lambdas -= 2.0 * p_lambda;
            }
            i += 1;
        }
        if p.norm && sum_lambdas > 0.0 {
            let norm_factor = (1.0 + sum_lambdas).log2() / sum_lambdas;
            for k in 0..cnt {
                lambdas[k] *= norm_factor;
                hessians[k] *= norm_factor;
            }
        }
        (lambdas, hessians)
    }

    #[test]
    fn ndcg_lambdas_match_lightgbm_loop() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for trial in 0..300 {
            let n = rng.random_range(2..40);
            // Ties in scores (a coarse grid) and in labels.
            let scores: Vec<f64> = (0..n)
                .map(|_| f64::from(rng.random_range(-4..4)) * 0.5)
                .collect();
            let labels: Vec<i32> = (0..n).map(|_| rng.random_range(0..5)).collect();
            let p = LambdaParams {
                truncation: [30, 3, 1][trial % 3],
                norm: trial % 2 == 0,
                sigma: [1.0, 2.0][trial % 2],
                ..LambdaParams::default()
            };
            let (want_g, want_h) = lightgbm_reference(&scores, &labels, &p);
            let mut g = vec![0.0; n];
            let mut h = vec![0.0; n];
            let got = lambda_grad_hess(&scores, &labels, LambdaMetric::Ndcg, &p, &mut g, &mut h);
            if got.is_none() {
                assert!(want_g.iter().all(|&x| x == 0.0));
                continue;
            }
            for r in 0..n {
                assert!((g[r] - want_g[r]).abs() <= 1e-12 * want_g[r].abs().max(1.0));
                assert!((h[r] - want_h[r]).abs() <= 1e-12 * want_h[r].abs().max(1.0));
            }
        }
    }

    /// By hand: two rows, labels (1, 0), equal scores. ΔNDCG = 1·(1 − 1/log2 3)/1, no
    /// score-distance normalisation (all scores equal), ρ = ½: λ = ∓ΔNDCG/2, h = ΔNDCG/4,
    /// then the query normalisation log2(1 + Σ)/Σ with Σ = ΔNDCG.
    #[test]
    fn two_rows_by_hand() {
        let mut g = [0.0; 2];
        let mut h = [0.0; 2];
        let p = LambdaParams::default();
        let v = lambda_grad_hess(&[0.0, 0.0], &[1, 0], LambdaMetric::Ndcg, &p, &mut g, &mut h);
        assert_eq!(v, Some(1.0));
        let d = 1.0 - 1.0 / 3f64.log2();
        let f = (1.0 + d).log2() / d;
        assert!((g[0] + d / 2.0 * f).abs() < 1e-15 && (g[1] - d / 2.0 * f).abs() < 1e-15);
        assert!((h[0] - d / 4.0 * f).abs() < 1e-15 && (h[1] - h[0]).abs() < 1e-15);
        // AP: swapping the two changes AP from 1 to 1/2.
        let v = lambda_grad_hess(&[0.0, 0.0], &[1, 0], LambdaMetric::Ap, &p, &mut g, &mut h);
        assert_eq!(v, Some(1.0));
        let f = 1.5f64.log2() / 0.5;
        assert!((g[0] + 0.25 * f).abs() < 1e-15, "{g:?}");
        // Nothing to learn: equal labels, or no relevant row for AP.
        assert_eq!(
            lambda_grad_hess(&[0.0, 1.0], &[2, 2], LambdaMetric::Ndcg, &p, &mut g, &mut h),
            None
        );
        assert_eq!(
            lambda_grad_hess(&[0.0, 1.0], &[0, 0], LambdaMetric::Ap, &p, &mut g, &mut h),
            None
        );
        assert_eq!(g, [0.0, 0.0]);
    }
}
