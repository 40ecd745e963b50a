//! A run: for each query, a list of scored documents, as a retrieval system returned them.

use std::cmp::Ordering;
use std::collections::BTreeMap;

/// One retrieved document and its score.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredDoc {
    pub doc: String,
    pub score: f64,
}

impl ScoredDoc {
    pub fn new(doc: impl Into<String>, score: f64) -> Self {
        ScoredDoc {
            doc: doc.into(),
            score,
        }
    }
}

/// `qid -> documents`, each list in the order it was given (file order, or the engine's rank
/// order). How a list is ordered for scoring is decided at evaluation time ([`RunOrder`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    queries: BTreeMap<String, Vec<ScoredDoc>>,
}

impl Run {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one document to a query's list (creating the query if needed).
    pub fn push(&mut self, qid: &str, doc: impl Into<String>, score: f64) {
        let doc = ScoredDoc::new(doc, score);
        match self.queries.get_mut(qid) {
            Some(docs) => docs.push(doc),
            None => {
                self.queries.insert(qid.to_string(), vec![doc]);
            }
        }
    }

    /// Sets a query's whole list. An empty list is kept: the query was run and found nothing,
    /// which scores 0, unlike a query missing from the run.
    pub fn insert(&mut self, qid: &str, docs: Vec<ScoredDoc>) {
        self.queries.insert(qid.to_string(), docs);
    }

    pub fn get(&self, qid: &str) -> Option<&[ScoredDoc]> {
        self.queries.get(qid).map(Vec::as_slice)
    }

    /// Queries in id order (string order), each with its list in stored order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[ScoredDoc])> {
        self.queries.iter().map(|(q, d)| (q.as_str(), d.as_slice()))
    }

    pub fn num_queries(&self) -> usize {
        self.queries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }
}

/// How a query's list is ordered before it is scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOrder {
    /// trec_eval's rule (SPEC §4): ignore the given order; sort by score descending, then by
    /// doc id descending in byte order. Scores are compared as `f32`, because trec_eval stores
    /// them as C `float` (`TEXT_RESULTS.sim`): two scores equal in `f32` are a tie there, and
    /// must be here too, or tied documents land at different ranks than in trec_eval.
    #[default]
    TrecEval,
    /// Keep the order as given (rankd's own rankings, already tie-broken by the engine).
    AsGiven,
}

impl RunOrder {
    /// The list in scoring order: position 0 is rank 1.
    pub fn apply(self, docs: &[ScoredDoc]) -> Vec<&ScoredDoc> {
        let mut ranked: Vec<&ScoredDoc> = docs.iter().collect();
        if self == RunOrder::TrecEval {
            ranked.sort_by(|a, b| trec_eval_order(a, b));
        }
        ranked
    }
}

/// trec_eval's `comp_sim_docno`: higher `f32` score first, then the larger doc id first.
fn trec_eval_order(a: &ScoredDoc, b: &ScoredDoc) -> Ordering {
    (b.score as f32)
        .total_cmp(&(a.score as f32))
        .then_with(|| b.doc.as_bytes().cmp(a.doc.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(order: RunOrder, docs: &[ScoredDoc]) -> Vec<&str> {
        order.apply(docs).iter().map(|d| d.doc.as_str()).collect()
    }

    #[test]
    fn trec_eval_breaks_ties_by_descending_doc_id() {
        let docs = vec![
            ScoredDoc::new("b", 1.0),
            ScoredDoc::new("a", 2.0),
            ScoredDoc::new("c", 1.0),
            ScoredDoc::new("10", 1.0),
            ScoredDoc::new("9", 1.0),
        ];
        // Byte order: "9" > "10" (as strings), "c" > "b".
        assert_eq!(ids(RunOrder::TrecEval, &docs), ["a", "c", "b", "9", "10"]);
        assert_eq!(ids(RunOrder::AsGiven, &docs), ["b", "a", "c", "10", "9"]);
    }

    #[test]
    fn scores_equal_in_f32_are_ties() {
        // 1.00000001 and 1.00000002 differ as f64 but not as f32: trec_eval sees a tie and
        // puts "b" first (pytrec_eval confirms: AP of relevant "a" is 0.5 on this pair).
        let docs = vec![
            ScoredDoc::new("a", 1.000_000_02),
            ScoredDoc::new("b", 1.000_000_01),
        ];
        assert_eq!(ids(RunOrder::TrecEval, &docs), ["b", "a"]);
    }
}
