//! From token vectors to one sentence vector, as sentence-transformers' `Pooling` and
//! `Normalize` modules compute it (`sentence_transformers/models/Pooling.py`).

use candle_core::{Result, Tensor, D};

/// How token vectors become a sentence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolingMode {
    /// The mean of the vectors of the text's tokens (padding excluded by the attention mask).
    Mean,
    /// The first token's vector ([CLS]).
    Cls,
}

/// A pooling module's configuration (`1_Pooling/config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pooling {
    pub mode: PoolingMode,
    /// `word_embedding_dimension`, checked against the transformer's hidden size.
    pub dim: Option<usize>,
}

impl Pooling {
    /// Reads a pooling configuration; the error says which mode is not supported.
    pub fn from_config(config: &serde_json::Value) -> std::result::Result<Pooling, String> {
        let flag = |name: &str| config.get(name).and_then(|v| v.as_bool()) == Some(true);
        let modes: Vec<&str> = [
            "pooling_mode_cls_token",
            "pooling_mode_mean_tokens",
            "pooling_mode_max_tokens",
            "pooling_mode_mean_sqrt_len_tokens",
            "pooling_mode_weightedmean_tokens",
            "pooling_mode_lasttoken",
        ]
        .into_iter()
        .filter(|m| flag(m))
        .collect();
        let mode = match modes.as_slice() {
            ["pooling_mode_mean_tokens"] => PoolingMode::Mean,
            ["pooling_mode_cls_token"] => PoolingMode::Cls,
            [] => return Err("a pooling configuration with no mode".into()),
            other => return Err(format!("pooling by {}", other.join(" + "))),
        };
        let dim = config
            .get("word_embedding_dimension")
            .and_then(|v| v.as_u64())
            .map(|d| d as usize);
        Ok(Pooling { mode, dim })
    }

    /// Sentence vectors `(batch, hidden)` from token vectors `(batch, tokens, hidden)` and the
    /// attention mask `(batch, tokens)` (1 for a token, 0 for padding), in f32.
    pub fn pool(&self, tokens: &Tensor, mask: &Tensor) -> Result<Tensor> {
        match self.mode {
            PoolingMode::Cls => tokens.narrow(1, 0, 1)?.squeeze(1),
            PoolingMode::Mean => {
                let mask = mask.unsqueeze(D::Minus1)?;
                let sum = tokens.broadcast_mul(&mask)?.sum(1)?;
                // torch.clamp(mask.sum(1), min=1e-9), as sentence-transformers divides.
                let count = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?;
                sum.broadcast_div(&count)
            }
        }
    }
}

/// Each row divided by its L2 norm (at least 1e-12, as `torch.nn.functional.normalize`).
pub fn l2_normalize(v: &Tensor) -> Result<Tensor> {
    let norm = v
        .sqr()?
        .sum_keepdim(D::Minus1)?
        .sqrt()?
        .clamp(1e-12f32, f32::MAX)?;
    v.broadcast_div(&norm)
}
