//! The pairwise core (SPEC §7) against independent oracles: every SIMD path and the sorted
//! algorithm against the scalar twin (proptest), the scalar twin against plain f64 double
//! loops, its gradient against finite differences, pair counts against Mann–Whitney ranks.
//!
//! Tolerances: scoring and counts must be bit-for-bit equal across paths (the module
//! promises it; ≤ 2 ulp is the acceptance bound); loss sums relative 1e-5. A gradient
//! element is a sum of same-sign terms, some of which sit at a piece boundary where two
//! paths may round a term of size ~1e-7 to 0 differently, so elements get relative 1e-5
//! plus an absolute 1e-5·|κ|·max(v) (ten such boundary terms).

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rankd::pairwise::{
    pair_counts_with, pair_loss_grad, pair_loss_grad_with, score_block_with, Isa, Kernel, Loss,
    PairCount, PairwiseError, SORTED_CROSSOVER,
};

// ---------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------

/// Scores in (−1, 1), large magnitudes, and exact repeats (ties, ±0).
fn score() -> impl Strategy<Value = f32> {
    prop_oneof![
        6 => -1.0f32..1.0,
        2 => -1e6f32..1e6,
        1 => Just(0.0f32),
        1 => Just(-0.0f32),
        1 => Just(0.25f32),
        1 => Just(-0.5f32),
    ]
}

fn scores(max_len: usize) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(score(), 0..max_len)
}

fn loss() -> impl Strategy<Value = Loss> {
    prop_oneof![
        prop::sample::select(vec![0.01f32, 0.1, 1.0]).prop_map(|tau| Loss::Huber { tau }),
        prop::sample::select(vec![0.5f32, 1.0, 4.0]).prop_map(|sigma| Loss::Logistic { sigma }),
        prop::sample::select(vec![0.0f32, 0.1, 1.0]).prop_map(|margin| Loss::Hinge { margin }),
        prop::sample::select(vec![0.0f32, 0.1, 1.0])
            .prop_map(|margin| Loss::SquaredHinge { margin }),
    ]
}

fn huber() -> impl Strategy<Value = Loss> {
    prop::sample::select(vec![0.01f32, 0.1, 1.0]).prop_map(|tau| Loss::Huber { tau })
}

/// Positives, negatives and one weight per positive (some exactly 0).
fn query(max_len: usize) -> impl Strategy<Value = (Vec<f32>, Vec<f32>, Vec<f32>)> {
    (scores(max_len), scores(max_len)).prop_flat_map(|(pos, neg)| {
        let n = pos.len();
        let weight = prop_oneof![4 => 0.0f32..2.0, 1 => Just(0.0f32), 1 => Just(1.0f32)];
        (Just(pos), Just(neg), prop::collection::vec(weight, n))
    })
}

struct Result3 {
    loss: f64,
    grad_pos: Vec<f64>,
    grad_neg: Vec<f64>,
}

fn run(kernel: Kernel, pos: &[f32], neg: &[f32], v: &[f32], loss: Loss) -> Result3 {
    let mut grad_pos = vec![f64::NAN; pos.len()];
    let mut grad_neg = vec![f64::NAN; neg.len()];
    let loss = pair_loss_grad_with(kernel, pos, neg, v, loss, &mut grad_pos, &mut grad_neg)
        .expect("valid input");
    Result3 {
        loss,
        grad_pos,
        grad_neg,
    }
}

fn close(a: f64, b: f64, rel: f64, abs: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()) + abs
}

fn assert_same(got: &Result3, want: &Result3, loss: Loss, v: &[f32], what: &str) {
    assert!(
        close(got.loss, want.loss, 1e-5, 1e-30),
        "{what}: loss {} vs scalar {}",
        got.loss,
        want.loss
    );
    let v_max = v.iter().fold(0.0f32, |m, &w| m.max(w)) as f64;
    let abs = 1e-5 * loss.slope_scale().abs() * v_max;
    for (k, (&a, &b)) in got.grad_pos.iter().zip(&want.grad_pos).enumerate() {
        assert!(
            close(a, b, 1e-5, abs),
            "{what}: grad_pos[{k}] {a} vs scalar {b}"
        );
    }
    for (k, (&a, &b)) in got.grad_neg.iter().zip(&want.grad_neg).enumerate() {
        assert!(
            close(a, b, 1e-5, abs),
            "{what}: grad_neg[{k}] {a} vs scalar {b}"
        );
    }
}

fn simd_paths() -> Vec<Isa> {
    let paths: Vec<Isa> = Isa::available()
        .into_iter()
        .filter(|&isa| isa != Isa::Scalar)
        .collect();
    if paths.len() < 2 {
        eprintln!("note: this CPU runs only {paths:?} besides scalar; other paths are skipped");
    }
    paths
}

// ---------------------------------------------------------------------------------------
// Paths against the scalar twin
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_path_scores_bit_for_bit_like_scalar(
        (n, d, x, w) in (0usize..13, 0usize..70).prop_flat_map(|(n, d)| {
            (Just(n), Just(d),
             prop::collection::vec(score(), n * d),
             prop::collection::vec(-1.0f32..1.0, d))
        })
    ) {
        let mut want = vec![0.0f32; n];
        score_block_with(Isa::Scalar, &x, n, d, &w, &mut want).unwrap();
        for isa in simd_paths() {
            let mut got = vec![f32::NAN; n];
            score_block_with(isa, &x, n, d, &w, &mut got).unwrap();
            let got_bits: Vec<u32> = got.iter().map(|s| s.to_bits()).collect();
            let want_bits: Vec<u32> = want.iter().map(|s| s.to_bits()).collect();
            prop_assert_eq!(got_bits, want_bits, "{:?} n={} d={}", isa, n, d);
        }
    }

    #[test]
    fn every_path_matches_scalar_loss_and_gradient((pos, neg, v) in query(70), loss in loss()) {
        let want = run(Kernel::AllPairs(Isa::Scalar), &pos, &neg, &v, loss);
        for isa in simd_paths() {
            let got = run(Kernel::AllPairs(isa), &pos, &neg, &v, loss);
            assert_same(&got, &want, loss, &v, &format!("{isa:?} {loss:?}"));
        }
    }

    #[test]
    fn sorted_matches_scalar_huber((pos, neg, v) in query(70), loss in huber()) {
        let want = run(Kernel::AllPairs(Isa::Scalar), &pos, &neg, &v, loss);
        let got = run(Kernel::Sorted, &pos, &neg, &v, loss);
        assert_same(&got, &want, loss, &v, &format!("sorted {loss:?}"));
    }

    #[test]
    fn every_path_counts_pairs_like_scalar(pos in scores(40), neg in scores(70)) {
        let mut want = vec![PairCount::default(); pos.len()];
        let total = pair_counts_with(Isa::Scalar, &pos, &neg, &mut want).unwrap();
        for isa in simd_paths() {
            let mut got = vec![PairCount::default(); pos.len()];
            prop_assert_eq!(pair_counts_with(isa, &pos, &neg, &mut got).unwrap(), total);
            prop_assert_eq!(&got, &want);
        }
        prop_assert!((total.auc_numerator() - mann_whitney_u(&pos, &neg)).abs() < 1e-9);
    }
}

/// Longer queries than proptest explores, crossing the f32 flush blocks (64 positives, 512
/// negatives) several times.
#[test]
fn long_queries_match_scalar_on_every_path() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for (n_pos, n_neg) in [(200, 1500), (65, 513), (1, 2049)] {
        let pos: Vec<f32> = (0..n_pos).map(|_| rng.random_range(-1.0..1.0)).collect();
        let neg: Vec<f32> = (0..n_neg).map(|_| rng.random_range(-1.0..1.0)).collect();
        let v: Vec<f32> = (0..n_pos).map(|_| rng.random_range(0.0..2.0)).collect();
        for loss in [
            Loss::Huber { tau: 0.1 },
            Loss::Logistic { sigma: 2.0 },
            Loss::Hinge { margin: 0.2 },
            Loss::SquaredHinge { margin: 0.2 },
        ] {
            let want = run(Kernel::AllPairs(Isa::Scalar), &pos, &neg, &v, loss);
            for isa in simd_paths() {
                let got = run(Kernel::AllPairs(isa), &pos, &neg, &v, loss);
                assert_same(
                    &got,
                    &want,
                    loss,
                    &v,
                    &format!("{isa:?} {loss:?} {n_pos}x{n_neg}"),
                );
            }
            if matches!(loss, Loss::Huber { .. }) {
                let got = run(Kernel::Sorted, &pos, &neg, &v, loss);
                assert_same(&got, &want, loss, &v, &format!("sorted {n_pos}x{n_neg}"));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The scalar twin against independent oracles
// ---------------------------------------------------------------------------------------

/// ℓ(x) in f64, straight from the SPEC's piecewise definitions.
fn loss_f64(loss: Loss, x: f64) -> f64 {
    match loss {
        Loss::Huber { tau } => {
            let tau = tau as f64;
            if x < 0.0 {
                1.0 - 2.0 * x / tau
            } else if x < tau {
                (1.0 - x / tau).powi(2)
            } else {
                0.0
            }
        }
        Loss::Logistic { sigma } => (1.0 + (-(sigma as f64) * x).exp()).ln(),
        Loss::Hinge { margin } => (margin as f64 - x).max(0.0),
        Loss::SquaredHinge { margin } => (margin as f64 - x).max(0.0).powi(2),
    }
}

fn total_f64(loss: Loss, pos: &[f64], neg: &[f64], v: &[f32]) -> f64 {
    let mut total = 0.0;
    for (p, &w) in pos.iter().zip(v) {
        for s in neg {
            total += w as f64 * loss_f64(loss, p - s);
        }
    }
    total
}

fn random_query(seed: u64, n_pos: usize, n_neg: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let pos = (0..n_pos).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let neg = (0..n_neg).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let v = (0..n_pos).map(|_| rng.random_range(0.1f32..2.0)).collect();
    (pos, neg, v)
}

const ORACLE_LOSSES: [Loss; 6] = [
    Loss::Huber { tau: 0.1 },
    Loss::Huber { tau: 1.0 },
    Loss::Logistic { sigma: 1.0 },
    Loss::Logistic { sigma: 5.0 },
    Loss::Hinge { margin: 0.5 },
    Loss::SquaredHinge { margin: 0.5 },
];

#[test]
fn scalar_loss_matches_f64_double_loop() {
    for seed in 0..20 {
        let (pos, neg, v) = random_query(seed, 13, 37);
        let pos64: Vec<f64> = pos.iter().map(|&s| s as f64).collect();
        let neg64: Vec<f64> = neg.iter().map(|&s| s as f64).collect();
        for loss in ORACLE_LOSSES {
            let got = run(Kernel::AllPairs(Isa::Scalar), &pos, &neg, &v, loss).loss;
            let want = total_f64(loss, &pos64, &neg64, &v);
            assert!(close(got, want, 1e-6, 0.0), "{loss:?}: {got} vs f64 {want}");
        }
    }
}

/// Central differences of the f64 oracle loss against the scalar gradient. Queries where
/// some pair sits within 10h of a hinge kink are skipped (ℓ has no derivative there).
#[test]
fn scalar_gradient_matches_finite_differences() {
    let h = 1e-6;
    let mut checked = 0;
    for seed in 100..140 {
        let (pos, neg, v) = random_query(seed, 7, 11);
        let pos64: Vec<f64> = pos.iter().map(|&s| s as f64).collect();
        let neg64: Vec<f64> = neg.iter().map(|&s| s as f64).collect();
        for loss in ORACLE_LOSSES {
            if let Loss::Hinge { margin } = loss {
                let near_kink = pos64.iter().any(|p| {
                    neg64
                        .iter()
                        .any(|s| (p - s - margin as f64).abs() < 10.0 * h)
                });
                if near_kink {
                    continue;
                }
            }
            let got = run(Kernel::AllPairs(Isa::Scalar), &pos, &neg, &v, loss);
            let fd = |pos: &[f64], neg: &[f64]| total_f64(loss, pos, neg, &v);
            for i in 0..pos.len() {
                let (mut up, mut down) = (pos64.clone(), pos64.clone());
                up[i] += h;
                down[i] -= h;
                let want = (fd(&up, &neg64) - fd(&down, &neg64)) / (2.0 * h);
                assert!(
                    close(got.grad_pos[i], want, 1e-4, 1e-4),
                    "{loss:?} grad_pos[{i}]: {} vs fd {want}",
                    got.grad_pos[i]
                );
            }
            for j in 0..neg.len() {
                let (mut up, mut down) = (neg64.clone(), neg64.clone());
                up[j] += h;
                down[j] -= h;
                let want = (fd(&pos64, &up) - fd(&pos64, &down)) / (2.0 * h);
                assert!(
                    close(got.grad_neg[j], want, 1e-4, 1e-4),
                    "{loss:?} grad_neg[{j}]: {} vs fd {want}",
                    got.grad_neg[j]
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 200, "only {checked} cases checked");
}

#[test]
fn scalar_scores_match_f64_dot_products() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for (n, d) in [(1, 1), (5, 15), (9, 16), (17, 33), (4, 300)] {
        let x: Vec<f32> = (0..n * d).map(|_| rng.random_range(-1.0..1.0)).collect();
        let w: Vec<f32> = (0..d).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut out = vec![0.0f32; n];
        score_block_with(Isa::Scalar, &x, n, d, &w, &mut out).unwrap();
        for r in 0..n {
            let row = &x[r * d..(r + 1) * d];
            let exact: f64 = row.iter().zip(&w).map(|(&a, &b)| a as f64 * b as f64).sum();
            let magnitude: f64 = row
                .iter()
                .zip(&w)
                .map(|(&a, &b)| (a as f64 * b as f64).abs())
                .sum();
            // Recursive summation bound for at most d/16 + 5 roundings per product.
            let bound = ((d / 16 + 6) as f64) * f32::EPSILON as f64 * magnitude;
            assert!(
                (out[r] as f64 - exact).abs() <= bound,
                "n={n} d={d} row {r}"
            );
        }
    }
    let mut out = [0.0f32; 2];
    score_block_with(
        Isa::Scalar,
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        2,
        3,
        &[1.0, 0.0, -1.0],
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [-2.0, -2.0]);
}

/// AUC numerator via ranks: U = Σ midranks of the positives − n⁺(n⁺ + 1)/2.
fn mann_whitney_u(pos: &[f32], neg: &[f32]) -> f64 {
    let mut all: Vec<(f32, bool)> = pos.iter().map(|&s| (s, true)).collect();
    all.extend(neg.iter().map(|&s| (s, false)));
    all.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    let mut rank_sum = 0.0;
    let mut start = 0;
    while start < all.len() {
        let end = start
            + all[start..]
                .iter()
                .take_while(|e| e.0 == all[start].0)
                .count();
        let midrank = (start + 1 + end) as f64 / 2.0;
        rank_sum += midrank * all[start..end].iter().filter(|e| e.1).count() as f64;
        start = end;
    }
    rank_sum - (pos.len() * (pos.len() + 1)) as f64 / 2.0
}

#[test]
fn pair_counts_known_values_and_tie_rule() {
    let pos = [0.9f32, 0.5, 0.0, f32::INFINITY];
    let neg = [0.5f32, 0.1, -0.0, f32::NEG_INFINITY];
    for isa in Isa::available() {
        let mut per = [PairCount::default(); 4];
        let total = pair_counts_with(isa, &pos, &neg, &mut per).unwrap();
        assert_eq!(per[0], PairCount { below: 4, ties: 0 }, "{isa:?}");
        assert_eq!(per[1], PairCount { below: 3, ties: 1 }, "{isa:?}");
        assert_eq!(
            per[2],
            PairCount { below: 1, ties: 1 },
            "{isa:?} (-0 ties +0)"
        );
        assert_eq!(per[3], PairCount { below: 4, ties: 0 }, "{isa:?}");
        assert_eq!(total.auc_numerator(), 13.0);
        assert_eq!(per[1].negatives_above(neg.len()), 0.5);
    }
}

// ---------------------------------------------------------------------------------------
// The sorted algorithm and the dispatcher
// ---------------------------------------------------------------------------------------

#[test]
fn sorted_matches_f64_double_loop_with_many_ties() {
    // Scores on a coarse grid so many pairs sit exactly on the piece boundaries x = 0, τ.
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let tau = 0.25f32;
    let pos: Vec<f32> = (0..300)
        .map(|_| rng.random_range(-8..8) as f32 * 0.125)
        .collect();
    let neg: Vec<f32> = (0..700)
        .map(|_| rng.random_range(-8..8) as f32 * 0.125)
        .collect();
    let v: Vec<f32> = (0..300).map(|_| rng.random_range(0.0..1.0)).collect();
    let got = run(Kernel::Sorted, &pos, &neg, &v, Loss::Huber { tau });
    let pos64: Vec<f64> = pos.iter().map(|&s| s as f64).collect();
    let neg64: Vec<f64> = neg.iter().map(|&s| s as f64).collect();
    let want = total_f64(Loss::Huber { tau }, &pos64, &neg64, &v);
    assert!(close(got.loss, want, 1e-12, 0.0), "{} vs {want}", got.loss);
}

#[test]
fn dispatcher_uses_sorted_above_the_crossover() {
    // n⁺ = n⁻ = 2K sits exactly on the crossover (n⁺n⁻ = K·(n⁺ + n⁻)); one fewer positive
    // falls below it.
    let n = 2 * SORTED_CROSSOVER;
    let (pos, neg, v) = random_query(5, n, n);
    let loss = Loss::Huber { tau: 0.1 };
    let mut gp = vec![0.0; n];
    let mut gn = vec![0.0; n];
    let auto = pair_loss_grad(&pos, &neg, &v, loss, &mut gp, &mut gn).unwrap();
    let sorted = run(Kernel::Sorted, &pos, &neg, &v, loss);
    assert_eq!(auto.to_bits(), sorted.loss.to_bits());
    assert_eq!((gp, gn.clone()), (sorted.grad_pos, sorted.grad_neg));

    let small = &pos[..n - 1];
    let mut gp = vec![0.0; n - 1];
    let auto = pair_loss_grad(small, &neg, &v[..n - 1], loss, &mut gp, &mut gn).unwrap();
    let kernel = run(
        Kernel::AllPairs(Isa::active()),
        small,
        &neg,
        &v[..n - 1],
        loss,
    );
    assert_eq!(auto.to_bits(), kernel.loss.to_bits());

    // Other losses never take the sorted path.
    let hinge = Loss::Hinge { margin: 0.1 };
    let mut gp = vec![0.0; n];
    let auto = pair_loss_grad(&pos, &neg, &v, hinge, &mut gp, &mut gn).unwrap();
    let kernel = run(Kernel::AllPairs(Isa::active()), &pos, &neg, &v, hinge);
    assert_eq!(auto.to_bits(), kernel.loss.to_bits());
}

// ---------------------------------------------------------------------------------------
// Bad input and edge cases
// ---------------------------------------------------------------------------------------

#[test]
fn empty_sides_give_zero_loss_and_gradient() {
    for kernel in Isa::available()
        .into_iter()
        .map(Kernel::AllPairs)
        .chain([Kernel::Sorted])
    {
        let got = run(kernel, &[], &[0.5, 0.2], &[], Loss::Huber { tau: 0.1 });
        assert_eq!(
            (got.loss, got.grad_neg),
            (0.0, vec![0.0, 0.0]),
            "{kernel:?}"
        );
        let got = run(kernel, &[0.5], &[], &[1.0], Loss::Huber { tau: 0.1 });
        assert_eq!((got.loss, got.grad_pos), (0.0, vec![0.0]), "{kernel:?}");
    }
}

#[test]
fn non_finite_and_inconsistent_input_is_an_error() {
    let huber = Loss::Huber { tau: 0.1 };
    let call = |pos: &[f32], neg: &[f32], v: &[f32], loss: Loss| {
        let mut gp = vec![0.0; pos.len()];
        let mut gn = vec![0.0; neg.len()];
        pair_loss_grad_with(
            Kernel::AllPairs(Isa::Scalar),
            pos,
            neg,
            v,
            loss,
            &mut gp,
            &mut gn,
        )
    };
    assert!(matches!(
        call(&[f32::NAN], &[0.0], &[1.0], huber),
        Err(PairwiseError::NonFinite {
            what: "pos",
            index: 0,
            ..
        })
    ));
    assert!(matches!(
        call(&[0.0], &[1.0, f32::INFINITY], &[1.0], huber),
        Err(PairwiseError::NonFinite {
            what: "neg",
            index: 1,
            ..
        })
    ));
    assert!(matches!(
        call(&[0.0], &[1.0], &[-1.0], huber),
        Err(PairwiseError::BadWeight { index: 0, .. })
    ));
    assert!(matches!(
        call(&[0.0], &[1.0], &[f32::NAN], huber),
        Err(PairwiseError::BadWeight { index: 0, .. })
    ));
    assert!(matches!(
        call(&[0.0], &[1.0], &[1.0, 1.0], huber),
        Err(PairwiseError::LengthMismatch { what: "v", .. })
    ));
    assert!(matches!(
        call(&[0.0], &[1.0], &[1.0], Loss::Huber { tau: 0.0 }),
        Err(PairwiseError::BadParameter { name: "tau", .. })
    ));
    assert!(matches!(
        call(&[0.0], &[1.0], &[1.0], Loss::Logistic { sigma: f32::NAN }),
        Err(PairwiseError::BadParameter { name: "sigma", .. })
    ));
    let mut g = [0.0];
    assert_eq!(
        pair_loss_grad_with(
            Kernel::Sorted,
            &[0.0],
            &[0.0],
            &[1.0],
            Loss::Hinge { margin: 1.0 },
            &mut g,
            &mut [0.0]
        ),
        Err(PairwiseError::SortedNeedsHuber(Loss::Hinge { margin: 1.0 }))
    );
    let mut per = [PairCount::default()];
    assert!(matches!(
        pair_counts_with(Isa::Scalar, &[0.0], &[f32::NAN], &mut per),
        Err(PairwiseError::NonFinite {
            what: "neg",
            index: 0,
            ..
        })
    ));
}

#[test]
fn non_finite_scores_name_the_row() {
    for isa in Isa::available() {
        let mut out = [0.0f32; 3];
        let x = [1.0, 1.0, f32::NAN, 1.0, 1.0, 1.0];
        assert!(
            matches!(
                score_block_with(isa, &x, 3, 2, &[1.0, 1.0], &mut out),
                Err(PairwiseError::NonFiniteScore { row: 1, .. })
            ),
            "{isa:?}"
        );
        let x = [1.0, 1.0, 1.0, 1.0, 3e38, 3e38];
        assert!(
            matches!(
                score_block_with(isa, &x, 3, 2, &[1.0, 1.0], &mut out),
                Err(PairwiseError::NonFiniteScore { row: 2, .. })
            ),
            "{isa:?}: overflow"
        );
        assert!(matches!(
            score_block_with(isa, &x, 3, 2, &[1.0], &mut out),
            Err(PairwiseError::LengthMismatch { what: "w", .. })
        ));
        assert!(matches!(
            score_block_with(isa, &x[..4], 2, 2, &[1.0, f32::INFINITY], &mut out[..2]),
            Err(PairwiseError::NonFinite {
                what: "w",
                index: 1,
                ..
            })
        ));
    }
}

/// Differences too large for f32 make the loss +inf on every path, never NaN, even with a
/// zero weight in the mix (0·inf would be NaN).
#[test]
fn overflowing_terms_give_infinity_not_nan() {
    let pos = [-3e38f32, 0.0];
    let neg = [3e38f32, 1.0];
    let v = [1.0f32, 0.0];
    for loss in [
        Loss::Huber { tau: 0.01 },
        Loss::Logistic { sigma: 1.0 },
        Loss::Hinge { margin: 1.0 },
        Loss::SquaredHinge { margin: 1.0 },
    ] {
        for isa in Isa::available() {
            let got = run(Kernel::AllPairs(isa), &pos, &neg, &v, loss);
            assert_eq!(got.loss, f64::INFINITY, "{isa:?} {loss:?}");
            assert!(
                got.grad_pos
                    .iter()
                    .chain(&got.grad_neg)
                    .all(|g| !g.is_nan()),
                "{isa:?} {loss:?}"
            );
        }
    }
}

#[test]
fn isa_names_parse() {
    assert_eq!(Isa::parse("AVX2"), Some(Isa::Avx2));
    assert_eq!(Isa::parse(" sse "), Some(Isa::Sse41));
    assert_eq!(Isa::parse("scalar"), Some(Isa::Scalar));
    assert_eq!(Isa::parse("neon"), None);
    assert!(Isa::Scalar.is_available());
    assert!(Isa::available().contains(&Isa::active()));
}
