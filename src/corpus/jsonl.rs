//! JSON Lines documents: one object per line with `id`, `url`, `title`, `name`, `headings`,
//! `body`, `anchor`, `links`, `published_at`, `lang` (a language tag, kept as its primary
//! subtag: [`super::lang`]); any other key is kept in [`Document::extra`] (a string `kind` is
//! also searched with the `name`, `crate::text::index`). Of those,
//! `votes_up`, `votes_down`, `rating`, `rating_count` (SPEC §1.8) and `group` (for
//! `collapse=group`) are checked here and indexed as fast fields ([`super::SocialFields`]).
//!
//! The checks here are the ones whose absence corrupts the index silently: an `id` must be a
//! JSON string (a number taken as text would replace the document whose id is that text), at most [`MAX_ID_BYTES`] long (tantivy drops longer terms, so the record could never
//! be replaced or deleted, and every ingest added another copy), and `published_at` must lie
//! in [`PUBLISHED_AT_RANGE`] (years 1900..=9999), so freshness features stay meaningful.

use std::path::Path;

use serde_json::{Map, Value};

use super::{Document, RecordError};

/// The longest `id` in bytes: tantivy indexes no longer term
/// (`tantivy::tokenizer::MAX_TOKEN_LEN`, 65 530).
pub(crate) const MAX_ID_BYTES: usize = tantivy::tokenizer::MAX_TOKEN_LEN;

/// The longest record (one line) in bytes: indexing a document takes about twelve times
/// its size at peak (its text analysed for every field, its columns, its snippet passages),
/// so a 98 MB line took 1.14 GB; a record at this bound peaked at 232 MB (docs/RELIABILITY.md,
/// N21). The admin API's body limit (`limits.max_body_bytes`) has the same default.
pub(crate) const MAX_RECORD_BYTES: usize = 16 << 20;

/// Accepted `published_at`, seconds since the Unix epoch: 1900-01-01T00:00:00Z through
/// 9999-12-31T23:59:59Z. Earlier or later values are typing errors (milliseconds given as
/// seconds, a sentinel such as `i64::MAX`), not dates of documents.
pub(crate) const PUBLISHED_AT_RANGE: std::ops::RangeInclusive<i64> =
    -2_208_988_800..=253_402_300_799;

/// Parses every non-blank line of `bytes` (the content of `path`). Each record is parsed on
/// its own, so one bad line yields one error and the others still parse. A UTF-8 byte order
/// mark opening the input (Windows editors write one) is skipped, as JSON parsers may
/// (RFC 8259 §8.1).
pub fn parse(path: &Path, bytes: &[u8]) -> Vec<Result<Document, RecordError>> {
    bytes
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(bytes)
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
        .map(|(i, line)| {
            parse_record(line).map_err(|message| RecordError {
                origin: path.display().to_string(),
                line: Some(i + 1),
                message,
            })
        })
        .collect()
}

fn parse_record(line: &[u8]) -> Result<Document, String> {
    if line.len() > MAX_RECORD_BYTES {
        return Err(format!(
            "the record is {} bytes long; records are limited to {MAX_RECORD_BYTES} bytes",
            line.len()
        ));
    }
    let text = std::str::from_utf8(line)
        .map_err(|e| format!("not valid UTF-8 (byte {})", e.valid_up_to() + 1))?;
    let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let Value::Object(object) = value else {
        return Err("expected a JSON object".into());
    };
    document_from_object(object)
}

/// Builds a document from one JSON object, checking every known field's type.
pub fn document_from_object(mut object: Map<String, Value>) -> Result<Document, String> {
    let id = match object.remove("id") {
        Some(Value::String(s)) if s.len() > MAX_ID_BYTES => {
            return Err(format!(
                "`id` is {} bytes long; ids are limited to {MAX_ID_BYTES} bytes (the index \
                 cannot look up longer ones, so the document could never be replaced or deleted)",
                s.len()
            ))
        }
        Some(Value::String(s)) if !s.trim().is_empty() => s,
        Some(Value::Number(n)) => {
            return Err(format!(
                "`id` must be a string, got the number {n}; write it as \"{n}\" (a number \
                 would silently become text and could replace another document)"
            ))
        }
        Some(Value::String(_)) => return Err("`id` is empty".into()),
        Some(other) => return Err(format!("`id` must be a string, got {}", kind(&other))),
        None => return Err("missing `id`".into()),
    };
    let mut text = |key: &str| -> Result<String, String> {
        match object.remove(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(format!("`{key}` must be a string, got {}", kind(&other))),
        }
    };
    let url = text("url")?;
    let title = text("title")?;
    let name = text("name")?;
    let headings = text("headings")?;
    let body = text("body")?;
    let anchor = text("anchor")?;
    if !url.is_empty() {
        url::Url::parse(&url).map_err(|e| format!("`url` {url:?} is not an absolute URL: {e}"))?;
    }
    let links = match object.remove("links") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s),
                other => Err(format!(
                    "`links[{i}]` must be a string, got {}",
                    kind(&other)
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(format!("`links` must be an array, got {}", kind(&other))),
    };
    let published_at = match object.remove("published_at") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(
            n.as_i64()
                .ok_or("`published_at` must be whole seconds since the Unix epoch")?,
        ),
        Some(Value::String(s)) => Some(parse_rfc3339(&s)?),
        Some(other) => {
            return Err(format!(
                "`published_at` must be RFC 3339 text or epoch seconds, got {}",
                kind(&other)
            ))
        }
    };
    if let Some(t) = published_at {
        if !PUBLISHED_AT_RANGE.contains(&t) {
            return Err(format!(
                "`published_at` {t} (seconds since the Unix epoch) is outside the years \
                 1900..=9999 (milliseconds given as seconds?)"
            ));
        }
    }
    let lang = match object.remove("lang") {
        None | Some(Value::Null) => None,
        Some(Value::String(tag)) => Some(super::lang::normalize(&tag).ok_or_else(|| {
            format!("`lang` {tag:?} is not a language tag (e.g. \"en\", \"pt-BR\")")
        })?),
        Some(other) => return Err(format!("`lang` must be a string, got {}", kind(&other))),
    };
    super::SocialFields::parse(&object)?;
    Ok(Document {
        id,
        url: (!url.is_empty()).then_some(url),
        title,
        name,
        headings,
        body,
        anchor,
        links,
        published_at,
        extra: object,
        prose: String::new(),
        lang,
        translation_of: None,
    })
}

fn parse_rfc3339(s: &str) -> Result<i64, String> {
    use tantivy::time::format_description::well_known::Rfc3339;
    tantivy::time::OffsetDateTime::parse(s, &Rfc3339)
        .map(|t| t.unix_timestamp())
        .map_err(|e| format!("`published_at` {s:?} is not an RFC 3339 date: {e}"))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses a whole NDJSON request body (an admin document batch, on a node or a cluster
/// root); the first bad line (1-based) fails the batch.
pub fn parse_batch(body: &[u8]) -> Result<Vec<Document>, RecordError> {
    parse(Path::new("request body"), body).into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Result<Document, RecordError> {
        parse(Path::new("t.jsonl"), line.as_bytes()).remove(0)
    }

    /// Issue 30, N21: one 98 MB line took 1.14 GB to index; a record over the bound is an
    /// invalid record naming its line and the limit, and the lines around it still parse.
    #[test]
    fn records_over_the_size_limit_are_refused_naming_the_line() {
        let long = format!(
            r#"{{"id":"big","body":"{}"}}"#,
            "a".repeat(MAX_RECORD_BYTES)
        );
        let text = format!("{{\"id\":\"a\"}}\n{long}\n{{\"id\":\"b\"}}\n");
        let parsed = parse(Path::new("t.jsonl"), text.as_bytes());
        let e = parsed[1].as_ref().unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(
            e.message.contains(&MAX_RECORD_BYTES.to_string()),
            "{}",
            e.message
        );
        assert_eq!(parsed[0].as_ref().unwrap().id, "a");
        assert_eq!(parsed[2].as_ref().unwrap().id, "b");
    }

    /// Issue 30, N17: a byte order mark opening the file is skipped (it was "invalid JSON");
    /// one anywhere else is still an error naming its line.
    #[test]
    fn a_leading_byte_order_mark_is_skipped() {
        let text = "\u{feff}{\"id\":\"a\"}\n{\"id\":\"b\"}\n\u{feff}{\"id\":\"c\"}\n";
        let parsed = parse(Path::new("t.jsonl"), text.as_bytes());
        assert_eq!(parsed[0].as_ref().unwrap().id, "a");
        assert_eq!(parsed[1].as_ref().unwrap().id, "b");
        assert_eq!(parsed[2].as_ref().unwrap_err().line, Some(3));
    }

    #[test]
    fn parses_fields_and_keeps_extras() {
        let d = one(r#"{"id":"a","url":"https://x.org/a","title":"T","name":"x::Y","body":"B","links":["https://x.org/b","c"],"published_at":"2024-01-02T03:04:05Z","votes":3}"#).unwrap();
        assert_eq!(d.id, "a");
        assert_eq!(d.name, "x::Y");
        assert!(!d.extra.contains_key("name"));
        assert_eq!(d.links, vec!["https://x.org/b", "c"]);
        assert_eq!(d.published_at, Some(1704164645));
        assert_eq!(d.extra["votes"], 3);
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let input = b"{\"id\":\"a\"}\n\n{\"id\": \"b\", \"title\": 3}\n{not json\n[1]\n{\"title\":\"x\"}\n{\"id\":\"\xff\"}\n";
        let out = parse(Path::new("docs.jsonl"), input);
        assert_eq!(out.len(), 6);
        assert!(out[0].is_ok());
        let errs: Vec<String> = out[1..]
            .iter()
            .map(|r| r.as_ref().unwrap_err().to_string())
            .collect();
        assert!(
            errs[0].starts_with("docs.jsonl:3:") && errs[0].contains("`title` must be a string"),
            "{}",
            errs[0]
        );
        assert!(
            errs[1].starts_with("docs.jsonl:4:") && errs[1].contains("invalid JSON"),
            "{}",
            errs[1]
        );
        assert!(errs[2].contains("expected a JSON object"));
        assert!(errs[3].contains("missing `id`"));
        assert!(
            errs[4].starts_with("docs.jsonl:7:") && errs[4].contains("UTF-8"),
            "{}",
            errs[4]
        );
    }

    /// A numeric id used to become the string "17" and replace the document with that id.
    #[test]
    fn numeric_ids_are_refused_naming_the_line() {
        let out = parse(
            Path::new("docs.jsonl"),
            b"{\"id\":\"17\",\"title\":\"a\"}\n{\"id\":17,\"title\":\"b\"}\n",
        );
        assert!(out[0].is_ok());
        let e = out[1].as_ref().unwrap_err().to_string();
        assert!(
            e.starts_with("docs.jsonl:2:")
                && e.contains("`id` must be a string, got the number 17"),
            "{e}"
        );
    }

    /// Ids tantivy cannot index as one term (over 65 530 bytes) are refused; the longest
    /// indexable one is kept.
    #[test]
    fn ids_over_the_term_limit_are_refused() {
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(65_531));
        let Err(e) = one(&long) else {
            panic!("an id over 65530 bytes is accepted")
        };
        let e = e.message;
        assert!(e.contains("65531 bytes") && e.contains("65530"), "{e}");
        let longest = format!(r#"{{"id":"{}"}}"#, "x".repeat(65_530));
        assert!(one(&longest).is_ok_and(|d| d.id.len() == 65_530));
    }

    /// Dates outside 1900..=9999 are refused, in both notations; the bounds themselves pass.
    #[test]
    fn published_at_outside_the_years_1900_to_9999_is_refused() {
        for bad in [
            r#"{"id":"a","published_at":9223372036854775807}"#,
            r#"{"id":"a","published_at":1700000000000000}"#,
            r#"{"id":"a","published_at":-2208988801}"#,
            r#"{"id":"a","published_at":"0001-01-01T00:00:00Z"}"#,
        ] {
            let e = one(bad).unwrap_err().message;
            assert!(e.contains("outside the years 1900..=9999"), "{bad}: {e}");
        }
        for good in [
            r#"{"id":"a","published_at":-2208988800}"#,
            r#"{"id":"a","published_at":"9999-12-31T23:59:59Z"}"#,
        ] {
            assert!(one(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn lang_is_kept_as_its_primary_subtag() {
        assert_eq!(
            one(r#"{"id":"a","lang":"pt-BR"}"#).unwrap().lang.as_deref(),
            Some("pt")
        );
        assert_eq!(one(r#"{"id":"a"}"#).unwrap().lang, None);
        let d = one(r#"{"id":"a","lang":"ja"}"#).unwrap();
        assert!(!d.extra.contains_key("lang"));
        assert!(one(r#"{"id":"a","lang":"Japanese"}"#)
            .unwrap_err()
            .message
            .contains("not a language tag"));
        assert!(one(r#"{"id":"a","lang":1}"#)
            .unwrap_err()
            .message
            .contains("`lang` must be a string"));
    }

    #[test]
    fn rejects_bad_urls_and_dates() {
        assert!(one(r#"{"id":"a","url":"not a url"}"#)
            .unwrap_err()
            .message
            .contains("absolute URL"));
        assert!(one(r#"{"id":"a","published_at":"yesterday"}"#)
            .unwrap_err()
            .message
            .contains("RFC 3339"));
        assert!(one(r#"{"id":"a","links":"x"}"#)
            .unwrap_err()
            .message
            .contains("array"));
    }
}
