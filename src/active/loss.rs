//! The loss-based batch (seed 002, chapter 4; seed note §3): pick the batch whose optimistic
//! labels make the labelled pairs likeliest and leave the rest of the pool least uncertain,
//! thesis eq. 4.5 in the implementable reading of seed note §3.5.
//!
//! - **The probabilistic output is pairwise** (seed note §1.5, reading (c)): a pool item's
//!   uncertain pair is its nearest score neighbour in its query's list, at margin
//!   `m = |f(x_d) − f(x_d')|` (the SPEC §5 neighbor gap before normalisation). Platt's sigmoid
//!   `P(correct | m) = σ(A·m + B)` — the probability that the model orders such a pair
//!   right — is fitted on the labelled pairs: every pair of labelled documents of one query
//!   with different grades, `correct` when the model ranks the better one higher. A pool item
//!   then has `P_j = P(correct | m_j)`, log-likelihoods `v_j = [ln P_j, ln(1 − P_j)]` of its
//!   two optimistic labels (the model is right / wrong about it) and entropy
//!   `H_j = −P_j ln P_j − (1 − P_j) ln(1 − P_j)`.
//! - **The batch** is the relaxed selection matrix μ (a weight in [0, 1] per item and
//!   optimistic label, at most 1 per item, m in all, at most ⌊(½ + ε)·m⌋ per label: thesis
//!   eq. 4.6–4.7) that maximises eq. 4.6's objective, found by Frank–Wolfe instead of the
//!   thesis's BFGS (whose printed loop has the wrong sign, updates the wrong matrix and drops
//!   the constraints: seed note §3.4). Each iteration refits Platt's (A, B) on the labelled
//!   pairs plus the pool items' optimistic labels weighted by μ — the refit is what lets one
//!   pick change the value of another (seed note §3.4 item 5; without it the problem is linear
//!   and the method is uncertainty sampling) — then takes the gradient
//!   `G[j, c] = β·v_j[c] + α·H_j` (eq. 4.9), solves the linear program over the polytope
//!   exactly (greedy: sort every (item, label) by G, take a pair while its item is free and its
//!   label under the cap — optimal for this transportation problem with one unit per item),
//!   and steps `μ ← μ + η_t (μ̂ − μ)`, `η_t = 2/(t + 2)`.
//! - The batch is the m items of largest `μ_j+ + μ_j−` (the rounding the thesis leaves open,
//!   seed note §3.4 item 7); the optimistic label only shapes the objective, the assessor gives
//!   the real one.
//!
//! Platt's fit is Newton's method on two parameters with Platt's target smoothing (Lin, Lin and
//! Weng 2007's safeguarded version: a backtracking line search, stop when the step is tiny): a
//! 2 × 2 system written here, which no crate would make shorter.

use super::SelectError;

/// The weights of eq. 4.6 and the iterations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossParams {
    /// α: weight of the pool's entropy.
    pub alpha: f64,
    /// β: weight of the optimistic labels' log-likelihood.
    pub beta: f64,
    /// ε: each optimistic label may take at most ⌊(½ + ε)·m⌋ of the batch.
    pub balance: f64,
    /// Frank–Wolfe iterations.
    pub iterations: usize,
}

impl Default for LossParams {
    /// α = β = 1 (the frozen reduction then favours items the model is right about with
    /// probability ≈ 0.78, seed note §3.4 item 6), ε = 0.1, 20 iterations.
    fn default() -> Self {
        LossParams {
            alpha: 1.0,
            beta: 1.0,
            balance: 0.1,
            iterations: 20,
        }
    }
}

/// A labelled pair for Platt's fit: the model's score margin, whether it orders the pair
/// right, and the pair's weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PairOutcome {
    pub margin: f64,
    pub correct: bool,
    pub weight: f64,
}

/// The labelled pairs of one query's list: every two labelled rows with different grades.
/// `scores[i]`, `grades[i]` per row; `None` grade: unlabelled.
pub(crate) fn labelled_pairs(scores: &[f32], grades: &[Option<i32>]) -> Vec<PairOutcome> {
    let mut out = Vec::new();
    let labelled: Vec<usize> = (0..scores.len()).filter(|&i| grades[i].is_some()).collect();
    for (a, &i) in labelled.iter().enumerate() {
        for &j in &labelled[a + 1..] {
            let (gi, gj) = (grades[i].unwrap_or(0), grades[j].unwrap_or(0));
            if gi == gj {
                continue;
            }
            let (si, sj) = (f64::from(scores[i]), f64::from(scores[j]));
            out.push(PairOutcome {
                margin: (si - sj).abs(),
                correct: (gi > gj) == (si > sj),
                weight: 1.0,
            });
        }
    }
    out
}

/// Platt's `(A, B)` of `P(correct | m) = 1/(1 + exp(−(A·m + B)))`, by Newton's method on the
/// weighted log-loss with Platt's smoothed targets. Without pairs of both outcomes the fit
/// has no information and gives the prior of the outcomes seen.
pub(crate) fn platt_fit(pairs: &[PairOutcome]) -> (f64, f64) {
    let positive: f64 = pairs.iter().filter(|p| p.correct).map(|p| p.weight).sum();
    let negative: f64 = pairs.iter().filter(|p| !p.correct).map(|p| p.weight).sum();
    // Platt's targets: (N+ + 1)/(N+ + 2) and 1/(N− + 2).
    let (hi, lo) = ((positive + 1.0) / (positive + 2.0), 1.0 / (negative + 2.0));
    let (mut a, mut b) = (0.0, ((positive + 1.0) / (negative + 1.0)).ln());
    let loss = |a: f64, b: f64| -> f64 {
        pairs
            .iter()
            .map(|p| {
                let t = if p.correct { hi } else { lo };
                let z = a * p.margin + b;
                // −[t ln σ(z) + (1 − t) ln(1 − σ(z))], stably.
                p.weight * (softplus(-z) * t + softplus(z) * (1.0 - t))
            })
            .sum()
    };
    let mut current = loss(a, b);
    for _ in 0..100 {
        let (mut ga, mut gb, mut haa, mut hab, mut hbb) = (0.0, 0.0, 1e-12, 0.0, 1e-12);
        for p in pairs {
            let t = if p.correct { hi } else { lo };
            let s = sigmoid(a * p.margin + b);
            let d = p.weight * (s - t);
            ga += d * p.margin;
            gb += d;
            let w = p.weight * s * (1.0 - s);
            haa += w * p.margin * p.margin;
            hab += w * p.margin;
            hbb += w;
        }
        let det = haa * hbb - hab * hab;
        if det.abs() < 1e-18 {
            break;
        }
        let (da, db) = ((hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det);
        let mut step = 1.0;
        let mut moved = false;
        while step > 1e-10 {
            let (na, nb) = (a - step * da, b - step * db);
            let l = loss(na, nb);
            if l < current + 1e-4 * step * (ga * -da + gb * -db) {
                (a, b, current, moved) = (na, nb, l, true);
                break;
            }
            step /= 2.0;
        }
        if !moved || (step * da).abs().max((step * db).abs()) < 1e-9 {
            break;
        }
    }
    (a, b)
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// ln(1 + eᶻ) without overflow.
fn softplus(z: f64) -> f64 {
    if z > 0.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

/// One picked item and what it was picked on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossPick {
    pub item: usize,
    /// `μ_j+ + μ_j−` at the end of the iterations.
    pub weight: f64,
    /// P(the model orders the item's nearest pair right), under the final fit.
    pub p_correct: f64,
    /// Its entropy (nats).
    pub entropy: f64,
}

/// Picks up to `k` of the pool items whose nearest-neighbour margins are `margins` (raw score
/// gaps, not normalised; `f64::INFINITY` for an item alone in its list), given the labelled
/// pairs `labelled` (see the module doc).
pub(crate) fn select_loss_batch(
    margins: &[f64],
    labelled: &[PairOutcome],
    k: usize,
    params: &LossParams,
) -> Result<Vec<LossPick>, SelectError> {
    if !(params.alpha >= 0.0 && params.beta >= 0.0 && (0.0..=0.5).contains(&params.balance)) {
        return Err(SelectError::Loss(format!(
            "alpha and beta must be ≥ 0 and balance in [0, 0.5], got {}, {}, {}",
            params.alpha, params.beta, params.balance
        )));
    }
    let n = margins.len();
    let m = k.min(n);
    if m == 0 {
        return Ok(Vec::new());
    }
    let cap = (((0.5 + params.balance) * m as f64).floor() as usize).max(m.div_ceil(2));
    // The largest finite margin stands in for an item without a neighbour (least uncertain).
    let largest = margins
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let margin: Vec<f64> = margins
        .iter()
        .map(|&v| if v.is_finite() { v } else { largest })
        .collect();
    // μ[j] = (μ_j+, μ_j−), starting feasible and uniform.
    let start = m as f64 / (2 * n) as f64;
    let mut mu = vec![(start, start); n];
    let probabilities = |mu: &[(f64, f64)]| -> Vec<f64> {
        let mut pairs = labelled.to_vec();
        for (j, &(plus, minus)) in mu.iter().enumerate() {
            for (weight, correct) in [(plus, true), (minus, false)] {
                if weight > 1e-12 {
                    pairs.push(PairOutcome {
                        margin: margin[j],
                        correct,
                        weight,
                    });
                }
            }
        }
        let (a, b) = platt_fit(&pairs);
        margin
            .iter()
            .map(|&g| sigmoid(a * g + b).clamp(1e-12, 1.0 - 1e-12))
            .collect()
    };
    for t in 0..params.iterations {
        let p = probabilities(&mu);
        // G[j, c] = β·v_j[c] + α·H_j (eq. 4.9), then the linear program's optimum.
        let mut candidates: Vec<(f64, usize, bool)> = Vec::with_capacity(2 * n);
        for (j, &pj) in p.iter().enumerate() {
            let h = entropy(pj);
            candidates.push((params.beta * pj.ln() + params.alpha * h, j, true));
            candidates.push((params.beta * (1.0 - pj).ln() + params.alpha * h, j, false));
        }
        candidates.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        let mut vertex = vec![(0.0, 0.0); n];
        let (mut taken, mut plus, mut minus) = (0, 0, 0);
        let mut free = vec![true; n];
        for &(_, j, correct) in &candidates {
            if taken == m {
                break;
            }
            let count = if correct { &mut plus } else { &mut minus };
            if !free[j] || *count == cap {
                continue;
            }
            *count += 1;
            free[j] = false;
            taken += 1;
            vertex[j] = if correct { (1.0, 0.0) } else { (0.0, 1.0) };
        }
        let eta = 2.0 / (t as f64 + 2.0);
        for (u, v) in mu.iter_mut().zip(&vertex) {
            u.0 += eta * (v.0 - u.0);
            u.1 += eta * (v.1 - u.1);
        }
    }
    let p = probabilities(&mu);
    let mut order: Vec<usize> = (0..n).collect();
    let weight = |j: usize| mu[j].0 + mu[j].1;
    order.sort_by(|&x, &y| weight(y).total_cmp(&weight(x)).then(x.cmp(&y)));
    Ok(order
        .into_iter()
        .take(m)
        .map(|j| LossPick {
            item: j,
            weight: weight(j),
            p_correct: p[j],
            entropy: entropy(p[j]),
        })
        .collect())
}

/// Binary entropy in nats.
fn entropy(p: f64) -> f64 {
    -(p * p.ln() + (1.0 - p) * (1.0 - p).ln())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Platt's fit recovers the sigmoid that generated the outcomes (expected counts, so no
    /// sampling noise beyond the target smoothing).
    #[test]
    fn platt_recovers_a_known_sigmoid() {
        let (a0, b0) = (3.0, -1.0);
        let mut pairs = Vec::new();
        for i in 0..200 {
            let m = i as f64 / 100.0;
            let p = sigmoid(a0 * m + b0);
            pairs.push(PairOutcome {
                margin: m,
                correct: true,
                weight: 50.0 * p,
            });
            pairs.push(PairOutcome {
                margin: m,
                correct: false,
                weight: 50.0 * (1.0 - p),
            });
        }
        let (a, b) = platt_fit(&pairs);
        assert!((a - a0).abs() < 0.05 && (b - b0).abs() < 0.05, "{a} {b}");
    }

    #[test]
    fn labelled_pairs_say_whether_the_model_orders_them_right() {
        let pairs = labelled_pairs(&[3.0, 1.0, 2.0, 0.0], &[Some(2), Some(0), None, Some(2)]);
        // (0, 1): better one higher, right; (0, 3) same grade, skipped; (1, 3): wrong.
        assert_eq!(pairs.len(), 2);
        assert!(pairs[0].correct && (pairs[0].margin - 2.0).abs() < 1e-12);
        assert!(!pairs[1].correct && (pairs[1].margin - 1.0).abs() < 1e-12);
    }

    /// When the labelled pairs outweigh the pool (the refit cannot move Platt's fit), the
    /// problem is linear and the batch must be its optimum: checked against brute force over
    /// every 3-subset of the pool and every labelling of it within the label cap.
    #[test]
    fn the_batch_is_the_brute_force_optimum_when_the_fit_is_fixed() {
        let labelled: Vec<PairOutcome> = (0..40)
            .map(|i| PairOutcome {
                margin: i as f64 / 10.0,
                correct: i % 4 != 0 || i > 20,
                weight: 1e7,
            })
            .collect();
        let margins = [0.05, 3.0, 0.4, 0.9, 1.5, f64::INFINITY, 0.2, 2.2];
        let params = LossParams {
            iterations: 200,
            ..LossParams::default()
        };
        let picks = select_loss_batch(&margins, &labelled, 3, &params).unwrap();
        let mut chosen: Vec<usize> = picks.iter().map(|x| x.item).collect();
        chosen.sort_unstable();
        let (a, b) = platt_fit(&labelled);
        let p: Vec<f64> = margins
            .iter()
            .map(|&g| sigmoid(a * if g.is_finite() { g } else { 3.0 } + b))
            .collect();
        let g = |j: usize, correct: bool| {
            let v = if correct {
                p[j].ln()
            } else {
                (1.0 - p[j]).ln()
            };
            params.beta * v + params.alpha * entropy(p[j])
        };
        let cap = 2; // ⌊(½ + 0.1)·3⌋
        let n = margins.len();
        let mut best: Option<(f64, Vec<usize>)> = None;
        for x in 0..n {
            for y in x + 1..n {
                for z in y + 1..n {
                    for labels in 0..8u32 {
                        let items = [x, y, z];
                        let plus = labels.count_ones() as usize;
                        if plus > cap || 3 - plus > cap {
                            continue;
                        }
                        let value: f64 = (0..3).map(|i| g(items[i], labels & (1 << i) != 0)).sum();
                        if best.as_ref().is_none_or(|(v, _)| value > *v + 1e-12) {
                            best = Some((value, items.to_vec()));
                        }
                    }
                }
            }
        }
        assert_eq!(chosen, best.unwrap().1, "{picks:?}");
        assert!(picks.windows(2).all(|w| w[0].weight >= w[1].weight));
    }

    /// The refit makes it a batch choice: against a fit that never moves, optimistic labels
    /// pull Platt's curve, and the iterations change which items are picked or their weights.
    #[test]
    fn the_refit_moves_the_fit() {
        let labelled = [
            PairOutcome {
                margin: 0.1,
                correct: false,
                weight: 1.0,
            },
            PairOutcome {
                margin: 2.0,
                correct: true,
                weight: 1.0,
            },
        ];
        let margins: Vec<f64> = (0..30).map(|i| i as f64 / 10.0).collect();
        let one = LossParams {
            iterations: 1,
            ..LossParams::default()
        };
        let many = LossParams {
            iterations: 50,
            ..LossParams::default()
        };
        let a = select_loss_batch(&margins, &labelled, 5, &one).unwrap();
        let b = select_loss_batch(&margins, &labelled, 5, &many).unwrap();
        assert_ne!(
            a.iter().map(|p| p.p_correct).collect::<Vec<_>>(),
            b.iter().map(|p| p.p_correct).collect::<Vec<_>>()
        );
    }

    #[test]
    fn bad_parameters_are_refused() {
        let params = LossParams {
            balance: 0.7,
            ..LossParams::default()
        };
        assert!(select_loss_batch(&[1.0], &[], 1, &params).is_err());
    }
}
