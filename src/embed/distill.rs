//! Distillation of a static embedding table ([`super::StaticEmbedder`]) from a loaded
//! sentence-transformer ([`super::Embedder`]): Model2Vec's method (Tulkens & van Dongen,
//! *Model2Vec: Fast State-of-the-Art Static Embeddings*, 2024), as the Python `model2vec`
//! package 0.10.0 does it with its defaults (`model2vec/distill/distillation.py`
//! `distill_from_model`, `model2vec/distill/inference.py` `create_embeddings`,
//! `compute_weights`, `apply_pca` and `_pca_fit_transform`, `model2vec/tokenizer/tokenizer.py`
//! `clean_and_create_vocabulary`, `turn_tokens_into_ids`):
//!
//! 1. The vocabulary is the transformer's tokenizer's, in id order, without the tokens the
//!    remove pattern matches at their start (`\[unused\d+\]`: BERT's unused slots) and without
//!    the added tokens other than the unknown and padding tokens (`[CLS]`, `[SEP]` and `[MASK]`
//!    have no meaning as words of a text). all-MiniLM-L6-v2: 30522 tokens, 29525 kept.
//! 2. Each token goes through the transformer alone, framed by the tokenizer's special tokens
//!    (`[CLS] token [SEP]`), and its vector is the mean of the last layer's vectors over those
//!    positions; 256 tokens a batch, sorted by length, padded with the padding token.
//! 3. PCA to [`DistillSettings::pca_dims`] (256) dimensions: the eigendecomposition of the
//!    covariance matrix of the centred token vectors (here nalgebra's symmetric eigensolver, in
//!    float64), the centred vectors projected on the leading eigenvectors, each component's
//!    sign chosen so that its largest score in absolute value is positive (as model2vec does,
//!    so that both programs pick the same signs unless two scores tie).
//! 4. Zipf-estimated SIF weights: the token of rank r (0-based, id order after step 1) is
//!    assumed to have probability p_r ∝ 1/(r+2), and its row is multiplied by
//!    `a / (a + p_r)` with the SIF coefficient a = 1e-4 (Arora et al. 2017's smooth inverse
//!    frequency), which shrinks the frequent tokens that carry little meaning.
//! 5. The table is stored as float16 (model2vec's default `quantize_to`), the vectors
//!    normalised at inference (`normalize: true`).
//!
//! The tokenizer written next to the table is the transformer's with that vocabulary
//! renumbered, no post-processor (a static model adds no special tokens), no padding, texts
//! cut at 512 tokens: the tokenizer.json model2vec writes. Only WordPiece tokenizers (the BERT
//! family [`super::Embedder`] runs) are rewritten; others are refused.
//!
//! Not offered: model2vec's custom vocabulary (words added to the tokenizer), vocabulary
//! quantization (k-means over the rows), PCA by explained-variance fraction, and the `last`,
//! `first` and `pooler` token poolings; the loader reads the first two's output.

use std::collections::HashMap;
use std::path::Path;

use nalgebra::{DMatrix, SymmetricEigen};
use tokenizers::{Encoding, Token};

use super::default_model;
use super::error::EmbedError;
use super::pooling::{Pooling, PoolingMode};
use super::Embedder;

/// Token sequences run through the transformer at once (model2vec's `_DEFAULT_BATCH_SIZE`).
pub const DISTILL_BATCH_SIZE: usize = 256;

/// The precision of the stored table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableType {
    F16,
    F32,
}

/// model2vec's `distill` parameters that rankd offers, with its defaults.
#[derive(Debug, Clone)]
pub struct DistillSettings {
    /// Dimensions kept by PCA; more than the transformer's keeps them all (rotated, centred);
    /// `None` skips PCA.
    pub pca_dims: Option<usize>,
    /// The SIF coefficient of the Zipf weights (0 < a < 1); `None` leaves the rows unweighted.
    pub sif_coefficient: Option<f64>,
    /// Vocabulary tokens matching this regular expression at their start are dropped.
    pub token_remove_pattern: Option<String>,
    pub table_type: TableType,
}

impl Default for DistillSettings {
    fn default() -> Self {
        DistillSettings {
            pca_dims: Some(256),
            sif_coefficient: Some(1e-4),
            token_remove_pattern: Some(r"\[unused\d+\]".to_string()),
            table_type: TableType::F16,
        }
    }
}

/// What a distillation produced.
#[derive(Debug, Clone)]
pub struct Distilled {
    /// Rows of the table (tokens of the vocabulary).
    pub tokens: usize,
    /// Width of the table.
    pub dim: usize,
    /// The fraction of the token vectors' variance the kept components explain (1 without PCA).
    pub explained_variance: f64,
}

/// Distills `embedder`'s transformer into a Model2Vec directory at `out`, which must not exist
/// yet: the files are written into a temporary directory beside it, renamed to `out` once
/// complete. `progress(done, total)` is called after each batch of the vocabulary pass.
pub fn distill(
    embedder: &Embedder,
    out: &Path,
    settings: &DistillSettings,
    mut progress: impl FnMut(usize, usize),
) -> Result<Distilled, EmbedError> {
    if let Some(a) = settings.sif_coefficient {
        if !(a > 0.0 && a < 1.0) {
            return Err(EmbedError::Unsupported {
                path: out.to_path_buf(),
                what: format!("a SIF coefficient of {a} (it lies strictly between 0 and 1)"),
            });
        }
    }
    if out.exists() {
        return Err(EmbedError::Write {
            path: out.to_path_buf(),
            reason: "exists already; a distillation writes a new directory".into(),
        });
    }
    let tokenizer_path = embedder.dir().join("tokenizer.json");
    let vocabulary = Vocabulary::read(&tokenizer_path, settings)?;
    let (prefix, suffix) = special_frame(embedder, vocabulary.kept[0].1)?;
    let sequences: Vec<Vec<u32>> = vocabulary
        .kept
        .iter()
        .map(|&(_, id)| [prefix.as_slice(), &[id][..], suffix.as_slice()].concat())
        .collect();
    let vectors = token_vectors(embedder, &sequences, &mut progress)?;
    let (mut table, dim, explained_variance) =
        pca(&vectors, sequences.len(), embedder.dim(), settings.pca_dims);
    if let Some(a) = settings.sif_coefficient {
        for (row, w) in table
            .chunks_mut(dim)
            .zip(zipf_sif_weights(sequences.len(), a))
        {
            row.iter_mut().for_each(|x| *x *= w);
        }
    }
    write_directory(
        out,
        &table,
        sequences.len(),
        dim,
        &vocabulary,
        embedder,
        settings,
    )?;
    Ok(Distilled {
        tokens: sequences.len(),
        dim,
        explained_variance,
    })
}

/// The transformer's tokenizer.json and the vocabulary kept of it.
struct Vocabulary {
    json: serde_json::Value,
    /// (token, id in the transformer's tokenizer), in id order; the new id is the position.
    kept: Vec<(String, u32)>,
    unk_token: Option<String>,
    pad_token: Option<String>,
}

impl Vocabulary {
    fn read(path: &Path, settings: &DistillSettings) -> Result<Vocabulary, EmbedError> {
        let corrupt = |reason: String| EmbedError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| corrupt(format!("cannot read the tokenizer: {e}")))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| corrupt(format!("not a tokenizer: {e}")))?;
        let model = &json["model"];
        if model["type"] != "WordPiece" {
            return Err(EmbedError::Unsupported {
                path: path.to_path_buf(),
                what: format!(
                    "distilling through a {} tokenizer (only WordPiece)",
                    model["type"]
                ),
            });
        }
        let vocab = model["vocab"]
            .as_object()
            .ok_or_else(|| corrupt("the WordPiece model has no vocab".into()))?;
        let unk_token = model["unk_token"].as_str().map(str::to_string);
        let pad_token = json["padding"]["pad_token"].as_str().map(str::to_string);
        // The added tokens model2vec prunes: all but the unknown and padding tokens.
        let pruned: Vec<&str> = json["added_tokens"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["content"].as_str())
            .filter(|t| Some(*t) != unk_token.as_deref() && Some(*t) != pad_token.as_deref())
            .collect();
        let remove = match &settings.token_remove_pattern {
            // Python's `re.match`: anchored at the start only.
            Some(p) => Some(regex::Regex::new(&format!("^(?:{p})")).map_err(|e| {
                EmbedError::Unsupported {
                    path: path.to_path_buf(),
                    what: format!("the token remove pattern {p:?}: {e}"),
                }
            })?),
            None => None,
        };
        let mut kept = Vec::with_capacity(vocab.len());
        for (token, id) in vocab {
            let id = id
                .as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| corrupt(format!("the id of {token:?} is {id}")))?;
            if pruned.contains(&token.as_str())
                || remove.as_ref().is_some_and(|r| r.is_match(token))
            {
                continue;
            }
            kept.push((token.clone(), id));
        }
        kept.sort_by_key(|&(_, id)| id);
        if kept.is_empty() {
            return Err(corrupt(
                "no token of the vocabulary is left once the remove pattern is applied".into(),
            ));
        }
        Ok(Vocabulary {
            json,
            kept,
            unk_token,
            pad_token,
        })
    }

    /// The tokenizer.json of the static model (see the module documentation).
    fn static_tokenizer(&self) -> serde_json::Value {
        let new_id: HashMap<&str, usize> = self
            .kept
            .iter()
            .enumerate()
            .map(|(i, (t, _))| (t.as_str(), i))
            .collect();
        let mut json = self.json.clone();
        json["model"]["vocab"] = serde_json::Value::Object(
            new_id
                .iter()
                .map(|(t, &i)| (t.to_string(), i.into()))
                .collect(),
        );
        let added: Vec<serde_json::Value> = json["added_tokens"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let id = *new_id.get(t["content"].as_str()?)?;
                let keep = [&self.unk_token, &self.pad_token]
                    .iter()
                    .any(|k| k.as_deref() == t["content"].as_str());
                keep.then(|| {
                    let mut t = t.clone();
                    t["id"] = id.into();
                    t
                })
            })
            .collect();
        json["added_tokens"] = added.into();
        json["post_processor"] = serde_json::Value::Null;
        json["padding"] = match self.pad_token.as_deref().and_then(|p| new_id.get(p)) {
            Some(&pad_id) => serde_json::json!({
                "strategy": {"Fixed": 0},
                "direction": "Right",
                "pad_to_multiple_of": null,
                "pad_id": pad_id,
                "pad_type_id": 0,
                "pad_token": self.pad_token,
            }),
            None => serde_json::Value::Null,
        };
        json["truncation"] = serde_json::json!({
            "direction": "Right",
            "max_length": super::static_model::DEFAULT_MAX_LENGTH,
            "strategy": "LongestFirst",
            "stride": 0,
        });
        json
    }
}

/// The special tokens the tokenizer's post-processor puts before and after a text (`[CLS]`
/// and `[SEP]` for BERT): skeletoken's `bos_ids` and `eos_ids`, which model2vec frames each
/// token with.
fn special_frame(embedder: &Embedder, id: u32) -> Result<(Vec<u32>, Vec<u32>), EmbedError> {
    let one = Encoding::from_tokens(vec![Token::new(id, String::new(), (0, 0))], 0);
    let framed = embedder
        .tokenizer
        .post_process(one, None, true)
        .map_err(|e| EmbedError::Inference(format!("adding special tokens: {e}")))?;
    let ids = framed.get_ids();
    let at = framed
        .get_special_tokens_mask()
        .iter()
        .position(|&special| special == 0)
        .expect("the token itself is not special");
    Ok((ids[..at].to_vec(), ids[at + 1..].to_vec()))
}

/// The mean of the transformer's last-layer vectors over each sequence (model2vec's
/// `create_embeddings` with `_encode_mean_with_model`), row-major, `embedder.dim()` a row,
/// in the order of `sequences`; NaN becomes 0 as `np.nan_to_num` does.
fn token_vectors(
    embedder: &Embedder,
    sequences: &[Vec<u32>],
    progress: &mut impl FnMut(usize, usize),
) -> Result<Vec<f32>, EmbedError> {
    let dim = embedder.dim();
    let mean = Pooling {
        mode: PoolingMode::Mean,
        dim: None,
    };
    let mut order: Vec<usize> = (0..sequences.len()).collect();
    order.sort_by_key(|&i| sequences[i].len());
    let mut out = vec![0f32; sequences.len() * dim];
    let mut done = 0;
    for chunk in order.chunks(DISTILL_BATCH_SIZE) {
        let batch: Vec<Vec<u32>> = chunk.iter().map(|&i| sequences[i].clone()).collect();
        let (tokens, mask) = embedder.token_states(&batch)?;
        let pooled = mean.pool(&tokens, &mask)?;
        for (&i, row) in chunk.iter().zip(pooled.to_vec2::<f32>()?) {
            let dst = &mut out[i * dim..(i + 1) * dim];
            for (d, x) in dst.iter_mut().zip(row) {
                *d = if x.is_nan() { 0.0 } else { x };
            }
        }
        done += chunk.len();
        progress(done, sequences.len());
    }
    Ok(out)
}

/// model2vec's `apply_pca` / `_pca_fit_transform`: the `n × d` rows projected on the leading
/// `pca_dims` principal components, their signs fixed; the table, its width and the fraction
/// of variance kept. Without PCA, or with no more rows than components (where model2vec skips
/// it too), the rows unchanged.
fn pca(rows: &[f32], n: usize, d: usize, pca_dims: Option<usize>) -> (Vec<f32>, usize, f64) {
    let Some(k) = pca_dims.map(|k| k.min(d)).filter(|&k| k < n) else {
        return (rows.to_vec(), d, 1.0);
    };
    let mut x = DMatrix::<f64>::from_fn(n, d, |i, j| rows[i * d + j] as f64);
    for mut column in x.column_iter_mut() {
        let mean = column.mean();
        column.add_scalar_mut(-mean);
    }
    let covariance = x.tr_mul(&x) / (n as f64 - 1.0);
    let eigen = SymmetricEigen::new(covariance);
    let mut by_variance: Vec<usize> = (0..d).collect();
    by_variance.sort_by(|&a, &b| eigen.eigenvalues[b].total_cmp(&eigen.eigenvalues[a]));
    let variance = |i: usize| eigen.eigenvalues[i].max(0.0);
    let total: f64 = (0..d).map(variance).sum();
    let kept: f64 = by_variance[..k].iter().map(|&i| variance(i)).sum();
    let components = DMatrix::from_fn(d, k, |r, c| eigen.eigenvectors[(r, by_variance[c])]);
    let mut scores = x * components;
    for mut column in scores.column_iter_mut() {
        // np.argmax of the absolute values: the first of equal ones (max_by keeps the one it
        // holds when the comparison says Greater).
        let largest = column.iter().copied().max_by(|held, next| {
            held.abs()
                .total_cmp(&next.abs())
                .then(std::cmp::Ordering::Greater)
        });
        if largest.is_some_and(|v| v < 0.0) {
            column.neg_mut();
        }
    }
    let table = (0..n)
        .flat_map(|i| (0..k).map(move |j| (i, j)))
        .map(|(i, j)| scores[(i, j)] as f32)
        .collect();
    (table, k, if total > 0.0 { kept / total } else { 1.0 })
}

/// model2vec's `compute_weights`: `a / (a + p_r)` with Zipf's p_r ∝ 1/(r+2), r = 0..n.
pub fn zipf_sif_weights(n: usize, a: f64) -> impl Iterator<Item = f32> {
    let total: f64 = (0..n).map(|r| 1.0 / (r as f64 + 2.0)).sum();
    (0..n).map(move |r| (a / (a + 1.0 / (r as f64 + 2.0) / total)) as f32)
}

fn write_directory(
    out: &Path,
    table: &[f32],
    n: usize,
    dim: usize,
    vocabulary: &Vocabulary,
    embedder: &Embedder,
    settings: &DistillSettings,
) -> Result<(), EmbedError> {
    let write_error = |path: &Path, e: &dyn std::fmt::Display| EmbedError::Write {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".rankd-tmp-{}-", std::process::id()))
        .tempdir_in(parent)
        .map_err(|e| write_error(parent, &e))?;

    let (dtype, bytes, dtype_name) = match settings.table_type {
        TableType::F16 => (
            safetensors::Dtype::F16,
            table
                .iter()
                .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
                .collect::<Vec<u8>>(),
            "float16",
        ),
        TableType::F32 => (
            safetensors::Dtype::F32,
            table.iter().flat_map(|&x| x.to_le_bytes()).collect(),
            "float32",
        ),
    };
    let weights_path = tmp.path().join("model.safetensors");
    let view = safetensors::tensor::TensorView::new(dtype, vec![n, dim], &bytes)
        .map_err(|e| write_error(&weights_path, &e))?;
    let safetensors = safetensors::serialize([("embeddings", view)], None)
        .map_err(|e| write_error(&weights_path, &e))?;

    let source_name = embedder
        .dir()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let config = serde_json::json!({
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": source_name,
        "apply_pca": settings.pca_dims,
        "sif_coefficient": settings.sif_coefficient,
        "hidden_dim": dim,
        "seq_length": 1_000_000,
        "normalize": true,
        "pooling": "mean",
        "max_length": super::static_model::DEFAULT_MAX_LENGTH,
        "embedding_dtype": dtype_name,
    });
    let json = |v: &serde_json::Value| serde_json::to_vec_pretty(v).expect("JSON values print");
    for (name, bytes) in [
        ("model.safetensors", safetensors),
        ("tokenizer.json", json(&vocabulary.static_tokenizer())),
        ("config.json", json(&config)),
    ] {
        let path = tmp.path().join(name);
        crate::durable::write_atomic(&path, &bytes)
            .map_err(|e| write_error(&path, &format!("{e:#}")))?;
    }
    let tmp = tmp.keep();
    std::fs::rename(&tmp, out).map_err(|e| {
        let _ = std::fs::remove_dir_all(&tmp);
        write_error(out, &e)
    })?;
    std::fs::File::open(parent)
        .and_then(|d| d.sync_all())
        .map_err(|e| write_error(parent, &e))
}

/// The demo's default embedder: the static model distilled from the default model
/// ([`default_model::STATIC_NAME`] in the cache) with the default settings, since on the demo
/// it ranks within a query of the transformer once the reranker reads the dense similarity,
/// and embeds a query in microseconds instead of milliseconds (docs/EVALUATION.md "The dense
/// similarity as a feature", docs/BENCHMARKS.md). Distilled first
/// (the default model fetched if needed; `progress(done, total)` over the
/// vocabulary) if it is not there. The distillation writes beside the target and renames it
/// into place, so a directory there is complete.
pub fn obtain_static(progress: impl FnMut(usize, usize)) -> Result<std::path::PathBuf, EmbedError> {
    let target = default_model::cache_dir()?.join(default_model::STATIC_NAME);
    if target.is_dir() {
        return Ok(target);
    }
    let source = super::Embedder::load(&default_model::obtain()?)?;
    let settings = DistillSettings::default();
    match distill(&source, &target, &settings, progress) {
        Ok(_) => Ok(target),
        // Another process distilled it meanwhile.
        Err(_) if target.is_dir() => Ok(target),
        Err(e) => Err(e),
    }
}
