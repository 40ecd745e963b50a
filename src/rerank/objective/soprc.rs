//! SOPRC, the sampling-rate-invariant AUPRC estimator of seed 003 (SPEC §3.4; eq. 8, Alg. 1–2,
//! eq. 9 as corrected in seed notes §B.3–§B.5, §B.9; the per-query form of §B.10a).
//!
//! Per query (positives = grade ≥ threshold, on bounded scores `f = sigmoid(g)` as the other AP
//! objectives), with `n⁺` positives `s_i` and `n⁻` negatives `t_x` in the batch, and the whole
//! query's `N⁺` positives among `N` rows (the same counts unless the trainer samples rows,
//! `--sample-rows`), prior `π = N⁺/N` and `κ = (1 − π)/π`:
//! ```text
//! A_i = (1/n⁻) Σ_x ℓ₁(s_i − t_x)                   soft FPR at threshold s_i (Huber, margin τ₁)
//! B_i = 1/N⁺ + (1/K) Σ_k ℓ₂(s_i − v_k)              soft TPR from the state v (stop-gradient)
//! L   = (1/n⁺) Σ_i σ(κ A_i / B_i) + L_var,  σ(r) = r/(1 + r)
//! ℓ₂(x) = tanh(−x/(2τ₂)) for x < 0, else 0
//! L_var = (λ₁/n⁺) Σ_{s_i<μ⁺} (s_i − μ⁺)² + (λ₂/n⁻) Σ_{t_x>μ⁻} (t_x − μ⁻)²      (eq. 9)
//! ```
//! The state `v_q ∈ [0, 1]^K` tracks the quantile function of the query's positive scores: each
//! time the query is in a batch, `v ← (1 − β)v + β·φ(sorted s)` (eq. 10) *before* the loss is
//! computed (Alg. 1), with φ the interpolation of Alg. 2; the first visit sets `v = φ(s)`
//! (Prop. 1: initialising at the target removes the `(1 − β)^T` bias). No gradient flows through
//! B, as in the authors' code (§B.5).
//!
//! Two choices differ from the authors' image-retrieval code, because here a query's positive
//! count and rate are known exactly:
//! - **The TPR's self term is `1/N⁺`**, not the code's `(1 + Σ_k ℓ₂)/(K + 1)`: the "1" counts
//!   the positive itself among the positives at or above it, and `N⁺` is its share; the code's
//!   `1/(K + 1)` assumes K ≈ N⁺. With `v` the exact sorted positives (K = N⁺) and τ₂ → 0, `B_i`
//!   is exactly the TPR at `s_i` and `κA_i/B_i` the ratio of negatives to positives above
//!   `s_i`, so `1 − σ(r_i)` is a smoothed precision at `s_i`.
//! - **The prior is the query's own rate**, not a tuned proxy. With whole queries in every
//!   batch it equals the batch rate, and the estimator's invariance to a biased sampler has
//!   nothing to correct; it matters when rows are sampled.
//!
//! φ (Alg. 2, corrected per §B.9 item 7): the sorted scores `u_1 ≤ … ≤ u_n` are knots of a
//! piecewise-linear function Λ with `Λ(j) = u_j`, `Λ(0) = max(2u_1 − u_2, 0)` and
//! `Λ(n + 1) = min(2u_n − u_{n−1}, 1)` (linear extrapolation clipped to the score range). The
//! "left" interpolation puts `u_i` at quantile `i/n`, the "right" one at `(i − 1)/n`; φ is
//! their mean at the K bin centres `q_k = (k − ½)/K`: `φ_k = (Λ(n q_k) + Λ(n q_k + 1))/2`. The
//! printed Alg. 2 grid `q_k = k/K` shifts every point up by half a spacing; the bin centres
//! reproduce evenly spaced scores exactly when K = n. One positive gives a constant φ.

use serde::{Deserialize, Serialize};

use super::{
    first_out_of_range, graded_mean, sigmoid, split_by_threshold, Domain, OutOfRange, QueryInput,
    QueryLoss, QueryState,
};
use crate::pairwise::{pair_loss_grad, Loss};
use crate::rerank::RerankError;

/// Hyperparameters (seed notes §B.10b: the authors' code's τ₁, τ₂, λ₁, λ₂ and K; β is per
/// query visit here, once per epoch, hence larger than the paper's per-step 0.001).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Soprc {
    /// Huber margin τ₁ of the FPR surrogate ℓ₁ (on sigmoid scores).
    pub tau1: f32,
    /// Temperature τ₂ of the TPR surrogate ℓ₂ (ℓ₂ → the 0-1 step as τ₂ → 0).
    pub tau2: f64,
    /// β of the state's moving average (1: the current scores' quantiles only).
    pub beta: f64,
    /// K, the length of the quantile state v per query and level.
    pub quantiles: usize,
    /// λ₁ and λ₂ of the semi-variance regulariser (eq. 9).
    pub lambda_pos: f64,
    pub lambda_neg: f64,
    /// Grades at or above this are positive.
    pub threshold: i32,
    /// Mean over every relevance level of the query (see [`super::relevance_levels`]).
    #[serde(default)]
    pub graded: bool,
}

impl Default for Soprc {
    fn default() -> Self {
        Soprc {
            tau1: 0.1,
            tau2: 0.001,
            beta: 0.1,
            quantiles: 100,
            lambda_pos: 1.0,
            lambda_neg: 5.0,
            threshold: 1,
            graded: false,
        }
    }
}

/// The largest K accepted (a state of 4 KiB per query and level).
const MAX_QUANTILES: usize = 1024;

impl Soprc {
    /// The first hyperparameter outside its domain (see [`super::Objective::out_of_range`]).
    pub fn out_of_range(&self) -> Option<OutOfRange> {
        first_out_of_range(&[
            ("tau1", f64::from(self.tau1), Domain::Positive),
            ("tau2", self.tau2, Domain::Positive),
            ("beta", self.beta, Domain::UnitInterval),
            (
                "quantiles",
                self.quantiles as f64,
                Domain::UpTo(MAX_QUANTILES),
            ),
            ("lambda_pos", self.lambda_pos, Domain::NonNegative),
            ("lambda_neg", self.lambda_neg, Domain::NonNegative),
            ("threshold", f64::from(self.threshold), Domain::AtLeastOne),
        ])
    }

    /// One query: at each relevance level, move v_q towards φ(s), then loss and ∂L/∂g.
    pub(super) fn query_loss(
        &self,
        input: &QueryInput,
        state: &mut QueryState,
    ) -> Result<Option<QueryLoss>, RerankError> {
        graded_mean(input.labels, self.threshold, self.graded, |level| {
            let mut v = state.quantiles.remove(&level);
            let q = self.binary_query_loss(input, level, &mut v);
            if let Some(v) = v {
                state.quantiles.insert(level, v);
            }
            q
        })
    }

    fn binary_query_loss(
        &self,
        input: &QueryInput,
        threshold: i32,
        state: &mut Option<Vec<f32>>,
    ) -> Result<Option<QueryLoss>, RerankError> {
        let (pos, neg) = split_by_threshold(input.labels, threshold);
        if pos.is_empty() || neg.is_empty() {
            return Ok(None);
        }
        let f: Vec<f64> = input.scores.iter().map(|&g| sigmoid(g)).collect();
        let f_pos: Vec<f32> = pos.iter().map(|&r| f[r] as f32).collect();
        let f_neg: Vec<f32> = neg.iter().map(|&r| f[r] as f32).collect();
        let mut sorted = f_pos.clone();
        sorted.sort_by(f32::total_cmp);
        let target = quantile_grid(&sorted, self.quantiles, 0.0, 1.0);
        let v = match state {
            None => state.insert(target),
            Some(v) => {
                for (v, m) in v.iter_mut().zip(&target) {
                    *v = ((1.0 - self.beta) * f64::from(*v) + self.beta * f64::from(*m)) as f32;
                }
                v
            }
        };
        // The query's own positive count and rate, from all its rows even when the trainer
        // sampled some of them (the "true prior" of eq. 8).
        let n_all = input.query_labels.len();
        let n_pos_all = input
            .query_labels
            .iter()
            .filter(|&&l| l >= threshold)
            .count();
        let tpr = soft_tpr(&f_pos, v, n_pos_all.max(pos.len()), self.tau2);
        let kappa = (n_all - n_pos_all) as f64 / n_pos_all.max(1) as f64;
        let (mut loss, mut grad_pos, mut grad_neg) =
            soprc_loss_grad(&f_pos, &f_neg, &tpr, kappa, self.tau1)?;
        loss += semi_variance(&f_pos, true, self.lambda_pos, &mut grad_pos)
            + semi_variance(&f_neg, false, self.lambda_neg, &mut grad_neg);
        // Chain rule through the sigmoid: ∂f/∂g = f(1 − f).
        let mut grad = vec![0f64; input.scores.len()];
        for (&r, g) in pos.iter().zip(&grad_pos).chain(neg.iter().zip(&grad_neg)) {
            grad[r] = g * f[r] * (1.0 - f[r]);
        }
        Ok(Some(QueryLoss {
            loss,
            grad,
            pairs: pos.len() * (neg.len() + self.quantiles),
        }))
    }
}

/// Alg. 2's φ (module docs): K quantile points of the ascending scores `sorted`, with the
/// extrapolated end knots clipped to `[lo, hi]`.
pub(crate) fn quantile_grid(sorted: &[f32], k: usize, lo: f32, hi: f32) -> Vec<f32> {
    let n = sorted.len();
    if n < 2 {
        return vec![sorted.first().copied().unwrap_or(lo); k];
    }
    let mut knots = Vec::with_capacity(n + 2);
    knots.push(f64::from((2.0 * sorted[0] - sorted[1]).max(lo)));
    knots.extend(sorted.iter().map(|&u| f64::from(u)));
    knots.push(f64::from((2.0 * sorted[n - 1] - sorted[n - 2]).min(hi)));
    let at = |p: f64| {
        let j = (p.floor() as usize).min(n);
        let w = p - j as f64;
        knots[j] * (1.0 - w) + knots[j + 1] * w
    };
    (1..=k)
        .map(|j| {
            let p = (j as f64 - 0.5) * n as f64 / k as f64;
            ((at(p) + at(p + 1.0)) / 2.0) as f32
        })
        .collect()
}

/// `B_i = 1/N⁺ + (1/K) Σ_k ℓ₂(s_i − v_k)`, `ℓ₂(x) = tanh(−x/(2τ₂))` for `x < 0`, else 0;
/// N⁺ is the query's number of positives (`n_pos_all`, all rows, sampled or not).
pub(crate) fn soft_tpr(f_pos: &[f32], v: &[f32], n_pos_all: usize, tau2: f64) -> Vec<f64> {
    let self_share = 1.0 / n_pos_all as f64;
    let k = v.len() as f64;
    // tanh(y) rounds to exactly 1.0 in f64 for y ≥ 20 (1 − tanh 20 ≈ 8e-18), so points more
    // than 40τ₂ above s count 1 without evaluating it.
    let saturated = -40.0 * tau2;
    f_pos
        .iter()
        .map(|&s| {
            let above: f64 = v
                .iter()
                .map(|&vk| f64::from(s) - f64::from(vk))
                .map(|x| match x {
                    x if x <= saturated => 1.0,
                    x if x < 0.0 => (-x / (2.0 * tau2)).tanh(),
                    _ => 0.0,
                })
                .sum();
            self_share + above / k
        })
        .collect()
}

/// Eq. 8 with the TPR estimates `tpr` held constant: `(1/n⁺) Σ_i σ(κ A_i / B_i)` and its
/// gradient with respect to the positives' and the negatives' scores.
pub(crate) fn soprc_loss_grad(
    f_pos: &[f32],
    f_neg: &[f32],
    tpr: &[f64],
    kappa: f64,
    tau1: f32,
) -> Result<(f64, Vec<f64>, Vec<f64>), RerankError> {
    let huber = Loss::Huber { tau: tau1 };
    let (n_pos, n_neg) = (f_pos.len() as f64, f_neg.len() as f64);
    let mut loss = 0.0;
    let mut grad_pos = vec![0f64; f_pos.len()];
    let mut grad_neg = vec![0f64; f_neg.len()];
    let mut g_self = [0f64];
    let mut g_neg = vec![0f64; f_neg.len()];
    for (i, &b) in tpr.iter().enumerate() {
        let a =
            pair_loss_grad(&f_pos[i..=i], f_neg, &[1.0], huber, &mut g_self, &mut g_neg)? / n_neg;
        let r = kappa * a / b;
        loss += r / (1.0 + r) / n_pos;
        // ∂σ(r)/∂A_i = σ'(r)·κ/B_i with σ'(r) = 1/(1 + r)², and ∂A_i = (1/n⁻)·∂(pair sum).
        let c = kappa / ((1.0 + r) * (1.0 + r) * b * n_pos * n_neg);
        grad_pos[i] += c * g_self[0];
        for (acc, g) in grad_neg.iter_mut().zip(&g_neg) {
            *acc += c * g;
        }
    }
    Ok((loss, grad_pos, grad_neg))
}

/// `weight · (1/n) Σ_{i∈A} (s_i − μ)²` with μ the mean of `values` and A the values below it
/// (`below`) or above it; adds its gradient to `grad` (A held fixed: the term is C¹ where a
/// value crosses μ, since its summand is zero there).
fn semi_variance(values: &[f32], below: bool, weight: f64, grad: &mut [f64]) -> f64 {
    let n = values.len() as f64;
    let mu = values.iter().map(|&s| f64::from(s)).sum::<f64>() / n;
    let side = |s: f64| if below { s < mu } else { s > mu };
    let deviation: Vec<f64> = values
        .iter()
        .map(|&s| f64::from(s))
        .map(|s| if side(s) { s - mu } else { 0.0 })
        .collect();
    let sum_dev: f64 = deviation.iter().sum();
    for (g, d) in grad.iter_mut().zip(&deviation) {
        *g += weight * 2.0 / n * (d - sum_dev / n);
    }
    weight * (deviation.iter().map(|d| d * d).sum::<f64>() / n)
}

#[cfg(test)]
mod tests {
    use super::super::Objective;
    use super::*;
    use crate::rerank::testutil::{check_gradient, check_query_gradient, huber, random_scores};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Eq. 8 written out as double loops in f64, the TPR from its definition.
    fn brute_force(s: &[f64], t: &[f64], v: &[f64], p: &Soprc) -> f64 {
        let kappa = t.len() as f64 / s.len() as f64;
        let mut total = 0.0;
        for &si in s {
            let fpr: f64 = t
                .iter()
                .map(|&tx| huber(si - tx, f64::from(p.tau1)))
                .sum::<f64>()
                / t.len() as f64;
            let mut tpr = 1.0 / s.len() as f64;
            for &vk in v {
                let x = si - vk;
                if x < 0.0 {
                    // (e^{−x/τ₂} − 1)/(e^{−x/τ₂} + 1), multiplied through by e^{x/τ₂} so that
                    // it does not overflow.
                    let e = (x / p.tau2).exp();
                    tpr += (1.0 - e) / (1.0 + e) / v.len() as f64;
                }
            }
            let r = kappa * fpr / tpr;
            total += r / (1.0 + r);
        }
        let semi = |xs: &[f64], below: bool| {
            let mu = xs.iter().sum::<f64>() / xs.len() as f64;
            xs.iter()
                .filter(|&&x| if below { x < mu } else { x > mu })
                .map(|x| (x - mu).powi(2))
                .sum::<f64>()
                / xs.len() as f64
        };
        total / s.len() as f64 + p.lambda_pos * semi(s, true) + p.lambda_neg * semi(t, false)
    }

    fn wide(s: &[f32]) -> Vec<f64> {
        s.iter().map(|&x| f64::from(x)).collect()
    }

    /// The loss of given sigmoid scores and state, through the product functions.
    fn product_loss(s: &[f32], t: &[f32], v: &[f32], p: &Soprc) -> f64 {
        let tpr = soft_tpr(s, v, s.len(), p.tau2);
        let kappa = t.len() as f64 / s.len() as f64;
        let (mut loss, mut gp, mut gn) = soprc_loss_grad(s, t, &tpr, kappa, p.tau1).unwrap();
        loss += semi_variance(s, true, p.lambda_pos, &mut gp);
        loss += semi_variance(t, false, p.lambda_neg, &mut gn);
        loss
    }

    #[test]
    fn loss_matches_the_equations_written_as_loops() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for trial in 0..200 {
            let p = Soprc {
                tau1: [0.03, 0.1, 0.3][trial % 3],
                tau2: [0.001, 0.01, 0.1][trial % 3],
                ..Soprc::default()
            };
            let (np, nn, k) = (
                rng.random_range(1..12),
                rng.random_range(1..200),
                rng.random_range(1..50),
            );
            let s = random_scores(&mut rng, np);
            let t = random_scores(&mut rng, nn);
            let v = random_scores(&mut rng, k);
            let loss = product_loss(&s, &t, &v, &p);
            let oracle = brute_force(&wide(&s), &wide(&t), &wide(&v), &p);
            assert!((loss - oracle).abs() < 1e-5 * oracle, "{loss} vs {oracle}");
        }
    }

    /// With v the exact sorted positives and a step-like ℓ₂, B_i is the fraction of positives
    /// at or above s_i (counted by hand), whatever the order of the positives.
    #[test]
    fn tpr_is_exact_on_the_positives_themselves() {
        let s = [0.3f32, 0.9, 0.1, 0.6];
        let mut v = s.to_vec();
        v.sort_by(f32::total_cmp);
        let b = soft_tpr(&s, &v, s.len(), 1e-6);
        for (got, want) in b.iter().zip([3.0 / 4.0, 1.0 / 4.0, 1.0, 2.0 / 4.0]) {
            assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        }
    }

    /// The saturation shortcut changes nothing: every term equals tanh's own value.
    #[test]
    fn tpr_shortcut_is_exact() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for tau2 in [1e-4, 1e-3, 1e-2, 0.1] {
            let s = random_scores(&mut rng, 7);
            let v = random_scores(&mut rng, 300);
            let direct: Vec<f64> = s
                .iter()
                .map(|&si| {
                    let above: f64 = v
                        .iter()
                        .map(|&vk| f64::from(si) - f64::from(vk))
                        .filter(|&x| x < 0.0)
                        .map(|x| (-x / (2.0 * tau2)).tanh())
                        .sum();
                    1.0 / 7.0 + above / 300.0
                })
                .collect();
            assert_eq!(soft_tpr(&s, &v, 7, tau2), direct);
        }
    }

    /// Alg. 2 checked against a literal reading: left and right interpolations built segment by
    /// segment over the grid (as the paper's loops), and against closed forms.
    #[test]
    fn quantile_grid_by_hand_and_against_the_segment_loops() {
        // Evenly spaced scores, K = n: φ reproduces them (bin centres).
        let u = [0.2f32, 0.3, 0.4, 0.5];
        for (a, b) in quantile_grid(&u, 4, 0.0, 1.0).iter().zip(u) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
        // K = 2n on the same line Λ(p) = 0.1 + 0.1p: φ_k = 0.15 + 0.05(k − ½).
        let want = [0.175f32, 0.225, 0.275, 0.325, 0.375, 0.425, 0.475, 0.525];
        for (a, b) in quantile_grid(&u, 8, 0.0, 1.0).iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
        // One positive: constant; clipping at the score range.
        assert_eq!(quantile_grid(&[0.4], 3, 0.0, 1.0), [0.4, 0.4, 0.4]);
        let clipped = quantile_grid(&[0.02, 0.5, 0.98], 30, 0.0, 1.0);
        assert!(clipped.iter().all(|&x| (0.0..=1.0).contains(&x)));

        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for _ in 0..200 {
            let n = rng.random_range(2..15);
            let k = rng.random_range(1..120);
            let mut u = random_scores(&mut rng, n);
            u.sort_by(f32::total_cmp);
            let got = quantile_grid(&u, k, 0.0, 1.0);
            assert!(got.windows(2).all(|w| w[0] <= w[1]), "monotone");
            // Literal segments: left puts u_i at position i (i = 0..n), right at i − 1
            // (i = 1..n+1); each grid point is in exactly one segment of each.
            let u0 = f64::from((2.0 * u[0] - u[1]).max(0.0));
            let un1 = f64::from((2.0 * u[n - 1] - u[n - 2]).min(1.0));
            let knot = |i: usize| match i {
                0 => u0,
                i if i == n + 1 => un1,
                i => f64::from(u[i - 1]),
            };
            let mut left = vec![f64::NAN; k];
            let mut right = vec![f64::NAN; k];
            for i in 1..=n {
                for (j, slot) in left.iter_mut().enumerate() {
                    let p = (j as f64 + 0.5) * n as f64 / k as f64;
                    if p > (i - 1) as f64 && p <= i as f64 {
                        *slot = (i as f64 - p) * knot(i - 1) + (p - (i - 1) as f64) * knot(i);
                    }
                }
                for (j, slot) in right.iter_mut().enumerate() {
                    let p = (j as f64 + 0.5) * n as f64 / k as f64;
                    if p >= (i - 1) as f64 && p < i as f64 {
                        *slot = (i as f64 - p) * knot(i) + (p - (i - 1) as f64) * knot(i + 1);
                    }
                }
            }
            for j in 0..k {
                let want = (left[j] + right[j]) / 2.0;
                assert!((f64::from(got[j]) - want).abs() < 1e-6, "{n} {k} {j}");
            }
        }
    }

    /// ∂L/∂s and ∂L/∂t with B held constant, against central differences of the same function
    /// with B frozen (step 1e-3, tolerance as the stable AP check).
    #[test]
    fn gradient_matches_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for trial in 0..40 {
            let p = Soprc {
                tau1: [0.1, 0.3, 0.03][trial % 3],
                ..Soprc::default()
            };
            let np = rng.random_range(1..6);
            let nn = rng.random_range(1..8);
            let s = random_scores(&mut rng, np);
            let t = random_scores(&mut rng, nn);
            let v = random_scores(&mut rng, 20);
            let tpr = soft_tpr(&s, &v, np, p.tau2);
            let kappa = nn as f64 / np as f64;
            let frozen = |x: &[f32]| {
                let (mut loss, mut gp, mut gn) =
                    soprc_loss_grad(&x[..np], &x[np..], &tpr, kappa, p.tau1).unwrap();
                loss += semi_variance(&x[..np], true, p.lambda_pos, &mut gp);
                loss += semi_variance(&x[np..], false, p.lambda_neg, &mut gn);
                (loss, gp, gn)
            };
            let all: Vec<f32> = s.iter().chain(&t).copied().collect();
            let (_, gp, gn) = frozen(&all);
            let analytic: Vec<f64> = gp.iter().chain(&gn).copied().collect();
            check_gradient(&all, &analytic, 1e-3, 2e-3, |x| frozen(x).0);
        }
    }

    /// The whole per-query path (sigmoid, state, regulariser) in raw scores g. With τ₂ = 10⁶, ℓ₂
    /// is ~10⁻⁷ per point, so B = 1/n⁺ to that precision and the stop-gradient is invisible to
    /// finite differences.
    #[test]
    fn query_gradient_in_raw_scores() {
        let p = Objective::Soprc(Soprc {
            tau2: 1e6,
            ..Soprc::default()
        });
        check_query_gradient(&p, 8);
        let graded = Objective::Soprc(Soprc {
            tau2: 1e6,
            graded: true,
            ..Soprc::default()
        });
        check_query_gradient(&graded, 9);
    }

    /// First visit: v = φ(s); later visits: v ← (1 − β)v + βφ(s), per level; a one-sided query
    /// is skipped and leaves the state alone.
    #[test]
    fn state_follows_the_moving_average() {
        let p = Soprc {
            beta: 0.25,
            quantiles: 4,
            graded: true,
            ..Soprc::default()
        };
        let labels = [2, 0, 1, 0];
        let mut state = QueryState::new();
        let visit = |g: [f32; 4], state: &mut QueryState| {
            let input = QueryInput {
                scores: &g,
                previous_scores: None,
                labels: &labels,
                query_labels: &labels,
            };
            p.query_loss(&input, state).unwrap().unwrap();
        };
        visit([1.0, -1.0, 0.0, -2.0], &mut state);
        assert_eq!(state.quantiles.keys().copied().collect::<Vec<_>>(), [1, 2]);
        // Level 2 has one positive, sigmoid(1): a constant state.
        let s1 = sigmoid(1.0) as f32;
        assert_eq!(state.quantiles[&2], [s1; 4]);
        visit([2.0, -1.0, 0.0, -2.0], &mut state);
        let s2 = sigmoid(2.0);
        for &x in &state.quantiles[&2] {
            assert!((f64::from(x) - (0.75 * f64::from(s1) + 0.25 * s2)).abs() < 1e-6);
        }
        let before = state.clone();
        let input = QueryInput {
            scores: &[0.0, 1.0],
            previous_scores: None,
            labels: &[0, 0],
            query_labels: &[0, 0],
        };
        assert_eq!(p.query_loss(&input, &mut state).unwrap(), None);
        assert_eq!(state, before);
    }

    /// With sampled rows, κ and the TPR's self term come from the whole query: the loss equals
    /// the equations with the whole query's n⁺ and n⁻ (regulariser off, so only eq. 8 is
    /// compared).
    #[test]
    fn prior_comes_from_the_whole_query() {
        let p = Soprc {
            lambda_pos: 0.0,
            lambda_neg: 0.0,
            ..Soprc::default()
        };
        let scores = [0.5f32, -0.3, 1.2, 0.1];
        let labels = [1, 0, 0, 0];
        let query_labels = [1, 0, 0, 0, 0, 0, 0, 1, 1, 0];
        let input = QueryInput {
            scores: &scores,
            previous_scores: None,
            labels: &labels,
            query_labels: &query_labels,
        };
        let got = p
            .query_loss(&input, &mut QueryState::new())
            .unwrap()
            .unwrap()
            .loss;
        // One sampled positive s; κ = 7/3; B = 1/3 (the state is φ(s), all equal to s, ℓ₂(0) = 0).
        let s = sigmoid(0.5);
        let fpr: f64 = [-0.3f32, 1.2, 0.1]
            .iter()
            .map(|&g| huber(s - sigmoid(g), 0.1))
            .sum::<f64>()
            / 3.0;
        let r = (7.0 / 3.0) * fpr / (1.0 / 3.0);
        let want = r / (1.0 + r);
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }

    #[test]
    fn bad_parameters_are_named() {
        for (p, name) in [
            (
                Soprc {
                    beta: 0.0,
                    ..Soprc::default()
                },
                "beta",
            ),
            (
                Soprc {
                    quantiles: 0,
                    ..Soprc::default()
                },
                "quantiles",
            ),
            (
                Soprc {
                    tau2: f64::NAN,
                    ..Soprc::default()
                },
                "tau2",
            ),
            (
                Soprc {
                    lambda_neg: -1.0,
                    ..Soprc::default()
                },
                "lambda_neg",
            ),
        ] {
            assert_eq!(p.out_of_range().map(|e| e.param), Some(name));
        }
    }
}
