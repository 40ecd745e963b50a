//! Paired significance over queries: is system B's per-query metric better than A's by more
//! than chance? The two-sided paired randomization (sign-flip permutation) test, which
//! Smucker, Allan & Carterette (CIKM 2007) recommend for IR evaluation, and the paired t
//! statistic beside it.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Result of comparing paired per-query values.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct PairedTest {
    pub queries: usize,
    /// Mean of `b − a`.
    pub mean_difference: f64,
    /// Paired t statistic (`mean / (sd / √n)`); 0 when every difference is equal.
    pub t: f64,
    /// Two-sided p-value of the randomization test.
    pub p_value: f64,
    /// Permutations drawn (`2^n` when the test was exact).
    pub permutations: u64,
}

/// Random sign assignments a paired test draws unless told otherwise: the estimated
/// p-value's standard error is then at most √(0.25/100 000) ≈ 0.0016.
pub(crate) const DEFAULT_SAMPLES: u64 = 100_000;

/// Up to this many queries every sign assignment is enumerated.
const EXACT_MAX_QUERIES: usize = 16;

/// Compares `b` with `a` (same queries, same order). Above 16 queries, `samples` random sign
/// assignments (seeded, so the p-value is reproducible) estimate the p-value, counting the
/// observed assignment as one of them (p ≥ 1/(samples + 1), never 0).
pub(crate) fn paired_randomization(a: &[f64], b: &[f64], samples: u64, seed: u64) -> PairedTest {
    assert_eq!(a.len(), b.len(), "paired values");
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    let n = d.len();
    if n == 0 {
        return PairedTest {
            queries: 0,
            mean_difference: 0.0,
            t: 0.0,
            p_value: 1.0,
            permutations: 0,
        };
    }
    let sum: f64 = d.iter().sum();
    let mean = sum / n as f64;
    let var = if n > 1 {
        d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    let t = if var > 0.0 {
        mean / (var / n as f64).sqrt()
    } else {
        0.0
    };
    // |Σ ± d_i| at least as extreme as observed (with a tolerance for float noise).
    let observed = sum.abs() - 1e-12 * d.iter().map(|x| x.abs()).sum::<f64>();
    let (extreme, permutations) = if n <= EXACT_MAX_QUERIES {
        let total = 1u64 << n;
        let extreme = (0..total)
            .filter(|mask| {
                let s: f64 = d
                    .iter()
                    .enumerate()
                    .map(|(i, x)| if mask >> i & 1 == 1 { -x } else { *x })
                    .sum();
                s.abs() >= observed
            })
            .count() as u64;
        (extreme, total)
    } else {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut extreme = 1u64; // the observed assignment
        for _ in 0..samples {
            let s: f64 = d
                .iter()
                .map(|x| if rng.random::<bool>() { -x } else { *x })
                .sum();
            if s.abs() >= observed {
                extreme += 1;
            }
        }
        (extreme, samples + 1)
    };
    PairedTest {
        queries: n,
        mean_difference: mean,
        t,
        p_value: extreme as f64 / permutations as f64,
        permutations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_test_by_hand() {
        // Differences (1, 2, 3): of the 8 sign assignments only (+,+,+) and (−,−,−) reach
        // |sum| = 6, so p = 2/8.
        let r = paired_randomization(&[0.0, 0.0, 0.0], &[1.0, 2.0, 3.0], 0, 0);
        assert_eq!(r.p_value, 0.25);
        assert_eq!(r.permutations, 8);
        assert!((r.mean_difference - 2.0).abs() < 1e-12);
        // t = 2 / (1 / √3).
        assert!((r.t - 2.0 * 3f64.sqrt()).abs() < 1e-12);
        // Identical systems: every assignment is as extreme, p = 1.
        let same = paired_randomization(&[0.3, 0.5], &[0.3, 0.5], 0, 0);
        assert_eq!(same.p_value, 1.0);
    }

    #[test]
    fn sampled_test_agrees_with_the_exact_one() {
        // 16 queries: exact; the same differences plus 4 zero differences (which change no
        // sum) go through the sampler and must land within 4 standard errors.
        let a: Vec<f64> = (0..16).map(|i| (i as f64 * 0.37).sin().abs()).collect();
        let b: Vec<f64> = a
            .iter()
            .enumerate()
            .map(|(i, x)| x + 0.05 + 0.2 * ((i as f64 * 1.3).cos()))
            .collect();
        let exact = paired_randomization(&a, &b, 0, 0);
        let (mut a2, mut b2) = (a.clone(), b.clone());
        a2.extend([0.5; 4]);
        b2.extend([0.5; 4]);
        let samples = 200_000;
        let sampled = paired_randomization(&a2, &b2, samples, 7);
        let se = (exact.p_value * (1.0 - exact.p_value) / samples as f64).sqrt();
        assert!(
            (sampled.p_value - exact.p_value).abs() < 4.0 * se + 1e-5,
            "exact {} sampled {}",
            exact.p_value,
            sampled.p_value
        );
        assert!(exact.p_value > 0.0 && exact.p_value < 1.0);
    }
}
