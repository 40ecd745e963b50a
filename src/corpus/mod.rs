//! Documents and their sources: JSONL, a directory of HTML pages, the Cranfield collection.

pub mod cranfield;
pub mod html;
pub mod jsonl;
pub mod letor;

use serde_json::{Map, Value};

/// One document as rankd indexes it. Every source (JSONL, HTML, Cranfield) produces these.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Document {
    /// Unique key; a second document with the same id replaces the first.
    pub id: String,
    /// Absolute URL, when the document has one (HTML pages, web JSONL).
    pub url: Option<String>,
    pub title: String,
    /// Section headings (h1..h6), newline-separated.
    pub headings: String,
    pub body: String,
    /// Anchor text of in-links, collected from the pages that link here.
    pub anchor: String,
    /// Out-links: absolute URLs, or ids of other documents.
    pub links: Vec<String>,
    /// Publication time, seconds since the Unix epoch.
    pub published_at: Option<i64>,
    /// Any other fields of a JSONL record, stored as given.
    pub extra: Map<String, Value>,
    /// The readable prose of the document, one paragraph or list item per line, for its
    /// snippets (`crate::text::snippet`); empty means "the body". Indexed, not stored.
    pub prose: String,
}

/// A record that could not be read, with where it came from.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{}: {message}", origin, line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct RecordError {
    /// The file (or request) the record came from.
    pub origin: String,
    /// 1-based line number, for line-oriented formats.
    pub line: Option<usize>,
    pub message: String,
}
