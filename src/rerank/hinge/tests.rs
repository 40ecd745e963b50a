//! The hinge losses against exhaustive search, the greedy baseline, finite differences and
//! the rank loss they bound (SPEC §3.4).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::exhaustive::{over_interleavings, over_permutations, rank_loss_of, Oracle};
use super::*;

const LOSSES: [RankLoss; 2] = [RankLoss::Ap, RankLoss::Ndcg];

/// A query of `n` documents with at least one relevant and one non-relevant. With `ties`,
/// scores come from a grid of five values, so equal scores within and across classes are
/// common; otherwise uniform in [−1, 1).
fn query(rng: &mut ChaCha8Rng, n: usize, ties: bool) -> (Vec<f32>, Vec<bool>) {
    assert!(n >= 2);
    let num_pos = rng.random_range(1..n);
    let mut relevant: Vec<bool> = (0..n).map(|i| i < num_pos).collect();
    for i in (1..n).rev() {
        relevant.swap(i, rng.random_range(0..=i));
    }
    let scores = (0..n)
        .map(|_| {
            if ties {
                rng.random_range(0..5) as f32 * 0.25
            } else {
                rng.random_range(-1.0..1.0)
            }
        })
        .collect();
    (scores, relevant)
}

struct Outcome {
    hinge: f64,
    grad: Vec<f64>,
    /// n_k, negatives above the k-th positive of the most violating ranking.
    pattern: Vec<usize>,
    /// Interleaving rank of each negative, negatives in descending score order.
    ranks: Vec<u32>,
}

fn solve(loss: RankLoss, inference: Inference, scores: &[f32], relevant: &[bool]) -> Outcome {
    let mut scratch = HingeScratch::new();
    let mut grad = vec![f64::NAN; scores.len()];
    let hinge = scratch
        .hinge(loss, inference, scores, relevant, &mut grad)
        .expect("valid query");
    let mut placed: Vec<(u64, u32)> = scratch
        .neg
        .iter()
        .copied()
        .zip(scratch.opt.iter().copied())
        .collect();
    placed.sort_unstable();
    Outcome {
        hinge,
        grad,
        pattern: scratch.negatives_above.clone(),
        ranks: placed.into_iter().map(|(_, rank)| rank).collect(),
    }
}

fn widen(scores: &[f32]) -> Vec<f64> {
    scores.iter().map(|&s| f64::from(s)).collect()
}

/// The quicksort (and greedy) result must reach the oracle's maximum, and be its ranking
/// when that ranking is unique.
fn check_against(oracle: &Oracle, got: &Outcome, what: &str) {
    assert!(
        (got.hinge - oracle.best).abs() < 1e-9,
        "{what}: hinge {} vs exhaustive {}",
        got.hinge,
        oracle.best
    );
    if oracle.patterns.len() == 1 {
        assert_eq!(got.pattern, oracle.patterns[0], "{what}");
    } else {
        assert!(oracle.patterns.contains(&got.pattern), "{what}");
    }
}

#[test]
fn quicksort_matches_search_over_all_permutations() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut unique = 0;
    for case in 0..300 {
        let n = rng.random_range(2..=7);
        let (scores, relevant) = query(&mut rng, n, case % 2 == 0);
        for loss in LOSSES {
            let oracle = over_permutations(loss, &widen(&scores), &relevant);
            unique += usize::from(oracle.patterns.len() == 1);
            let what = format!("case {case} {loss:?} {scores:?} {relevant:?}");
            check_against(
                &oracle,
                &solve(loss, Inference::Quicksort, &scores, &relevant),
                &what,
            );
            check_against(
                &oracle,
                &solve(loss, Inference::Greedy, &scores, &relevant),
                &what,
            );
        }
    }
    // The ranking itself was checked, not just the value, in most cases.
    assert!(unique > 400, "only {unique} unique maximisers");
}

#[test]
fn quicksort_matches_search_over_all_interleavings() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    for case in 0..300 {
        let n = rng.random_range(8..=12);
        let (scores, relevant) = query(&mut rng, n, case % 2 == 0);
        for loss in LOSSES {
            let oracle = over_interleavings(loss, &widen(&scores), &relevant);
            let what = format!("case {case} {loss:?} {scores:?} {relevant:?}");
            check_against(
                &oracle,
                &solve(loss, Inference::Quicksort, &scores, &relevant),
                &what,
            );
        }
    }
}

#[test]
fn quicksort_matches_greedy_on_large_queries() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for case in 0..300 {
        let ties = case % 3 == 0;
        let num_pos = rng.random_range(1..=60);
        let num_neg = rng.random_range(1..=800);
        let (mut scores, mut relevant) = query(&mut rng, num_pos + num_neg, ties);
        if case % 5 == 0 {
            // Few positives among many negatives, as in search: the shape the seed targets.
            relevant = (0..scores.len()).map(|i| i % 50 == 0).collect();
            scores.iter_mut().step_by(50).for_each(|s| *s += 0.3);
        }
        for loss in LOSSES {
            let qs = solve(loss, Inference::Quicksort, &scores, &relevant);
            let greedy = solve(loss, Inference::Greedy, &scores, &relevant);
            let what = format!("case {case} {loss:?}");
            assert!((qs.hinge - greedy.hinge).abs() < 1e-9, "{what}");
            if !ties {
                // Continuous scores: no ties in the objective, identical rankings.
                assert_eq!(qs.ranks, greedy.ranks, "{what}");
                assert_eq!(qs.grad, greedy.grad, "{what}");
            }
            // Observation 2: ranks never decrease down the sorted negatives.
            assert!(qs.ranks.windows(2).all(|w| w[0] <= w[1]), "{what}");
        }
    }
}

/// J is piecewise linear in the scores; away from a kink (the exhaustive maximiser unique,
/// with a margin no step of h can close) its central difference is the gradient exactly.
#[test]
fn gradient_matches_central_differences_of_exhaustive_search() {
    const H: f64 = 1e-6;
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut checked = 0;
    for case in 0..300 {
        let n = rng.random_range(2..=6);
        let (scores, relevant) = query(&mut rng, n, false);
        for loss in LOSSES {
            let s = widen(&scores);
            let at = over_permutations(loss, &s, &relevant);
            // Each ranking's value moves by at most 2h per coordinate step.
            if at.patterns.len() != 1 || at.best - at.runner_up < 10.0 * H {
                continue;
            }
            checked += 1;
            let got = solve(loss, Inference::Quicksort, &scores, &relevant);
            for i in 0..n {
                let shifted = |delta: f64| {
                    let mut s = s.clone();
                    s[i] += delta;
                    over_permutations(loss, &s, &relevant).best
                };
                let fd = (shifted(H) - shifted(-H)) / (2.0 * H);
                assert!(
                    (fd - got.grad[i]).abs() < 1e-7,
                    "case {case} {loss:?} d/ds[{i}]: fd {fd} vs {}",
                    got.grad[i]
                );
            }
        }
    }
    assert!(checked > 400, "only {checked} points away from kinks");
}

/// The hinge upper-bounds the rank loss of the model's own ranking (seed 001 Eq. 4): that
/// ranking maximises F, so Δ(y*, ŷ_model) ≤ Δ + F(ŷ_model) − F(y*) ≤ J.
#[test]
fn hinge_bounds_the_rank_loss_of_the_models_ranking() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for case in 0..300 {
        let n = rng.random_range(2..=300);
        let (scores, relevant) = query(&mut rng, n, case % 2 == 0);
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        for loss in LOSSES {
            let got = solve(loss, Inference::Quicksort, &scores, &relevant);
            let model_loss = rank_loss_of(loss, &order, &relevant);
            assert!(got.hinge >= model_loss - 1e-12, "case {case} {loss:?}");
            assert!(got.hinge >= 0.0, "case {case} {loss:?}");
        }
    }
}

#[test]
fn perfectly_separated_queries_have_no_violation() {
    // Every positive above every negative by more than any loss step can pay for.
    let scores = [10.0, 9.0, -9.0, -10.0, 11.0];
    let relevant = [true, true, false, false, true];
    for loss in LOSSES {
        let got = solve(loss, Inference::Quicksort, &scores, &relevant);
        assert_eq!(got.hinge, 0.0);
        assert!(got.grad.iter().all(|&g| g == 0.0));
    }
}

#[test]
fn queries_without_both_classes_give_zero_loss_and_gradient() {
    let mut scratch = HingeScratch::new();
    for relevant in [vec![true; 3], vec![false; 3]] {
        let mut grad = vec![f64::NAN; 3];
        let j = scratch.ap_hinge(&[0.5, -1.0, 2.0], &relevant, &mut grad);
        assert_eq!(j, Ok(0.0));
        assert_eq!(grad, vec![0.0; 3]);
    }
    let mut grad = vec![f64::NAN; 2];
    assert_eq!(ndcg_hinge(&[0.5, 1.0], &[0, -1], &mut grad), Ok(0.0));
    assert_eq!(grad, vec![0.0; 2]);
    assert_eq!(ap_hinge(&[], &[], &mut []), Ok(0.0));
}

#[test]
fn bad_input_is_a_clear_error() {
    let mut grad = vec![0.0; 3];
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let err = ap_hinge(&[0.0, bad, 1.0], &[true, false, false], &mut grad).unwrap_err();
        assert!(matches!(err, HingeError::NonFiniteScore { index: 1, .. }));
        assert!(err.to_string().contains("score[1]"));
    }
    assert_eq!(
        ap_hinge(&[0.0, 1.0, 2.0], &[true, false], &mut grad),
        Err(HingeError::LengthMismatch {
            what: "relevant",
            expected: 3,
            got: 2
        })
    );
    assert_eq!(
        ndcg_hinge(&[0.0, 1.0, 2.0], &[1, 0, 0], &mut grad[..2]),
        Err(HingeError::LengthMismatch {
            what: "grad",
            expected: 3,
            got: 2
        })
    );
    assert!(matches!(
        ndcg_hinge(&[0.0, 1.0], &[1, 0, 0], &mut grad[..2]),
        Err(HingeError::LengthMismatch { what: "labels", .. })
    ));
}

/// Graded labels are binarised at grade 1, negative grades are non-relevant, and the
/// results do not depend on what a reused scratch held before or on the sign of zero.
#[test]
fn labels_scratch_reuse_and_determinism() {
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let mut reused = HingeScratch::new();
    for case in 0..100 {
        let n = rng.random_range(2..=200);
        let (mut scores, relevant) = query(&mut rng, n, case % 2 == 0);
        let positive_zeros = scores.clone();
        scores
            .iter_mut()
            .filter(|s| **s == 0.0)
            .for_each(|s| *s = -0.0);
        let labels: Vec<i32> = relevant
            .iter()
            .map(|&r| {
                if r {
                    rng.random_range(1..=4)
                } else {
                    rng.random_range(-1..=0)
                }
            })
            .collect();
        let (mut fresh_grad, mut reused_grad) = (vec![0.0; n], vec![0.0; n]);
        let fresh = ndcg_hinge(&scores, &labels, &mut fresh_grad).unwrap();
        let again = reused
            .ndcg_hinge(&scores, &labels, &mut reused_grad)
            .unwrap();
        assert_eq!(fresh.to_bits(), again.to_bits());
        assert_eq!(fresh_grad, reused_grad);
        let binary = solve(
            RankLoss::Ndcg,
            Inference::Quicksort,
            &positive_zeros,
            &relevant,
        );
        assert_eq!(fresh, binary.hinge);
        assert_eq!(fresh_grad, binary.grad);

        let fresh = ap_hinge(&scores, &relevant, &mut fresh_grad).unwrap();
        let again = reused
            .ap_hinge(&scores, &relevant, &mut reused_grad)
            .unwrap();
        assert_eq!(fresh.to_bits(), again.to_bits());
        assert_eq!(fresh_grad, reused_grad);
    }
}
