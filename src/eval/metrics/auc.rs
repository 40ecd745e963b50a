//! Per-query ROC AUC: the fraction of (relevant, non-relevant) pairs ranked in the right order.

use super::JudgedRanking;

/// AUC over every pair of one relevant and one non-relevant document of the query.
///
/// Non-relevant means retrieved but not relevant (judged or not, as trec_eval), plus judged
/// non-relevant documents the run missed. Documents the run missed sit below every retrieved
/// one, tied among themselves: such a tie counts 1/2. Relevant documents the run missed are
/// therefore counted too, as AP counts them through R. 0 with no relevant document; 1 with no
/// non-relevant one (nothing can be misordered).
pub fn auc(r: &JudgedRanking, threshold: i32) -> f64 {
    let num_rel = r.num_relevant(threshold);
    if num_rel == 0 {
        return 0.0;
    }
    let retrieved_judged_nonrel = r
        .retrieved
        .iter()
        .filter(|g| g.is_some_and(|g| g < threshold))
        .count();
    let judged_nonrel = r.judged.len() - num_rel;
    let missed_nonrel = (judged_nonrel - retrieved_judged_nonrel) as f64;
    let retrieved_nonrel = r.relevant(threshold).filter(|&rel| !rel).count() as f64;
    let all_nonrel = retrieved_nonrel + missed_nonrel;
    if all_nonrel == 0.0 {
        return 1.0;
    }
    // Walk down the list: a retrieved relevant document beats every non-relevant one below it.
    let mut nonrel_above = 0.0;
    let mut rel_retrieved = 0usize;
    let mut correct = 0.0;
    for rel in r.relevant(threshold) {
        if rel {
            rel_retrieved += 1;
            correct += all_nonrel - nonrel_above;
        } else {
            nonrel_above += 1.0;
        }
    }
    let missed_rel = (num_rel - rel_retrieved) as f64;
    correct += 0.5 * missed_rel * missed_nonrel;
    correct / (num_rel as f64 * all_nonrel)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{random_ranking, ranking, Rng};
    use super::*;

    #[test]
    fn hand_computed() {
        // rel, non, rel: pairs (r1,n) ok, (r3,n) wrong -> 1/2.
        assert_eq!(auc(&ranking(&[1, 0, 1], &[]), 1), 0.5);
        // rel, non + one relevant missed and one non-relevant missed:
        // rel@1 beats non@2 and missed non (2); missed rel vs non@2: wrong;
        // missed rel vs missed non: tie 1/2. (2 + 0 + 0.5) / (2 · 2) = 0.625.
        assert_eq!(auc(&ranking(&[1, 0], &[2, 0]), 1), 0.625);
        assert_eq!(auc(&ranking(&[1, 2], &[]), 1), 1.0);
        assert_eq!(auc(&ranking(&[0, 0], &[]), 1), 0.0);
        // Unjudged retrieved documents are non-relevant.
        let mut r = ranking(&[], &[]);
        r.retrieved = vec![None, Some(1)];
        r.judged = vec![1];
        assert_eq!(auc(&r, 1), 0.0);
    }

    /// Oracle: enumerate every (relevant, non-relevant) pair with explicit positions, missed
    /// documents all at the same position below the list.
    #[test]
    fn matches_pair_enumeration() {
        let mut rng = Rng(5);
        for _ in 0..2000 {
            let r = random_ranking(&mut rng, 20);
            let threshold = 1 + rng.below(2) as i32;
            // (position, relevant) for every document that takes part.
            let mut docs: Vec<(usize, bool)> = r
                .retrieved
                .iter()
                .enumerate()
                .map(|(i, g)| (i, g.is_some_and(|g| g >= threshold)))
                .collect();
            let mut retrieved_judged: Vec<i32> = r.retrieved.iter().flatten().copied().collect();
            for &g in &r.judged {
                if let Some(i) = retrieved_judged.iter().position(|&x| x == g) {
                    retrieved_judged.swap_remove(i);
                } else {
                    docs.push((usize::MAX, g >= threshold));
                }
            }
            let (mut pairs, mut correct) = (0.0, 0.0);
            for &(pr, rel_r) in &docs {
                for &(pn, rel_n) in &docs {
                    if rel_r && !rel_n {
                        pairs += 1.0;
                        correct += match pr.cmp(&pn) {
                            std::cmp::Ordering::Less => 1.0,
                            std::cmp::Ordering::Equal => 0.5,
                            std::cmp::Ordering::Greater => 0.0,
                        };
                    }
                }
            }
            let has_rel = docs.iter().any(|d| d.1);
            let expected = match (has_rel, pairs > 0.0) {
                (false, _) => 0.0,
                (true, false) => 1.0,
                (true, true) => correct / pairs,
            };
            assert!((auc(&r, threshold) - expected).abs() < 1e-12, "{r:?}");
        }
    }
}
