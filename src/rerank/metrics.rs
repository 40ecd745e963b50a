//! Ranking quality of a model's scores on a [`RankSet`], through [`crate::eval`] (SPEC §4).
//!
//! Each query's rows are ranked by score, ties broken by row order (a stable sort, as
//! LightGBM's evaluator does, so both agree on tied scores), and scored with exponential
//! gain `2^l − 1`. Two conventions for queries with no relevant row:
//! - [`MetricConvention::Letor`] (LightGBM's): such a query counts with NDCG = 1 in the NDCG
//!   means; MAP, MRR and P@10 are means over the queries that have a relevant row.
//! - [`MetricConvention::Trec`] (SPEC §4 default): such queries are left out of every mean.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{RankSet, RerankError};
use crate::eval::{evaluate, EvalOptions, NoRelevant, Qrels, Run, RunOrder};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricConvention {
    Letor,
    Trec,
}

/// Means over the evaluated queries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankMetrics {
    pub map: f64,
    #[serde(rename = "ndcg@1")]
    pub ndcg1: f64,
    #[serde(rename = "ndcg@3")]
    pub ndcg3: f64,
    #[serde(rename = "ndcg@5")]
    pub ndcg5: f64,
    #[serde(rename = "ndcg@10")]
    pub ndcg10: f64,
    #[serde(rename = "p@10")]
    pub p10: f64,
    pub mrr: f64,
    /// Queries in the NDCG means.
    pub queries: usize,
    /// Queries without a relevant row (grade ≥ 1).
    pub no_relevant: usize,
    pub convention: MetricConvention,
}

/// Scores `scores` (one per row of `set`) under `convention`.
pub fn evaluate_scores(
    set: &RankSet,
    scores: &[f32],
    convention: MetricConvention,
) -> Result<RankMetrics, RerankError> {
    if scores.len() != set.num_rows() {
        return Err(RerankError::invalid(format!(
            "{} scores for {} rows",
            scores.len(),
            set.num_rows()
        )));
    }
    if let Some(r) = scores.iter().position(|s| !s.is_finite()) {
        return Err(RerankError::invalid(format!(
            "score of row {r} is {}",
            scores[r]
        )));
    }
    let mut run = Run::new();
    let mut qrels = Qrels::new();
    for q in &set.queries {
        let mut order: Vec<usize> = q.rows.clone().collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        for r in order {
            run.push(&q.qid, (r - q.rows.start).to_string(), f64::from(scores[r]));
        }
        for r in q.rows.clone() {
            qrels.insert(&q.qid, &(r - q.rows.start).to_string(), set.labels[r]);
        }
    }
    let options = |no_relevant| EvalOptions {
        cutoffs: vec![1, 3, 5, 10],
        no_relevant,
        order: RunOrder::AsGiven,
        complete: true,
        ..EvalOptions::default()
    };
    let binary = evaluate(&run, &qrels, &options(NoRelevant::Skip))
        .map_err(|e| RerankError::invalid(format!("evaluation: {e}")))?;
    let graded = match convention {
        MetricConvention::Letor => evaluate(&run, &qrels, &options(NoRelevant::NdcgOne))
            .map_err(|e| RerankError::invalid(format!("evaluation: {e}")))?,
        MetricConvention::Trec => binary.clone(),
    };
    let weights: HashMap<&str, f64> = set
        .queries
        .iter()
        .map(|q| (q.qid.as_str(), q.weight))
        .collect();
    let weighted = set.queries.iter().any(|q| q.weight != 1.0);
    // Weighted queries (click training groups, SPEC §11) count by their weight in every mean.
    let get = |report: &crate::eval::Report, name: &str| {
        if !weighted {
            return report.mean(name).unwrap_or(0.0);
        }
        // Per query, MAP and MRR are a query's AP and RR.
        let per_query = match name {
            "map" => "ap",
            "mrr" => "rr",
            other => other,
        };
        let (mut sum, mut total) = (0.0, 0.0);
        for (qid, values) in &report.per_query {
            if let Some(v) = values.get(per_query) {
                let w = weights.get(qid.as_str()).copied().unwrap_or(1.0);
                sum += w * v;
                total += w;
            }
        }
        if total > 0.0 {
            sum / total
        } else {
            0.0
        }
    };
    Ok(RankMetrics {
        map: get(&binary, "map"),
        ndcg1: get(&graded, "ndcg@1"),
        ndcg3: get(&graded, "ndcg@3"),
        ndcg5: get(&graded, "ndcg@5"),
        ndcg10: get(&graded, "ndcg@10"),
        p10: get(&binary, "p@10"),
        mrr: get(&binary, "mrr"),
        queries: graded.queries,
        no_relevant: binary.skipped_no_relevant.len(),
        convention,
    })
}

/// MAP and NDCG@10 of `scores` under `convention`, as [`evaluate_scores`] computes them
/// (scores narrowed to `f32`, ties in row order, gain `2^l − 1`, grade ≥ 1 relevant), but
/// straight from the labels, without building a run and qrels: the tree trainer logs and
/// early-stops on them every round, where the general evaluator took a fifth of the
/// training time. Tested equal to [`evaluate_scores`].
pub(crate) fn map_ndcg10(
    set: &RankSet,
    scores: &[f64],
    convention: MetricConvention,
) -> Result<(f64, f64), RerankError> {
    if scores.len() != set.num_rows() {
        return Err(RerankError::invalid(format!(
            "{} scores for {} rows",
            scores.len(),
            set.num_rows()
        )));
    }
    let mut order: Vec<usize> = Vec::new();
    let mut ideal: Vec<i32> = Vec::new();
    // Sums of query weights (SPEC §11, inverse propensity scoring): counts when every query weighs 1.
    let (mut ap_sum, mut ap_queries) = (0.0, 0.0);
    let (mut ndcg_sum, mut ndcg_queries) = (0.0, 0.0);
    for q in &set.queries {
        let w = q.weight;
        let narrow = |r: usize| {
            let s = scores[r] as f32;
            if s.is_finite() {
                Ok(s)
            } else {
                Err(RerankError::invalid(format!("score of row {r} is {s}")))
            }
        };
        order.clear();
        order.extend(q.rows.clone());
        for &r in &order {
            narrow(r)?;
        }
        order.sort_by(|&a, &b| (scores[b] as f32).total_cmp(&(scores[a] as f32)));
        let labels = &set.labels[q.rows.clone()];
        let relevant = labels.iter().filter(|&&l| l >= 1).count();
        if relevant == 0 {
            if convention == MetricConvention::Letor {
                ndcg_sum += w;
                ndcg_queries += w;
            }
            continue;
        }
        let mut found = 0usize;
        let mut precisions = 0.0;
        for (i, &r) in order.iter().enumerate() {
            if set.labels[r] >= 1 {
                found += 1;
                precisions += found as f64 / (i + 1) as f64;
            }
        }
        ap_sum += w * precisions / relevant as f64;
        ap_queries += w;
        // Gains scaled by 2^-top as the evaluator does (the ratio is the same).
        let top = labels.iter().copied().max().unwrap_or(0);
        let gain = |g: i32| {
            if g <= 0 {
                0.0
            } else {
                2f64.powi(g - top) - 2f64.powi(-top)
            }
        };
        let discount = |i: usize| 1.0 / ((i + 2) as f64).log2();
        ideal.clear();
        ideal.extend_from_slice(labels);
        ideal.sort_unstable_by(|a, b| b.cmp(a));
        let ideal_dcg: f64 = ideal
            .iter()
            .take(10)
            .enumerate()
            .map(|(i, &g)| gain(g) * discount(i))
            .sum();
        let dcg: f64 = order
            .iter()
            .take(10)
            .enumerate()
            .map(|(i, &r)| gain(set.labels[r]) * discount(i))
            .sum();
        ndcg_sum += w * dcg / ideal_dcg;
        ndcg_queries += w;
    }
    if ap_queries == 0.0 {
        return Err(RerankError::invalid(
            "evaluation: no query to evaluate: no query has a relevant row",
        ));
    }
    Ok((ap_sum / ap_queries, ndcg_sum / ndcg_queries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::QueryGroup;

    #[test]
    fn hand_computed_with_ties_and_an_unjudged_query() {
        // q1: labels [0, 2, 1], scores [3, 1, 1]: ranking rows 0, 1, 2 (tie kept in row order).
        // AP = (1/2)(1/2 + 2/3) = 7/12. NDCG@3: DCG = 3/log2(3) + 1/2, ideal = 3 + 1/log2(3).
        // q2: labels all 0: NDCG 1 under LETOR, out of MAP.
        let set = RankSet::new(
            vec!["f1".into()],
            vec![0.0; 5],
            vec![0, 2, 1, 0, 0],
            vec![QueryGroup::new("q1", 0..3), QueryGroup::new("q2", 3..5)],
            None,
        )
        .unwrap();
        let scores = [3.0, 1.0, 1.0, 0.5, 0.5];
        let m = evaluate_scores(&set, &scores, MetricConvention::Letor).unwrap();
        assert!((m.map - 7.0 / 12.0).abs() < 1e-12);
        let ndcg3 = (3.0 / 3f64.log2() + 0.5) / (3.0 + 1.0 / 3f64.log2());
        assert!((m.ndcg3 - (ndcg3 + 1.0) / 2.0).abs() < 1e-12, "{}", m.ndcg3);
        assert_eq!((m.queries, m.no_relevant), (2, 1));
        let t = evaluate_scores(&set, &scores, MetricConvention::Trec).unwrap();
        assert!((t.ndcg3 - ndcg3).abs() < 1e-12);
        assert_eq!(t.ndcg1, 0.0);
        assert!(evaluate_scores(&set, &scores[..4], MetricConvention::Trec).is_err());
    }

    /// Weighted queries (click groups) weigh every mean, MAP and MRR included: each query's
    /// AP and RR count by its weight.
    #[test]
    fn weighted_queries_weigh_every_mean() {
        // a: the relevant row first (AP = RR = 1); b: second (AP = RR = 1/2), weighing 3.
        let mut b = QueryGroup::new("b", 2..4);
        b.weight = 3.0;
        let set = RankSet::new(
            vec!["f1".into()],
            vec![0.0; 4],
            vec![1, 0, 0, 1],
            vec![QueryGroup::new("a", 0..2), b],
            None,
        )
        .unwrap();
        let m = evaluate_scores(&set, &[2.0, 1.0, 2.0, 1.0], MetricConvention::Trec).unwrap();
        let mean = (1.0 + 3.0 * 0.5) / 4.0;
        assert!((m.map - mean).abs() < 1e-12, "{m:?}");
        assert!((m.mrr - mean).abs() < 1e-12, "{m:?}");
        let ndcg = (1.0 + 3.0 / 3f64.log2()) / 4.0;
        assert!((m.ndcg10 - ndcg).abs() < 1e-12, "{m:?}");
    }

    #[test]
    fn map_ndcg10_is_the_evaluators() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..30 {
            let mut labels = Vec::new();
            let mut queries = Vec::new();
            for q in 0..rng.random_range(1..12) {
                let start = labels.len();
                let rows = rng.random_range(1..30);
                let top = rng.random_range(0..5);
                labels.extend((0..rows).map(|_| rng.random_range(0..=top)));
                queries.push(QueryGroup::new(format!("q{q}"), start..labels.len()));
            }
            let n = labels.len();
            // Coarse scores so that ties are common.
            let scores: Vec<f64> = (0..n)
                .map(|_| f64::from(rng.random_range(0..6)) * 0.25 + 1e-9)
                .collect();
            let set = RankSet::new(vec!["f".into()], vec![0.0; n], labels, queries, None).unwrap();
            for convention in [MetricConvention::Letor, MetricConvention::Trec] {
                let narrow: Vec<f32> = scores.iter().map(|&s| s as f32).collect();
                let Ok(m) = evaluate_scores(&set, &narrow, convention) else {
                    assert!(map_ndcg10(&set, &scores, convention).is_err());
                    continue;
                };
                let (map, ndcg10) = map_ndcg10(&set, &scores, convention).unwrap();
                assert!((map - m.map).abs() < 1e-12, "{map} {}", m.map);
                assert!((ndcg10 - m.ndcg10).abs() < 1e-12, "{ndcg10} {}", m.ndcg10);
            }
        }
        let set = RankSet::new(
            vec!["f".into()],
            vec![0.0; 2],
            vec![1, 0],
            vec![QueryGroup::new("q", 0..2)],
            None,
        )
        .unwrap();
        assert!(map_ndcg10(&set, &[f64::NAN, 1.0], MetricConvention::Trec).is_err());
        assert!(map_ndcg10(&set, &[1.0], MetricConvention::Trec).is_err());
    }
}
