//! Judged feature vectors grouped by query (SPEC §3.5): what every trainer and evaluator reads.
//!
//! Rows are stored row-major in one `f32` matrix so a whole query (or a whole batch) is one
//! contiguous block for [`crate::pairwise::score_block`]. Splits are by query, never by row:
//! rows of one query are never on both sides of a train/validation boundary.

use std::ops::Range;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::RerankError;
use crate::corpus::letor::LetorSet;

/// One query's rows: `rows` indexes [`RankSet`]'s rows, contiguous.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryGroup {
    pub qid: String,
    pub rows: Range<usize>,
    /// How much the query counts in a loss or a mean over queries: 1 for a judged query; an
    /// inverse-propensity weight for a group built from clicks (the click module's `ips`, SPEC
    /// §11). Finite and positive.
    pub weight: f64,
}

impl QueryGroup {
    /// A query of weight 1.
    pub fn new(qid: impl Into<String>, rows: Range<usize>) -> QueryGroup {
        QueryGroup {
            qid: qid.into(),
            rows,
            weight: 1.0,
        }
    }
}

/// Rows of judged (query, document) feature vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct RankSet {
    pub feature_names: Vec<String>,
    /// Row-major `num_rows × num_features`.
    pub x: Vec<f32>,
    pub labels: Vec<i32>,
    pub queries: Vec<QueryGroup>,
    /// Document id per row, if the source has them.
    pub doc_ids: Option<Vec<String>>,
}

/// How many queries a pairwise loss can use at a relevance threshold: a query needs at least
/// one positive (grade ≥ threshold) and one negative. The others are skipped and counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PairCoverage {
    pub usable: usize,
    pub only_positives: usize,
    pub only_negatives: usize,
    /// Positive–negative pairs over the usable queries.
    pub pairs: usize,
}

impl RankSet {
    /// Builds a set and checks it: matrix shape, finite values, query ranges that tile the rows.
    pub fn new(
        feature_names: Vec<String>,
        x: Vec<f32>,
        labels: Vec<i32>,
        queries: Vec<QueryGroup>,
        doc_ids: Option<Vec<String>>,
    ) -> Result<Self, RerankError> {
        let d = feature_names.len();
        let n = labels.len();
        if x.len() != n * d {
            return Err(RerankError::invalid(format!(
                "feature matrix has {} values, expected {n} rows × {d} features",
                x.len()
            )));
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(RerankError::invalid(format!(
                "feature `{}` of row {} is {}, expected a finite number",
                feature_names[i % d],
                i / d,
                x[i]
            )));
        }
        let mut next = 0;
        for q in &queries {
            if !(q.weight.is_finite() && q.weight > 0.0) {
                return Err(RerankError::invalid(format!(
                    "query `{}` has weight {}; weights must be finite and positive",
                    q.qid, q.weight
                )));
            }
            if q.rows.start != next || q.rows.end <= q.rows.start {
                return Err(RerankError::invalid(format!(
                    "query `{}` covers rows {:?}; queries must tile the rows in order, \
                     each with at least one row",
                    q.qid, q.rows
                )));
            }
            next = q.rows.end;
        }
        if next != n {
            return Err(RerankError::invalid(format!(
                "queries cover {next} rows but the set has {n}"
            )));
        }
        if let Some(ids) = &doc_ids {
            if ids.len() != n {
                return Err(RerankError::invalid(format!(
                    "{} document ids for {n} rows",
                    ids.len()
                )));
            }
        }
        Ok(RankSet {
            feature_names,
            x,
            labels,
            queries,
            doc_ids,
        })
    }

    /// A LETOR set with features `f1..fN`, N = the largest index it uses.
    pub fn from_letor(set: &LetorSet) -> Result<Self, RerankError> {
        Self::from_letor_width(set, set.num_features)
    }

    /// A LETOR set with features `f1..f{width}` (so a test file that happens not to use the
    /// last index still lines up with its training file). Indices above `width` are an error.
    pub fn from_letor_width(set: &LetorSet, width: usize) -> Result<Self, RerankError> {
        let feature_names: Vec<String> = (1..=width).map(|i| format!("f{i}")).collect();
        let mut x = Vec::with_capacity(set.num_rows() * width);
        let mut labels = Vec::with_capacity(set.num_rows());
        let mut queries = Vec::with_capacity(set.queries.len());
        let mut doc_ids = Vec::with_capacity(set.num_rows());
        for q in &set.queries {
            let start = labels.len();
            for (i, row) in q.rows.iter().enumerate() {
                let mut dense = vec![0f32; width];
                for &(index, value) in &row.features {
                    let slot = dense.get_mut(index as usize - 1).ok_or_else(|| {
                        RerankError::invalid(format!(
                            "line {}: feature index {index} is above the {width} features \
                             of the model's feature set",
                            row.line
                        ))
                    })?;
                    *slot = value as f32;
                    if !slot.is_finite() {
                        return Err(RerankError::invalid(format!(
                            "line {}: feature {index} = {value} does not fit in f32",
                            row.line
                        )));
                    }
                }
                x.extend_from_slice(&dense);
                labels.push(row.label);
                doc_ids.push(row.comment.clone().unwrap_or_else(|| i.to_string()));
            }
            queries.push(QueryGroup::new(q.qid.clone(), start..labels.len()));
        }
        RankSet::new(feature_names, x, labels, queries, Some(doc_ids))
    }

    /// Each query's index in [`RankSet::queries`], by qid.
    pub fn query_index(&self) -> std::collections::HashMap<&str, usize> {
        self.queries
            .iter()
            .enumerate()
            .map(|(i, q)| (q.qid.as_str(), i))
            .collect()
    }

    pub fn num_rows(&self) -> usize {
        self.labels.len()
    }

    pub fn num_features(&self) -> usize {
        self.feature_names.len()
    }

    /// The feature block of a query's rows (row-major).
    pub fn block(&self, rows: &Range<usize>) -> &[f32] {
        let d = self.num_features();
        &self.x[rows.start * d..rows.end * d]
    }

    /// The sets one after the other, as one set; their features must be the same, by name
    /// and order. Document ids are kept when every set has them.
    pub fn concat(sets: &[RankSet]) -> Result<RankSet, RerankError> {
        let Some(first) = sets.first() else {
            return Err(RerankError::invalid("no training data"));
        };
        let mut x = Vec::new();
        let mut labels = Vec::new();
        let mut queries = Vec::new();
        let mut doc_ids = sets.iter().all(|s| s.doc_ids.is_some()).then(Vec::new);
        for set in sets {
            if set.feature_names != first.feature_names {
                return Err(RerankError::invalid(
                    "the sets to join have different features",
                ));
            }
            let offset = labels.len();
            x.extend_from_slice(&set.x);
            labels.extend_from_slice(&set.labels);
            queries.extend(set.queries.iter().map(|q| QueryGroup {
                qid: q.qid.clone(),
                rows: q.rows.start + offset..q.rows.end + offset,
                weight: q.weight,
            }));
            if let (Some(out), Some(ids)) = (doc_ids.as_mut(), &set.doc_ids) {
                out.extend_from_slice(ids);
            }
        }
        RankSet::new(first.feature_names.clone(), x, labels, queries, doc_ids)
    }

    /// The subset made of the queries at `indices`, in that order.
    pub fn subset(&self, indices: &[usize]) -> RankSet {
        let d = self.num_features();
        let mut x = Vec::new();
        let mut labels = Vec::new();
        let mut queries = Vec::with_capacity(indices.len());
        let mut doc_ids = self.doc_ids.as_ref().map(|_| Vec::new());
        for &qi in indices {
            let q = &self.queries[qi];
            let start = labels.len();
            x.extend_from_slice(&self.x[q.rows.start * d..q.rows.end * d]);
            labels.extend_from_slice(&self.labels[q.rows.clone()]);
            if let (Some(out), Some(ids)) = (doc_ids.as_mut(), self.doc_ids.as_ref()) {
                out.extend_from_slice(&ids[q.rows.clone()]);
            }
            queries.push(QueryGroup {
                qid: q.qid.clone(),
                rows: start..labels.len(),
                weight: q.weight,
            });
        }
        RankSet {
            feature_names: self.feature_names.clone(),
            x,
            labels,
            queries,
            doc_ids,
        }
    }

    /// Query indices in a seeded random order (ChaCha8, so the same seed gives the same split
    /// on every platform).
    fn shuffled_queries(&self, seed: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.queries.len()).collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        order
    }

    /// Splits by query: `fraction` of the queries (rounded, at least one) go to validation,
    /// the rest to training; both keep the file order of their queries.
    pub fn split_validation(
        &self,
        fraction: f64,
        seed: u64,
    ) -> Result<(RankSet, RankSet), RerankError> {
        if !(fraction > 0.0 && fraction < 1.0) {
            return Err(RerankError::invalid(format!(
                "validation fraction must be in (0, 1), got {fraction}"
            )));
        }
        let nq = self.queries.len();
        let n_valid = ((nq as f64 * fraction).round() as usize).max(1);
        if n_valid >= nq {
            return Err(RerankError::invalid(format!(
                "cannot hold out {n_valid} of {nq} queries for validation and train on the rest"
            )));
        }
        let order = self.shuffled_queries(seed);
        let mut valid = order[..n_valid].to_vec();
        let mut train = order[n_valid..].to_vec();
        valid.sort_unstable();
        train.sort_unstable();
        Ok((self.subset(&train), self.subset(&valid)))
    }

    /// k-fold cross-validation by query: fold i holds every k-th query of a seeded shuffle.
    /// Returns `(train, test)` per fold.
    pub fn k_folds(&self, k: usize, seed: u64) -> Result<Vec<(RankSet, RankSet)>, RerankError> {
        if k < 2 || k > self.queries.len() {
            return Err(RerankError::invalid(format!(
                "k-fold needs 2 ≤ k ≤ {} (the number of queries), got {k}",
                self.queries.len()
            )));
        }
        let order = self.shuffled_queries(seed);
        Ok((0..k)
            .map(|fold| {
                let (mut test, mut train): (Vec<usize>, Vec<usize>) =
                    (0..order.len()).partition(|&i| i % k == fold);
                for i in test.iter_mut().chain(train.iter_mut()) {
                    *i = order[*i];
                }
                test.sort_unstable();
                train.sort_unstable();
                (self.subset(&train), self.subset(&test))
            })
            .collect())
    }

    /// Which queries a binary pairwise loss can use at `threshold` (SPEC §3.3: queries
    /// without both positives and negatives are skipped).
    pub fn pair_coverage(&self, threshold: i32) -> PairCoverage {
        let mut c = PairCoverage::default();
        for q in &self.queries {
            let labels = &self.labels[q.rows.clone()];
            let pos = labels.iter().filter(|&&l| l >= threshold).count();
            let neg = labels.len() - pos;
            match (pos, neg) {
                (0, _) => c.only_negatives += 1,
                (_, 0) => c.only_positives += 1,
                _ => {
                    c.usable += 1;
                    c.pairs += pos * neg;
                }
            }
        }
        c
    }

    /// Pairs `i ≻ j` (grade_i > grade_j) over all queries: what RankNet sees.
    pub fn graded_pairs(&self) -> usize {
        self.queries
            .iter()
            .map(|q| {
                let labels = &self.labels[q.rows.clone()];
                labels
                    .iter()
                    .map(|a| labels.iter().filter(|&b| a > b).count())
                    .sum::<usize>()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queries of sizes 2, 3, 1, 4 with labels chosen to cover every coverage case.
    fn toy() -> RankSet {
        let sizes = [2usize, 3, 1, 4];
        let labels = vec![1, 0, 2, 2, 1, 0, 0, 0, 3, 1];
        let mut queries = Vec::new();
        let mut start = 0;
        for (i, s) in sizes.iter().enumerate() {
            queries.push(QueryGroup::new(format!("q{i}"), start..start + s));
            start += s;
        }
        let x = (0..20).map(|v| v as f32).collect();
        RankSet::new(vec!["a".into(), "b".into()], x, labels, queries, None).unwrap()
    }

    #[test]
    fn coverage_counts_skipped_queries() {
        let set = toy();
        // Threshold 1: q0 usable (1×1), q1 only positives, q2 only negatives, q3 usable (2×2).
        let c = set.pair_coverage(1);
        assert_eq!(
            c,
            PairCoverage {
                usable: 2,
                only_positives: 1,
                only_negatives: 1,
                pairs: 1 + 4
            }
        );
        // Threshold 2: q1 has 2 pos and 1 neg now, q0 has no positive left.
        let c = set.pair_coverage(2);
        assert_eq!((c.usable, c.only_positives, c.only_negatives), (2, 0, 2));
        // Graded pairs by brute force over the label lists: q0 1, q1 2, q3 (3>1,3>0,3>0,1>0,1>0) 5.
        assert_eq!(set.graded_pairs(), 1 + 2 + 5);
    }

    #[test]
    fn splits_are_by_query_and_deterministic() {
        let set = toy();
        let (train, valid) = set.split_validation(0.5, 7).unwrap();
        assert_eq!(train.queries.len() + valid.queries.len(), 4);
        assert_eq!(train.num_rows() + valid.num_rows(), set.num_rows());
        let again = set.split_validation(0.5, 7).unwrap();
        assert_eq!((train.clone(), valid.clone()), again);
        // Every query's rows travel together, features included.
        for part in [&train, &valid] {
            for q in &part.queries {
                let orig = set.queries.iter().find(|o| o.qid == q.qid).unwrap();
                assert_eq!(part.block(&q.rows), set.block(&orig.rows));
                assert_eq!(part.labels[q.rows.clone()], set.labels[orig.rows.clone()]);
            }
        }
        let folds = set.k_folds(2, 3).unwrap();
        let mut seen: Vec<String> = folds
            .iter()
            .flat_map(|(_, test)| test.queries.iter().map(|q| q.qid.clone()))
            .collect();
        seen.sort();
        assert_eq!(seen, ["q0", "q1", "q2", "q3"]);
        assert!(set.split_validation(1.0, 1).is_err());
        assert!(set.k_folds(5, 1).is_err());
    }

    #[test]
    fn bad_shapes_are_errors() {
        let q = vec![QueryGroup::new("q", 0..2)];
        let err = RankSet::new(vec!["a".into()], vec![1.0], vec![0, 1], q.clone(), None);
        assert!(err.unwrap_err().to_string().contains("expected 2 rows"));
        let err = RankSet::new(vec!["a".into()], vec![1.0, f32::NAN], vec![0, 1], q, None);
        assert!(err
            .unwrap_err()
            .to_string()
            .contains("feature `a` of row 1"));
    }

    #[test]
    fn letor_rows_become_dense_named_features() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("t.svm");
        std::fs::write(&data, "1 qid:a 2:0.5 # d1\n0 qid:a 1:2\n2 qid:b 3:1\n").unwrap();
        let letor = crate::corpus::letor::read(&data, None).unwrap();
        let set = RankSet::from_letor(&letor).unwrap();
        assert_eq!(set.feature_names, ["f1", "f2", "f3"]);
        assert_eq!(set.x, [0.0, 0.5, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
        assert_eq!(set.doc_ids.as_deref().unwrap(), ["d1", "1", "0"]);
        assert!(RankSet::from_letor_width(&letor, 2).is_err());
        assert_eq!(
            RankSet::from_letor_width(&letor, 4).unwrap().num_features(),
            4
        );
    }
}
