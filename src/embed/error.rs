//! The embedder's errors: each names the file at fault and says what was expected. Their kinds
//! (the user's input or not) are given where the kinds are defined (`crate::error`), so this
//! layer does not import the one above it.

use std::path::PathBuf;

use super::default_model::FetchError;

/// Why an embedder could not be loaded or could not embed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("{path}: missing ({what}); a sentence-transformers model directory holds config.json, model.safetensors, tokenizer.json and a pooling configuration (1_Pooling/config.json, named by modules.json)")]
    Missing { path: PathBuf, what: &'static str },
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("{path}: the tokenizer does not match the model: it knows {tokenizer_vocab} tokens, the model's config.json {model_vocab}")]
    TokenizerMismatch {
        path: PathBuf,
        tokenizer_vocab: usize,
        model_vocab: usize,
    },
    #[error("{path}: {what} is not supported")]
    Unsupported { path: PathBuf, what: String },
    #[error("embedding failed: {0}")]
    Inference(String),
    #[error(transparent)]
    Fetch(#[from] FetchError),
}

impl From<candle_core::Error> for EmbedError {
    fn from(e: candle_core::Error) -> Self {
        EmbedError::Inference(e.to_string())
    }
}
