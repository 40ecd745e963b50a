//! The one error type of every text-format reader (TREC runs and qrels, Cranfield, LETOR).
//!
//! A reader error always says which file and which line, and what was expected there, so a user
//! can open the file at the right place without guessing (ripgrep-style messages).

use std::fmt;
use std::path::{Path, PathBuf};

/// A file could not be read, or one of its lines is malformed.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        message: String,
    },
}

impl ParseError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        ParseError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn syntax(path: &Path, line: usize, message: impl fmt::Display) -> Self {
        ParseError::Syntax {
            path: path.to_path_buf(),
            line,
            message: message.to_string(),
        }
    }
}

/// Reads `path` line by line, calling `each(line_number, line)` with the trailing `\r` of CRLF
/// files removed. Stops at the first error.
pub(crate) fn for_each_line(
    path: &Path,
    mut each: impl FnMut(usize, &str) -> Result<(), ParseError>,
) -> Result<(), ParseError> {
    let file = std::fs::File::open(path).map_err(|e| ParseError::io(path, e))?;
    for_each_line_in(std::io::BufReader::new(file), path, &mut each)
}

/// As [`for_each_line`], over any reader; `path` only names the source in errors.
pub(crate) fn for_each_line_in(
    reader: impl std::io::BufRead,
    path: &Path,
    mut each: impl FnMut(usize, &str) -> Result<(), ParseError>,
) -> Result<(), ParseError> {
    for (index, line) in reader.lines().enumerate() {
        let line_number = index + 1;
        let line = line.map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => {
                ParseError::syntax(path, line_number, "line is not valid UTF-8")
            }
            _ => ParseError::io(path, e),
        })?;
        each(line_number, line.strip_suffix('\r').unwrap_or(&line))?;
    }
    Ok(())
}
