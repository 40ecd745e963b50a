//! A sentence-transformers model directory, as the Python library saves it and the Hugging Face
//! hub serves it:
//!
//! ```text
//! config.json                 the transformer (BERT) configuration
//! model.safetensors           its weights
//! tokenizer.json              the tokenizer (Hugging Face `tokenizers` format)
//! modules.json                the module pipeline; names the pooling module's directory
//! 1_Pooling/config.json       how token vectors become one sentence vector
//! sentence_bert_config.json   max_seq_length (optional: else the model's position table)
//! ```

use std::path::{Path, PathBuf};

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

use super::error::{EmbedError, Layout};
use super::pooling::Pooling;

/// What a model directory holds, read and checked, the weights and tokenizer not yet loaded.
pub struct ModelDirectory {
    pub config: Config,
    pub pooling: Pooling,
    /// Texts are cut at this many tokens, special tokens included.
    pub max_seq_length: usize,
    pub tokenizer_path: PathBuf,
    pub weights_path: PathBuf,
}

impl ModelDirectory {
    pub fn read(dir: &Path) -> Result<ModelDirectory, EmbedError> {
        if !dir.is_dir() {
            return Err(EmbedError::Missing {
                path: dir.to_path_buf(),
                what: "not a directory",
                layout: Layout::SentenceTransformers,
            });
        }
        let config_path = dir.join("config.json");
        let config: Config = read_json(
            &config_path,
            "the transformer configuration",
            Layout::SentenceTransformers,
        )?;
        if !config
            .hidden_size
            .is_multiple_of(config.num_attention_heads)
        {
            return Err(EmbedError::Corrupt {
                path: config_path,
                reason: format!(
                    "hidden_size {} is not a multiple of num_attention_heads {}",
                    config.hidden_size, config.num_attention_heads
                ),
            });
        }
        let pooling = read_pooling(dir, config.hidden_size)?;
        let max_seq_length = read_max_seq_length(dir)?
            .unwrap_or(config.max_position_embeddings)
            .min(config.max_position_embeddings);
        let tokenizer_path = dir.join("tokenizer.json");
        let weights_path = dir.join("model.safetensors");
        for (path, what) in [
            (&tokenizer_path, "the tokenizer"),
            (&weights_path, "the weights"),
        ] {
            if !path.is_file() {
                return Err(EmbedError::Missing {
                    path: path.clone(),
                    what,
                    layout: Layout::SentenceTransformers,
                });
            }
        }
        Ok(ModelDirectory {
            config,
            pooling,
            max_seq_length,
            tokenizer_path,
            weights_path,
        })
    }
}

/// The tokenizer of `path`, cutting texts at `max_seq_length` tokens and never padding (the
/// embedder pads a batch itself, to its longest text).
pub fn load_tokenizer(path: &Path, max_seq_length: usize) -> Result<Tokenizer, EmbedError> {
    let corrupt = |e: &dyn std::fmt::Display| EmbedError::Corrupt {
        path: path.to_path_buf(),
        reason: format!("not a tokenizer: {e}"),
    };
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| corrupt(&e))?;
    tokenizer
        .with_padding(None)
        .with_truncation(Some(TruncationParams {
            max_length: max_seq_length,
            ..TruncationParams::default()
        }))
        .map_err(|e| corrupt(&e))?;
    Ok(tokenizer)
}

/// The transformer with the weights of `path` (read into memory: no mapping of a file that
/// another process could truncate under us).
pub fn load_weights(path: &Path, config: &Config) -> Result<BertModel, EmbedError> {
    let corrupt = |e: &dyn std::fmt::Display| EmbedError::Corrupt {
        path: path.to_path_buf(),
        reason: format!("not the weights of the model config.json describes: {e}"),
    };
    let bytes = std::fs::read(path).map_err(|e| corrupt(&e))?;
    let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &Device::Cpu)
        .map_err(|e| corrupt(&e))?;
    BertModel::load(vb, config).map_err(|e| corrupt(&e))
}

/// The pooling module's configuration: the directory modules.json names for
/// `sentence_transformers.models.Pooling`, else `1_Pooling`.
fn read_pooling(dir: &Path, hidden_size: usize) -> Result<Pooling, EmbedError> {
    #[derive(serde::Deserialize)]
    struct Module {
        path: String,
        #[serde(rename = "type")]
        kind: String,
    }
    let modules_path = dir.join("modules.json");
    let pooling_dir = if modules_path.is_file() {
        let modules: Vec<Module> = read_json(
            &modules_path,
            "the module list",
            Layout::SentenceTransformers,
        )?;
        let pooling = modules
            .into_iter()
            .find(|m| m.kind.ends_with(".Pooling"))
            .ok_or_else(|| EmbedError::Corrupt {
                path: modules_path.clone(),
                reason: "no sentence_transformers.models.Pooling module".into(),
            })?;
        pooling.path
    } else {
        "1_Pooling".to_string()
    };
    let path = dir.join(pooling_dir).join("config.json");
    let pooling = Pooling::from_config(&read_json(
        &path,
        "the pooling configuration",
        Layout::SentenceTransformers,
    )?)
    .map_err(|what| EmbedError::Unsupported {
        path: path.clone(),
        what,
    })?;
    if let Some(d) = pooling.dim {
        if d != hidden_size {
            return Err(EmbedError::Corrupt {
                path,
                reason: format!(
                    "word_embedding_dimension {d} differs from config.json's hidden_size {hidden_size}"
                ),
            });
        }
    }
    Ok(pooling)
}

/// sentence_bert_config.json's `max_seq_length`, when the file is there.
fn read_max_seq_length(dir: &Path) -> Result<Option<usize>, EmbedError> {
    #[derive(serde::Deserialize)]
    struct SentenceBertConfig {
        max_seq_length: Option<usize>,
    }
    let path = dir.join("sentence_bert_config.json");
    if !path.is_file() {
        return Ok(None);
    }
    let config: SentenceBertConfig = read_json(
        &path,
        "the sentence-transformers configuration",
        Layout::SentenceTransformers,
    )?;
    Ok(config.max_seq_length)
}

/// The JSON file `path` of a model directory of the given layout.
pub(super) fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &'static str,
    layout: Layout,
) -> Result<T, EmbedError> {
    let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => EmbedError::Missing {
            path: path.to_path_buf(),
            what,
            layout,
        },
        _ => EmbedError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("cannot read {what}: {e}"),
        },
    })?;
    serde_json::from_str(&text).map_err(|e| EmbedError::Corrupt {
        path: path.to_path_buf(),
        reason: format!("not {what}: {e}"),
    })
}
