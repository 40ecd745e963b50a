//! The two-sided sign test: under the null hypothesis that neither ranker is better, each
//! impression one team won is a fair coin, so the wins of A among the `n` decided impressions
//! follow Binomial(n, 1/2). The p-value is the probability of a split at least as uneven as
//! the one observed: `min(1, 2·P(X ≤ min(a, b)))`, the distribution being symmetric.
//!
//! Computed exactly for every `n` (no normal approximation): the terms `C(n, i)/2ⁿ` are summed
//! in log space, each from the previous one, so nothing overflows or underflows before the
//! final exponential. It is written here rather than taken from `statrs` (not among this
//! project's dependencies, and it pulls in `nalgebra`) because the whole test is this one
//! sum; the tests check it against an enumeration of every outcome.

/// `ln C(n, k)`, summed term by term (exact up to rounding; O(min(k, n − k))).
fn ln_choose(n: u64, k: u64) -> f64 {
    let k = k.min(n - k);
    (1..=k)
        .map(|i| ((n - k + i) as f64).ln() - (i as f64).ln())
        .sum()
}

/// An always-valid p-value for the same hypothesis, safe to watch after every impression:
/// under H0, the chance that it *ever* falls below alpha is at most alpha (Ville's
/// inequality), where the fixed-horizon [`sign_test`] watched that way rejects far more often.
///
/// It is the mixture sequential probability ratio test (Robbins 1970; Johari et al.,
/// "Always valid inference", KDD 2017) with a uniform prior on the win probability of A:
/// `Λ = ∫₀¹ pᵃ(1−p)ᵇ dp / 2⁻ⁿ = 2ⁿ / ((n+1)·C(n, a))` for `a` wins of A among `n`, and the
/// p-value is `min(1, 1/Λ)` (kept non-increasing over the impressions by the caller if it
/// wants the running minimum; the counts alone give this value).
pub fn always_valid_p(wins_a: u64, wins_b: u64) -> f64 {
    let n = wins_a + wins_b;
    let ln_inverse =
        ((n + 1) as f64).ln() + ln_choose(n, wins_a) - n as f64 * std::f64::consts::LN_2;
    ln_inverse.exp().min(1.0)
}

/// Two-sided exact binomial (sign) test of `wins_a` against `wins_b` successes with p = 1/2.
/// No decided impression gives 1.
pub fn sign_test(wins_a: u64, wins_b: u64) -> f64 {
    let n = wins_a + wins_b;
    let k = wins_a.min(wins_b);
    if n == 0 {
        return 1.0;
    }
    // ln C(n, i) for i = 0..=k, then log-sum-exp.
    let mut ln_c = 0.0f64;
    let mut terms = Vec::with_capacity(k as usize + 1);
    for i in 0..=k {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        terms.push(ln_c);
    }
    let max = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = terms.iter().map(|t| (t - max).exp()).sum();
    let ln_tail = max + sum.ln() - n as f64 * std::f64::consts::LN_2;
    (2.0 * ln_tail.exp()).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The p-value by enumerating all 2ⁿ win/loss sequences: the share of sequences whose
    /// split is at least as uneven as `a` against `b`.
    fn enumerated(a: u64, b: u64) -> f64 {
        let n = a + b;
        let observed = a.abs_diff(b);
        let extreme = (0..1u64 << n)
            .filter(|s| {
                let wins = u64::from(s.count_ones());
                wins.abs_diff(n - wins) >= observed
            })
            .count();
        extreme as f64 / (1u64 << n) as f64
    }

    #[test]
    fn against_enumeration() {
        for n in 0..=16u64 {
            for a in 0..=n {
                let (p, q) = (sign_test(a, n - a), enumerated(a, n - a));
                assert!((p - q).abs() < 1e-12, "{a} vs {}: {p} vs {q}", n - a);
            }
        }
    }

    #[test]
    fn always_valid_by_hand() {
        // 10 of 10: (n+1)·C(10,0)/2¹⁰ = 11/1024.
        assert!((always_valid_p(0, 10) - 11.0 / 1024.0).abs() < 1e-15);
        // 3 of 5: 6·10/32 > 1.
        assert_eq!(always_valid_p(3, 2), 1.0);
        assert_eq!(always_valid_p(0, 0), 1.0);
        // The mixture integral against the Beta function by numeric integration.
        let (a, b) = (7u64, 19u64);
        let steps = 200_000;
        let integral: f64 = (0..steps)
            .map(|i| {
                let p = (i as f64 + 0.5) / steps as f64;
                p.powi(a as i32) * (1.0 - p).powi(b as i32)
            })
            .sum::<f64>()
            / steps as f64;
        let lambda = integral * 2f64.powi((a + b) as i32);
        assert!((always_valid_p(a, b) - 1.0 / lambda).abs() < 1e-6 * (1.0 / lambda));
    }

    /// Watched after every decided impression, the always-valid p-value rejects an A/A
    /// experiment in at most about alpha of the runs; the fixed-horizon test watched the same
    /// way rejects several times as often.
    #[test]
    fn watching_the_always_valid_p_value_keeps_alpha() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let (runs, n) = (2000, 500);
        let (mut valid, mut naive) = (0, 0);
        for _ in 0..runs {
            let (mut a, mut b) = (0u64, 0u64);
            let (mut hit_valid, mut hit_naive) = (false, false);
            for _ in 0..n {
                if rng.random_bool(0.5) {
                    a += 1
                } else {
                    b += 1
                }
                hit_valid |= always_valid_p(a, b) < 0.05;
                hit_naive |= sign_test(a, b) < 0.05;
            }
            valid += usize::from(hit_valid);
            naive += usize::from(hit_naive);
        }
        // alpha·runs = 100; binomial sd ≈ 10.
        assert!(valid <= 130, "{valid} of {runs}");
        assert!(naive >= 3 * valid.max(50), "{naive} vs {valid}");
    }

    #[test]
    fn by_hand_and_at_scale() {
        // 9 of 10: 2·(1 + 10)/1024.
        assert!((sign_test(9, 1) - 22.0 / 1024.0).abs() < 1e-15);
        assert!((sign_test(1, 9) - 22.0 / 1024.0).abs() < 1e-15);
        assert_eq!(sign_test(5, 5), 1.0);
        assert_eq!(sign_test(0, 0), 1.0);
        // 0 of 20: 2/2²⁰.
        assert!((sign_test(0, 20) - 2.0 / 1_048_576.0).abs() < 1e-18);
        // Large n: the normal approximation with continuity correction is close.
        // 5 300 of 10 000: z = (299.5)/50 = 5.99, two-sided p ≈ 2.1e-9.
        let p = sign_test(5300, 4700);
        assert!(p > 1e-9 && p < 4e-9, "{p}");
        // 10 000 against 10 000 is as even as it gets.
        assert!((sign_test(10_000, 10_000) - 1.0).abs() < 1e-12);
    }
}
