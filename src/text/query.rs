//! Query text → analysed terms with their multiplicity `qtf` (SPEC §1.1: a query is analysed
//! by the same chain as the field it searches).

use super::config::Analyzer;
use super::schema::tokens;

/// Queries longer than this are refused: it bounds the cost of one request, and leaves room
/// for the longest topics of the classic test collections (whole paragraphs).
pub(crate) const MAX_QUERY_BYTES: usize = 16 * 1024;
/// Distinct analysed terms allowed in one query: Lucene's default clause limit
/// (`IndexSearcher.getMaxClauseCount`, 1024).
pub(crate) const MAX_QUERY_TERMS: usize = 1024;

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum QueryError {
    #[error("the query is empty")]
    Empty,
    #[error("the query is {0} bytes long; the limit is {MAX_QUERY_BYTES}")]
    TooLong(usize),
    #[error("the query has {0} distinct terms after analysis; the limit is {MAX_QUERY_TERMS}")]
    TooManyTerms(usize),
}

/// Distinct query terms in order of first occurrence, each with its count in the query.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryTerms {
    pub terms: Vec<(String, u32)>,
}

impl QueryTerms {
    /// Analyses `text` with `analyzer`. A query whose every word is a stop word yields no
    /// terms (and so no hits); an empty or over-long query is an error.
    pub fn analyze(text: &str, analyzer: Analyzer) -> Result<QueryTerms, QueryError> {
        check_query_text(text)?;
        let mut terms: Vec<(String, u32)> = Vec::new();
        let mut position: std::collections::HashMap<String, usize> = Default::default();
        for token in tokens(analyzer, text) {
            match position.get(&token) {
                Some(&i) => terms[i].1 += 1,
                None => {
                    position.insert(token.clone(), terms.len());
                    terms.push((token, 1));
                }
            }
        }
        if terms.len() > MAX_QUERY_TERMS {
            return Err(QueryError::TooManyTerms(terms.len()));
        }
        Ok(QueryTerms { terms })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// |q|: the number of query tokens, repeats included.
    pub fn len_with_repeats(&self) -> u32 {
        self.terms.iter().map(|(_, qtf)| qtf).sum()
    }
}

/// A query's text and its terms under each analyzer, each analysed at most once: every step
/// of a search (statistics, first phase, features, snippets, RM3) reads its terms here, so a
/// search analyses its query once per analyzer its fields use.
#[derive(Debug)]
pub struct AnalyzedQuery {
    text: String,
    /// By analyzer (`Analyzer as usize`), analysed on first use.
    terms: [std::sync::OnceLock<Result<QueryTerms, QueryError>>; Analyzer::ALL.len()],
}

impl AnalyzedQuery {
    pub fn new(text: impl Into<String>) -> Self {
        AnalyzedQuery {
            text: text.into(),
            terms: Default::default(),
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The terms under `analyzer` ([`QueryTerms::analyze`]).
    pub fn terms(&self, analyzer: Analyzer) -> Result<&QueryTerms, QueryError> {
        self.terms[analyzer as usize]
            .get_or_init(|| QueryTerms::analyze(&self.text, analyzer))
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// The checks every query text passes before analysis.
pub fn check_query_text(text: &str) -> Result<(), QueryError> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(QueryError::TooLong(text.len()));
    }
    if text.trim().is_empty() {
        return Err(QueryError::Empty);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_analysed_query_keeps_each_analyzer_terms() {
        let q = AnalyzedQuery::new("Flows of the heat");
        for a in Analyzer::ALL {
            assert_eq!(
                q.terms(a).unwrap(),
                &QueryTerms::analyze(q.text(), a).unwrap()
            );
        }
        assert_ne!(q.terms(Analyzer::EnStem), q.terms(Analyzer::Plain));
        assert_eq!(
            AnalyzedQuery::new(" ").terms(Analyzer::En),
            Err(QueryError::Empty)
        );
    }

    #[test]
    fn counts_repeats_in_first_occurrence_order() {
        let q = QueryTerms::analyze("Flow flows of the heat", Analyzer::EnStem).unwrap();
        assert_eq!(q.terms, vec![("flow".into(), 2), ("heat".into(), 1)]);
        assert_eq!(q.len_with_repeats(), 3);
    }

    #[test]
    fn refuses_empty_and_huge_queries() {
        assert_eq!(
            QueryTerms::analyze("  \t", Analyzer::En),
            Err(QueryError::Empty)
        );
        let huge = "word ".repeat(4000);
        assert_eq!(
            QueryTerms::analyze(&huge, Analyzer::En),
            Err(QueryError::TooLong(huge.len()))
        );
        let many: String = (0..1025).map(|i| format!("w{i} ")).collect();
        assert_eq!(
            QueryTerms::analyze(&many, Analyzer::Plain),
            Err(QueryError::TooManyTerms(1025))
        );
        // Lucene's default clause limit is accepted, repeats and all.
        let limit: String = (0..2048).map(|i| format!("w{} ", i % 1024)).collect();
        let q = QueryTerms::analyze(&limit, Analyzer::Plain).unwrap();
        assert_eq!(q.terms.len(), 1024);
        assert_eq!(q.len_with_repeats(), 2048);
        assert!(QueryTerms::analyze("the of", Analyzer::En)
            .unwrap()
            .is_empty());
    }
}
