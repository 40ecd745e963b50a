//! TREC text formats (SPEC §4): run files `qid Q0 docid rank score tag` and qrels files
//! `qid iter docid grade`, whitespace-separated, one line each.
//!
//! The readers are strict where trec_eval is strict (column counts, numeric fields, a document
//! listed twice for one query) so that a file rankd accepts scores the same in trec_eval.

use std::collections::HashSet;
use std::io::{self, BufRead, Write};
use std::path::Path;

use super::parse_error::{for_each_line, for_each_line_in, ParseError};
use super::{Qrels, Run};

/// Reads a TREC run file. The rank column must be an integer but is otherwise ignored (trec_eval
/// re-sorts by score); `Q0` and the tag may be anything.
pub fn read_run(path: &Path) -> Result<Run, ParseError> {
    let mut parser = RunParser::default();
    for_each_line(path, |n, line| parser.line(path, n, line))?;
    Ok(parser.run)
}

/// As [`read_run`], from any reader; `path` only names the source in errors.
pub fn parse_run(reader: impl BufRead, path: &Path) -> Result<Run, ParseError> {
    let mut parser = RunParser::default();
    for_each_line_in(reader, path, |n, line| parser.line(path, n, line))?;
    Ok(parser.run)
}

/// Reads a TREC qrels file. The second column (iteration) is ignored; grades are integers.
pub fn read_qrels(path: &Path) -> Result<Qrels, ParseError> {
    let mut qrels = Qrels::new();
    for_each_line(path, |n, line| qrels_line(&mut qrels, path, n, line))?;
    Ok(qrels)
}

/// As [`read_qrels`], from any reader; `path` only names the source in errors.
pub fn parse_qrels(reader: impl BufRead, path: &Path) -> Result<Qrels, ParseError> {
    let mut qrels = Qrels::new();
    for_each_line_in(reader, path, |n, line| {
        qrels_line(&mut qrels, path, n, line)
    })?;
    Ok(qrels)
}

/// Writes a run, queries in id order, each list in its stored order with ranks 1, 2, ...
/// Scores are written in Rust's shortest round-trip form, so reading the file back gives the
/// same `f64` values.
pub fn write_run(mut out: impl Write, run: &Run, tag: &str) -> io::Result<()> {
    let tag = if tag.is_empty() { "rankd" } else { tag };
    for (qid, docs) in run.iter() {
        for (index, d) in docs.iter().enumerate() {
            writeln!(out, "{qid} Q0 {} {} {} {tag}", d.doc, index + 1, d.score)?;
        }
    }
    out.flush()
}

/// Writes qrels, queries in id order and documents in id order, iteration column `0`.
pub fn write_qrels(mut out: impl Write, qrels: &Qrels) -> io::Result<()> {
    for (qid, docs) in qrels.iter() {
        for (doc, grade) in docs {
            writeln!(out, "{qid} 0 {doc} {grade}")?;
        }
    }
    out.flush()
}

#[derive(Default)]
struct RunParser {
    run: Run,
    seen: HashSet<(String, String)>,
}

impl RunParser {
    fn line(&mut self, path: &Path, n: usize, line: &str) -> Result<(), ParseError> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() {
            return Ok(());
        }
        let [qid, _q0, doc, rank, score, _tag] = fields[..] else {
            return Err(ParseError::syntax(
                path,
                n,
                format!(
                    "expected 6 columns `qid Q0 docid rank score tag`, found {}",
                    fields.len()
                ),
            ));
        };
        if rank.parse::<i64>().is_err() {
            return Err(ParseError::syntax(
                path,
                n,
                format!("rank `{rank}` is not an integer"),
            ));
        }
        let score: f64 = match score.parse() {
            Ok(s) if f64::is_finite(s) => s,
            _ => {
                return Err(ParseError::syntax(
                    path,
                    n,
                    format!("score `{score}` is not a finite number"),
                ))
            }
        };
        if !self.seen.insert((qid.to_string(), doc.to_string())) {
            return Err(ParseError::syntax(
                path,
                n,
                format!("document `{doc}` is listed twice for query `{qid}`"),
            ));
        }
        self.run.push(qid, doc, score);
        Ok(())
    }
}

fn qrels_line(qrels: &mut Qrels, path: &Path, n: usize, line: &str) -> Result<(), ParseError> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.is_empty() {
        return Ok(());
    }
    let [qid, _iter, doc, grade] = fields[..] else {
        return Err(ParseError::syntax(
            path,
            n,
            format!(
                "expected 4 columns `qid iter docid grade`, found {}",
                fields.len()
            ),
        ));
    };
    let grade: i32 = grade
        .parse()
        .map_err(|_| ParseError::syntax(path, n, format!("grade `{grade}` is not an integer")))?;
    if qrels.insert(qid, doc, grade).is_some() {
        return Err(ParseError::syntax(
            path,
            n,
            format!("document `{doc}` is judged twice for query `{qid}`"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_err(text: &str) -> String {
        parse_run(text.as_bytes(), Path::new("r.trec"))
            .unwrap_err()
            .to_string()
    }

    fn qrels_err(text: &str) -> String {
        parse_qrels(text.as_bytes(), Path::new("q.qrels"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn run_round_trips_through_text() {
        let mut run = Run::new();
        run.push("1", "d3", 12.5);
        run.push("1", "d1", 0.1 + 0.2);
        run.push("2", "x", -3.0);
        run.insert("3", vec![]);
        let mut text = Vec::new();
        write_run(&mut text, &run, "test").unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.starts_with("1 Q0 d3 1 12.5 test\n1 Q0 d1 2 0.30000000000000004 test\n"));
        let back = parse_run(text.as_bytes(), Path::new("r")).unwrap();
        // An empty list writes no line, so query 3 does not come back.
        assert_eq!(back.get("1"), run.get("1"));
        assert_eq!(back.get("2"), run.get("2"));
        assert_eq!(back.num_queries(), 2);
    }

    #[test]
    fn qrels_round_trip_and_crlf() {
        let q = parse_qrels(
            "1 0 a 2\r\n1 0 b -1\r\n\r\n2 0 a 0\r\n".as_bytes(),
            Path::new("q"),
        )
        .unwrap();
        assert_eq!(q.grade("1", "a"), Some(2));
        assert_eq!(q.grade("1", "b"), Some(-1));
        assert_eq!(q.grade("2", "a"), Some(0));
        let mut text = Vec::new();
        write_qrels(&mut text, &q).unwrap();
        assert_eq!(
            parse_qrels(text.as_slice(), Path::new("q")).unwrap(),
            q,
            "written qrels read back equal"
        );
    }

    #[test]
    fn bad_run_lines_name_file_and_line() {
        assert_eq!(
            run_err("1 Q0 a 1 2.0 t\n1 Q0 b 2 2.0\n"),
            "r.trec:2: expected 6 columns `qid Q0 docid rank score tag`, found 5"
        );
        assert_eq!(
            run_err("1 Q0 a one 2.0 t\n"),
            "r.trec:1: rank `one` is not an integer"
        );
        assert_eq!(
            run_err("1 Q0 a 1 NaN t\n"),
            "r.trec:1: score `NaN` is not a finite number"
        );
        assert_eq!(
            run_err("1 Q0 a 1 inf t\n"),
            "r.trec:1: score `inf` is not a finite number"
        );
        assert_eq!(
            run_err("1 Q0 a 1 x t\n"),
            "r.trec:1: score `x` is not a finite number"
        );
        assert_eq!(
            run_err("1 Q0 a 1 1 t\n2 Q0 a 1 1 t\n1 Q0 a 2 0.5 t\n"),
            "r.trec:3: document `a` is listed twice for query `1`"
        );
    }

    #[test]
    fn bad_qrels_lines_name_file_and_line() {
        assert_eq!(
            qrels_err("1 0 a\n"),
            "q.qrels:1: expected 4 columns `qid iter docid grade`, found 3"
        );
        assert_eq!(
            qrels_err("1 0 a 1\n1 0 b 1.5\n"),
            "q.qrels:2: grade `1.5` is not an integer"
        );
        assert_eq!(
            qrels_err("1 0 a 1\n1 0 a 2\n"),
            "q.qrels:2: document `a` is judged twice for query `1`"
        );
        let bytes = b"1 0 a 1\n1 0 \xff 1\n";
        let err = parse_qrels(&bytes[..], Path::new("q.qrels")).unwrap_err();
        assert_eq!(err.to_string(), "q.qrels:2: line is not valid UTF-8");
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = read_run(Path::new("/nonexistent/run.trec")).unwrap_err();
        assert!(
            err.to_string().starts_with("/nonexistent/run.trec: "),
            "{err}"
        );
    }
}
