//! Sessions over a LETOR file's rows: what `rankd simulate-clicks` writes and
//! `rankd eval-letor --train-clicks` reads (README, "Learning from clicks").
//!
//! One JSON object per line, `{"qid":"10","shown":[3,0,7],"clicks":[0]}`: `shown` lists the
//! documents in the order shown (rank 1 first), `clicks` the clicked ones; both are 0-based row
//! indices of the query's documents in the training file, in file order. Naming documents by
//! their row keeps the file independent of any document id the LETOR file may lack, and lets a
//! session be checked against the file it belongs to ([`check`]).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Session;
use crate::error::Invalid;
use crate::rerank::RankSet;

/// One result list of a LETOR query and its clicks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowSession {
    pub qid: String,
    /// Row indices within the query, in the order shown.
    pub shown: Vec<usize>,
    /// Row indices within the query that were clicked (a subset of `shown`).
    pub clicks: Vec<usize>,
}

impl RowSession {
    /// The session as the click models read it: the query is the qid, a document its row.
    pub fn to_session(&self) -> Session {
        Session {
            query: self.qid.clone(),
            shown: self.shown.iter().map(|r| r.to_string()).collect(),
            clicks: self.shown.iter().map(|r| self.clicks.contains(r)).collect(),
        }
    }

    /// `(0-based rank, row)` of each click.
    pub fn clicked_ranks(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.shown
            .iter()
            .enumerate()
            .filter(|(_, r)| self.clicks.contains(r))
            .map(|(k, &r)| (k, r))
    }
}

/// Reads a sessions file; an unreadable line is an error naming the file and the line.
pub fn read(path: &Path) -> Result<Vec<RowSession>, Invalid> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Invalid(format!("cannot read {}: {e}", path.display())))?;
    let mut sessions = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let s: RowSession = serde_json::from_str(line).map_err(|e| {
            Invalid(format!(
                "{}:{}: not a session ({e}); expected \
                 {{\"qid\":\"10\",\"shown\":[3,0,7],\"clicks\":[0]}}",
                path.display(),
                i + 1
            ))
        })?;
        sessions.push(s);
    }
    if sessions.is_empty() {
        return Err(Invalid(format!("{} holds no session", path.display())));
    }
    Ok(sessions)
}

/// Writes sessions, one per line, atomically (temporary file, fsync, rename).
pub fn write(path: &Path, sessions: &[RowSession]) -> anyhow::Result<()> {
    let mut text = String::new();
    for s in sessions {
        text.push_str(&serde_json::to_string(s)?);
        text.push('\n');
    }
    crate::durable::write_atomic(path, text.as_bytes())
}

/// Checks every session against the training set it describes: a known qid, rows within the
/// query, no row shown twice, clicks among the shown rows. Errors name the session (1-based,
/// as the file's line when it has no blank lines).
pub fn check(sessions: &[RowSession], set: &RankSet) -> Result<(), Invalid> {
    let sizes: HashMap<&str, usize> = set
        .queries
        .iter()
        .map(|q| (q.qid.as_str(), q.rows.len()))
        .collect();
    for (i, s) in sessions.iter().enumerate() {
        let n = i + 1;
        let Some(&size) = sizes.get(s.qid.as_str()) else {
            return Err(Invalid(format!(
                "session {n}: query `{}` is not in the training file",
                s.qid
            )));
        };
        let mut seen = HashSet::new();
        for &r in &s.shown {
            if r >= size {
                return Err(Invalid(format!(
                    "session {n}: row {r} is beyond query `{}`'s {size} rows",
                    s.qid
                )));
            }
            if !seen.insert(r) {
                return Err(Invalid(format!("session {n}: row {r} is shown twice")));
            }
        }
        if let Some(r) = s.clicks.iter().find(|r| !seen.contains(r)) {
            return Err(Invalid(format!(
                "session {n}: row {r} is clicked but not shown"
            )));
        }
    }
    Ok(())
}

/// A session for tests: `qid`'s rows `shown` in that order, `clicks` the rows clicked.
#[cfg(test)]
pub(crate) fn test_session(qid: &str, shown: &[usize], clicks: &[usize]) -> RowSession {
    RowSession {
        qid: qid.into(),
        shown: shown.to_vec(),
        clicks: clicks.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::test_session as session;
    use super::*;
    use crate::rerank::QueryGroup;

    fn set() -> RankSet {
        RankSet::new(
            vec!["f1".into()],
            vec![0.0; 5],
            vec![0, 1, 0, 2, 0],
            vec![QueryGroup::new("a", 0..3), QueryGroup::new("b", 3..5)],
            None,
        )
        .unwrap()
    }

    #[test]
    fn a_file_round_trips_and_bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let sessions = vec![session("a", &[2, 0, 1], &[0]), session("b", &[1, 0], &[])];
        write(&path, &sessions).unwrap();
        assert_eq!(read(&path).unwrap(), sessions);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(r#"{"qid":"a","shown":[2,0,1],"clicks":[0]}"#));

        std::fs::write(
            &path,
            "{\"qid\":\"a\",\"shown\":[0],\"clicks\":[]}\n\n{\"qid\":1}\n",
        )
        .unwrap();
        let e = read(&path).unwrap_err().0;
        assert!(e.contains("s.jsonl:3:"), "{e}");
        std::fs::write(&path, "\n").unwrap();
        assert!(read(&path).unwrap_err().0.contains("no session"));
    }

    #[test]
    fn sessions_are_checked_against_the_training_file() {
        let set = set();
        assert!(check(&[session("a", &[2, 0, 1], &[0, 1])], &set).is_ok());
        for (bad, want) in [
            (session("c", &[0], &[]), "query `c` is not in"),
            (
                session("b", &[2], &[]),
                "row 2 is beyond query `b`'s 2 rows",
            ),
            (session("a", &[1, 1], &[]), "row 1 is shown twice"),
            (
                session("a", &[1, 2], &[0]),
                "row 0 is clicked but not shown",
            ),
        ] {
            let e = check(&[session("a", &[0], &[]), bad], &set).unwrap_err().0;
            assert!(e.starts_with("session 2: ") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn a_session_reads_as_a_click_models_session() {
        let s = session("a", &[2, 0, 1], &[0]).to_session();
        assert_eq!(s.shown, ["2", "0", "1"]);
        assert_eq!(s.clicks, [false, true, false]);
        assert_eq!(
            session("a", &[2, 0, 1], &[1, 2])
                .clicked_ranks()
                .collect::<Vec<_>>(),
            [(0, 2), (2, 1)]
        );
    }
}
