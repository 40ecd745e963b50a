//! Evaluation of a ranking (a first-phase model or a fusion, boosted or reranked) on the
//! stored judgments (SPEC §4): every judged query that has a text is run against the index
//! (`crate::search::evaluate`) and the run is scored by `crate::eval`.

use std::collections::BTreeMap;

use crate::db::judgments::StoredJudgment;
use crate::eval::{self, EvalOptions, Qrels};
use crate::search::evaluate::{ranked_by, run_queries, Evaluation, RunError};
use crate::search::{Engine, SearchQuery};

/// Why an evaluation could not run, for a 4xx answer.
#[derive(Debug, thiserror::Error)]
pub enum EvaluateError {
    #[error("no judgments are stored; add some with POST /admin/judgments")]
    NoJudgments,
    #[error("none of the {0} judged queries has a text; add texts with POST /admin/queries")]
    NoQueryTexts(usize),
    #[error("{0}")]
    Eval(String),
    /// The request cannot run on this engine (no reranker or link scores at hand), or the
    /// engine failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

impl crate::error::Kinded for EvaluateError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        // The request was fine; the stored judgments are what cannot be evaluated.
        match self {
            EvaluateError::NoJudgments
            | EvaluateError::NoQueryTexts(_)
            | EvaluateError::Eval(_) => ErrorKind::Conflict,
            EvaluateError::Run(e) => crate::error::Kinded::kind(e),
        }
    }
}

/// An evaluation on the stored judgments: the report and the failed queries, the judged
/// queries left out for want of a text, and the depth of each ranking.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StoredEvaluation {
    #[serde(flatten)]
    pub evaluation: Evaluation,
    pub skipped_queries: Vec<String>,
    pub depth: usize,
}

/// Runs the judged queries through the engine as `query` (an
/// [`EvalRequest`](crate::search::request::EvalRequest)'s, as `rankd eval` runs them) and
/// scores them. Queries without a text are listed in `skipped_queries`; queries the engine
/// refuses (too many terms, say) in `failed_queries`, scored 0.
pub fn evaluate(
    engine: &Engine,
    judgments: &[StoredJudgment],
    query: &SearchQuery,
) -> Result<StoredEvaluation, EvaluateError> {
    if judgments.is_empty() {
        return Err(EvaluateError::NoJudgments);
    }
    let mut qrels = Qrels::new();
    let mut texts: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for s in judgments {
        let j = &s.judgment;
        qrels.insert(&j.query_id, &j.doc_id, j.grade);
        texts.insert(&j.query_id, s.query.as_deref());
    }
    let queries: Vec<(String, String)> = texts
        .iter()
        .filter_map(|(q, t)| Some((q.to_string(), (*t)?.to_string())))
        .collect();
    let skipped: Vec<&str> = texts
        .iter()
        .filter(|(_, t)| t.is_none())
        .map(|(q, _)| *q)
        .collect();
    if queries.is_empty() {
        return Err(EvaluateError::NoQueryTexts(texts.len()));
    }
    // Queries without a text are left out of the qrels too, or `complete` would score them 0.
    let mut judged = Qrels::new();
    for (qid, _) in &queries {
        for (doc, grade) in qrels.get(qid).into_iter().flatten() {
            judged.insert(qid, doc, *grade);
        }
    }
    let (run, failed) = run_queries(engine, &queries, query, false, &|| {})?;
    let options = EvalOptions {
        complete: true,
        ..EvalOptions::default()
    };
    let mut report =
        eval::evaluate(&run, &judged, &options).map_err(|e| EvaluateError::Eval(e.to_string()))?;
    report.model = Some(ranked_by(engine, query));
    Ok(StoredEvaluation {
        evaluation: Evaluation {
            report,
            failed_queries: failed,
        },
        skipped_queries: skipped.into_iter().map(str::to_string).collect(),
        depth: query.k,
    })
}
