//! Set-based metrics over a ranking prefix: P@k, R@k, R-precision, reciprocal rank (SPEC §4).

use super::JudgedRanking;

/// P@k: relevant documents in the top k, divided by k (trec_eval `P.k`: a run shorter than k is
/// padded with non-relevant documents, so the divisor stays k).
pub fn precision_at(r: &JudgedRanking, k: usize, threshold: i32) -> f64 {
    if k == 0 {
        return 0.0;
    }
    relevant_in_top(r, k, threshold) as f64 / k as f64
}

/// R@k: relevant documents in the top k, divided by R (all judged relevant documents).
pub fn recall_at(r: &JudgedRanking, k: usize, threshold: i32) -> f64 {
    match r.num_relevant(threshold) {
        0 => 0.0,
        num_rel => relevant_in_top(r, k, threshold) as f64 / num_rel as f64,
    }
}

/// R-precision: precision at rank R, where R is the number of judged relevant documents.
pub fn r_precision(r: &JudgedRanking, threshold: i32) -> f64 {
    let num_rel = r.num_relevant(threshold);
    precision_at(r, num_rel, threshold)
}

/// RR: 1 / rank of the first relevant document; 0 when none is retrieved.
pub fn reciprocal_rank(r: &JudgedRanking, threshold: i32) -> f64 {
    r.relevant(threshold)
        .position(|rel| rel)
        .map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

fn relevant_in_top(r: &JudgedRanking, k: usize, threshold: i32) -> usize {
    r.relevant(threshold).take(k).filter(|&rel| rel).count()
}

#[cfg(test)]
mod tests {
    use super::super::test_support::ranking;
    use super::*;

    #[test]
    fn hand_computed_values() {
        // Ranks: rel, non, unjudged, rel(2), non(-1); one relevant doc unretrieved.
        let mut r = ranking(&[1, 0], &[3]);
        r.retrieved.push(None);
        r.retrieved.push(Some(2));
        r.judged.push(2);
        r.retrieved.push(Some(-1));
        r.judged.push(-1);
        // R = 3 (grades 1, 3, 2).
        assert_eq!(precision_at(&r, 1, 1), 1.0);
        assert_eq!(precision_at(&r, 4, 1), 0.5);
        assert_eq!(precision_at(&r, 10, 1), 0.2); // padded to 10
        assert_eq!(recall_at(&r, 4, 1), 2.0 / 3.0);
        assert_eq!(recall_at(&r, 1000, 1), 2.0 / 3.0);
        assert_eq!(r_precision(&r, 1), 1.0 / 3.0); // top 3: rel, non, unjudged
        assert_eq!(reciprocal_rank(&r, 1), 1.0);
        // Threshold 2: only grades 2, 3 relevant; first relevant retrieved at rank 4.
        assert_eq!(reciprocal_rank(&r, 2), 0.25);
        assert_eq!(r_precision(&r, 2), 0.0);
        assert_eq!(recall_at(&r, 4, 2), 0.5);
    }

    #[test]
    fn no_relevant_and_empty_runs_give_zero() {
        let none = ranking(&[0, 0], &[-1]);
        assert_eq!(recall_at(&none, 10, 1), 0.0);
        assert_eq!(r_precision(&none, 1), 0.0);
        assert_eq!(reciprocal_rank(&none, 1), 0.0);
        let empty = ranking(&[], &[2]);
        assert_eq!(precision_at(&empty, 10, 1), 0.0);
        assert_eq!(reciprocal_rank(&empty, 1), 0.0);
        assert_eq!(precision_at(&empty, 0, 1), 0.0);
    }
}
