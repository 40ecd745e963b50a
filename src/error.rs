//! Errors by kind: whether a failure is the caller's (invalid input, something not found, a
//! conflict with the current state), a cancellation, or internal. Every library error type
//! says which ([`Kinded`]); front ends turn the kind into an HTTP status or an exit code
//! ([`ErrorKind::exit_code`], [`ErrorKind::http_status`]) and keep the error chain for the
//! message. An error of no known type is internal: a failure is never blamed on the user by
//! accident.
//!
//! Errors travel as `anyhow::Error` through the command line and the jobs, so
//! `crate::search::error::kind_of` walks the chain for the first cause whose type knows its
//! kind, the types of this layer and below through [`known_kind`].

use crate::corpus::RecordError;
use crate::eval::ParseError;
use crate::rerank::RerankError;
use crate::text::query::QueryError;
use crate::text::TextError;

/// What kind of failure an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The input or a parameter is wrong; the message says which and where.
    Invalid,
    /// Something the request names does not exist.
    NotFound,
    /// The request is valid but clashes with the current state.
    Conflict,
    /// The work was cancelled on request.
    Cancelled,
    /// A part the answer needs is down (a cluster shard without a live replica); retrying
    /// later may succeed.
    Unavailable,
    /// Anything else: a bug, a full disk, a dead database.
    Internal,
}

impl ErrorKind {
    /// The command line's exit code (INTERFACE.md): 2 for the caller's errors, 1 otherwise
    /// (130, as for SIGINT, for a cancellation).
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Invalid | ErrorKind::NotFound | ErrorKind::Conflict => 2,
            ErrorKind::Cancelled => 130,
            ErrorKind::Unavailable | ErrorKind::Internal => 1,
        }
    }

    /// The HTTP status of an error of this kind.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::Invalid => 400,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict | ErrorKind::Cancelled => 409,
            ErrorKind::Unavailable => 503,
            ErrorKind::Internal => 500,
        }
    }
}

/// An error type that knows its kind.
pub(crate) trait Kinded {
    fn kind(&self) -> ErrorKind;
}

/// Invalid input, described by its message (which says what and where).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// Something named that does not exist.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct NotFound(pub String);

/// A valid request that clashes with the current state.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Conflict(pub String);

impl Kinded for Invalid {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Invalid
    }
}

impl Kinded for NotFound {
    fn kind(&self) -> ErrorKind {
        ErrorKind::NotFound
    }
}

impl Kinded for Conflict {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Conflict
    }
}

impl Kinded for TextError {
    fn kind(&self) -> ErrorKind {
        match self {
            TextError::Query(_) | TextError::Field(_) => ErrorKind::Invalid,
            TextError::Index(_) => ErrorKind::Internal,
        }
    }
}

impl Kinded for crate::text::WriterBusy {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Unavailable
    }
}

impl Kinded for QueryError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Invalid
    }
}

impl Kinded for RerankError {
    fn kind(&self) -> ErrorKind {
        match self {
            RerankError::ModelFile { .. }
            | RerankError::Invalid(_)
            | RerankError::MissingFeatures { .. }
            | RerankError::Pairwise(_) => ErrorKind::Invalid,
            RerankError::Cancelled => ErrorKind::Cancelled,
            RerankError::Write { .. } => ErrorKind::Internal,
        }
    }
}

impl Kinded for RecordError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Invalid
    }
}

impl Kinded for crate::eval::EvalError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Invalid
    }
}

impl Kinded for ParseError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Invalid
    }
}

impl Kinded for crate::graph::GraphError {
    fn kind(&self) -> ErrorKind {
        use crate::graph::GraphError as G;
        match self {
            // Inputs the user named: a graph file, a parameter, a node, a host file.
            G::Parse { .. }
            | G::Io { .. }
            | G::NodeOutOfRange { .. }
            | G::InvalidParameter { .. }
            | G::TooLarge { .. }
            | G::Format { .. } => ErrorKind::Invalid,
            G::Cancelled => ErrorKind::Cancelled,
            // A stored file of ours, or a job whose peers failed: not the user's input.
            G::Sidecar { .. } | G::Job(_) => ErrorKind::Internal,
        }
    }
}

impl Kinded for crate::embed::EmbedError {
    fn kind(&self) -> ErrorKind {
        use crate::embed::{EmbedError as E, FetchError as F};
        match self {
            E::Missing { .. }
            | E::Corrupt { .. }
            | E::TokenizerMismatch { .. }
            | E::Unsupported { .. } => ErrorKind::Invalid,
            E::Inference(_) | E::Write { .. } => ErrorKind::Internal,
            // No cache directory or no pip: the user's set-up, fixed by pointing at a directory.
            E::Fetch(F::NoCacheDir | F::NoPip { .. }) => ErrorKind::Invalid,
            E::Fetch(F::Download { .. }) => ErrorKind::Unavailable,
            E::Fetch(F::Checksum { .. } | F::Io { .. }) => ErrorKind::Internal,
        }
    }
}

impl Kinded for crate::dense::DenseError {
    fn kind(&self) -> ErrorKind {
        match self {
            crate::dense::DenseError::Embed(e) => e.kind(),
            // A damaged vector file or an unreadable index is the machine's state, not the
            // caller's request.
            _ => ErrorKind::Internal,
        }
    }
}

/// The kind of `cause` when its type is one of this layer's or below that knows its kind.
pub(crate) fn known_kind(cause: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    macro_rules! try_kind {
        ($($t:ty),*) => {
            $(if let Some(k) = cause.downcast_ref::<$t>() {
                return Some(k.kind());
            })*
        };
    }
    try_kind!(
        Invalid,
        NotFound,
        Conflict,
        crate::text::WriterBusy,
        TextError,
        QueryError,
        RerankError,
        RecordError,
        ParseError,
        crate::eval::EvalError,
        crate::graph::GraphError,
        crate::embed::EmbedError,
        crate::dense::DenseError
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_failure_of_the_trainer_is_not_the_users_fault() {
        let e = RerankError::Write {
            path: "/full/disk/m.json".into(),
            message: "No space left on device".into(),
        };
        assert_eq!(known_kind(&e), Some(ErrorKind::Internal));
    }
}
