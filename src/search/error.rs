//! The search pipeline's error: what every front end gets back from a search, an evaluation
//! or a training window. A caller's mistake names the parameter at fault (`GET /search`'s
//! name for it), which the HTTP API answers as a 400 with `error.field` and the command line
//! as a usage error (exit 2).

use crate::error::{ErrorKind, Kinded};
use crate::text::query::QueryError;
use crate::text::search::TextError;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The query text cannot be searched (empty, too long, too many terms).
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error("{field}: {message}")]
    Param {
        field: &'static str,
        message: String,
    },
    /// Part of a sharded collection is down and partial answers are not allowed.
    #[error("{0}")]
    Unavailable(String),
    /// The search's deadline passed; the step it stopped at is named.
    #[error("the search took longer than its time budget and was stopped at {0}")]
    OverBudget(&'static str),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<tantivy::TantivyError> for SearchError {
    fn from(e: tantivy::TantivyError) -> Self {
        SearchError::Internal(e.into())
    }
}

impl From<TextError> for SearchError {
    fn from(e: TextError) -> Self {
        match e {
            TextError::Query(e) => SearchError::Query(e),
            TextError::Field(message) => SearchError::Param {
                field: "field",
                message,
            },
            TextError::Index(e) => e.into(),
        }
    }
}

impl Kinded for SearchError {
    fn kind(&self) -> ErrorKind {
        match self {
            SearchError::Query(_) | SearchError::Param { .. } => ErrorKind::Invalid,
            SearchError::Unavailable(_) | SearchError::OverBudget(_) => ErrorKind::Unavailable,
            SearchError::Internal(_) => ErrorKind::Internal,
        }
    }
}

/// The kind of the first cause in `e`'s chain whose type knows its kind: the search
/// pipeline's errors and those of the layers below ([`crate::error::known_kind`]); internal
/// when none does.
pub(crate) fn kind_of(e: &anyhow::Error) -> ErrorKind {
    e.chain()
        .find_map(|cause| match cause.downcast_ref::<SearchError>() {
            Some(e) => Some(e.kind()),
            None => crate::error::known_kind(cause),
        })
        .unwrap_or(ErrorKind::Internal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Invalid;
    use crate::rerank::RerankError;

    #[test]
    fn the_first_kinded_cause_decides_and_unknown_errors_are_internal() {
        let e = anyhow::Error::from(Invalid("bad k".into())).context("query 7");
        assert_eq!(kind_of(&e), ErrorKind::Invalid);
        assert_eq!(format!("{e:#}"), "query 7: bad k");
        let io = std::io::Error::other("disk full");
        let e = anyhow::Error::from(io).context("cannot write x");
        assert_eq!(kind_of(&e), ErrorKind::Internal);
        let internal = SearchError::Internal(anyhow::anyhow!("corrupt segment"));
        assert_eq!(kind_of(&anyhow::Error::from(internal)), ErrorKind::Internal);
        let param = SearchError::Param {
            field: "k",
            message: "k must be between 1 and 1000".into(),
        };
        assert_eq!(kind_of(&anyhow::Error::from(param)), ErrorKind::Invalid);
        let field = SearchError::from(TextError::Field("unknown field `x`".into()));
        assert!(matches!(field, SearchError::Param { field: "field", .. }));
        let text = TextError::Query(QueryError::Empty);
        assert_eq!(kind_of(&anyhow::Error::from(text)), ErrorKind::Invalid);
        let cancelled = anyhow::Error::from(RerankError::Cancelled);
        assert_eq!(kind_of(&cancelled), ErrorKind::Cancelled);
        assert_eq!(ErrorKind::Cancelled.exit_code(), 130);
        assert_eq!(ErrorKind::Internal.exit_code(), 1);
        assert_eq!(ErrorKind::NotFound.http_status(), 404);
        let missing = anyhow::Error::from(crate::error::NotFound("no model m1".into()));
        assert_eq!(kind_of(&missing).exit_code(), 2);
    }
}
