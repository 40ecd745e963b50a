//! The embedder's errors: each names the file at fault and says what was expected. Their kinds
//! (the user's input or not) are given where the kinds are defined (`crate::error`), so this
//! layer does not import the one above it.

use std::path::PathBuf;

use super::default_model::FetchError;

/// Why an embedder could not be loaded or could not embed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("{path}: missing ({what}); {layout}")]
    Missing {
        path: PathBuf,
        what: &'static str,
        layout: Layout,
    },
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("{path}: the tokenizer does not match the model: it knows {tokenizer_vocab} tokens, the model has vectors for {model_vocab}")]
    TokenizerMismatch {
        path: PathBuf,
        tokenizer_vocab: usize,
        model_vocab: usize,
    },
    #[error("{path}: {what} is not supported")]
    Unsupported { path: PathBuf, what: String },
    #[error("{path}: cannot write: {reason}")]
    Write { path: PathBuf, reason: String },
    #[error("embedding failed: {0}")]
    Inference(String),
    #[error(transparent)]
    Fetch(#[from] FetchError),
}

/// The kind of model directory a file is missing from, and what such a directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A transformer ([`super::Embedder`]).
    SentenceTransformers,
    /// A static embedding table ([`super::StaticEmbedder`]).
    Model2Vec,
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layout::SentenceTransformers => "a sentence-transformers model directory holds config.json, model.safetensors, tokenizer.json and a pooling configuration (1_Pooling/config.json, named by modules.json)",
            Layout::Model2Vec => "a Model2Vec model directory holds config.json, model.safetensors (the `embeddings` table) and tokenizer.json",
        })
    }
}

impl From<candle_core::Error> for EmbedError {
    fn from(e: candle_core::Error) -> Self {
        EmbedError::Inference(e.to_string())
    }
}
