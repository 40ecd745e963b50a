//! Evaluation of a first-phase model on the stored judgments (SPEC §4): every judged query
//! that has a text is run against the index and the run is scored by `crate::eval`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::db::judgments::StoredJudgment;
use crate::eval::{self, EvalOptions, Qrels};
use crate::text::{ModelKind, TextIndex};

/// Why an evaluation could not run, for a 4xx answer.
#[derive(Debug, thiserror::Error)]
pub enum EvaluateError {
    #[error("no judgments are stored; add some with POST /admin/judgments")]
    NoJudgments,
    #[error("none of the {0} judged queries has a text; add texts with POST /admin/queries")]
    NoQueryTexts(usize),
    #[error("{0}")]
    Eval(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// Runs the judged queries with `model` (ranking `depth` documents each) and scores them.
/// Queries without a text are listed in `skipped_queries`.
pub fn evaluate(
    index: &TextIndex,
    judgments: &[StoredJudgment],
    model: ModelKind,
    field: Option<&str>,
    depth: usize,
) -> Result<Value, EvaluateError> {
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
    let ranking = crate::cli::eval::Ranking::FirstPhase { depth, boost: None };
    let run = crate::cli::eval::run_queries(index, &queries, model, field, &ranking, true)
        .map_err(|e| EvaluateError::Eval(format!("{e:#}")))?;
    let options = EvalOptions {
        complete: true,
        ..EvalOptions::default()
    };
    let mut report =
        eval::evaluate(&run, &judged, &options).map_err(|e| EvaluateError::Eval(e.to_string()))?;
    report.model = Some(model.to_string());
    let mut value = serde_json::to_value(&report).map_err(anyhow::Error::from)?;
    value["skipped_queries"] = json!(skipped);
    value["depth"] = json!(depth);
    Ok(value)
}
