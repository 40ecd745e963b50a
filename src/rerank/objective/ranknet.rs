//! RankNet / pairwise logistic (SPEC §3.4, book §22.7): `Σ_{i≻j} ln(1 + exp(−σ(g_i − g_j)))`
//! over every pair whose grades differ, on the raw scores g.
//!
//! The sum is divided by the query's number of pairs, so every query weighs the same in a
//! batch, as in the AP objectives (a query's minimiser is unchanged; only the balance
//! between queries differs from the plain sum). Pairs are formed grade level by grade level:
//! rows of grade k against every row of a lower grade, one [`pair_loss_grad`] call per level,
//! so each pair i ≻ j is counted exactly once.

use super::QueryLoss;
use crate::pairwise::{pair_loss_grad, Loss};
use crate::rerank::RerankError;

pub fn ranknet_loss_grad(
    scores: &[f32],
    labels: &[i32],
    sigma: f32,
) -> Result<Option<QueryLoss>, RerankError> {
    let mut levels: Vec<i32> = labels.to_vec();
    levels.sort_unstable();
    levels.dedup();
    let mut loss = 0.0;
    let mut grad = vec![0f64; scores.len()];
    let mut pairs = 0;
    for &level in levels.iter().skip(1) {
        let upper: Vec<usize> = (0..labels.len()).filter(|&r| labels[r] == level).collect();
        let lower: Vec<usize> = (0..labels.len()).filter(|&r| labels[r] < level).collect();
        let pos: Vec<f32> = upper.iter().map(|&r| scores[r]).collect();
        let neg: Vec<f32> = lower.iter().map(|&r| scores[r]).collect();
        let mut gp = vec![0f64; pos.len()];
        let mut gn = vec![0f64; neg.len()];
        let ones = vec![1f32; pos.len()];
        loss += pair_loss_grad(
            &pos,
            &neg,
            &ones,
            Loss::Logistic { sigma },
            &mut gp,
            &mut gn,
        )?;
        for (&r, g) in upper.iter().zip(&gp).chain(lower.iter().zip(&gn)) {
            grad[r] += g;
        }
        pairs += pos.len() * neg.len();
    }
    if pairs == 0 {
        return Ok(None);
    }
    let scale = 1.0 / pairs as f64;
    grad.iter_mut().for_each(|g| *g *= scale);
    Ok(Some(QueryLoss {
        loss: loss * scale,
        grad,
        pairs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::testutil::check_gradient;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Oracle: the SPEC sum over ordered pairs by brute force, in f64.
    fn brute_force(scores: &[f32], labels: &[i32], sigma: f64) -> (f64, usize) {
        let mut sum = 0.0;
        let mut pairs = 0;
        for i in 0..scores.len() {
            for j in 0..scores.len() {
                if labels[i] > labels[j] {
                    let d = f64::from(scores[i]) - f64::from(scores[j]);
                    sum += (1.0 + (-sigma * d).exp()).ln();
                    pairs += 1;
                }
            }
        }
        (sum / pairs as f64, pairs)
    }

    #[test]
    fn matches_brute_force_and_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..50 {
            let n = rng.random_range(2..15);
            let scores: Vec<f32> = (0..n).map(|_| rng.random_range(-3f32..3.0)).collect();
            let mut labels: Vec<i32> = (0..n).map(|_| rng.random_range(0..5)).collect();
            labels[0] = 4;
            labels[1] = 0;
            let q = ranknet_loss_grad(&scores, &labels, 1.5).unwrap().unwrap();
            let (oracle, pairs) = brute_force(&scores, &labels, 1.5);
            assert_eq!(q.pairs, pairs);
            assert!(
                (q.loss - oracle).abs() < 1e-6 * oracle.max(1.0),
                "{} vs {oracle}",
                q.loss
            );
            check_gradient(&scores, &q.grad, 1e-3, 2e-3, |s| {
                ranknet_loss_grad(s, &labels, 1.5).unwrap().unwrap().loss
            });
        }
    }

    #[test]
    fn equal_grades_are_skipped() {
        assert_eq!(ranknet_loss_grad(&[1.0, 2.0], &[3, 3], 1.0).unwrap(), None);
    }
}
