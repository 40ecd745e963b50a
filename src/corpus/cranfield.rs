//! The Cranfield 1400 collection (see ../shared/data/README.md for its quirks).
//!
//! Three files: `cran.all.1400` (documents), `cran.qry` (queries), `cranqrel` (judgments).
//! Records are introduced by `.I n` and fields by marker lines `.T` (title), `.A` (authors),
//! `.B` (bibliographic reference) and `.W` (abstract). The readers accept the collection's
//! known defects, each covered by a test below: empty abstracts (docs 471, 995), marker lines
//! stranded inside an abstract (doc 240's second `.A`/`.B`, docs 576/578's second `.W`), and
//! CRLF line endings in `cran.qry`.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use super::Document;
use crate::eval::{for_each_line, ParseError, Qrels};

/// File names inside a Cranfield directory.
pub(crate) const DOCUMENTS_FILE: &str = "cran.all.1400";
pub const QUERIES_FILE: &str = "cran.qry";
pub const QRELS_FILE: &str = "cranqrel";

/// One Cranfield query.
#[derive(Debug, Clone, PartialEq)]
pub struct CranfieldQuery {
    /// The id `cranqrel` uses: the query's 1-based position in `cran.qry`.
    pub id: String,
    /// The `.I` number as written in `cran.qry` (`001`, `002`, `004`, ...). Not the qrels id.
    pub source_id: String,
    pub text: String,
}

/// How `cranqrel`'s relevance codes become grades (data README; always name the variant).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Judgments {
    /// Codes 1..4 relevant with grade `5 − code` (Cleverdon's 1 = best becomes 4); `-1` (the
    /// query's source paper) and 5 ("no interest") are judged non-relevant, grade 0.
    #[default]
    A,
    /// Every listed pair relevant, grade 1 (used by some course materials).
    B,
}

/// Reads `cran.all.1400`. Document id = the `.I` number; title = `.T`; body = `.W` (the abstract,
/// which repeats the title); authors and bibliographic reference go to `extra` as `"authors"`
/// and `"bib"`. Every Cranfield record puts `.W` last, so a marker line after `.W` is a stray
/// inside the abstract: the text after it stays in the body (doc 240's second `.A` line starts
/// mid-sentence: "application to turbulent separations is made ...").
pub fn read_documents(path: &Path) -> Result<Vec<Document>, ParseError> {
    let mut documents: Vec<Document> = Vec::new();
    let mut ids = HashSet::new();
    let mut current: Option<DocumentBuilder> = None;
    for_each_line(path, |n, line| {
        let marker = line.trim_end();
        if let Some(id) = record_id(marker) {
            let id = id.ok_or_else(|| {
                ParseError::syntax(path, n, format!("`{marker}`: expected `.I` and a number"))
            })?;
            if !ids.insert(id.clone()) {
                return Err(ParseError::syntax(
                    path,
                    n,
                    format!("document {id} appears twice"),
                ));
            }
            documents.extend(current.take().map(DocumentBuilder::finish));
            current = Some(DocumentBuilder::new(id));
            return Ok(());
        }
        let Some(doc) = current.as_mut() else {
            return if marker.is_empty() {
                Ok(())
            } else {
                Err(ParseError::syntax(
                    path,
                    n,
                    "expected `.I n` to start a document",
                ))
            };
        };
        match (marker, doc.field) {
            (".W", _) => doc.field = Field::Abstract,
            (".T" | ".A" | ".B", Field::Abstract) => {}
            (".T", _) => doc.field = Field::Title,
            (".A", _) => doc.field = Field::Authors,
            (".B", _) => doc.field = Field::Bib,
            (_, Field::None) if marker.is_empty() => {}
            (_, Field::None) => {
                return Err(ParseError::syntax(
                    path,
                    n,
                    "text before any field marker (.T, .A, .B or .W)",
                ))
            }
            (_, field) => doc.lines[field as usize].push(line.to_string()),
        }
        Ok(())
    })?;
    documents.extend(current.map(DocumentBuilder::finish));
    Ok(documents)
}

/// Reads `cran.qry`: `.I nnn` then `.W` then the query text. Ids are positional (see
/// [`CranfieldQuery::id`]); the text's lines are joined with spaces.
pub fn read_queries(path: &Path) -> Result<Vec<CranfieldQuery>, ParseError> {
    let mut queries: Vec<(CranfieldQuery, usize)> = Vec::new();
    let mut in_text = false;
    for_each_line(path, |n, line| {
        let marker = line.trim_end();
        if let Some(id) = record_id(marker) {
            let source_id = id.ok_or_else(|| {
                ParseError::syntax(path, n, format!("`{marker}`: expected `.I` and a number"))
            })?;
            check_query_text(path, queries.last())?;
            queries.push((
                CranfieldQuery {
                    id: (queries.len() + 1).to_string(),
                    source_id,
                    text: String::new(),
                },
                n,
            ));
            in_text = false;
        } else if marker == ".W" && !queries.is_empty() {
            in_text = true;
        } else if let (true, Some((query, _))) = (in_text, queries.last_mut()) {
            let words = line.trim();
            if !words.is_empty() {
                if !query.text.is_empty() {
                    query.text.push(' ');
                }
                query.text.push_str(words);
            }
        } else if !marker.is_empty() {
            return Err(ParseError::syntax(
                path,
                n,
                format!("unexpected `{marker}`: expected `.I n` or `.W`"),
            ));
        }
        Ok(())
    })?;
    check_query_text(path, queries.last())?;
    Ok(queries.into_iter().map(|(q, _)| q).collect())
}

/// Reads `cranqrel` (`qid docid code` per line; qid positional as in [`read_queries`]) into
/// graded judgments under the given variant.
pub fn read_qrels(path: &Path, variant: Judgments) -> Result<Qrels, ParseError> {
    let mut qrels = Qrels::new();
    for_each_line(path, |n, line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() {
            return Ok(());
        }
        let [qid, doc, code] = fields[..] else {
            return Err(ParseError::syntax(
                path,
                n,
                format!(
                    "expected 3 columns `qid docid code`, found {}",
                    fields.len()
                ),
            ));
        };
        for (what, value) in [("query id", qid), ("document id", doc)] {
            if value.parse::<u32>().is_err() {
                return Err(ParseError::syntax(
                    path,
                    n,
                    format!("{what} `{value}` is not a number"),
                ));
            }
        }
        let grade = match (variant, code.parse::<i32>()) {
            (Judgments::A, Ok(code @ 1..=4)) => 5 - code,
            (Judgments::A, Ok(-1 | 5)) => 0,
            (Judgments::B, Ok(_)) => 1,
            _ => {
                return Err(ParseError::syntax(
                    path,
                    n,
                    format!("relevance code `{code}` is not one of -1, 1, 2, 3, 4, 5"),
                ))
            }
        };
        if qrels.insert(qid, doc, grade).is_some() {
            return Err(ParseError::syntax(
                path,
                n,
                format!("query {qid}, document {doc} is judged twice"),
            ));
        }
        Ok(())
    })?;
    Ok(qrels)
}

/// `Some(Some(id))` for a valid `.I n` line, `Some(None)` for a malformed one, `None` otherwise.
fn record_id(marker: &str) -> Option<Option<String>> {
    let rest = marker.strip_prefix(".I")?;
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let id = rest.trim();
    Some((!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then(|| id.to_string()))
}

fn check_query_text(path: &Path, last: Option<&(CranfieldQuery, usize)>) -> Result<(), ParseError> {
    match last {
        Some((q, line)) if q.text.is_empty() => Err(ParseError::syntax(
            path,
            *line,
            format!("query .I {} (query {}) has no text", q.source_id, q.id),
        )),
        _ => Ok(()),
    }
}

/// Which field the lines being read belong to; the discriminant indexes `lines`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    Title = 0,
    Authors = 1,
    Bib = 2,
    Abstract = 3,
    None = 4,
}

struct DocumentBuilder {
    id: String,
    field: Field,
    lines: [Vec<String>; 4],
}

impl DocumentBuilder {
    fn new(id: String) -> Self {
        DocumentBuilder {
            id,
            field: Field::None,
            lines: Default::default(),
        }
    }

    fn finish(self) -> Document {
        let [title, authors, bib, body] = self.lines.map(|lines| {
            lines
                .iter()
                .map(|l| l.trim())
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("\n")
        });
        let mut doc = Document {
            id: self.id,
            title: title.replace('\n', " "),
            body,
            ..Document::default()
        };
        for (key, text) in [("authors", authors), ("bib", bib)] {
            if !text.is_empty() {
                doc.extra
                    .insert(key.to_string(), Value::String(text.replace('\n', " ")));
            }
        }
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/cranfield");

    fn data(file: &str) -> std::path::PathBuf {
        Path::new(DIR).join(file)
    }

    fn temp(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    fn error(
        result: Result<impl std::fmt::Debug, ParseError>,
        file: &tempfile::NamedTempFile,
    ) -> String {
        let message = result.unwrap_err().to_string();
        let prefix = format!("{}:", file.path().display());
        message
            .strip_prefix(&prefix)
            .expect("error names the file")
            .to_string()
    }

    #[test]
    fn reads_all_1400_documents_with_their_quirks() {
        let docs = read_documents(&data(DOCUMENTS_FILE)).unwrap();
        assert_eq!(docs.len(), 1400);
        for (i, d) in docs.iter().enumerate() {
            assert_eq!(d.id, (i + 1).to_string());
        }
        let doc = |id: usize| &docs[id - 1];
        assert_eq!(
            doc(1).title,
            "experimental investigation of the aerodynamics of a wing in a slipstream ."
        );
        assert!(doc(1)
            .body
            .starts_with("experimental investigation of the aerodynamics of a\n"));
        assert!(doc(1)
            .body
            .ends_with("the specific configuration of the experiment ."));
        assert_eq!(doc(1).extra["authors"], "brenckman,m.");
        assert_eq!(doc(1).extra["bib"], "j. ae. scs. 25, 1958, 324.");
        // Empty abstracts.
        assert_eq!(doc(471).body, "");
        assert_eq!(doc(995).body, "");
        assert_eq!(doc(995).title, "");
        assert!(doc(995).extra.is_empty());
        // Doc 240: the stray .A/.B inside the abstract keep their text in the body.
        assert_eq!(doc(240).extra["authors"], "dean r. chapman");
        assert_eq!(doc(240).extra["bib"], "naca technote 3792");
        assert!(doc(240)
            .body
            .contains("region of low-velocity air (/dead air/) ."));
        assert!(doc(240).body.contains(
            "\napplication to turbulent separations is made for a prandtl number of\n\
             unity in low-speed flow without injection .\n"
        ));
        assert!(doc(240)
            .body
            .ends_with("transfer in a laminar separated flow ."));
        // Docs 576, 578: both .W sections are in the body.
        assert!(doc(578)
            .body
            .starts_with("dissociation scaling for nonequilibrium blunt"));
        assert!(doc(578)
            .body
            .contains("\ncompressor operation with one or more blade rows stalled ."));
        assert!(doc(576)
            .body
            .starts_with("viscous and inviscid stagnation flow"));
        assert!(docs
            .iter()
            .all(|d| !d.body.contains("\n.W") && !d.body.contains("\n.A")));
    }

    #[test]
    fn queries_are_positional_and_crlf_free() {
        let queries = read_queries(&data(QUERIES_FILE)).unwrap();
        assert_eq!(queries.len(), 225);
        assert_eq!(queries[0].id, "1");
        assert_eq!(queries[0].source_id, "001");
        assert_eq!(
            queries[0].text,
            "what similarity laws must be obeyed when constructing aeroelastic models of heated \
             high speed aircraft ."
        );
        assert_eq!(queries[224].id, "225");
        assert_eq!(queries[224].source_id, "365");
        assert!(queries
            .iter()
            .all(|q| !q.text.contains('\r') && !q.text.is_empty()));
    }

    /// The data README's check: cranqrel query 3 is `.I 004`, "heat conduction in composite
    /// slabs", and document 5 is relevant to it (code 3).
    #[test]
    fn cranqrel_query_3_is_heat_conduction_in_composite_slabs() {
        let queries = read_queries(&data(QUERIES_FILE)).unwrap();
        let q3 = &queries[2];
        assert_eq!((q3.id.as_str(), q3.source_id.as_str()), ("3", "004"));
        assert!(q3.text.contains("heat conduction in composite slabs"));
        let a = read_qrels(&data(QRELS_FILE), Judgments::A).unwrap();
        assert_eq!(a.grade("3", "5"), Some(2));
        let b = read_qrels(&data(QRELS_FILE), Judgments::B).unwrap();
        assert_eq!(b.grade("3", "5"), Some(1));
        let docs = read_documents(&data(DOCUMENTS_FILE)).unwrap();
        assert!(docs[4].body.contains("heat"), "{}", docs[4].body);
    }

    #[test]
    fn judgment_variants() {
        let a = read_qrels(&data(QRELS_FILE), Judgments::A).unwrap();
        assert_eq!((a.num_queries(), a.num_judgments()), (225, 1837));
        let mut counts = [0; 5];
        for (_, docs) in a.iter() {
            for &g in docs.values() {
                counts[g as usize] += 1;
            }
        }
        // Code counts in cranqrel: -1: 225, 1: 128, 2: 387, 3: 734, 4: 363.
        assert_eq!(counts, [225, 363, 734, 387, 128]);
        assert!(a.iter().all(|(q, _)| a.num_relevant(q, 1) > 0));
        let b = read_qrels(&data(QRELS_FILE), Judgments::B).unwrap();
        assert_eq!(b.num_judgments(), 1837);
        assert!(b.iter().all(|(_, docs)| docs.values().all(|&g| g == 1)));
    }

    #[test]
    fn bad_documents_name_file_and_line() {
        let f = temp("some text\n.I 1\n");
        assert_eq!(
            error(read_documents(f.path()), &f),
            "1: expected `.I n` to start a document"
        );
        let f = temp(".I 1\n.T\nt\n.I x\n");
        assert_eq!(
            error(read_documents(f.path()), &f),
            "4: `.I x`: expected `.I` and a number"
        );
        let f = temp(".I 1\n.W\na\n.I 1\n");
        assert_eq!(
            error(read_documents(f.path()), &f),
            "4: document 1 appears twice"
        );
        let f = temp(".I 1\ntext\n");
        assert_eq!(
            error(read_documents(f.path()), &f),
            "2: text before any field marker (.T, .A, .B or .W)"
        );
        let f = temp(".I 7\n.T\ntitle\r\n.W\r\nbody\r\n");
        let docs = read_documents(f.path()).unwrap();
        assert_eq!(
            (docs[0].title.as_str(), docs[0].body.as_str()),
            ("title", "body")
        );
    }

    #[test]
    fn bad_queries_and_qrels_name_file_and_line() {
        let f = temp(".I 001\n.W\nfirst\n.I 002\n.W\n.I 003\n.W\nthird\n");
        assert_eq!(
            error(read_queries(f.path()), &f),
            "4: query .I 002 (query 2) has no text"
        );
        let f = temp(".I 001\n.W\nfirst\n.I 002\n");
        assert_eq!(
            error(read_queries(f.path()), &f),
            "4: query .I 002 (query 2) has no text"
        );
        let f = temp(".I 001\n.T\nfirst\n");
        assert_eq!(
            error(read_queries(f.path()), &f),
            "2: unexpected `.T`: expected `.I n` or `.W`"
        );
        let f = temp("1 2 3\n1 3\n");
        assert_eq!(
            error(read_qrels(f.path(), Judgments::A), &f),
            "2: expected 3 columns `qid docid code`, found 2"
        );
        let f = temp("1 2 3\n1 3 7\n");
        assert_eq!(
            error(read_qrels(f.path(), Judgments::A), &f),
            "2: relevance code `7` is not one of -1, 1, 2, 3, 4, 5"
        );
        let f = temp("1 2 3\n1 2 1\n");
        assert_eq!(
            error(read_qrels(f.path(), Judgments::B), &f),
            "2: query 1, document 2 is judged twice"
        );
        let f = temp("1 d2 3\n");
        assert_eq!(
            error(read_qrels(f.path(), Judgments::A), &f),
            "1: document id `d2` is not a number"
        );
    }
}
