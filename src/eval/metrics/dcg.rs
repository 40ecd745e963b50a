//! Discounted cumulative gain and its normalised form (SPEC §4; Järvelin & Kekäläinen 2002).

use super::JudgedRanking;

/// How a grade becomes a gain. Grades at or below 0 (non-relevant, or negative "junk" grades)
/// give no gain under either rule, as in trec_eval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gain {
    /// `2^grade − 1`: LightGBM and most learning-to-rank work; SPEC's default.
    #[default]
    Exponential,
    /// `grade`: trec_eval's `ndcg` and `ndcg_cut`.
    Linear,
}

impl Gain {
    /// The gain of `grade`, divided by `2^top` for the exponential rule so that any `i32` grade
    /// stays finite. NDCG is a ratio, so the common factor cancels; `top` is the query's highest
    /// grade.
    fn scaled(self, grade: i32, top: i32) -> f64 {
        if grade <= 0 {
            return 0.0;
        }
        match self {
            Gain::Linear => grade as f64,
            Gain::Exponential => 2f64.powi(grade - top) - 2f64.powi(-top),
        }
    }
}

/// DCG of gains in rank order: Σ_i gain_i / log2(i + 1), ranks i from 1.
pub fn dcg(gains: impl IntoIterator<Item = f64>) -> f64 {
    gains
        .into_iter()
        .enumerate()
        .map(|(i, g)| g / ((i + 2) as f64).log2())
        .sum()
}

/// NDCG@k = DCG@k / ideal DCG@k, the ideal ordering being every judged document of the query by
/// grade (not just the retrieved ones). `k = None` is the untruncated NDCG (trec_eval `ndcg`).
/// 0 when the query has no document with positive gain.
pub fn ndcg_at(r: &JudgedRanking, k: Option<usize>, gain: Gain) -> f64 {
    let k = k.unwrap_or(usize::MAX);
    let top = r.judged.iter().copied().max().unwrap_or(0);
    let mut ideal: Vec<f64> = r.judged.iter().map(|&g| gain.scaled(g, top)).collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let ideal_dcg = dcg(ideal.into_iter().take(k));
    if ideal_dcg <= 0.0 {
        return 0.0;
    }
    let actual = r
        .retrieved
        .iter()
        .take(k)
        .map(|g| g.map_or(0.0, |g| gain.scaled(g, top)));
    dcg(actual) / ideal_dcg
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{ranking, Rng};
    use super::*;

    #[test]
    fn hand_computed() {
        // Grades in rank order 3, 2, 0, 1; linear gain.
        // DCG@4 = 3/1 + 2/log2(3) + 0 + 1/log2(5); ideal = same grades sorted 3, 2, 1, 0.
        let r = ranking(&[3, 2, 0, 1], &[]);
        let dcg_4 = 3.0 + 2.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let ideal_4 = 3.0 + 2.0 / 3f64.log2() + 1.0 / 2.0;
        assert!((ndcg_at(&r, Some(4), Gain::Linear) - dcg_4 / ideal_4).abs() < 1e-15);
        // Exponential: gains 7, 3, 0, 1.
        let dcg_e = 7.0 + 3.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let ideal_e = 7.0 + 3.0 / 3f64.log2() + 1.0 / 2.0;
        assert!((ndcg_at(&r, Some(4), Gain::Exponential) - dcg_e / ideal_e).abs() < 1e-15);
        // Cut at 1: perfect.
        assert_eq!(ndcg_at(&r, Some(1), Gain::Linear), 1.0);
        // pytrec_eval (trec_eval) on ranking [non, non, 1, 2] gives ndcg 0.5174418337467067.
        let r = ranking(&[0, 0, 1, 2], &[]);
        assert!((ndcg_at(&r, Some(10), Gain::Linear) - 0.517_441_833_746_706_7).abs() < 1e-12);
        // Negative grades give no gain (pytrec_eval: [-1, 3] -> 0.6309297535714574).
        let r = ranking(&[-1, 3], &[]);
        assert!((ndcg_at(&r, None, Gain::Linear) - 0.630_929_753_571_457_4).abs() < 1e-12);
    }

    #[test]
    fn missing_relevant_lower_the_ideal_denominator_only() {
        // One relevant retrieved at rank 1, a better one unretrieved: DCG 1, ideal 3 + 1/log2 3.
        let r = ranking(&[1], &[3]);
        let expected = 1.0 / (3.0 + 1.0 / 3f64.log2());
        assert!((ndcg_at(&r, Some(10), Gain::Linear) - expected).abs() < 1e-15);
        assert_eq!(
            ndcg_at(&ranking(&[0, 0], &[-1]), Some(10), Gain::Linear),
            0.0
        );
        assert_eq!(ndcg_at(&ranking(&[], &[]), None, Gain::Exponential), 0.0);
    }

    #[test]
    fn huge_grades_stay_finite() {
        let r = ranking(&[i32::MAX, 5, i32::MAX - 1], &[]);
        let v = ndcg_at(&r, Some(3), Gain::Exponential);
        assert!(v.is_finite() && v > 0.0 && v < 1.0, "{v}");
    }

    fn permutations(items: &[i32]) -> Vec<Vec<i32>> {
        if items.len() <= 1 {
            return vec![items.to_vec()];
        }
        let mut all = Vec::new();
        for i in 0..items.len() {
            let mut rest = items.to_vec();
            let first = rest.remove(i);
            for mut p in permutations(&rest) {
                p.insert(0, first);
                all.push(p);
            }
        }
        all
    }

    /// Oracle: the ideal DCG@k is the maximum DCG@k over every ordering of the judged documents.
    #[test]
    fn ideal_is_the_best_permutation() {
        let mut rng = Rng(11);
        for _ in 0..300 {
            let n = 1 + rng.below(6) as usize;
            let grades: Vec<i32> = (0..n).map(|_| rng.below(5) as i32 - 1).collect();
            let retrieved = 1 + rng.below(n as u64) as usize;
            let k = 1 + rng.below(n as u64 + 1) as usize;
            let r = ranking(&grades[..retrieved], &grades[retrieved..]);
            for gain in [Gain::Linear, Gain::Exponential] {
                let value = |g: i32| match gain {
                    Gain::Linear => g.max(0) as f64,
                    Gain::Exponential => 2f64.powi(g.max(0)) - 1.0,
                };
                let best = permutations(&grades)
                    .iter()
                    .map(|p| dcg(p.iter().take(k).map(|&g| value(g))))
                    .fold(0.0, f64::max);
                let actual = dcg(grades[..retrieved].iter().take(k).map(|&g| value(g)));
                let expected = if best > 0.0 { actual / best } else { 0.0 };
                let got = ndcg_at(&r, Some(k), gain);
                assert!(
                    (got - expected).abs() < 1e-12,
                    "{grades:?} k={k}: {got} vs {expected}"
                );
            }
        }
    }
}
