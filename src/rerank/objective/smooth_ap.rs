//! Naive smoothed AP (SPEC §3.4, seed 000 §3.3): the surrogate the stable loss replaces.
//!
//! `1 − AP = (1/n⁺) Σ_i h̃(r⁻_i / r⁺_i)`, `h̃(x) = x/(1 + x)`, with the ranks smoothed:
//! `r⁻_i = Σ_{j∈N} ℓ(f_i − f_j)` (negatives above positive i) and `r⁺_i = Σ_{k∈P} ℓ(f_i − f_k)`
//! (positives at or above it, itself included: ℓ(0) = 1, so r⁺_i ≥ 1 and the ratio is always
//! defined). ℓ is the one-sided Huber loss on sigmoid scores, as in the stable loss, so τ
//! means the same thing in both. Each positive couples to every other item through h̃ of a
//! ratio, which is exactly the instability seed 000 proves.

use super::{sigmoid, split_by_threshold, QueryLoss};
use crate::pairwise::{pair_loss_grad, Loss};
use crate::rerank::RerankError;

pub fn smooth_ap_loss_grad(
    scores: &[f32],
    labels: &[i32],
    tau: f32,
    threshold: i32,
) -> Result<Option<QueryLoss>, RerankError> {
    let (pos, neg) = split_by_threshold(labels, threshold);
    if pos.is_empty() || neg.is_empty() {
        return Ok(None);
    }
    let f: Vec<f64> = scores.iter().map(|&g| sigmoid(g)).collect();
    let f_pos: Vec<f32> = pos.iter().map(|&r| f[r] as f32).collect();
    let f_neg: Vec<f32> = neg.iter().map(|&r| f[r] as f32).collect();
    let huber = Loss::Huber { tau };
    let n_pos = pos.len() as f64;
    let mut loss = 0.0;
    let mut grad_f = vec![0f64; scores.len()];
    let mut g_self = [0f64];
    let mut g_neg = vec![0f64; neg.len()];
    let mut g_pos = vec![0f64; pos.len()];
    for (i, &ri) in pos.iter().enumerate() {
        let this = &f_pos[i..=i];
        let r_neg = pair_loss_grad(this, &f_neg, &[1.0], huber, &mut g_self, &mut g_neg)?;
        let d_neg_self = g_self[0];
        let r_pos = pair_loss_grad(this, &f_pos, &[1.0], huber, &mut g_self, &mut g_pos)?;
        let d_pos_self = g_self[0];
        let x = r_neg / r_pos;
        loss += x / (1.0 + x) / n_pos;
        // d h̃(N/D) = h̃'(x)·(dN/D − N·dD/D²), h̃'(x) = 1/(1 + x)².
        let outer = 1.0 / ((1.0 + x) * (1.0 + x) * n_pos);
        let (a, b) = (outer / r_pos, outer * r_neg / (r_pos * r_pos));
        grad_f[ri] += a * d_neg_self - b * d_pos_self;
        for (&rj, g) in neg.iter().zip(&g_neg) {
            grad_f[rj] += a * g;
        }
        for (&rk, g) in pos.iter().zip(&g_pos) {
            grad_f[rk] -= b * g;
        }
    }
    let grad = grad_f
        .iter()
        .zip(&f)
        .map(|(g, f)| g * f * (1.0 - f))
        .collect();
    Ok(Some(QueryLoss {
        loss,
        grad,
        pairs: pos.len() * (neg.len() + pos.len()),
    }))
}

#[cfg(test)]
mod tests {
    use super::super::sigmoid;
    use super::*;
    use crate::rerank::testutil::{check_gradient, huber};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Oracle: the formula as written, in f64.
    fn brute_force(scores: &[f32], labels: &[i32], tau: f64) -> f64 {
        let f: Vec<f64> = scores.iter().map(|&g| sigmoid(g)).collect();
        let pos: Vec<usize> = (0..f.len()).filter(|&r| labels[r] >= 1).collect();
        let mut total = 0.0;
        for &i in &pos {
            let mut r_neg = 0.0;
            let mut r_pos = 0.0;
            for j in 0..f.len() {
                let l = huber(f[i] - f[j], tau);
                if labels[j] >= 1 {
                    r_pos += l;
                } else {
                    r_neg += l;
                }
            }
            let x = r_neg / r_pos;
            total += x / (1.0 + x);
        }
        total / pos.len() as f64
    }

    #[test]
    fn matches_brute_force_and_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for trial in 0..50 {
            let tau = [0.1f32, 0.3, 0.03][trial % 3];
            let n = rng.random_range(2..12);
            let scores: Vec<f32> = (0..n).map(|_| rng.random_range(-2f32..2.0)).collect();
            let mut labels: Vec<i32> = (0..n).map(|_| rng.random_range(0..3)).collect();
            labels[0] = 1;
            labels[1] = 0;
            let q = smooth_ap_loss_grad(&scores, &labels, tau, 1)
                .unwrap()
                .unwrap();
            let oracle = brute_force(&scores, &labels, f64::from(tau));
            assert!(
                (q.loss - oracle).abs() < 1e-5 * oracle.max(1e-3),
                "{} vs {oracle}",
                q.loss
            );
            check_gradient(&scores, &q.grad, 1e-3, 3e-3, |s| {
                smooth_ap_loss_grad(s, &labels, tau, 1)
                    .unwrap()
                    .unwrap()
                    .loss
            });
        }
    }

    #[test]
    fn one_sided_queries_are_skipped() {
        assert_eq!(
            smooth_ap_loss_grad(&[0.0, 1.0], &[2, 1], 0.1, 1).unwrap(),
            None
        );
        assert_eq!(
            smooth_ap_loss_grad(&[0.0, 1.0], &[0, 0], 0.1, 1).unwrap(),
            None
        );
    }
}
