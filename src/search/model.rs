//! The second phase's model (SPEC §3): a reranker bound to the current feature set, ready to
//! score a window's feature matrix, and the model files of an index (`DATA/models/`).

use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use serde::Serialize;

use crate::features::{self, FeatureMatrix, FeatureSet};
use crate::rerank::{RerankError, Reranker};

/// The window reranked when a request does not say (SPEC §3).
pub const DEFAULT_WINDOW: usize = 100;
/// The largest window a request may ask for.
pub const MAX_WINDOW: usize = 1000;

/// A reranker ready to serve: the model and, for each of its features, the column of the
/// current feature set that holds it (checked once, when the model is activated).
#[derive(Debug)]
pub struct ActiveModel {
    pub reranker: Reranker,
    pub path: PathBuf,
    columns: Vec<usize>,
    /// Whether serving must compute the RM3 features for this model (it reads one).
    prf: features::Prf,
    /// Whether the model reads `dense.similarity`: serving then embeds the query.
    dense: bool,
}

impl ActiveModel {
    /// Fails, naming them, when the model needs features this server does not compute.
    pub fn new(reranker: Reranker, path: PathBuf) -> Result<Self, RerankError> {
        let set = FeatureSet::current();
        let mut columns = Vec::with_capacity(reranker.num_features());
        let mut missing = Vec::new();
        for name in reranker.feature_names() {
            match set.get(name) {
                Some(c) => columns.push(c),
                None => missing.push(name.clone()),
            }
        }
        if !missing.is_empty() {
            return Err(RerankError::MissingFeatures { missing });
        }
        Ok(ActiveModel {
            prf: set.prf_for(&columns),
            dense: set.reads_dense(&columns),
            reranker,
            path,
            columns,
        })
    }

    pub fn load(path: &Path) -> Result<Self, RerankError> {
        ActiveModel::new(Reranker::load(path)?, path.to_path_buf())
    }

    pub fn id(&self) -> &str {
        self.reranker.id()
    }

    /// Whether the model reads any RM3 feature, i.e. whether serving must compute them.
    pub fn prf(&self) -> features::Prf {
        self.prf
    }

    /// Whether the model reads the dense similarity, i.e. whether serving must embed the
    /// query (when the index has vectors) even for a lexical first phase.
    pub fn reads_dense(&self) -> bool {
        self.dense
    }

    /// The fingerprint of the embedder whose similarities the model was trained on, when it
    /// reads them and its file records one ([`crate::rerank::TrainingInfo::embedder`]).
    pub fn embedder(&self) -> Option<&str> {
        self.reranker.training.embedder.as_deref()
    }

    /// Whether the model reads the dense similarity and vectors computed by the embedder
    /// `fingerprint` can give it: those it was trained on, or any when it records none.
    /// Another embedder's similarities have another distribution (a static model's cosines
    /// are not a transformer's), so the feature is then left at 0, as for a document
    /// without a vector, and the search stays lexical.
    pub fn reads_dense_of(&self, fingerprint: &str) -> bool {
        self.dense && self.embedder().is_none_or(|e| e == fingerprint)
    }

    /// The rows of `m` in the model's feature order.
    fn rows(&self, m: &FeatureMatrix) -> Vec<f32> {
        let mut x = Vec::with_capacity(m.rows * self.columns.len());
        for r in 0..m.rows {
            let row = m.row(r);
            x.extend(self.columns.iter().map(|&c| row[c]));
        }
        x
    }

    /// The model's scores of a feature matrix.
    pub fn score(&self, m: &FeatureMatrix) -> Result<Vec<f32>, RerankError> {
        self.reranker.score(&self.rows(m), m.rows)
    }

    /// Feature values of one row, and each feature's contribution for a linear model.
    pub fn explain(&self, m: &FeatureMatrix, row: usize, score: f32) -> RerankExplanation {
        let values: Vec<f32> = self.columns.iter().map(|&c| m.row(row)[c]).collect();
        let names = self.reranker.feature_names();
        RerankExplanation {
            reranker: self.id().to_string(),
            rerank_score: score,
            contributions: self
                .reranker
                .contributions(&values)
                .map(|c| names.iter().cloned().zip(c).collect()),
            base_score: self.reranker.base_score(),
            features: names.iter().cloned().zip(values).collect(),
        }
    }
}

/// What the reranker made of one hit (`/search?explain=true`).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RerankExplanation {
    /// The model's id.
    pub reranker: String,
    pub rerank_score: f32,
    /// Every feature the model reads, by name.
    pub features: BTreeMap<String, f32>,
    /// Each feature's share of the score: weight × normalised value for a linear model,
    /// TreeSHAP values for trees (Lundberg et al. 2018); absent for an MLP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contributions: Option<BTreeMap<String, f32>>,
    /// What the contributions add to: the linear model's bias, the trees' expected score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_score: Option<f32>,
}

/// Where an index keeps its reranker models (`DATA/models/*.json`).
pub(crate) fn models_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models")
}

/// The file in which the command line asks the server to activate a model (one file name of
/// [`models_dir`]); the server carries the request into its model registry at start-up.
fn activation_request(data_dir: &Path) -> PathBuf {
    models_dir(data_dir).join("ACTIVE")
}

/// The model id a pending command-line activation names. The server removes the request
/// ([`clear_activation_request`]) only once the registry has recorded the activation, so a
/// start-up that dies in between applies it at the next start.
pub fn activation_request_id(data_dir: &Path) -> anyhow::Result<Option<String>> {
    let path = activation_request(data_dir);
    let name = match std::fs::read_to_string(&path) {
        Ok(n) => n.trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
    };
    Ok(Some(name.trim_end_matches(".json").to_string()))
}

/// Removes the command line's activation request once it is applied.
pub(crate) fn clear_activation_request(data_dir: &Path) -> anyhow::Result<()> {
    let path = activation_request(data_dir);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(anyhow::anyhow!("cannot remove {}: {e}", path.display()))
        }
        _ => Ok(()),
    }
}

/// The model files of an index, newest first.
pub fn model_files(data_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let dir = models_dir(data_dir);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) == Some("json") {
            files.push((entry.metadata()?.modified()?, path));
        }
    }
    files.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

/// Saves `reranker` as `<id>.json` in the index's model directory; returns the path.
pub fn store(data_dir: &Path, reranker: &Reranker) -> anyhow::Result<PathBuf> {
    let dir = models_dir(data_dir);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{}.json", reranker.id()));
    reranker.save(&path)?;
    Ok(path)
}

/// Asks the server to activate the stored `reranker` at its next start.
pub(crate) fn request_activation(data_dir: &Path, reranker: &Reranker) -> anyhow::Result<()> {
    let name = format!("{}.json", reranker.id());
    crate::text::index::write_atomic(&activation_request(data_dir), name.as_bytes())?;
    Ok(())
}
