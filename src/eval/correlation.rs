//! Rank correlation between two runs: Kendall τ_b and Spearman ρ (SPEC §4).
//!
//! Used to ask "how differently do two models order the same documents": per query, over the
//! documents both runs retrieved, comparing their scores (equal scores are ties).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::Run;

/// Correlation of one query's common documents.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QueryCorrelation {
    /// Documents retrieved by both runs.
    pub common: usize,
    /// `None` when undefined: fewer than two common documents, or one side all tied.
    pub kendall_tau_b: Option<f64>,
    pub spearman_rho: Option<f64>,
}

/// Per-query correlations and their means over the queries where they are defined.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunCorrelation {
    pub per_query: BTreeMap<String, QueryCorrelation>,
    pub mean_kendall_tau_b: Option<f64>,
    pub mean_spearman_rho: Option<f64>,
}

/// Correlates `a` and `b` on every query present in both.
pub fn compare_runs(a: &Run, b: &Run) -> RunCorrelation {
    let mut per_query = BTreeMap::new();
    for (qid, docs_a) in a.iter() {
        let Some(docs_b) = b.get(qid) else { continue };
        let scores_b: BTreeMap<&str, f64> =
            docs_b.iter().map(|d| (d.doc.as_str(), d.score)).collect();
        let (xs, ys): (Vec<f64>, Vec<f64>) = docs_a
            .iter()
            .filter_map(|d| Some((d.score, *scores_b.get(d.doc.as_str())?)))
            .unzip();
        per_query.insert(
            qid.to_string(),
            QueryCorrelation {
                common: xs.len(),
                kendall_tau_b: kendall_tau_b(&xs, &ys),
                spearman_rho: spearman_rho(&xs, &ys),
            },
        );
    }
    let mean = |f: fn(&QueryCorrelation) -> Option<f64>| {
        let values: Vec<f64> = per_query.values().filter_map(f).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    RunCorrelation {
        mean_kendall_tau_b: mean(|q| q.kendall_tau_b),
        mean_spearman_rho: mean(|q| q.spearman_rho),
        per_query,
    }
}

/// Kendall τ_b = (C − D) / sqrt((n0 − n1)(n0 − n2)), in O(n log n) (Knight 1966): sort by x
/// then y, count ties, then count discordant pairs as the inversions of y (merge sort).
/// `xs` and `ys` have equal length.
pub fn kendall_tau_b(xs: &[f64], ys: &[f64]) -> Option<f64> {
    assert_eq!(xs.len(), ys.len(), "kendall_tau_b needs paired values");
    let n = xs.len();
    let mut pairs: Vec<(f64, f64)> = xs.iter().copied().zip(ys.iter().copied()).collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let ties_x = tied_pairs(&pairs, |a, b| a.0 == b.0);
    let ties_xy = tied_pairs(&pairs, |a, b| a == b);
    let mut y: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    let discordant = sort_counting_inversions(&mut y);
    let ties_y = tied_pairs(&y, |a, b| a == b);
    let n0 = (n * n.saturating_sub(1) / 2) as f64;
    let (n1, n2) = (ties_x as f64, ties_y as f64);
    let denominator = ((n0 - n1) * (n0 - n2)).sqrt();
    if denominator == 0.0 {
        return None;
    }
    let c_minus_d = n0 - n1 - n2 + ties_xy as f64 - 2.0 * discordant as f64;
    Some((c_minus_d / denominator).clamp(-1.0, 1.0))
}

/// Spearman ρ: Pearson correlation of the fractional ranks (ties share their mean rank).
pub fn spearman_rho(xs: &[f64], ys: &[f64]) -> Option<f64> {
    assert_eq!(xs.len(), ys.len(), "spearman_rho needs paired values");
    if xs.len() < 2 {
        return None;
    }
    let (rx, ry) = (fractional_ranks(xs), fractional_ranks(ys));
    let n = xs.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in rx.iter().zip(&ry) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    if sxx == 0.0 || syy == 0.0 {
        return None;
    }
    Some((sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0))
}

/// Σ t(t−1)/2 over runs of equal neighbours in a sorted slice.
fn tied_pairs<T>(sorted: &[T], equal: impl Fn(&T, &T) -> bool) -> u64 {
    let mut total = 0u64;
    let mut run = 1u64;
    for w in sorted.windows(2) {
        if equal(&w[0], &w[1]) {
            run += 1;
        } else {
            total += run * (run - 1) / 2;
            run = 1;
        }
    }
    total + run * (run - 1) / 2
}

/// Sorts ascending and returns the number of pairs i < j with v[i] > v[j] (strictly).
fn sort_counting_inversions(v: &mut [f64]) -> u64 {
    if v.len() < 2 {
        return 0;
    }
    let mid = v.len() / 2;
    let mut count =
        sort_counting_inversions(&mut v[..mid]) + sort_counting_inversions(&mut v[mid..]);
    let mut merged = Vec::with_capacity(v.len());
    let (mut i, mut j) = (0, mid);
    while i < mid && j < v.len() {
        if v[i].total_cmp(&v[j]) != Ordering::Greater {
            merged.push(v[i]);
            i += 1;
        } else {
            count += (mid - i) as u64;
            merged.push(v[j]);
            j += 1;
        }
    }
    merged.extend_from_slice(&v[i..mid]);
    merged.extend_from_slice(&v[j..]);
    v.copy_from_slice(&merged);
    count
}

/// 1-based ranks in ascending order of value; tied values get the mean of their ranks.
fn fractional_ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        let mean_rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = mean_rank;
        }
        start = end;
    }
    ranks
}

#[cfg(test)]
mod tests {
    use super::super::metrics::test_support::Rng;
    use super::*;

    /// O(n²) definition of τ_b.
    fn tau_b_brute(xs: &[f64], ys: &[f64]) -> Option<f64> {
        let n = xs.len();
        let (mut c, mut d, mut tx, mut ty) = (0.0f64, 0.0, 0.0, 0.0);
        for i in 0..n {
            for j in i + 1..n {
                let s = (xs[i] - xs[j]).signum() * (ys[i] - ys[j]).signum();
                if xs[i] == xs[j] && ys[i] == ys[j] {
                    continue;
                } else if xs[i] == xs[j] {
                    tx += 1.0;
                } else if ys[i] == ys[j] {
                    ty += 1.0;
                } else if s > 0.0 {
                    c += 1.0;
                } else {
                    d += 1.0;
                }
            }
        }
        // τ_b = (C − D) / sqrt((C + D + T_x)(C + D + T_y)), T_x ties only in x.
        let den = (c + d + tx) * (c + d + ty);
        (den > 0.0).then(|| (c - d) / den.sqrt())
    }

    #[test]
    fn tau_b_matches_pair_definition_with_ties() {
        let mut rng = Rng(42);
        for _ in 0..2000 {
            let n = rng.below(25) as usize;
            let levels = 1 + rng.below(6);
            let xs: Vec<f64> = (0..n).map(|_| rng.below(levels) as f64).collect();
            let ys: Vec<f64> = (0..n).map(|_| rng.below(levels) as f64 * 0.5).collect();
            match (kendall_tau_b(&xs, &ys), tau_b_brute(&xs, &ys)) {
                (Some(a), Some(b)) => assert!((a - b).abs() < 1e-12, "{xs:?} {ys:?}"),
                (a, b) => assert_eq!(a, b, "{xs:?} {ys:?}"),
            }
        }
    }

    #[test]
    fn published_values() {
        // scipy.stats.kendalltau([12, 2, 1, 12, 2], [1, 4, 7, 1, 0]) = -0.4714045207910316
        // (scipy's documentation example, τ_b).
        let x = [12.0, 2.0, 1.0, 12.0, 2.0];
        let y = [1.0, 4.0, 7.0, 1.0, 0.0];
        assert!((kendall_tau_b(&x, &y).unwrap() + 0.471_404_520_791_031_6).abs() < 1e-12);
        // scipy.stats.spearmanr([1,2,3,4,5], [5,6,7,8,7]) = 0.8207826816681233 (scipy docs).
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [5.0, 6.0, 7.0, 8.0, 7.0];
        assert!((spearman_rho(&x, &y).unwrap() - 0.820_782_681_668_123_3).abs() < 1e-12);
        assert_eq!(kendall_tau_b(&x, &x), Some(1.0));
        let rev: Vec<f64> = x.iter().rev().copied().collect();
        assert_eq!(spearman_rho(&x, &rev), Some(-1.0));
    }

    #[test]
    fn undefined_cases_are_none() {
        assert_eq!(kendall_tau_b(&[], &[]), None);
        assert_eq!(kendall_tau_b(&[1.0], &[2.0]), None);
        assert_eq!(kendall_tau_b(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]), None);
        assert_eq!(spearman_rho(&[1.0], &[2.0]), None);
        assert_eq!(spearman_rho(&[1.0, 2.0], &[3.0, 3.0]), None);
    }

    #[test]
    fn compare_runs_uses_common_documents() {
        let mut a = Run::new();
        let mut b = Run::new();
        for (doc, s) in [("x", 3.0), ("y", 2.0), ("z", 1.0), ("only_a", 9.0)] {
            a.push("1", doc, s);
        }
        for (doc, s) in [("z", 30.0), ("y", 20.0), ("x", 10.0)] {
            b.push("1", doc, s);
        }
        a.push("2", "p", 1.0);
        b.push("3", "p", 1.0);
        let c = compare_runs(&a, &b);
        assert_eq!(c.per_query.len(), 1);
        let q = &c.per_query["1"];
        assert_eq!(q.common, 3);
        assert_eq!(q.kendall_tau_b, Some(-1.0));
        assert_eq!(q.spearman_rho, Some(-1.0));
        assert_eq!(c.mean_kendall_tau_b, Some(-1.0));
    }
}
