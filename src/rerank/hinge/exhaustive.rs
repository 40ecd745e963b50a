//! Test oracle: the most violating ranking by exhaustive search, every quantity from its
//! definition — Δ through the evaluation metrics of `crate::eval` (SPEC §4), F through the
//! pairwise sum of seed 001 Eq. 1 — sharing no code with the inference algorithms.

use crate::eval::metrics::{average_precision, ndcg_at, JudgedRanking};
use crate::eval::Gain;

use super::RankLoss;

/// The maximum of `Δ(y*, y) + F(y) − F(y*)` and the ± patterns that reach it.
pub(super) struct Oracle {
    pub best: f64,
    /// Distinct `n_k` vectors (negatives above the k-th positive in rank order) of the
    /// rankings within `TIE` of `best`: one entry means the maximiser's pattern is unique.
    pub patterns: Vec<Vec<usize>>,
    /// The best value among rankings whose pattern is not in `patterns`.
    pub runner_up: f64,
}

/// Rankings closer than this to the best count as tied with it.
const TIE: f64 = 1e-9;

/// Over all (P + N)! rankings: also checks seed 001 Observation 1 (within-class sorted
/// order suffices) instead of assuming it. For P + N ≤ 8.
pub(super) fn over_permutations(loss: RankLoss, scores: &[f64], relevant: &[bool]) -> Oracle {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    let mut values = Vec::new();
    permute(&mut order, 0, &mut |order| {
        values.push(evaluate(loss, order, scores, relevant))
    });
    summarise(values)
}

/// Over all C(P + N, P) interleavings of the positives and negatives, each class in
/// descending score order (Observation 1 taken as given). For P + N ≤ 16.
pub(super) fn over_interleavings(loss: RankLoss, scores: &[f64], relevant: &[bool]) -> Oracle {
    let n = scores.len();
    let by_score = |class: bool| {
        let mut idx: Vec<usize> = (0..n).filter(|&i| relevant[i] == class).collect();
        idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        idx
    };
    let (pos, neg) = (by_score(true), by_score(false));
    let mut values = Vec::new();
    for mask in 0u32..(1 << n) {
        if mask.count_ones() as usize != pos.len() {
            continue;
        }
        let (mut p, mut q) = (pos.iter(), neg.iter());
        let order: Vec<usize> = (0..n)
            .map(|slot| {
                let next = if mask >> slot & 1 == 1 {
                    p.next()
                } else {
                    q.next()
                };
                *next.expect("the mask has P ones")
            })
            .collect();
        values.push(evaluate(loss, &order, scores, relevant));
    }
    summarise(values)
}

/// `Δ(y*, y)` of a ranking (document indices, best first) from the evaluation metrics.
pub(super) fn rank_loss_of(loss: RankLoss, order: &[usize], relevant: &[bool]) -> f64 {
    let grade = |i: usize| i32::from(relevant[i]);
    let ranking = JudgedRanking {
        retrieved: order.iter().map(|&i| Some(grade(i))).collect(),
        judged: (0..relevant.len()).map(grade).collect(),
    };
    match loss {
        RankLoss::Ap => 1.0 - average_precision(&ranking, 1),
        RankLoss::Ndcg => 1.0 - ndcg_at(&ranking, None, Gain::Linear),
    }
}

fn evaluate(
    loss: RankLoss,
    order: &[usize],
    scores: &[f64],
    relevant: &[bool],
) -> (f64, Vec<usize>) {
    let n = order.len();
    let mut place = vec![0; n];
    for (r, &i) in order.iter().enumerate() {
        place[i] = r;
    }
    let (mut f_y, mut f_star, mut pairs) = (0.0, 0.0, 0.0);
    for x in (0..n).filter(|&x| relevant[x]) {
        for z in (0..n).filter(|&z| !relevant[z]) {
            let y_xz = if place[x] < place[z] { 1.0 } else { -1.0 };
            f_y += y_xz * (scores[x] - scores[z]);
            f_star += scores[x] - scores[z];
            pairs += 1.0;
        }
    }
    let mut pattern = Vec::new();
    let mut negatives_seen = 0;
    for &i in order {
        if relevant[i] {
            pattern.push(negatives_seen);
        } else {
            negatives_seen += 1;
        }
    }
    let value = rank_loss_of(loss, order, relevant) + (f_y - f_star) / pairs;
    (value, pattern)
}

fn summarise(values: Vec<(f64, Vec<usize>)>) -> Oracle {
    let best = values
        .iter()
        .map(|(v, _)| *v)
        .fold(f64::NEG_INFINITY, f64::max);
    let mut patterns: Vec<Vec<usize>> = Vec::new();
    for (v, pattern) in &values {
        if *v >= best - TIE && !patterns.contains(pattern) {
            patterns.push(pattern.clone());
        }
    }
    let runner_up = values
        .iter()
        .filter(|(_, pattern)| !patterns.contains(pattern))
        .map(|(v, _)| *v)
        .fold(f64::NEG_INFINITY, f64::max);
    Oracle {
        best,
        patterns,
        runner_up,
    }
}

/// Every permutation of `order[k..]`, by swapping (each visited once).
fn permute(order: &mut [usize], k: usize, visit: &mut impl FnMut(&[usize])) {
    if k == order.len() {
        visit(order);
        return;
    }
    for i in k..order.len() {
        order.swap(k, i);
        permute(order, k + 1, visit);
        order.swap(k, i);
    }
}
