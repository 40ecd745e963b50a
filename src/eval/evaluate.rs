//! Scoring a run against judgments: every SPEC §4 metric per query, and their means.

use std::collections::{BTreeMap, HashSet};

use super::metrics::{self, Gain, JudgedRanking};
use super::report::{Conventions, Metrics, NoRelevant, Report};
use super::{Qrels, Run, RunOrder};

/// How to evaluate. `Default` is SPEC §4's default: exponential gain, skip queries without
/// relevant documents, trec_eval's ordering, relevance from grade 1.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalOptions {
    /// The k of P@k, recall@k, NDCG@k, ERR@k and pFound@k.
    pub cutoffs: Vec<usize>,
    pub gain: Gain,
    pub no_relevant: NoRelevant,
    /// Grades at or above this are relevant (trec_eval `-l`). At least 1.
    pub relevance_threshold: i32,
    pub order: RunOrder,
    /// Also score judged queries absent from the run, as empty rankings (trec_eval `-c`).
    /// Off by default, as in trec_eval, which scores only queries in both files; a caller that
    /// ran every query itself should turn it on so that a query with no hits counts as 0.
    pub complete: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            cutoffs: vec![1, 3, 5, 10, 20, 100],
            gain: Gain::Exponential,
            no_relevant: NoRelevant::Skip,
            relevance_threshold: 1,
            order: RunOrder::TrecEval,
            complete: false,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EvalError {
    #[error("invalid evaluation option: {0}")]
    InvalidOption(String),
    #[error("document `{doc}` appears twice in the run for query `{qid}`")]
    DuplicateDocument { qid: String, doc: String },
    #[error("document `{doc}` of query `{qid}` has a non-finite score")]
    NonFiniteScore { qid: String, doc: String },
    #[error(
        "no query to evaluate: the run has {run_queries} queries, the qrels {qrels_queries}, \
         {common} in common, {with_relevant} of those with a relevant document \
         (do the query ids match?)"
    )]
    NoQueries {
        run_queries: usize,
        qrels_queries: usize,
        common: usize,
        with_relevant: usize,
    },
}

/// Scores `run` against `qrels`. Queries only in the run are ignored (nothing to score them
/// against); judged queries only in the qrels are scored when `options.complete` is set.
pub fn evaluate(run: &Run, qrels: &Qrels, options: &EvalOptions) -> Result<Report, EvalError> {
    check_options(options)?;
    check_run(run)?;
    let threshold = options.relevance_threshold;
    let max_grade = qrels.max_grade().unwrap_or(0);
    let mut per_query = BTreeMap::new();
    let mut skipped = Vec::new();
    let mut common = 0;
    for (qid, judged_docs) in qrels.iter() {
        let docs = match run.get(qid) {
            Some(docs) => {
                common += 1;
                docs
            }
            None if options.complete => &[],
            None => continue,
        };
        let ranking = JudgedRanking {
            retrieved: options
                .order
                .apply(docs)
                .iter()
                .map(|d| judged_docs.get(&d.doc).copied())
                .collect(),
            judged: judged_docs.values().copied().collect(),
        };
        let no_relevant = ranking.num_relevant(threshold) == 0;
        if no_relevant && options.no_relevant == NoRelevant::Skip {
            skipped.push(qid.to_string());
            continue;
        }
        let mut values = query_metrics(&ranking, options, max_grade);
        if no_relevant && options.no_relevant == NoRelevant::NdcgOne {
            values.set_matching(|name| name == "ndcg" || name.starts_with("ndcg@"), 1.0);
        }
        per_query.insert(qid.to_string(), values);
    }
    if per_query.is_empty() {
        return Err(EvalError::NoQueries {
            run_queries: run.num_queries(),
            qrels_queries: qrels.num_queries(),
            common,
            with_relevant: common - skipped.len().min(common),
        });
    }
    Ok(Report {
        model: None,
        queries: per_query.len(),
        means: means(&per_query),
        conventions: Conventions {
            gain: options.gain,
            no_relevant: options.no_relevant,
            relevance_threshold: threshold,
            order: options.order,
            complete: options.complete,
            err_max_grade: max_grade,
            pfound_break: metrics::PFOUND_BREAK,
        },
        skipped_no_relevant: skipped,
        per_query,
    })
}

/// Every metric of one query, in report order.
fn query_metrics(r: &JudgedRanking, options: &EvalOptions, max_grade: i32) -> Metrics {
    let t = options.relevance_threshold;
    let mut m = Metrics::default();
    m.push("ap", metrics::average_precision(r, t));
    m.push("rr", metrics::reciprocal_rank(r, t));
    m.push("r-prec", metrics::r_precision(r, t));
    m.push("ndcg", metrics::ndcg_at(r, None, options.gain));
    m.push("auc", metrics::auc(r, t));
    for &k in &options.cutoffs {
        m.push(&format!("p@{k}"), metrics::precision_at(r, k, t));
        m.push(&format!("recall@{k}"), metrics::recall_at(r, k, t));
        m.push(
            &format!("ndcg@{k}"),
            metrics::ndcg_at(r, Some(k), options.gain),
        );
        m.push(&format!("err@{k}"), metrics::err_at(r, k, max_grade));
        m.push(&format!("pfound@{k}"), metrics::pfound_at(r, k, max_grade));
    }
    m
}

/// Arithmetic mean of each metric over the evaluated queries; per-query `ap` and `rr` become
/// `map` and `mrr`.
fn means(per_query: &BTreeMap<String, Metrics>) -> Metrics {
    let n = per_query.len() as f64;
    let mut total = Metrics::default();
    for (i, values) in per_query.values().enumerate() {
        for (index, (name, value)) in values.iter().enumerate() {
            if i == 0 {
                let mean_name = match name {
                    "ap" => "map",
                    "rr" => "mrr",
                    other => other,
                };
                total.push(mean_name, 0.0);
            }
            total.add_at(index, value);
        }
    }
    total.scale(1.0 / n);
    total
}

fn check_options(options: &EvalOptions) -> Result<(), EvalError> {
    if options.relevance_threshold < 1 {
        return Err(EvalError::InvalidOption(format!(
            "relevance threshold must be at least 1 (grade 0 is non-relevant), got {}",
            options.relevance_threshold
        )));
    }
    if options.cutoffs.contains(&0) {
        return Err(EvalError::InvalidOption(
            "cutoff k must be at least 1".into(),
        ));
    }
    let distinct: HashSet<_> = options.cutoffs.iter().collect();
    if distinct.len() != options.cutoffs.len() {
        return Err(EvalError::InvalidOption(format!(
            "cutoffs listed twice: {:?}",
            options.cutoffs
        )));
    }
    Ok(())
}

/// trec_eval refuses a run listing a document twice for a query; so do we. Scores must be
/// finite to be ordered.
fn check_run(run: &Run) -> Result<(), EvalError> {
    for (qid, docs) in run.iter() {
        let mut seen = HashSet::with_capacity(docs.len());
        for d in docs {
            if !d.score.is_finite() {
                return Err(EvalError::NonFiniteScore {
                    qid: qid.to_string(),
                    doc: d.doc.clone(),
                });
            }
            if !seen.insert(d.doc.as_str()) {
                return Err(EvalError::DuplicateDocument {
                    qid: qid.to_string(),
                    doc: d.doc.clone(),
                });
            }
        }
    }
    Ok(())
}
