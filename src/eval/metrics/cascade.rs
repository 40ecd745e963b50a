//! Cascade-model metrics: ERR (Chapelle et al. 2009) and Yandex's pFound (SPEC §4).
//!
//! Both model a user reading down the list who stops at document j with probability
//! `R_j = (2^g_j − 1) / 2^g_max` ("satisfied"); pFound adds a constant chance of giving up.

use super::JudgedRanking;

/// pFound's per-rank probability that the user abandons the list (Yandex: 0.15).
pub const PFOUND_BREAK: f64 = 0.15;

/// ERR@k = Σ_{r≤k} (1/r) · Π_{j<r}(1 − R_j) · R_r.
/// `max_grade` is the top of the grading scale (the highest grade in the judgments).
pub fn err_at(r: &JudgedRanking, k: usize, max_grade: i32) -> f64 {
    cascade(r, k, max_grade, |rank, _| 1.0 / rank as f64)
}

/// pFound@k = Σ_{r≤k} (1 − b)^{r−1} · Π_{j<r}(1 − R_j) · R_r, b = [`PFOUND_BREAK`].
pub fn pfound_at(r: &JudgedRanking, k: usize, max_grade: i32) -> f64 {
    cascade(r, k, max_grade, |_, look| look)
}

/// Walks the top k keeping `reach` = Π_{j<r}(1 − R_j) and `look` = (1 − b)^{r−1}; `weight`
/// turns (rank, look) into the metric's per-rank factor.
fn cascade(r: &JudgedRanking, k: usize, max_grade: i32, weight: impl Fn(usize, f64) -> f64) -> f64 {
    let mut reach = 1.0;
    let mut look = 1.0;
    let mut total = 0.0;
    for (i, grade) in r.retrieved.iter().take(k).enumerate() {
        let stop = satisfaction(grade.unwrap_or(0), max_grade);
        total += weight(i + 1, look) * reach * stop;
        reach *= 1.0 - stop;
        look *= 1.0 - PFOUND_BREAK;
    }
    total
}

/// `R = (2^g − 1) / 2^g_max`, written as `2^(g − g_max) − 2^(−g_max)` so large grades stay
/// finite; grades are clamped to [0, g_max].
fn satisfaction(grade: i32, max_grade: i32) -> f64 {
    if max_grade <= 0 || grade <= 0 {
        return 0.0;
    }
    let g = grade.min(max_grade);
    2f64.powi(g - max_grade) - 2f64.powi(-max_grade)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{random_ranking, ranking, Rng};
    use super::*;

    #[test]
    fn hand_computed() {
        // g_max = 2: R(2) = 3/4, R(1) = 1/4, R(0) = 0. Ranking grades 1, 0, 2.
        let r = ranking(&[1, 0, 2], &[]);
        // ERR = 1/4 + 0 + (1/3)(3/4)(1)(3/4) = 0.25 + 0.1875 = 0.4375
        assert!((err_at(&r, 10, 2) - 0.4375).abs() < 1e-15);
        assert!((err_at(&r, 1, 2) - 0.25).abs() < 1e-15);
        // pFound = 1/4 + 0 + 0.85² (3/4)(3/4) = 0.25 + 0.7225 · 0.5625
        assert!((pfound_at(&r, 10, 2) - (0.25 + 0.7225 * 0.5625)).abs() < 1e-15);
        assert_eq!(err_at(&ranking(&[0, -1], &[3]), 10, 3), 0.0);
        assert_eq!(err_at(&r, 10, 0), 0.0);
    }

    /// Oracle: the definitions, with each product recomputed from scratch (O(k²)).
    #[test]
    fn match_definitions_on_random_rankings() {
        let mut rng = Rng(3);
        for _ in 0..1000 {
            let r = random_ranking(&mut rng, 25);
            let k = 1 + rng.below(30) as usize;
            let max_grade = 3;
            let stop = |j: usize| {
                let g = r.retrieved[j].unwrap_or(0).clamp(0, max_grade);
                (2f64.powi(g) - 1.0) / 2f64.powi(max_grade)
            };
            let (mut err, mut pfound) = (0.0, 0.0);
            for rank in 1..=k.min(r.retrieved.len()) {
                let reach: f64 = (0..rank - 1).map(|j| 1.0 - stop(j)).product();
                err += reach * stop(rank - 1) / rank as f64;
                pfound += 0.85f64.powi(rank as i32 - 1) * reach * stop(rank - 1);
            }
            assert!((err_at(&r, k, max_grade) - err).abs() < 1e-12);
            assert!((pfound_at(&r, k, max_grade) - pfound).abs() < 1e-12);
        }
    }
}
