//! Evaluation metrics and TREC formats (SPEC §4).
//!
//! A [`Run`] (ranked documents per query) is scored against [`Qrels`] (graded judgments) by
//! [`evaluate`], under [`EvalOptions`] that name every convention (gain, what to do with
//! queries that have no relevant document, tie order). The result is a [`Report`]: means and
//! per-query values, serialisable to JSON.
//!
//! ```
//! use rankd::eval::{evaluate, EvalOptions, Qrels, Run};
//! let mut qrels = Qrels::new();
//! qrels.insert("q1", "d2", 1);
//! let mut run = Run::new();
//! run.push("q1", "d1", 2.0);
//! run.push("q1", "d2", 1.0);
//! let report = evaluate(&run, &qrels, &EvalOptions::default()).unwrap();
//! assert_eq!(report.mean("map"), Some(0.5));
//! ```
//!
//! Numbers agree with NIST trec_eval on the same files (checked by `bench/trec_crosscheck.py`).

mod correlation;
mod evaluate;
pub mod metrics;
mod parse_error;
mod qrels;
mod report;
mod run;
pub mod significance;
pub mod trec;

pub use correlation::{
    compare_runs, kendall_tau_b, spearman_rho, QueryCorrelation, RunCorrelation,
};
pub use evaluate::{evaluate, EvalError, EvalOptions};
pub use metrics::Gain;
pub(crate) use parse_error::for_each_line;
pub use parse_error::ParseError;
pub use qrels::Qrels;
pub use report::{Conventions, Metrics, NoRelevant, Report};
pub use run::{Run, RunOrder, ScoredDoc};

#[cfg(test)]
mod tests;
