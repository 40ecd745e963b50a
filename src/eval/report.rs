//! The result of an evaluation: JSON for scripts (`rankd eval --json`) and a table for people.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::metrics::Gain;
use super::RunOrder;

/// Named metric values in a fixed, readable order (`map, mrr, ..., p@10, ndcg@10, ...`),
/// serialised as a JSON object in that order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics(Vec<(String, f64)>);

impl Metrics {
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.0.iter().map(|(n, v)| (n.as_str(), *v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn push(&mut self, name: &str, value: f64) {
        self.0.push((name.to_string(), value));
    }

    pub(crate) fn set_matching(&mut self, matches: impl Fn(&str) -> bool, value: f64) {
        for (n, v) in &mut self.0 {
            if matches(n) {
                *v = value;
            }
        }
    }

    pub(crate) fn add_at(&mut self, index: usize, value: f64) {
        self.0[index].1 += value;
    }

    pub(crate) fn scale(&mut self, factor: f64) {
        for (_, v) in &mut self.0 {
            *v *= factor;
        }
    }
}

impl Serialize for Metrics {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Metrics {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MetricsVisitor;
        impl<'de> Visitor<'de> for MetricsVisitor {
            type Value = Metrics;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of metric names to numbers")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Metrics, A::Error> {
                let mut m = Metrics::default();
                while let Some((name, value)) = map.next_entry::<String, f64>()? {
                    m.0.push((name, value));
                }
                Ok(m)
            }
        }
        d.deserialize_map(MetricsVisitor)
    }
}

/// What to do with a query whose judgments contain no relevant document (R = 0), where AP,
/// recall and NDCG are 0/0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoRelevant {
    /// Leave the query out of every mean (SPEC §4's default).
    #[default]
    Skip,
    /// Score it like any other query: every metric comes out 0. This is what trec_eval 9 and
    /// pytrec_eval actually do with a judged query that has no relevant document.
    Score,
    /// As `Score`, but NDCG counts as 1 (LightGBM's convention for all-zero-label queries).
    NdcgOne,
}

/// The conventions an evaluation ran under, printed with every report (SPEC §4: "report which").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conventions {
    pub gain: Gain,
    pub no_relevant: NoRelevant,
    pub relevance_threshold: i32,
    pub order: RunOrder,
    pub complete: bool,
    /// g_max of ERR and pFound: the highest grade in the qrels.
    pub err_max_grade: i32,
    pub pfound_break: f64,
}

/// Means over the evaluated queries at the top level (`"map"`, `"ndcg@10"`, `"p@10"`, `"mrr"`,
/// ... as INTERFACE.md shows for `rankd eval --json`), then the conventions and per-query
/// values (`"ap"` and `"rr"` per query are the `"map"` and `"mrr"` of the means).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Set by the caller (`rankd eval --model`); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Number of queries in the means.
    pub queries: usize,
    #[serde(flatten)]
    pub means: Metrics,
    pub conventions: Conventions,
    /// Judged queries left out because none of their documents is relevant.
    pub skipped_no_relevant: Vec<String>,
    pub per_query: BTreeMap<String, Metrics>,
}

impl Report {
    /// The mean of one metric (`"map"`, `"ndcg@10"`, ...).
    pub fn mean(&self, name: &str) -> Option<f64> {
        self.means.get(name)
    }

    /// Writes the means as a two-column table; with `per_query`, also one line per query and
    /// metric in trec_eval's `-q` layout (`metric  qid  value`).
    pub fn write_table(
        &self,
        mut out: impl std::io::Write,
        per_query: bool,
    ) -> std::io::Result<()> {
        if per_query {
            for (qid, values) in &self.per_query {
                for (name, value) in values.iter() {
                    writeln!(out, "{name:<12}\t{qid}\t{value:.4}")?;
                }
            }
        }
        write!(out, "{self}")
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let c = &self.conventions;
        if let Some(model) = &self.model {
            writeln!(f, "model       \t{model}")?;
        }
        writeln!(f, "queries     \t{}", self.queries)?;
        for (name, value) in self.means.iter() {
            writeln!(f, "{name:<12}\t{value:.4}")?;
        }
        writeln!(
            f,
            "conventions: gain {:?}, no-relevant queries {:?} ({} skipped), relevant from grade {}, \
             order {:?}, complete {}, ERR g_max {}",
            c.gain,
            c.no_relevant,
            self.skipped_no_relevant.len(),
            c.relevance_threshold,
            c.order,
            c.complete,
            c.err_max_grade
        )
    }
}
