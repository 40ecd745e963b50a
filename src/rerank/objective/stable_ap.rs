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

use super::{graded_mean, sigmoid, split_by_threshold, QueryInput, QueryLoss, QueryState};
use crate::pairwise::{pair_loss_grad, Loss};
use crate::rerank::RerankError;

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
    pub fn validate(&self) -> Result<(), RerankError> {
        let checks: [(&str, f64, bool); 6] = [
            (
                "tau",
                f64::from(self.tau),
                self.tau.is_finite() && self.tau > 0.0,
            ),
            (
                "epsilon",
                self.epsilon,
                self.epsilon.is_finite() && self.epsilon > 0.0,
            ),
            ("a", self.a, self.a.is_finite() && self.a > 0.0),
            ("t", self.t, self.t.is_finite() && self.t >= 0.0),
            (
                "lambda",
                self.lambda,
                self.lambda > 0.0 && self.lambda <= 1.0,
            ),
            ("threshold", f64::from(self.threshold), self.threshold >= 1),
        ];
        match checks.iter().find(|c| !c.2) {
            None => Ok(()),
            Some((name, value, _)) => Err(RerankError::invalid(format!(
                "stable AP parameter {name} = {value} is out of range"
            ))),
        }
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
            Ok(q)
        })
    }

    /// The loss of one query with positives = grade ≥ `threshold`.
    fn binary_query_loss(
        &self,
        input: &QueryInput,
        threshold: i32,
        mu: &mut Option<f64>,
    ) -> Result<Option<QueryLoss>, RerankError> {
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
        let (loss, grad_pos, grad_neg) = stable_ap_loss_grad(&f_pos, &f_neg, &v, self)?;
        // Chain rule through the sigmoid: ∂f/∂g = f(1 − f).
        let mut grad = vec![0f64; input.scores.len()];
        for (&r, g) in pos.iter().zip(&grad_pos).chain(neg.iter().zip(&grad_neg)) {
            grad[r] = g * f[r] * (1.0 - f[r]);
        }
        Ok(Some(QueryLoss {
            loss,
            grad,
            pairs: pos.len() * neg.len(),
        }))
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
    Ok((h, grad_pos, grad_neg))
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{self, huber};
    use super::*;
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

    fn random_scores(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
        (0..n).map(|_| rng.random_range(0.01f32..0.99)).collect()
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
            gradcheck::check(&all, &analytic, 1e-3, 2e-3, |s| {
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
        gradcheck::check_query_gradient(&super::super::Objective::StableAp(p), 8);
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
