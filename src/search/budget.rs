//! A search's budget: a deadline the pipeline checks between its steps, and a cost estimate
//! that refuses, before any work, a search that cannot fit in any budget.
//!
//! A front end that answers within a time limit (the HTTP API's `limits.request_timeout_secs`)
//! gives [`crate::search::Engine::search_until`] the instant its answer is due; the pipeline
//! checks it after each first-phase input, after the fusion, the features, the reranker and
//! before the hits, and gives up with [`SearchError::OverBudget`] once it has passed, so the
//! thread running the search is free again within one step of the deadline. One step (one
//! model's walk over the postings of the query's terms) is not interrupted: the cost estimate
//! bounds how long it can be.
//!
//! The estimate counts the posting lists a first phase walks: the query's distinct words
//! times the models it ranks with (the fusion's inputs, or one). The walk over a term's
//! postings is the work that grows with the index; the window, depth and page are bounded on
//! their own (`request.rs`).

use std::time::Instant;

use super::{SearchError, SearchQuery};
use crate::text::config::Analyzer;
use crate::text::query::QueryTerms;

/// Most posting lists one search may walk: distinct words × first-phase models. A search of
/// the longest query (`MAX_QUERY_TERMS` = 1 024 words) fits with two fused models.
pub const MAX_TERM_LISTS: usize = 2048;

/// Posting lists past which a search counts as heavy (a front end may run it behind light
/// ones): more than a long question's words fused over every first-phase model.
pub const HEAVY_TERM_LISTS: usize = 64;

/// When a search must have finished; `None`: no limit (the command line, evaluation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// No limit.
    pub const NONE: Deadline = Deadline(None);

    pub fn at(instant: Instant) -> Self {
        Deadline(Some(instant))
    }

    /// `Err(OverBudget)` naming `step` once the deadline has passed.
    pub fn check(self, step: &'static str) -> Result<(), SearchError> {
        match self.0 {
            Some(at) if Instant::now() >= at => Err(SearchError::OverBudget(step)),
            _ => Ok(()),
        }
    }
}

/// The posting lists the search's first phase walks; a search over [`MAX_TERM_LISTS`] is
/// refused, naming the parameter to change (`inputs` for a fusion, else `q`).
pub fn check_cost(q: &SearchQuery) -> Result<usize, SearchError> {
    // The plain analyzer keeps every word: stemming and stop words only lower the count.
    let words = QueryTerms::analyze(&q.text, Analyzer::Plain)?.terms.len();
    // The dense input walks no posting list.
    let models = match &q.fusion {
        Some(f) => f.inputs.iter().filter(|r| r.text().is_some()).count(),
        None if q.dense => 0,
        None => 1,
    };
    let lists = words.saturating_mul(models);
    if lists <= MAX_TERM_LISTS {
        return Ok(lists);
    }
    Err(SearchError::Param {
        field: if models > 1 { "inputs" } else { "q" },
        message: format!(
            "this search would walk {lists} posting lists ({words} distinct words × {models} \
             models); the limit is {MAX_TERM_LISTS} per search: use fewer words or fewer \
             fusion inputs"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::fusion::Method;
    use crate::search::{Fusion, FusionQuery, Retriever};
    use crate::text::ModelKind;
    use std::time::Duration;

    fn words(n: usize) -> String {
        (0..n)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn searches_over_the_cost_limit_are_refused_naming_the_parameter() {
        assert_eq!(
            check_cost(&SearchQuery::new(words(1024), 10)).unwrap(),
            1024
        );
        let mut q = SearchQuery::new(words(1024), 10);
        q.fusion = Some(FusionQuery {
            inputs: vec![
                Retriever::Text(ModelKind::Bm25),
                Retriever::Text(ModelKind::Bm25F),
                Retriever::Dense,
            ],
            fusion: Fusion::new(Method::Rrf, 3, None, None, None).unwrap(),
            depth: 100,
            hybrid: false,
        });
        assert_eq!(check_cost(&q).unwrap(), 2048);
        q.fusion
            .as_mut()
            .unwrap()
            .inputs
            .push(Retriever::Text(ModelKind::Lm));
        match check_cost(&q) {
            Err(SearchError::Param { field, message }) => {
                assert_eq!(field, "inputs");
                assert!(message.contains("3072 posting lists"), "{message}");
                assert!(message.contains("2048"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_deadline_passes_only_once() {
        assert!(Deadline::NONE.check("first phase").is_ok());
        let later = Deadline::at(Instant::now() + Duration::from_secs(60));
        assert!(later.check("first phase").is_ok());
        let past = Deadline::at(Instant::now() - Duration::from_millis(1));
        assert!(matches!(
            past.check("features"),
            Err(SearchError::OverBudget("features"))
        ));
    }
}
