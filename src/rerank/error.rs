//! The one error type of the reranker: every message says what was wrong and where.

use std::path::PathBuf;

use crate::pairwise::PairwiseError;

#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    /// A model file that cannot be used: unreadable, truncated, wrong version, bad numbers.
    #[error("model file {}: {message}", path.display())]
    ModelFile { path: PathBuf, message: String },
    /// Input data or parameters that make no sense (the message names them).
    #[error("{0}")]
    Invalid(String),
    /// The model needs features the caller does not provide.
    #[error("model needs feature{} {} which the input does not have", if missing.len() == 1 { "" } else { "s" }, missing.join(", "))]
    MissingFeatures { missing: Vec<String> },
    #[error(transparent)]
    Pairwise(#[from] PairwiseError),
    /// Training was cancelled before any epoch finished (nothing to keep).
    #[error("training cancelled before the first epoch finished")]
    Cancelled,
    #[error("cannot write {}: {message}", path.display())]
    Write { path: PathBuf, message: String },
}

impl RerankError {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        RerankError::Invalid(message.into())
    }
}
