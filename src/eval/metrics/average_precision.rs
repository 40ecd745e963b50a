//! Average precision (SPEC §4; trec_eval `map`).

use super::JudgedRanking;

/// AP = (1/R) Σ_{k: doc_k relevant} P@k, with R = every judged relevant document of the query,
/// so relevant documents the run missed contribute 0. One pass, counting relevant-so-far.
pub fn average_precision(r: &JudgedRanking, threshold: i32) -> f64 {
    let num_rel = r.num_relevant(threshold);
    if num_rel == 0 {
        return 0.0;
    }
    let mut rel_so_far = 0usize;
    let mut sum = 0.0;
    for (i, rel) in r.relevant(threshold).enumerate() {
        if rel {
            rel_so_far += 1;
            sum += rel_so_far as f64 / (i + 1) as f64;
        }
    }
    sum / num_rel as f64
}

#[cfg(test)]
mod tests {
    use super::super::precision_at;
    use super::super::test_support::{random_ranking, ranking, Rng};
    use super::*;

    #[test]
    fn hand_computed() {
        // Relevant at ranks 1, 3, 6 of 6; R = 4 (one missed):
        // (1/1 + 2/3 + 3/6) / 4 = 0.541666...
        let r = ranking(&[1, 0, 2, 0, 0, 1], &[1]);
        assert!((average_precision(&r, 1) - (1.0 + 2.0 / 3.0 + 0.5) / 4.0).abs() < 1e-15);
        assert_eq!(average_precision(&ranking(&[0, 0], &[]), 1), 0.0);
        assert_eq!(average_precision(&ranking(&[], &[1]), 1), 0.0);
        assert_eq!(average_precision(&ranking(&[1, 1], &[]), 1), 1.0);
    }

    /// Oracle: the definition, with P@k recomputed from scratch at each relevant rank.
    #[test]
    fn matches_definition_on_random_rankings() {
        let mut rng = Rng(7);
        for _ in 0..2000 {
            let r = random_ranking(&mut rng, 30);
            for threshold in 1..=2 {
                let num_rel = r.num_relevant(threshold);
                let expected = if num_rel == 0 {
                    0.0
                } else {
                    let sum: f64 = (1..=r.retrieved.len())
                        .filter(|&k| r.retrieved[k - 1].is_some_and(|g| g >= threshold))
                        .map(|k| precision_at(&r, k, threshold))
                        .sum();
                    sum / num_rel as f64
                };
                assert!((average_precision(&r, threshold) - expected).abs() < 1e-12);
            }
        }
    }
}
