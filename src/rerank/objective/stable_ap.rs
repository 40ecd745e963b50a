//! The stable AP surrogate, SPEC §3.3 (seed 000 §§4–6, Algorithm 1), with the SPEC's
//! corrections: bounded scores `f = sigmoid(g)`, `h(x) = sqrt(ε² + x/(1+x))` (the paper's
//! exponent −1/2 is a typo), weights `v_i` treated as constants, and μ̂_q updated with the
//! variance-reduction term from the previous parameters' scores.
//!
//! Per query, with `n⁺` positives and `n⁻` negatives:
//! `L_q = h( ρ_q/(n⁺n⁻) · Σ_i Σ_j v_i ℓ(f_i⁺ − f_j⁻) )`, `ρ_q = n⁻/n⁺`, so the factor in
//! front of the double sum is `1/(n⁺)²`. The double sum and its gradient come from
//! [`crate::pairwise::pair_loss_grad`] with the one-sided Huber loss.

use serde::{Deserialize, Serialize};

use super::{
    first_out_of_range, graded_mean, sigmoid, split_by_threshold, Domain, OutOfRange, QueryInput,
    QueryLoss, QueryState,
};
use crate::pairwise::{pair_loss_grad, Loss};
use crate::rerank::RerankError;

/// The curvature a gradient-boosted tree's Newton step (`leaf = −ΣG/(ΣH + λ)`) uses with the
/// stable AP loss (SPEC §3.6).
///
/// The loss has no useful exact diagonal hessian: the one-sided Huber ℓ is linear below 0,
/// so every pair in the wrong order contributes no curvature, and the concave outer h
/// contributes negative curvature. `Bound` is the diagonal of a majoriser (an MM step):
/// every pair's ℓ'' replaced by its maximum 2/τ², the negative `h''·(∂u)²` term dropped
/// (Gauss–Newton), and the sigmoid's own second derivative dropped, i.e. for a positive i
/// `H_i = h'(u)/(n⁺)² · v_i·n⁻ · 2/τ² · (f_i(1 − f_i))²` and for a negative j the same with
/// `Σ_i v_i` in place of `v_i·n⁻` (u, v, f as in SPEC §3.3). It is positive for every row of
/// a usable query and scales with the gradient, so leaf values are Newton-sized steps.
/// `Constant` is `H = 1` per row (first-order boosting: a leaf is the mean negative
/// gradient, times the learning rate), the baseline SPEC §3.6 asks the choice to beat.
/// Measured on the LightGBM LETOR example (100 trees of 31 leaves, graded, a = 10, each
/// with its learning rate chosen on training queries, seeds 1–5): `Bound` MAP 0.8427,
/// NDCG@10 0.7518; `Constant` MAP 0.7978, NDCG@10 0.6800 (`bench/gbdt_letor.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum StableApHessian {
    Bound,
    Constant,
}

/// Hyperparameters, SPEC §3.3 (paper defaults except τ and ε, which the paper leaves open).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StableAp {
    /// Huber margin τ (on sigmoid scores).
    pub tau: f32,
    /// ε of the outer function h.
    pub epsilon: f64,
    /// a and t of the weighting `w̃(r) = ((1 + a)/(r + a))^t`.
    pub a: f64,
    pub t: f64,
    /// λ of the μ̂ moving average.
    pub lambda: f64,
    /// Grades at or above this are positive.
    pub threshold: i32,
    /// Mean of the loss over every relevance level of the query instead of one threshold
    /// (an extension beyond SPEC §3.3, see [`super::relevance_levels`]); one μ̂ per level.
    #[serde(default)]
    pub graded: bool,
}

impl Default for StableAp {
    fn default() -> Self {
        StableAp {
            tau: 0.1,
            epsilon: 0.01,
            a: 0.1,
            t: 2.0,
            lambda: 0.01,
            threshold: 1,
            graded: false,
        }
    }
}

impl StableAp {
    /// The first hyperparameter outside its domain (see [`super::Objective::out_of_range`]).
    pub fn out_of_range(&self) -> Option<OutOfRange> {
        first_out_of_range(&[
            ("tau", f64::from(self.tau), Domain::Positive),
            ("epsilon", self.epsilon, Domain::Positive),
            ("a", self.a, Domain::Positive),
            ("t", self.t, Domain::NonNegative),
            ("lambda", self.lambda, Domain::UnitInterval),
            ("threshold", f64::from(self.threshold), Domain::AtLeastOne),
        ])
    }

    /// SPEC §3.3's μ̂ update: `μ̂ ← (1 − λ)μ̂ + λ m_k + (1 − λ)(m_k − m_{k−1})`, or `m_k` the
    /// first time the query is seen.
    pub fn update_mu(&self, mu: &mut Option<f64>, m_k: f64, m_prev: f64) -> f64 {
        let l = self.lambda;
        let next = match *mu {
            None => m_k,
            Some(old) => (1.0 - l) * old + l * m_k + (1.0 - l) * (m_k - m_prev),
        };
        *mu = Some(next);
        next
    }

    /// One query: at each relevance level, update μ̂_q, compute the weights (constants),
    /// then loss and ∂L/∂g.
    pub(super) fn query_loss(
        &self,
        input: &QueryInput,
        state: &mut QueryState,
    ) -> Result<Option<QueryLoss>, RerankError> {
        graded_mean(input.labels, self.threshold, self.graded, |level| {
            let mut mu = state.mu.get(&level).copied();
            let q = self.binary_query_loss(input, level, &mut mu)?;
            if let Some(mu) = mu {
                state.mu.insert(level, mu);
            }
            Ok(q.map(|(q, _)| q))
        })
    }

    /// One query's loss, gradient `∂L/∂g` and the per-row curvature a Newton step of a
    /// gradient-boosted tree divides by (SPEC §3.6; see [`StableApHessian`]), averaged over
    /// relevance levels like the loss. Updates μ̂_q as [`Self::query_loss`] does.
    pub fn query_newton(
        &self,
        input: &QueryInput,
        state: &mut QueryState,
        hessian: StableApHessian,
    ) -> Result<Option<(QueryLoss, Vec<f64>)>, RerankError> {
        let mut curvature = vec![0f64; input.scores.len()];
        let mut used = 0usize;
        let q = graded_mean(input.labels, self.threshold, self.graded, |level| {
            let mut mu = state.mu.get(&level).copied();
            let q = self.binary_query_loss(input, level, &mut mu)?;
            if let Some(mu) = mu {
                state.mu.insert(level, mu);
            }
            Ok(q.map(|(q, bound)| {
                used += 1;
                for (c, b) in curvature.iter_mut().zip(&bound) {
                    *c += match hessian {
                        StableApHessian::Bound => *b,
                        StableApHessian::Constant => 1.0,
                    };
                }
                q
            }))
        })?;
        Ok(q.map(|q| {
            let scale = 1.0 / used as f64;
            curvature.iter_mut().for_each(|c| *c *= scale);
            (q, curvature)
        }))
    }

    /// The loss of one query with positives = grade ≥ `threshold`, and the bound curvature
    /// of every row (see [`StableApHessian::Bound`]).
    fn binary_query_loss(
        &self,
        input: &QueryInput,
        threshold: i32,
        mu: &mut Option<f64>,
    ) -> Result<Option<(QueryLoss, Vec<f64>)>, RerankError> {
        let (pos, neg) = split_by_threshold(input.labels, threshold);
        if pos.is_empty() || neg.is_empty() {
            return Ok(None);
        }
        let f: Vec<f64> = input.scores.iter().map(|&g| sigmoid(g)).collect();
        let mean_pos =
            |scores: &[f64]| pos.iter().map(|&r| scores[r]).sum::<f64>() / pos.len() as f64;
        let m_k = mean_pos(&f);
        let m_prev = match input.previous_scores {
            Some(prev) => {
                let f_prev: Vec<f64> = prev.iter().map(|&g| sigmoid(g)).collect();
                mean_pos(&f_prev)
            }
            None => m_k,
        };
        let mu_now = self.update_mu(mu, m_k, m_prev);
        let f_pos: Vec<f32> = pos.iter().map(|&r| f[r] as f32).collect();
        let f_neg: Vec<f32> = neg.iter().map(|&r| f[r] as f32).collect();
        let v = stable_ap_weights(&f_pos, mu_now, self);
        let (loss, dh, grad_pos, grad_neg) = loss_grad_scale(&f_pos, &f_neg, &v, self)?;
        // Chain rule through the sigmoid: ∂f/∂g = f(1 − f).
        let mut grad = vec![0f64; input.scores.len()];
        for (&r, g) in pos.iter().zip(&grad_pos).chain(neg.iter().zip(&grad_neg)) {
            grad[r] = g * f[r] * (1.0 - f[r]);
        }
        // Curvature bound: h'(u)·∂²u/∂f² with ℓ'' ≤ 2/τ² for every pair, times (∂f/∂g)².
        let l2 = 2.0 / (f64::from(self.tau) * f64::from(self.tau));
        let sum_v: f64 = v.iter().map(|&w| f64::from(w)).sum();
        let mut bound = vec![0f64; input.scores.len()];
        for (k, &r) in pos.iter().enumerate() {
            let s = f[r] * (1.0 - f[r]);
            bound[r] = dh * f64::from(v[k]) * neg.len() as f64 * l2 * s * s;
        }
        for &r in &neg {
            let s = f[r] * (1.0 - f[r]);
            bound[r] = dh * sum_v * l2 * s * s;
        }
        Ok(Some((
            QueryLoss {
                loss,
                grad,
                pairs: pos.len() * neg.len(),
            },
            bound,
        )))
    }
}

/// `v_i = w̃(clamp(ℓ(f_i⁺ − μ̂)/B_ℓ, 0, 1))`, `B_ℓ = ℓ(−1) = 1 + 2/τ` (scores in (0, 1)).
pub fn stable_ap_weights(f_pos: &[f32], mu: f64, p: &StableAp) -> Vec<f32> {
    let huber = Loss::Huber { tau: p.tau };
    let bound = 1.0 + 2.0 / f64::from(p.tau);
    f_pos
        .iter()
        .map(|&f| {
            let l = f64::from(huber.term((f64::from(f) - mu) as f32).0);
            let r = (l / bound).clamp(0.0, 1.0);
            ((1.0 + p.a) / (r + p.a)).powf(p.t) as f32
        })
        .collect()
}

/// `L = h(S/(n⁺)²)` with `S = Σ_i v_i Σ_j ℓ(f_i⁺ − f_j⁻)`, and `∂L/∂f` for the positives and
/// the negatives (v held constant).
pub fn stable_ap_loss_grad(
    f_pos: &[f32],
    f_neg: &[f32],
    v: &[f32],
    p: &StableAp,
) -> Result<(f64, Vec<f64>, Vec<f64>), RerankError> {
    let (h, _, grad_pos, grad_neg) = loss_grad_scale(f_pos, f_neg, v, p)?;
    Ok((h, grad_pos, grad_neg))
}

/// [`stable_ap_loss_grad`] and the factor `h'(u)/(n⁺)²` that turns the pairwise sum's
/// derivatives into the loss's.
fn loss_grad_scale(
    f_pos: &[f32],
    f_neg: &[f32],
    v: &[f32],
    p: &StableAp,
) -> Result<(f64, f64, Vec<f64>, Vec<f64>), RerankError> {
    let mut grad_pos = vec![0f64; f_pos.len()];
    let mut grad_neg = vec![0f64; f_neg.len()];
    let sum = pair_loss_grad(
        f_pos,
        f_neg,
        v,
        Loss::Huber { tau: p.tau },
        &mut grad_pos,
        &mut grad_neg,
    )?;
    let n_pos = f_pos.len() as f64;
    let factor = 1.0 / (n_pos * n_pos);
    let u = sum * factor;
    let h = (p.epsilon * p.epsilon + u / (1.0 + u)).sqrt();
    // h'(u) = 1 / (2 h (1 + u)²).
    let dh = 1.0 / (2.0 * h * (1.0 + u) * (1.0 + u)) * factor;
    for g in grad_pos.iter_mut().chain(grad_neg.iter_mut()) {
        *g *= dh;
    }
    Ok((h, dh, grad_pos, grad_neg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::testutil::{check_gradient, check_query_gradient, huber, random_scores};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// SPEC §3.3 written out as a double loop in f64, ρ and n⁺n⁻ kept separate.
    fn brute_force(f_pos: &[f64], f_neg: &[f64], v: &[f64], p: &StableAp) -> f64 {
        let (np, nn) = (f_pos.len() as f64, f_neg.len() as f64);
        let rho = nn / np;
        let mut s = 0.0;
        for (i, fi) in f_pos.iter().enumerate() {
            for fj in f_neg {
                s += v[i] * huber(fi - fj, f64::from(p.tau));
            }
        }
        let x = rho * s / (np * nn);
        (p.epsilon * p.epsilon + x / (1.0 + x)).sqrt()
    }

    #[test]
    fn loss_matches_the_spec_double_loop() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for trial in 0..200 {
            let p = StableAp {
                tau: [0.01, 0.03, 0.1, 0.3][trial % 4],
                ..StableAp::default()
            };
            let np = rng.random_range(1..12);
            let nn = rng.random_range(1..300);
            let f_pos = random_scores(&mut rng, np);
            let f_neg = random_scores(&mut rng, nn);
            let mu = rng.random_range(0.0..1.0);
            let v = stable_ap_weights(&f_pos, mu, &p);
            let (loss, _, _) = stable_ap_loss_grad(&f_pos, &f_neg, &v, &p).unwrap();
            let wide = |s: &[f32]| s.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
            let oracle = brute_force(&wide(&f_pos), &wide(&f_neg), &wide(&v), &p);
            assert!((loss - oracle).abs() < 1e-5 * oracle, "{loss} vs {oracle}");
        }
    }

    #[test]
    fn weights_by_hand() {
        // τ = 0.1: B = 21. A positive far above μ̂ has ℓ = 0 → r = 0 → w = (1.1/0.1)² = 121.
        // At f = μ̂: ℓ(0) = 1 → r = 1/21 → w = (1.1/(1/21 + 0.1))².
        // Far below: ℓ(−0.5) = 11 → r = 11/21.
        let p = StableAp::default();
        let v = stable_ap_weights(&[0.9, 0.5, 0.0], 0.5, &p);
        let expect = [
            121.0,
            (1.1f64 / (1.0 / 21.0 + 0.1)).powi(2),
            (1.1f64 / (11.0 / 21.0 + 0.1)).powi(2),
        ];
        for (a, b) in v.iter().zip(expect) {
            assert!((f64::from(*a) - b).abs() < 1e-4 * b, "{a} vs {b}");
        }
    }

    #[test]
    fn mu_update_by_hand() {
        let p = StableAp {
            lambda: 0.1,
            ..StableAp::default()
        };
        let mut mu = None;
        assert_eq!(p.update_mu(&mut mu, 0.6, 0.2), 0.6); // first sight: m_k
                                                         // 0.9·0.6 + 0.1·0.7 + 0.9·(0.7 − 0.65) = 0.54 + 0.07 + 0.045 = 0.655
        let next = p.update_mu(&mut mu, 0.7, 0.65);
        assert!((next - 0.655).abs() < 1e-12);
        assert_eq!(mu, Some(next));
    }

    /// ∂L/∂f with v frozen, against central differences of the same function (step 1e-3 on
    /// f32 scores in (0, 1); tolerance 2e-3 of the largest component: the loss is a sum of
    /// f32 pair terms, relative rounding ~1e-7, divided by the 2e-3 step).
    #[test]
    fn gradient_matches_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for trial in 0..30 {
            let p = StableAp {
                tau: [0.1, 0.3, 0.03][trial % 3],
                ..StableAp::default()
            };
            let np = rng.random_range(1..6);
            let nn = rng.random_range(1..8);
            let f_pos = random_scores(&mut rng, np);
            let f_neg = random_scores(&mut rng, nn);
            let v = stable_ap_weights(&f_pos, 0.5, &p);
            let (_, gp, gn) = stable_ap_loss_grad(&f_pos, &f_neg, &v, &p).unwrap();
            let all: Vec<f32> = f_pos.iter().chain(&f_neg).copied().collect();
            let analytic: Vec<f64> = gp.iter().chain(&gn).copied().collect();
            check_gradient(&all, &analytic, 1e-3, 2e-3, |s| {
                stable_ap_loss_grad(&s[..np], &s[np..], &v, &p).unwrap().0
            });
        }
    }

    /// The whole per-query path (sigmoid, μ̂, weights) against finite differences in g, with
    /// t = 0 so the weights are constant by construction and the check covers everything.
    #[test]
    fn query_gradient_in_raw_scores() {
        let p = StableAp {
            t: 0.0,
            ..StableAp::default()
        };
        check_query_gradient(&super::super::Objective::StableAp(p), 8);
    }

    /// The Newton curvature against its definition: h'(u)/(n⁺)² · ∂²S/∂f_r² · (f_r(1 − f_r))²
    /// with S the pairwise sum (weights 1: t = 0) and ∂²S by central differences of the
    /// brute-force sum. When every positive–negative gap lies in [0, τ), ℓ'' = 2/τ² for every
    /// pair and the bound is exact; otherwise it is an upper bound. The constant curvature is
    /// 1 per row.
    #[test]
    fn newton_curvature_is_the_bound_of_seed_loss() {
        let p = StableAp {
            t: 0.0,
            ..StableAp::default()
        };
        let logit = |f: f64| (f / (1.0 - f)).ln() as f32;
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        for trial in 0..40 {
            let inside = trial % 2 == 0;
            let (np, nn) = (rng.random_range(1..5), rng.random_range(1..6));
            let f: Vec<f64> = (0..np + nn)
                .map(|k| match (inside, k < np) {
                    (true, true) => rng.random_range(0.50..0.55),
                    (true, false) => rng.random_range(0.46..0.4999),
                    (false, _) => rng.random_range(0.05..0.95),
                })
                .collect();
            let g: Vec<f32> = f.iter().map(|&v| logit(v)).collect();
            let labels: Vec<i32> = (0..np + nn).map(|k| i32::from(k < np)).collect();
            let input = QueryInput {
                scores: &g,
                previous_scores: None,
                labels: &labels,
                query_labels: &labels,
            };
            let (_, bound) = p
                .query_newton(&input, &mut QueryState::new(), StableApHessian::Bound)
                .unwrap()
                .unwrap();
            // The sigmoid of the f32 scores, as the loss sees them.
            let f: Vec<f64> = g.iter().map(|&x| sigmoid(x)).collect();
            let tau = f64::from(p.tau);
            let pair_sum = |f: &[f64]| {
                let mut s = 0.0;
                for i in 0..np {
                    for j in np..np + nn {
                        s += huber(f[i] - f[j], tau);
                    }
                }
                s
            };
            let n2 = (np * np) as f64;
            let u = pair_sum(&f) / n2;
            let h = (p.epsilon * p.epsilon + u / (1.0 + u)).sqrt();
            let dh = 1.0 / (2.0 * h * (1.0 + u) * (1.0 + u)) / n2;
            let step = 1e-4;
            for r in 0..np + nn {
                let at = |delta: f64| {
                    let mut moved = f.clone();
                    moved[r] += delta;
                    pair_sum(&moved)
                };
                let second = (at(step) - 2.0 * at(0.0) + at(-step)) / (step * step);
                let s = f[r] * (1.0 - f[r]);
                let exact = dh * second * s * s;
                if inside {
                    assert!(
                        (bound[r] - exact).abs() <= 1e-4 * exact,
                        "row {r}: {} vs {exact}",
                        bound[r]
                    );
                } else {
                    assert!(
                        bound[r] >= exact * (1.0 - 1e-4) - 1e-9,
                        "row {r}: {} < {exact}",
                        bound[r]
                    );
                }
                assert!(bound[r] > 0.0);
            }
            let (_, constant) = p
                .query_newton(&input, &mut QueryState::new(), StableApHessian::Constant)
                .unwrap()
                .unwrap();
            assert!(constant.iter().all(|&c| c == 1.0));
        }
    }

    #[test]
    fn one_sided_queries_are_skipped() {
        let p = StableAp::default();
        for labels in [[1, 2, 1], [0, 0, 0]] {
            let input = QueryInput {
                scores: &[0.1, 0.2, 0.3],
                previous_scores: None,
                labels: &labels,
                query_labels: &labels,
            };
            let mut state = QueryState::new();
            assert_eq!(p.query_loss(&input, &mut state).unwrap(), None);
            assert!(state.is_empty(), "a skipped query leaves μ̂ alone");
        }
    }
}
