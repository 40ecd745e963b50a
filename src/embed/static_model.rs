//! Static embeddings: a text's vector is the mean of one stored vector per token, with no
//! transformer at query time, so a query costs microseconds instead of the transformer's
//! milliseconds ([`super::Embedder`]). The table is distilled from a sentence-transformer
//! ([`super::distill`]): Model2Vec's method (Tulkens & van Dongen, *Model2Vec: Fast State-of-
//! the-Art Static Embeddings*, 2024, <https://github.com/MinishLab/model2vec>).
//!
//! This module reads the directory the Python `model2vec` package writes and reads
//! (`model2vec/persistence/persistence.py`, `save_pretrained` / `load_pretrained`):
//!
//! ```text
//! config.json         normalize (default false), max_length (default 512; null: no limit)
//! model.safetensors   `embeddings` (rows × dim: float32, float16, bfloat16, float64 or int8);
//!                     with vocabulary quantization also `mapping` (token id → row) and
//!                     `weights` (one per token id)
//! tokenizer.json      the tokenizer (Hugging Face `tokenizers` format)
//! ```
//!
//! and embeds as `StaticModel.encode` of model2vec 0.10.0 does (`model2vec/model.py`:
//! `_encode_dispatch`, `tokenize`, `_encode_batch`, `_encode_helper`):
//!
//! 1. the text is cut at `max_length × median token length` characters (the median over the
//!    vocabulary's tokens), so that a megabyte of text is not tokenized to keep 512 tokens;
//! 2. tokenized without special tokens and without padding, cut at `max_length` tokens, and the
//!    unknown token's ids dropped (a word-level vocabulary would otherwise average `[UNK]` in);
//! 3. the vector is the mean of the tokens' rows (each row times the token's weight when the
//!    file has weights); a text with no tokens left gets the zero vector, as in model2vec;
//! 4. divided by its L2 norm (+1e-32) when config.json says `normalize`.
//!
//! The arithmetic is float32 whatever the table's type: model2vec averages a float16 table in
//! float16, so its vectors differ from these by float16 rounding (relative 1e-3), not more
//! (`bench/static_embed_fixture.py` writes model2vec's vectors, `static_tests.rs` compares).
//!
//! Why not the `model2vec-rs` crate (MinishLab's own Rust implementation, maintained, 0.4.0):
//! it depends on `tokenizers` 0.21 and `safetensors` 0.5 where rankd builds 0.23 and 0.8, so it
//! would compile a second copy of each, and it brings its own WordPiece and Unigram tokenizers
//! besides. The lookup and mean it would save are the thirty lines of [`StaticEmbedder::embed`].

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use safetensors::{Dtype, SafeTensors};
use tokenizers::{Tokenizer, TruncationParams};

use super::directory::read_json;
use super::error::{EmbedError, Layout};

/// model2vec's `DEFAULT_MAX_LENGTH`: texts are cut at this many tokens unless config.json says
/// otherwise.
pub const DEFAULT_MAX_LENGTH: usize = 512;

/// A loaded Model2Vec model: tokenizer and embedding table.
pub struct StaticEmbedder {
    dir: PathBuf,
    tokenizer: Tokenizer,
    /// The embedding table, row-major, `dim` values a row.
    rows: Vec<f32>,
    dim: usize,
    /// Vocabulary quantization: the row of each token id (else the row is the token id).
    mapping: Option<Vec<u32>>,
    /// One weight per token id, multiplied into its row (only with vocabulary quantization).
    weights: Option<Vec<f32>>,
    unk_id: Option<u32>,
    normalize: bool,
    /// Characters kept of a text: `max_length` × the median token length.
    max_chars: Option<usize>,
}

/// config.json as model2vec reads it.
#[derive(serde::Deserialize)]
struct StaticConfig {
    #[serde(default)]
    normalize: bool,
    /// Absent: [`DEFAULT_MAX_LENGTH`]; `null`: no limit.
    #[serde(default = "default_max_length")]
    max_length: Option<usize>,
}

fn default_max_length() -> Option<usize> {
    Some(DEFAULT_MAX_LENGTH)
}

impl StaticEmbedder {
    /// Loads the Model2Vec directory `dir`; every error names the file at fault.
    pub fn load(dir: &Path) -> Result<StaticEmbedder, EmbedError> {
        if !dir.is_dir() {
            return Err(EmbedError::Missing {
                path: dir.to_path_buf(),
                what: "not a directory",
                layout: Layout::Model2Vec,
            });
        }
        let config: StaticConfig = read_json(
            &dir.join("config.json"),
            "the Model2Vec configuration",
            Layout::Model2Vec,
        )?;
        let tokenizer_path = dir.join("tokenizer.json");
        let (mut tokenizer, unk_id) = read_tokenizer(&tokenizer_path)?;
        let corrupt = |e: &dyn std::fmt::Display| EmbedError::Corrupt {
            path: tokenizer_path.clone(),
            reason: format!("not a tokenizer: {e}"),
        };
        // model2vec's `_disable_padding` and `_set_max_length_in_tokenizer`.
        tokenizer
            .with_padding(None)
            .with_truncation(config.max_length.map(|max_length| TruncationParams {
                max_length,
                ..TruncationParams::default()
            }))
            .map_err(|e| corrupt(&e))?;

        let weights_path = dir.join("model.safetensors");
        let table = Table::read(&weights_path)?;
        let vocab = tokenizer.get_vocab(true);
        let ids = vocab.values().map(|&id| id as usize + 1).max().unwrap_or(0);
        let mismatch = |model_vocab: usize| EmbedError::TokenizerMismatch {
            path: tokenizer_path.clone(),
            tokenizer_vocab: ids,
            model_vocab,
        };
        match &table.mapping {
            None if ids > table.n_rows => return Err(mismatch(table.n_rows)),
            Some(mapping) if ids > mapping.len() => return Err(mismatch(mapping.len())),
            _ => {}
        }
        if let Some(weights) = &table.weights {
            if ids > weights.len() {
                return Err(mismatch(weights.len()));
            }
        }
        let mut lengths: Vec<usize> = vocab.keys().map(|t| t.chars().count()).collect();
        let max_chars = config
            .max_length
            .map(|max_length| max_length * median_floor(&mut lengths));
        Ok(StaticEmbedder {
            dir: dir.to_path_buf(),
            tokenizer,
            rows: table.rows,
            dim: table.dim,
            mapping: table.mapping,
            weights: table.weights,
            unk_id,
            normalize: config.normalize,
            max_chars,
        })
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The length of every vector (the table's width).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Whether vectors are L2-normalised (config.json's `normalize`).
    pub fn normalizes(&self) -> bool {
        self.normalize
    }

    /// The token ids whose rows make `text`'s vector: no special tokens, cut at `max_length`,
    /// the unknown token dropped.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let text = match self.max_chars {
            Some(n) => text.char_indices().nth(n).map_or(text, |(i, _)| &text[..i]),
            None => text,
        };
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| EmbedError::Inference(format!("tokenizing: {e}")))?;
        let mut ids = encoding.get_ids().to_vec();
        if let Some(unk) = self.unk_id {
            ids.retain(|&id| id != unk);
        }
        Ok(ids)
    }

    /// One text's vector: the mean of its tokens' rows, L2-normalised when the model says so;
    /// zero when no token of the text is in the vocabulary.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let ids = self.token_ids(text)?;
        let mut sum = vec![0f32; self.dim];
        for &id in &ids {
            let id = id as usize;
            let row = self.mapping.as_ref().map_or(id, |m| m[id] as usize);
            let row = &self.rows[row * self.dim..(row + 1) * self.dim];
            let weight = self.weights.as_ref().map_or(1.0, |w| w[id]);
            for (s, &x) in sum.iter_mut().zip(row) {
                *s += weight * x;
            }
        }
        if !ids.is_empty() {
            let n = ids.len() as f32;
            sum.iter_mut().for_each(|s| *s /= n);
        }
        if self.normalize {
            let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt() + 1e-32;
            sum.iter_mut().for_each(|s| *s /= norm);
        }
        Ok(sum)
    }

    /// The vectors of `texts`, in their order, on rayon's global pool.
    pub fn embed_batch<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        texts.par_iter().map(|t| self.embed(t.as_ref())).collect()
    }
}

/// The tokenizer of `path` and its unknown token's id (model2vec's `_get_unk_token_id`: the
/// model's `unk_token` for WordPiece, BPE and WordLevel, `unk_id` for Unigram).
fn read_tokenizer(path: &Path) -> Result<(Tokenizer, Option<u32>), EmbedError> {
    let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => EmbedError::Missing {
            path: path.to_path_buf(),
            what: "the tokenizer",
            layout: Layout::Model2Vec,
        },
        _ => EmbedError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("cannot read the tokenizer: {e}"),
        },
    })?;
    let corrupt = |e: &dyn std::fmt::Display| EmbedError::Corrupt {
        path: path.to_path_buf(),
        reason: format!("not a tokenizer: {e}"),
    };
    let tokenizer: Tokenizer = text.parse().map_err(|e| corrupt(&e))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| corrupt(&e))?;
    let model = &json["model"];
    let unk_id = match model.get("unk_token") {
        Some(serde_json::Value::String(token)) => tokenizer.token_to_id(token),
        Some(_) => None,
        None => model
            .get("unk_id")
            .and_then(|v| v.as_u64())
            .map(|id| id as u32),
    };
    Ok((tokenizer, unk_id))
}

/// `int(np.median(lengths))`: the middle value, or the two middle values' mean rounded down.
fn median_floor(lengths: &mut [usize]) -> usize {
    lengths.sort_unstable();
    match lengths.len() {
        0 => 0,
        n if n % 2 == 1 => lengths[n / 2],
        n => (lengths[n / 2 - 1] + lengths[n / 2]) / 2,
    }
}

/// model.safetensors, converted to float32.
struct Table {
    rows: Vec<f32>,
    n_rows: usize,
    dim: usize,
    mapping: Option<Vec<u32>>,
    weights: Option<Vec<f32>>,
}

impl Table {
    fn read(path: &Path) -> Result<Table, EmbedError> {
        let bytes = std::fs::read(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => EmbedError::Missing {
                path: path.to_path_buf(),
                what: "the embedding table",
                layout: Layout::Model2Vec,
            },
            _ => EmbedError::Corrupt {
                path: path.to_path_buf(),
                reason: format!("cannot read the embedding table: {e}"),
            },
        })?;
        let corrupt = |reason: String| EmbedError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        let file = SafeTensors::deserialize(&bytes)
            .map_err(|e| corrupt(format!("not a safetensors file: {e}")))?;
        let embeddings = file
            .tensor("embeddings")
            .map_err(|e| corrupt(format!("no `embeddings` tensor: {e}")))?;
        let (n_rows, dim) = match embeddings.shape() {
            &[n, d] if d > 0 => (n, d),
            other => {
                return Err(corrupt(format!(
                    "`embeddings` has shape {other:?}, not rows × dim"
                )))
            }
        };
        let rows = floats(embeddings.dtype(), embeddings.data())
            .ok_or_else(|| unsupported(path, "embeddings", embeddings.dtype()))?;
        let optional = |name: &str| match file.tensor(name) {
            Ok(t) if t.shape().len() == 1 => Ok(Some(t)),
            Ok(t) => Err(corrupt(format!(
                "`{name}` has shape {:?}, not one value per token",
                t.shape()
            ))),
            Err(_) => Ok(None),
        };
        let weights = match optional("weights")? {
            Some(t) => Some(
                floats(t.dtype(), t.data())
                    .ok_or_else(|| unsupported(path, "weights", t.dtype()))?,
            ),
            None => None,
        };
        let mapping = match optional("mapping")? {
            Some(t) => {
                let rows: Vec<i64> = integers(t.dtype(), t.data())
                    .ok_or_else(|| unsupported(path, "mapping", t.dtype()))?;
                let rows = rows
                    .into_iter()
                    .map(|r| u32::try_from(r).ok().filter(|&r| (r as usize) < n_rows))
                    .collect::<Option<Vec<u32>>>()
                    .ok_or_else(|| {
                        corrupt(format!(
                            "`mapping` names a row outside the {n_rows} rows of `embeddings`"
                        ))
                    })?;
                Some(rows)
            }
            None => None,
        };
        Ok(Table {
            rows,
            n_rows,
            dim,
            mapping,
            weights,
        })
    }
}

fn unsupported(path: &Path, tensor: &str, dtype: Dtype) -> EmbedError {
    EmbedError::Unsupported {
        path: path.to_path_buf(),
        what: format!("`{tensor}` of type {dtype:?}"),
    }
}

/// A floating-point or int8 tensor's values as float32 (model2vec averages an int8 table in
/// float32 without rescaling, as this does).
fn floats(dtype: Dtype, data: &[u8]) -> Option<Vec<f32>> {
    Some(match dtype {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::F64 => data
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()) as f32)
            .collect(),
        Dtype::I8 => data.iter().map(|&b| b as i8 as f32).collect(),
        _ => return None,
    })
}

fn integers(dtype: Dtype, data: &[u8]) -> Option<Vec<i64>> {
    Some(match dtype {
        Dtype::I64 => data
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect(),
        Dtype::I32 => data
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()) as i64)
            .collect(),
        _ => return None,
    })
}
