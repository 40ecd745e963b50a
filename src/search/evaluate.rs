//! Evaluation through the search pipeline (SPEC §4): what `rankd eval` and
//! `POST /admin/evaluate` answer, a typed value until it is serialised.

use serde::Serialize;

use super::FailedQuery;
use crate::eval::Report;

/// What an evaluation found: the SPEC §4 report (its means at the top level) and the queries
/// the engine could not run, which the report scores 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    #[serde(flatten)]
    pub report: Report,
    pub failed_queries: Vec<FailedQuery>,
}
