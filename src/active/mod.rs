//! Active learning (SPEC §5, seed 002 ch. 3): which unjudged (query, document) pairs to label
//! next, as one batch several assessors can work on in parallel.
//!
//! The corrected criterion of thesis eq. 3.12: every pool item x has an uncertainty margin
//! `g(x)` — the **neighbor gap**, `min_{d'≠d in q's list} |f(x_d) − f(x_d')|`, normalised by
//! its maximum over the pool — and, against the batch S chosen so far, a redundancy
//! `maxcos(x) = max_{y∈S} |cos(x, y)|` on normalised feature vectors (0 while S is empty).
//! Greedily, k times: `x* = argmin_{x∈U∖S} λ·g(x) + (1 − λ)·maxcos(x)`, `S ← S ∪ {x*}`.
//! λ = 1 is the plain margin batch (the k smallest gaps); λ = 0 picks by angle alone after the
//! first item.
//!
//! Only the arithmetic lives here (no index, no database): [`neighbor_gaps`] turns the scores
//! of each query's candidate list into normalised gaps, [`unit_rows`] z-scores and
//! length-normalises feature rows, and [`select_batch`] runs the greedy loop with the
//! incremental max-cos update of seed note §2.3: after each pick, every remaining item's
//! `maxcos` is raised by one dot product with the new pick, O(n·d) per step and O(k·n·d) in all.
//! [`replay`] is the offline check of the criterion on judged LETOR data (`rankd active-replay`).

pub mod loss;
pub mod replay;

/// λ when a request does not give one: the value the offline replay on LETOR chose most often
/// on its validation folds (docs/EVALUATION.md, "Active learning (SPEC §5)").
pub(crate) const DEFAULT_LAMBDA: f64 = 0.5;

/// One picked item: its position in the pool and the terms of the criterion when it was
/// picked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pick {
    pub item: usize,
    /// Normalised neighbor gap g(x) in [0, 1].
    pub margin: f64,
    /// max |cos| against the items picked before it (0 for the first).
    pub max_cos: f64,
    /// λ·g + (1 − λ)·maxcos.
    pub objective: f64,
}

/// Normalised neighbor gaps (SPEC §5) of the items of a pool.
///
/// `lists` holds each query's full candidate list as its scores (judged and unjudged alike:
/// a neighbour does not need to be unjudged to make a pair uncertain). `pool` names the items
/// to score as `(list, position in the list)`. An item alone in its list has no neighbour;
/// its gap counts as the largest of the pool (it is the least uncertain). Gaps are divided by
/// their maximum over the pool; when every gap is 0, all are 0.
pub(crate) fn neighbor_gaps(lists: &[Vec<f32>], pool: &[(usize, usize)]) -> Vec<f64> {
    let raw = neighbor_margins(lists, pool);
    let max = raw.iter().flatten().copied().fold(0.0f64, f64::max);
    raw.into_iter()
        .map(|g| match g {
            Some(g) if max > 0.0 => g / max,
            Some(_) => 0.0,
            None => 1.0,
        })
        .collect()
}

/// The pool items' score gaps to their nearest neighbour in their list, not normalised;
/// `None` for an item alone in its list.
pub(crate) fn neighbor_margins(lists: &[Vec<f32>], pool: &[(usize, usize)]) -> Vec<Option<f64>> {
    // Per list: sort once, then each item's gap is to its sorted predecessor or successor.
    let gaps_of_list = |scores: &[f32]| -> Vec<Option<f64>> {
        let mut order: Vec<usize> = (0..scores.len()).collect();
        order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
        let mut gap = vec![None; scores.len()];
        for (r, &i) in order.iter().enumerate() {
            let s = f64::from(scores[i]);
            let below = r
                .checked_sub(1)
                .map(|p| (s - f64::from(scores[order[p]])).abs());
            let above = order.get(r + 1).map(|&n| (f64::from(scores[n]) - s).abs());
            gap[i] = match (below, above) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        gap
    };
    let per_list: Vec<Vec<Option<f64>>> = lists.iter().map(|l| gaps_of_list(l)).collect();
    pool.iter().map(|&(l, p)| per_list[l][p]).collect()
}

/// The rows of `x` (`n × d`, row-major) z-scored per column over the rows themselves (a
/// constant column becomes 0) and scaled to unit length (an all-zero row stays zero, so its
/// cosine with anything is 0). The dot product of two returned rows is their cosine.
pub(crate) fn unit_rows(x: &[f32], d: usize) -> Vec<f64> {
    if d == 0 {
        return Vec::new();
    }
    let n = x.len() / d;
    let mut mean = vec![0.0f64; d];
    for row in x.chunks_exact(d) {
        for (m, &v) in mean.iter_mut().zip(row) {
            *m += f64::from(v);
        }
    }
    mean.iter_mut().for_each(|m| *m /= n.max(1) as f64);
    let mut var = vec![0.0f64; d];
    for row in x.chunks_exact(d) {
        for ((s, &v), m) in var.iter_mut().zip(row).zip(&mean) {
            *s += (f64::from(v) - m).powi(2);
        }
    }
    let sd: Vec<f64> = var.iter().map(|s| (s / n.max(1) as f64).sqrt()).collect();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let start = out.len();
        for ((&v, m), s) in row.iter().zip(&mean).zip(&sd) {
            out.push(if *s > 1e-12 {
                (f64::from(v) - m) / s
            } else {
                0.0
            });
        }
        let z = &mut out[start..];
        let norm = z.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm > 0.0 {
            z.iter_mut().for_each(|v| *v /= norm);
        }
    }
    out
}

/// Why a selection cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum SelectError {
    #[error("lambda must be in [0, 1], got {0}")]
    Lambda(f64),
    #[error("{0}")]
    Loss(String),
    #[error("{rows} feature values for {n} items of {d} features")]
    Shape { rows: usize, n: usize, d: usize },
}

/// Picks up to `k` items (fewer when the pool is smaller) by the SPEC §5 criterion.
///
/// `unit` holds one unit-length (or zero) row of `d` values per item ([`unit_rows`]); `gaps`
/// the normalised margins ([`neighbor_gaps`]). Ties go to the smaller margin, then to the
/// earlier item, so a pool in a fixed order gives a fixed batch.
pub(crate) fn select_batch(
    unit: &[f64],
    d: usize,
    gaps: &[f64],
    k: usize,
    lambda: f64,
) -> Result<Vec<Pick>, SelectError> {
    if !(0.0..=1.0).contains(&lambda) {
        return Err(SelectError::Lambda(lambda));
    }
    let n = gaps.len();
    if unit.len() != n * d {
        return Err(SelectError::Shape {
            rows: unit.len(),
            n,
            d,
        });
    }
    let mut max_cos = vec![0.0f64; n];
    let mut available = vec![true; n];
    let mut picks = Vec::with_capacity(k.min(n));
    for _ in 0..k.min(n) {
        let mut best: Option<(f64, usize)> = None;
        for i in (0..n).filter(|&i| available[i]) {
            let f = lambda * gaps[i] + (1.0 - lambda) * max_cos[i];
            let better = match best {
                None => true,
                Some((bf, bi)) => f < bf || (f == bf && gaps[i] < gaps[bi]),
            };
            if better {
                best = Some((f, i));
            }
        }
        let Some((objective, j)) = best else { break };
        available[j] = false;
        picks.push(Pick {
            item: j,
            margin: gaps[j],
            max_cos: max_cos[j],
            objective,
        });
        // Incremental update: only the new pick can raise an item's max |cos|.
        let yj = &unit[j * d..(j + 1) * d];
        for i in (0..n).filter(|&i| available[i]) {
            let c = dot(&unit[i * d..(i + 1) * d], yj).abs();
            if c > max_cos[i] {
                max_cos[i] = c;
            }
        }
    }
    Ok(picks)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Independent oracle: at every step, recompute each remaining item's max |cos| against
    /// the whole batch from the raw (z-scored, not unit) vectors, and take the argmin.
    fn brute_force(z: &[Vec<f64>], gaps: &[f64], k: usize, lambda: f64) -> Vec<usize> {
        let cos = |a: &[f64], b: &[f64]| {
            let (na, nb) = (
                a.iter().map(|v| v * v).sum::<f64>().sqrt(),
                b.iter().map(|v| v * v).sum::<f64>().sqrt(),
            );
            if na == 0.0 || nb == 0.0 {
                0.0
            } else {
                (a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>() / (na * nb)).abs()
            }
        };
        let mut chosen: Vec<usize> = Vec::new();
        while chosen.len() < k.min(gaps.len()) {
            let mut best: Option<(f64, f64, usize)> = None;
            for i in (0..gaps.len()).filter(|i| !chosen.contains(i)) {
                let m = chosen
                    .iter()
                    .map(|&s| cos(&z[i], &z[s]))
                    .fold(0.0, f64::max);
                let f = lambda * gaps[i] + (1.0 - lambda) * m;
                let key = (f, gaps[i], i);
                if best.is_none_or(|b| (key.0, key.1, key.2) < b) {
                    best = Some(key);
                }
            }
            chosen.push(best.unwrap().2);
        }
        chosen
    }

    /// The z-scored rows of `x` (what `unit_rows` normalises to unit length), recomputed
    /// directly.
    fn zscore(x: &[Vec<f32>]) -> Vec<Vec<f64>> {
        let (n, d) = (x.len(), x[0].len());
        (0..n)
            .map(|i| {
                (0..d)
                    .map(|c| {
                        let col: Vec<f64> = x.iter().map(|r| f64::from(r[c])).collect();
                        let mean = col.iter().sum::<f64>() / n as f64;
                        let sd =
                            (col.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
                        if sd > 1e-12 {
                            (col[i] - mean) / sd
                        } else {
                            0.0
                        }
                    })
                    .collect()
            })
            .collect()
    }

    fn random_pool(seed: u64, n: usize, d: usize) -> (Vec<Vec<f32>>, Vec<f64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let x: Vec<Vec<f32>> = (0..n)
            .map(|_| (0..d).map(|_| rng.random_range(-3.0f32..3.0)).collect())
            .collect();
        let gaps: Vec<f64> = (0..n).map(|_| rng.random_range(0.0..1.0)).collect();
        (x, gaps)
    }

    #[test]
    fn greedy_matches_brute_force_for_every_lambda() {
        for seed in 0..20u64 {
            let (n, d) = (30 + seed as usize, 5);
            let (x, gaps) = random_pool(seed, n, d);
            let flat: Vec<f32> = x.iter().flatten().copied().collect();
            let unit = unit_rows(&flat, d);
            let z = zscore(&x);
            for lambda in [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0] {
                let picks = select_batch(&unit, d, &gaps, 12, lambda).unwrap();
                let items: Vec<usize> = picks.iter().map(|p| p.item).collect();
                assert_eq!(
                    items,
                    brute_force(&z, &gaps, 12, lambda),
                    "seed {seed}, λ {lambda}"
                );
            }
        }
    }

    #[test]
    fn lambda_one_is_sorting_by_margin() {
        let (x, gaps) = random_pool(7, 40, 4);
        let flat: Vec<f32> = x.iter().flatten().copied().collect();
        let picks = select_batch(&unit_rows(&flat, 4), 4, &gaps, 15, 1.0).unwrap();
        let mut by_gap: Vec<usize> = (0..40).collect();
        by_gap.sort_by(|&a, &b| gaps[a].total_cmp(&gaps[b]).then(a.cmp(&b)));
        let items: Vec<usize> = picks.iter().map(|p| p.item).collect();
        assert_eq!(items, by_gap[..15]);
        assert!(picks.iter().all(|p| p.objective == p.margin));
    }

    #[test]
    fn diversity_skips_a_duplicate() {
        // Items 0 and 1 are the same vector with the two smallest gaps; item 2 points
        // elsewhere. Plain margin takes the duplicate, the angle criterion does not.
        let x = [1.0f32, 0.0, 1.0, 0.0, 0.0, 1.0, -1.0, -1.0];
        let unit = unit_rows(&x, 2);
        let gaps = [0.0, 0.05, 0.2, 1.0];
        let margin: Vec<usize> = select_batch(&unit, 2, &gaps, 2, 1.0)
            .unwrap()
            .iter()
            .map(|p| p.item)
            .collect();
        assert_eq!(margin, [0, 1]);
        let diverse = select_batch(&unit, 2, &gaps, 2, 0.5).unwrap();
        assert_eq!(diverse[0].item, 0);
        assert_eq!(diverse[0].max_cos, 0.0);
        assert_eq!(diverse[1].item, 2);
    }

    #[test]
    fn neighbor_gaps_by_hand() {
        // List 0 scores 1, 4, 4.5, 10: gaps 3, 0.5, 0.5, 5.5; list 1 has one item; list 2
        // ties. Pool: every item of lists 0 and 1, one of list 2.
        let lists = vec![vec![4.0, 1.0, 10.0, 4.5], vec![7.0], vec![2.0, 2.0]];
        let pool = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (2, 1)];
        let g = neighbor_gaps(&lists, &pool);
        let max = 5.5;
        let expect = [0.5 / max, 3.0 / max, 1.0, 0.5 / max, 1.0, 0.0];
        for (a, b) in g.iter().zip(expect) {
            assert!((a - b).abs() < 1e-12, "{g:?}");
        }
        assert_eq!(
            neighbor_gaps(&[vec![3.0, 3.0]], &[(0, 0), (0, 1)]),
            [0.0, 0.0]
        );
    }

    #[test]
    fn small_pools_bad_lambda_and_zero_rows() {
        let unit = unit_rows(&[1.0, 2.0, 1.0, 2.0], 2);
        // Identical rows z-score to zero: cosine 0, so both are picked by margin.
        assert!(unit.iter().all(|&v| v == 0.0));
        let picks = select_batch(&unit, 2, &[0.4, 0.2], 5, 0.5).unwrap();
        assert_eq!(picks.iter().map(|p| p.item).collect::<Vec<_>>(), [1, 0]);
        assert!(select_batch(&unit, 2, &[0.4, 0.2], 0, 0.5)
            .unwrap()
            .is_empty());
        assert!(select_batch(&[], 2, &[], 3, 0.5).unwrap().is_empty());
        assert_eq!(
            select_batch(&unit, 2, &[0.4, 0.2], 1, 1.5),
            Err(SelectError::Lambda(1.5))
        );
        assert!(select_batch(&unit, 3, &[0.4, 0.2], 1, 0.5).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn greedy_equals_oracle(seed in 0u64..10_000, n in 1usize..25, d in 2usize..6,
                                k in 0usize..30, lambda in 0.0f64..=1.0) {
            let (x, gaps) = random_pool(seed, n, d);
            let flat: Vec<f32> = x.iter().flatten().copied().collect();
            let picks = select_batch(&unit_rows(&flat, d), d, &gaps, k, lambda).unwrap();
            prop_assert_eq!(picks.len(), k.min(n));
            let items: Vec<usize> = picks.iter().map(|p| p.item).collect();
            prop_assert_eq!(items, brute_force(&zscore(&x), &gaps, k, lambda));
        }
    }
}
