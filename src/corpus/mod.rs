//! Documents and their sources: JSONL, a directory of HTML pages, the Cranfield collection.

pub mod cranfield;
pub mod html;
mod html_parse;
pub mod jsonl;
pub mod lang;
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
    /// The name of the item the document is about, with its path where it has one
    /// (`std::collections::HashMap`): rustdoc's page heading, a JSONL `name` key.
    pub name: String,
    /// Section headings (h1..h6), newline-separated.
    pub headings: String,
    pub body: String,
    /// Anchor text of in-links, collected from the pages that link here.
    pub anchor: String,
    /// Out-links: absolute URLs, or ids of other documents.
    pub links: Vec<String>,
    /// Publication time, seconds since the Unix epoch.
    pub published_at: Option<i64>,
    /// Any other fields of a JSONL record, stored as given; an HTML API page's `kind`. A
    /// string `kind` (`trait`, a product category) is also searched as part of the name.
    pub extra: Map<String, Value>,
    /// The readable prose of the document, one paragraph or list item per line, for its
    /// snippets (`crate::text::snippet`); empty means "the body". Indexed, not stored.
    pub prose: String,
    /// The document's language, [`lang::normalize`]d (`en`, `ja`): from `<html lang>` or the
    /// JSONL `lang` key; `None` when unknown.
    pub lang: Option<String>,
    /// For one language version of a page: the URL that stands for the page (the first of
    /// its `hreflang` alternates), whose page key it takes for `collapse=page`; `None`: its own.
    pub translation_of: Option<String>,
}

/// The documented JSONL fields rankd reads besides the text (SPEC §1.8 and `collapse=group`);
/// they stay in [`Document::extra`] as given and are also indexed as fast fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SocialFields {
    /// `votes_up`, `votes_down`: whole numbers ≥ 0.
    pub votes_up: Option<u64>,
    pub votes_down: Option<u64>,
    /// `rating`: the document's mean rating, a finite number; `rating_count`: how many
    /// ratings it averages, a whole number ≥ 0.
    pub rating: Option<f64>,
    pub rating_count: Option<u64>,
    /// `group`: a non-empty string; `collapse=group` keeps one hit per group.
    pub group: Option<String>,
}

impl SocialFields {
    /// The fields of a record, or what is wrong with one of them.
    pub fn parse(extra: &Map<String, Value>) -> Result<SocialFields, String> {
        let count = |key: &str| -> Result<Option<u64>, String> {
            match extra.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Number(n)) => n
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| format!("`{key}` must be a whole number ≥ 0, got {n}")),
                Some(_) => Err(format!("`{key}` must be a whole number ≥ 0")),
            }
        };
        let rating = match extra.get("rating") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => Some(
                n.as_f64()
                    .filter(|r| r.is_finite())
                    .ok_or_else(|| format!("`rating` must be a finite number, got {n}"))?,
            ),
            Some(_) => return Err("`rating` must be a number".into()),
        };
        let group = match extra.get("group") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(_) => return Err("`group` must be a non-empty string".into()),
        };
        Ok(SocialFields {
            votes_up: count("votes_up")?,
            votes_down: count("votes_down")?,
            rating,
            rating_count: count("rating_count")?,
            group,
        })
    }

    /// The fields of an already validated record (invalid ones read as absent).
    pub fn of(extra: &Map<String, Value>) -> SocialFields {
        SocialFields::parse(extra).unwrap_or_default()
    }
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
