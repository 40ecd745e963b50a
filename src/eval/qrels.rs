//! Relevance judgments: for each query, the graded documents an assessor looked at.

use std::collections::BTreeMap;

/// Judgments per query: `qid -> (docid -> grade)`. A document absent from a query's map is
/// unjudged and counts as non-relevant (trec_eval's convention). Grades may be negative
/// (some collections mark "judged, useless" that way); negative grades carry no gain.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Qrels {
    queries: BTreeMap<String, BTreeMap<String, i32>>,
}

impl Qrels {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a judgment; returns the grade it replaced, if the pair was already judged.
    pub fn insert(&mut self, qid: &str, doc: &str, grade: i32) -> Option<i32> {
        self.queries
            .entry(qid.to_string())
            .or_default()
            .insert(doc.to_string(), grade)
    }

    /// The judged documents of one query, or `None` if the query has no judgments at all.
    pub fn get(&self, qid: &str) -> Option<&BTreeMap<String, i32>> {
        self.queries.get(qid)
    }

    pub fn grade(&self, qid: &str, doc: &str) -> Option<i32> {
        self.queries.get(qid)?.get(doc).copied()
    }

    /// Number of documents of `qid` judged at `threshold` or above (trec_eval's `num_rel`).
    pub fn num_relevant(&self, qid: &str, threshold: i32) -> usize {
        self.get(qid)
            .map_or(0, |docs| docs.values().filter(|&&g| g >= threshold).count())
    }

    /// Queries in id order (string order), each with its judged documents.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &BTreeMap<String, i32>)> {
        self.queries.iter().map(|(q, d)| (q.as_str(), d))
    }

    /// The highest grade anywhere in the judgments (the top of the grading scale, as used by
    /// ERR), or `None` when there are no judgments.
    pub fn max_grade(&self) -> Option<i32> {
        self.queries
            .values()
            .flat_map(|d| d.values())
            .copied()
            .max()
    }

    pub fn num_queries(&self) -> usize {
        self.queries.len()
    }

    pub fn num_judgments(&self) -> usize {
        self.queries.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }
}
