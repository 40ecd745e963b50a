//! LETOR / SVMlight ranking files: `label [qid:Q] index:value ... [# comment]`, one row per
//! (query, document) pair, sparse 1-based feature indices.
//!
//! Queries come either from `qid:` on every row (rows of a query contiguous, as SVMlight-rank
//! and LightGBM require) or from a group file (`rank.train.query`: one group size per line, in
//! row order, as LightGBM's examples ship). Errors name the file and line; a group file whose
//! sizes do not add up to the number of rows is an error, never a silent truncation.
//!
//! Feature indices are capped at [`MAX_FEATURE_INDEX`]: training and evaluation hold the rows
//! as dense vectors as long as the largest index, so one stray `4294967295:1` would otherwise
//! ask for a 100 GB allocation (and abort) instead of naming the bad line.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::eval::{for_each_line, ParseError, Qrels};

/// The largest feature index accepted. The public LETOR sets use at most 700 features
/// (Yahoo! LTR; MSLR-WEB 136, Istella 220, LightGBM's example 300); rows are stored densely,
/// so this bounds a row at 80 KB.
pub(crate) const MAX_FEATURE_INDEX: u32 = 10_000;

/// One judged (query, document) row.
#[derive(Debug, Clone, PartialEq)]
pub struct LetorRow {
    /// Relevance grade.
    pub label: i32,
    /// `(index, value)`, indices 1-based and increasing; absent features are 0.
    pub features: Vec<(u32, f64)>,
    /// Text after `#`, if any (often a document id).
    pub comment: Option<String>,
    /// Line in the data file, for messages.
    pub line: usize,
}

impl LetorRow {
    /// The features as a dense vector of length `num_features` (index i at position i − 1).
    pub fn dense(&self, num_features: usize) -> Vec<f64> {
        let mut dense = vec![0.0; num_features];
        for &(index, value) in &self.features {
            if let Some(slot) = dense.get_mut(index as usize - 1) {
                *slot = value;
            }
        }
        dense
    }
}

/// The rows of one query.
#[derive(Debug, Clone, PartialEq)]
pub struct LetorQuery {
    /// The `qid:` of its rows, or its 1-based position in the group file.
    pub qid: String,
    pub rows: Vec<LetorRow>,
}

/// A whole LETOR file, grouped by query, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct LetorSet {
    pub queries: Vec<LetorQuery>,
    /// The largest feature index used (dense vectors need this length).
    pub num_features: usize,
}

impl LetorSet {
    pub fn num_rows(&self) -> usize {
        self.queries.iter().map(|q| q.rows.len()).sum()
    }

    /// Labels as judgments: document id = the row's position within its query (`"0"`, `"1"`,
    /// ...), matching the ids a run over this set would use.
    pub fn qrels(&self) -> Qrels {
        let mut qrels = Qrels::new();
        for q in &self.queries {
            for (i, row) in q.rows.iter().enumerate() {
                qrels.insert(&q.qid, &i.to_string(), row.label);
            }
        }
        qrels
    }
}

/// The group file LightGBM pairs with `data`: `data` + `.query` (`rank.train.query`), if it
/// exists.
pub(crate) fn group_file_for(data: &Path) -> Option<PathBuf> {
    let mut name = data.as_os_str().to_owned();
    name.push(".query");
    let path = PathBuf::from(name);
    path.is_file().then_some(path)
}

/// Reads a LETOR file; `groups` is the group-size file, if queries are not given by `qid:`.
pub fn read(data: &Path, groups: Option<&Path>) -> Result<LetorSet, ParseError> {
    let mut rows: Vec<(Option<String>, LetorRow)> = Vec::new();
    for_each_line(data, |n, line| {
        if let Some(row) = parse_row(data, n, line)? {
            rows.push(row);
        }
        Ok(())
    })?;
    let num_features = rows
        .iter()
        .filter_map(|(_, r)| r.features.last())
        .map(|&(i, _)| i as usize)
        .max()
        .unwrap_or(0);
    let queries = match groups {
        Some(groups) => split_by_group_file(data, groups, rows)?,
        None => split_by_qid(data, rows)?,
    };
    Ok(LetorSet {
        queries,
        num_features,
    })
}

/// Parses one line; `None` for blank and comment-only lines.
fn parse_row(
    path: &Path,
    n: usize,
    line: &str,
) -> Result<Option<(Option<String>, LetorRow)>, ParseError> {
    let (data, comment) = match line.split_once('#') {
        Some((data, comment)) => (data, Some(comment.trim()).filter(|c| !c.is_empty())),
        None => (line, None),
    };
    let mut tokens = data.split_whitespace();
    let Some(label) = tokens.next() else {
        return Ok(None);
    };
    let label = parse_label(label).ok_or_else(|| {
        ParseError::syntax(path, n, format!("label `{label}` is not an integer grade"))
    })?;
    let mut qid = None;
    let mut features: Vec<(u32, f64)> = Vec::new();
    for (position, token) in tokens.enumerate() {
        let Some((key, value)) = token.split_once(':') else {
            return Err(ParseError::syntax(
                path,
                n,
                format!("`{token}` is not `index:value`"),
            ));
        };
        if key == "qid" {
            if position != 0 {
                return Err(ParseError::syntax(
                    path,
                    n,
                    "`qid:` must come right after the label",
                ));
            }
            if value.is_empty() {
                return Err(ParseError::syntax(path, n, "empty `qid:`"));
            }
            qid = Some(value.to_string());
            continue;
        }
        let index: u32 = match key.parse() {
            Ok(0) => {
                return Err(ParseError::syntax(
                    path,
                    n,
                    "feature index 0: indices start at 1",
                ))
            }
            Ok(i) if i > MAX_FEATURE_INDEX => {
                return Err(ParseError::syntax(
                    path,
                    n,
                    format!(
                        "feature index {i} is above the limit of {MAX_FEATURE_INDEX} \
                         (rows are stored densely, as long as the largest index)"
                    ),
                ))
            }
            Ok(i) => i,
            Err(_) => {
                return Err(ParseError::syntax(
                    path,
                    n,
                    format!("feature index `{key}` in `{token}` is not a positive integer"),
                ))
            }
        };
        let value: f64 = match value.parse() {
            Ok(v) if f64::is_finite(v) => v,
            _ => {
                return Err(ParseError::syntax(
                    path,
                    n,
                    format!("value `{value}` of feature {index} is not a finite number"),
                ))
            }
        };
        features.push((index, value));
    }
    features.sort_by_key(|&(i, _)| i);
    if let Some(w) = features.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(ParseError::syntax(
            path,
            n,
            format!("feature {} is given twice", w[0].0),
        ));
    }
    let row = LetorRow {
        label,
        features,
        comment: comment.map(str::to_string),
        line: n,
    };
    Ok(Some((qid, row)))
}

/// Integer grades; `2.0` is accepted as 2, `2.5` is not.
fn parse_label(token: &str) -> Option<i32> {
    token.parse().ok().or_else(|| {
        let v: f64 = token.parse().ok()?;
        (v.fract() == 0.0 && v.abs() <= i32::MAX as f64).then_some(v as i32)
    })
}

fn split_by_qid(
    path: &Path,
    rows: Vec<(Option<String>, LetorRow)>,
) -> Result<Vec<LetorQuery>, ParseError> {
    let mut queries: Vec<LetorQuery> = Vec::new();
    let mut finished: HashSet<String> = HashSet::new();
    for (qid, row) in rows {
        let Some(qid) = qid else {
            return Err(ParseError::syntax(
                path,
                row.line,
                "row has no `qid:` and no group file was given: cannot tell queries apart",
            ));
        };
        match queries.last_mut() {
            Some(q) if q.qid == qid => q.rows.push(row),
            _ => {
                if finished.contains(&qid) {
                    return Err(ParseError::syntax(
                        path,
                        row.line,
                        format!("query `{qid}` appears again after other queries; a query's rows must be contiguous"),
                    ));
                }
                if let Some(previous) = queries.last() {
                    finished.insert(previous.qid.clone());
                }
                queries.push(LetorQuery {
                    qid,
                    rows: vec![row],
                });
            }
        }
    }
    Ok(queries)
}

fn split_by_group_file(
    data: &Path,
    groups: &Path,
    rows: Vec<(Option<String>, LetorRow)>,
) -> Result<Vec<LetorQuery>, ParseError> {
    let total = rows.len();
    let mut sizes: Vec<(usize, usize)> = Vec::new();
    let mut sum = 0usize;
    let mut last_line = 0;
    for_each_line(groups, |n, line| {
        last_line = n;
        let token = line.trim();
        if token.is_empty() {
            return Ok(());
        }
        let size = match token.parse::<usize>() {
            Ok(s) if s > 0 => s,
            _ => {
                return Err(ParseError::syntax(
                    groups,
                    n,
                    format!("group size `{token}` is not a positive integer"),
                ))
            }
        };
        sum += size;
        if sum > total {
            return Err(ParseError::syntax(
                groups,
                n,
                format!(
                    "group sizes add up to {sum} by this line, but {} has only {total} rows",
                    data.display()
                ),
            ));
        }
        sizes.push((size, n));
        Ok(())
    })?;
    if sum < total {
        return Err(ParseError::syntax(
            groups,
            last_line.max(1),
            format!(
                "group sizes add up to {sum}, but {} has {total} rows",
                data.display()
            ),
        ));
    }
    let mut rows = rows.into_iter();
    let mut queries = Vec::with_capacity(sizes.len());
    for (position, (size, _)) in sizes.into_iter().enumerate() {
        let group: Vec<(Option<String>, LetorRow)> = rows.by_ref().take(size).collect();
        let qid = group[0].0.clone();
        if let Some((_, row)) = group.iter().find(|(q, _)| *q != qid) {
            return Err(ParseError::syntax(
                data,
                row.line,
                format!(
                    "row's `qid:` differs from the rest of its group (group {} in {})",
                    position + 1,
                    groups.display()
                ),
            ));
        }
        queries.push(LetorQuery {
            qid: qid.unwrap_or_else(|| (position + 1).to_string()),
            rows: group.into_iter().map(|(_, r)| r).collect(),
        });
    }
    Ok(queries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{evaluate, EvalOptions, Gain, NoRelevant, Run, RunOrder};
    use std::io::Write;

    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/letor-lightgbm");

    fn data(file: &str) -> PathBuf {
        Path::new(DIR).join(file)
    }

    fn temp(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    fn error(result: Result<LetorSet, ParseError>, file: &tempfile::NamedTempFile) -> String {
        let message = result.unwrap_err().to_string();
        let prefix = format!("{}:", file.path().display());
        message
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("error names the file: {message}"))
            .to_string()
    }

    #[test]
    fn reads_lightgbm_example_with_group_files() {
        let train = data("rank.train");
        let groups = group_file_for(&train).expect("rank.train.query exists");
        let set = read(&train, Some(&groups)).unwrap();
        assert_eq!((set.num_rows(), set.queries.len()), (3005, 201));
        assert_eq!(set.num_features, 300);
        assert_eq!(set.queries[0].qid, "1");
        assert_eq!(set.queries[0].rows.len(), 1);
        assert_eq!(set.queries[1].rows.len(), 13);
        let first = &set.queries[0].rows[0];
        assert_eq!(first.label, 0);
        assert_eq!(&first.features[..2], &[(10, 0.89), (11, 0.75)]);
        assert_eq!(first.dense(300)[9], 0.89);
        assert_eq!(first.dense(300)[0], 0.0);
        assert!(set
            .queries
            .iter()
            .flat_map(|q| &q.rows)
            .all(|r| (0..=4).contains(&r.label)));
        let test = read(&data("rank.test"), Some(&data("rank.test.query"))).unwrap();
        assert_eq!((test.num_rows(), test.queries.len()), (768, 50));
    }

    /// The data README's unlearned baseline, under LightGBM's convention (gain 2^label − 1,
    /// all-zero queries count 1): rows in file order give NDCG@5 = 0.478 on rank.test.
    #[test]
    fn file_order_ndcg_matches_the_published_baseline() {
        let test = read(&data("rank.test"), Some(&data("rank.test.query"))).unwrap();
        let mut run = Run::new();
        for q in &test.queries {
            for i in 0..q.rows.len() {
                run.push(&q.qid, i.to_string(), -(i as f64));
            }
        }
        let options = EvalOptions {
            cutoffs: vec![5],
            gain: Gain::Exponential,
            no_relevant: NoRelevant::NdcgOne,
            order: RunOrder::AsGiven,
            ..EvalOptions::default()
        };
        let report = evaluate(&run, &test.qrels(), &options).unwrap();
        assert_eq!(report.queries, 50);
        let ndcg5 = report.mean("ndcg@5").unwrap();
        assert!((ndcg5 - 0.478).abs() < 0.0005, "{ndcg5}");
    }

    #[test]
    fn qid_rows_and_comments() {
        let f = temp(
            "# header comment\n\
             2 qid:7 1:0.5 3:1e-2 # doc-a\n\
             0 qid:7 2:1\n\
             \n\
             1 qid:3 3:-2 1:4 #\n",
        );
        let set = read(f.path(), None).unwrap();
        assert_eq!(set.queries.len(), 2);
        assert_eq!(set.num_features, 3);
        assert_eq!(set.queries[0].qid, "7");
        assert_eq!(set.queries[0].rows[0].comment.as_deref(), Some("doc-a"));
        assert_eq!(set.queries[0].rows[0].features, [(1, 0.5), (3, 0.01)]);
        assert_eq!(set.queries[1].rows[0].features, [(1, 4.0), (3, -2.0)]);
        assert_eq!(set.queries[1].rows[0].comment, None);
        assert_eq!(set.queries[1].rows[0].line, 5);
        assert_eq!(set.qrels().grade("7", "0"), Some(2));
    }

    #[test]
    fn bad_rows_name_file_and_line() {
        let cases = [
            (
                "1 qid:1 1:0.5\nx qid:1 1:1\n",
                "2: label `x` is not an integer grade",
            ),
            (
                "1.5 qid:1 1:0.5\n",
                "1: label `1.5` is not an integer grade",
            ),
            ("1 qid:1 abc\n", "1: `abc` is not `index:value`"),
            ("1 qid:1 0:1\n", "1: feature index 0: indices start at 1"),
            (
                "1 qid:1 -3:1\n",
                "1: feature index `-3` in `-3:1` is not a positive integer",
            ),
            (
                "1 qid:1 3:nan\n",
                "1: value `nan` of feature 3 is not a finite number",
            ),
            (
                "1 qid:1 3:\n",
                "1: value `` of feature 3 is not a finite number",
            ),
            ("1 qid:1 3:1 3:2\n", "1: feature 3 is given twice"),
            ("1 1:1 qid:1\n", "1: `qid:` must come right after the label"),
            ("1 qid: 1:1\n", "1: empty `qid:`"),
            (
                "1 qid:1 1:1\n0 1:1\n",
                "2: row has no `qid:` and no group file was given: cannot tell queries apart",
            ),
            (
                "1 qid:1 1:1\n0 qid:2 1:1\n0 qid:1 1:1\n",
                "3: query `1` appears again after other queries; a query's rows must be contiguous",
            ),
        ];
        for (text, expected) in cases {
            let f = temp(text);
            assert_eq!(error(read(f.path(), None), &f), expected, "{text:?}");
        }
        assert_eq!(parse_label("2.0"), Some(2));
        assert_eq!(parse_label("+1"), Some(1));
    }

    /// A huge index is refused by name before any dense row is allocated (it used to abort
    /// `eval-letor` with a 103 GB allocation).
    #[test]
    fn feature_index_above_the_limit_is_refused() {
        let f = temp("1 qid:1 1:1\n0 qid:1 4294967295:1\n");
        assert_eq!(
            error(read(f.path(), None), &f),
            "2: feature index 4294967295 is above the limit of 10000 \
             (rows are stored densely, as long as the largest index)"
        );
        let f = temp("1 qid:1 2000000:1\n");
        assert!(error(read(f.path(), None), &f).starts_with("1: feature index 2000000"));
        let f = temp(&format!("1 qid:1 {MAX_FEATURE_INDEX}:1\n"));
        assert_eq!(read(f.path(), None).unwrap().num_features, 10_000);
    }

    #[test]
    fn group_files_must_add_up() {
        let rows = temp("1 1:1\n0 1:1\n0 2:1\n");
        let check = |groups: &str, expected: &str| {
            let g = temp(groups);
            let message = read(rows.path(), Some(g.path())).unwrap_err().to_string();
            let expected = expected.replace("DATA", &rows.path().display().to_string());
            assert_eq!(
                message,
                format!("{}:{expected}", g.path().display()),
                "{groups:?}"
            );
        };
        check(
            "2\n2\n",
            "2: group sizes add up to 4 by this line, but DATA has only 3 rows",
        );
        check("1\n1\n", "2: group sizes add up to 2, but DATA has 3 rows");
        check("", "1: group sizes add up to 0, but DATA has 3 rows");
        check("1\nx\n", "2: group size `x` is not a positive integer");
        check("0\n3\n", "1: group size `0` is not a positive integer");
        let g = temp("1\n\n2\n");
        let set = read(rows.path(), Some(g.path())).unwrap();
        assert_eq!(
            set.queries.iter().map(|q| q.rows.len()).collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(set.queries[1].qid, "2");
        // qid: inside a group must agree.
        let rows = temp("1 qid:a 1:1\n0 qid:b 1:1\n");
        let g = temp("2\n");
        let message = read(rows.path(), Some(g.path())).unwrap_err().to_string();
        assert!(
            message.starts_with(&format!(
                "{}:2: row's `qid:` differs",
                rows.path().display()
            )),
            "{message}"
        );
    }
}
