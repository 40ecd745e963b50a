//! Evaluation through the search pipeline (SPEC §4): every judged query ranked as one
//! request ([`EvalRequest`](super::request::EvalRequest) → [`SearchQuery`]), the rankings
//! collected as a TREC run, and what the scoring found, a typed value until it is serialised.
//! `rankd eval` and `POST /admin/evaluate` both run here.

use serde::Serialize;

use super::{Engine, SearchError, SearchQuery};
use crate::error::{ErrorKind, Kinded};
use crate::eval::{Report, Run};

/// What an evaluation found: the SPEC §4 report (its means at the top level) and the queries
/// the engine could not run, which the report scores 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    #[serde(flatten)]
    pub report: Report,
    pub failed_queries: Vec<FailedQuery>,
}

/// A query of a batch that could not be run, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedQuery {
    pub qid: String,
    pub error: String,
}

/// Why a run stopped, naming the query it stopped at.
#[derive(Debug, thiserror::Error)]
#[error("query {qid}")]
pub struct RunError {
    pub qid: String,
    #[source]
    pub source: SearchError,
}

impl Kinded for RunError {
    fn kind(&self) -> ErrorKind {
        self.source.kind()
    }
}

/// Runs every `(qid, text)` as `template` with that text and collects the rankings as a TREC
/// run. A query whose own text the engine refuses (too many terms, say) is listed in the
/// second value and left out of the run, unless `strict`, which stops at it. Any other
/// refusal is the request's, the same for every query (no reranker or link scores at hand),
/// and stops the run, as does an internal failure. `on_query` is called after each query.
pub(crate) fn run_queries(
    engine: &Engine,
    queries: &[(String, String)],
    template: &SearchQuery,
    strict: bool,
    on_query: &dyn Fn(),
) -> Result<(Run, Vec<FailedQuery>), RunError> {
    let mut run = Run::new();
    let mut failed = Vec::new();
    let mut query = template.clone();
    for (qid, text) in queries {
        query.text.clone_from(text);
        match engine.search(&query) {
            Ok(results) => {
                for hit in results.hits {
                    run.push(qid, hit.id, f64::from(hit.score));
                }
            }
            Err(e @ SearchError::Query(_)) if !strict => failed.push(FailedQuery {
                qid: qid.clone(),
                error: e.to_string(),
            }),
            Err(source) => {
                return Err(RunError {
                    qid: qid.clone(),
                    source,
                })
            }
        }
        on_query();
    }
    Ok((run, failed))
}

/// The name of what `query` ranks by, for the report and the run's tag: its model, or
/// `fusion-METHOD` (`hybrid-METHOD`), or `dense`.
pub(crate) fn ranked_by(engine: &Engine, query: &SearchQuery) -> String {
    match (&query.fusion, query.model) {
        (Some(f), _) if f.hybrid => format!("hybrid-{}", f.fusion.method),
        (Some(f), _) => format!("fusion-{}", f.fusion.method),
        (None, _) if query.dense => "dense".to_string(),
        (None, Some(model)) => model.to_string(),
        (None, None) => engine.index.config.default_model.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::Document;
    use crate::search::request::EvalRequest;
    use crate::text::TextIndex;

    fn engine() -> (tempfile::TempDir, Engine) {
        let dir = tempfile::tempdir().unwrap();
        let index = TextIndex::open_or_create(dir.path(), None).unwrap();
        let words = ["shock", "wave", "flow", "mach", "boundary"];
        index
            .upsert((0..10).map(|i| Document {
                id: format!("d{i}"),
                title: words[i % 5].to_string(),
                body: format!("{} {}", words[i % 5], words[(i + 1) % 5]),
                ..Default::default()
            }))
            .unwrap();
        (dir, Engine::new(index))
    }

    fn query(request: serde_json::Value) -> SearchQuery {
        serde_json::from_value::<EvalRequest>(request)
            .unwrap()
            .into_query()
            .unwrap()
    }

    #[test]
    fn a_query_fails_alone_for_its_text_and_the_run_stops_for_the_request() {
        let (_dir, engine) = engine();
        let long: String = (0..1025).map(|i| format!("w{i} ")).collect();
        let queries = [
            ("q1".to_string(), "shock wave".to_string()),
            ("q2".to_string(), long),
            ("q3".to_string(), "mach".to_string()),
        ];
        let q = query(serde_json::json!({"model": "bm25", "depth": 3}));
        let (run, failed) = run_queries(&engine, &queries, &q, false, &|| {}).unwrap();
        assert_eq!(run.num_queries(), 2);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].qid, "q2");
        assert!(
            failed[0].error.contains("1025 distinct terms"),
            "{failed:?}"
        );
        assert_eq!(ranked_by(&engine, &q), "bm25");

        let e = run_queries(&engine, &queries, &q, true, &|| {}).unwrap_err();
        assert_eq!(e.qid, "q2");
        assert_eq!(e.kind(), ErrorKind::Invalid);

        // Nothing to rerank with, no link scores to boost by: the first query stops the run.
        for (request, field, says) in [
            (
                serde_json::json!({"model": "bm25", "rerank": true}),
                "rerank",
                "no reranker is active",
            ),
            (
                serde_json::json!({"model": "bm25", "boost": "pagerank"}),
                "boost",
                "no link scores",
            ),
        ] {
            let e = run_queries(&engine, &queries, &query(request), false, &|| {}).unwrap_err();
            assert_eq!(e.qid, "q1");
            match &e.source {
                SearchError::Param { field: f, message } => {
                    assert_eq!((*f, message.contains(says)), (field, true), "{message}")
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
