//! Two-phase search (SPEC §3): the first-phase model ranks the whole collection, the top
//! `window` candidates get their feature vectors (SPEC §3.1, batched), the active reranker
//! scores them and the window is re-sorted (ties keep the first-phase order); then the page
//! `offset..offset + k` is cut and only its hits get snippets.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Map, Value};
use tantivy::{DocAddress, Score};

use crate::features::{self, Candidate, FeatureMatrix, FeatureSet};
use crate::links::LinkData;
use crate::rerank::{RerankError, Reranker};
use crate::text::search::{SearchError, SearchRequest, SearchResults};
use crate::text::TextIndex;

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
    fn explain(&self, m: &FeatureMatrix, row: usize, score: f32) -> Value {
        let values: Vec<f32> = self.columns.iter().map(|&c| m.row(row)[c]).collect();
        let names = self.reranker.feature_names();
        let features: Map<String, Value> = names
            .iter()
            .zip(&values)
            .map(|(n, v)| (n.clone(), json!(v)))
            .collect();
        let mut out = json!({
            "reranker": self.id(),
            "rerank_score": score,
            "features": features,
        });
        if let Some(c) = self.reranker.contributions(&values) {
            let contributions: Map<String, Value> = names
                .iter()
                .zip(c)
                .map(|(n, v)| (n.clone(), json!(v)))
                .collect();
            out["contributions"] = Value::Object(contributions);
        }
        out
    }
}

/// Where an index keeps its reranker models (`DATA/models/*.json`).
pub fn models_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models")
}

/// The file in which the command line asks the server to activate a model (one file name of
/// [`models_dir`]); the server carries the request into its model registry at start-up.
fn activation_request(data_dir: &Path) -> PathBuf {
    models_dir(data_dir).join("ACTIVE")
}

/// The model id a pending command-line activation names, removing the request.
pub fn take_activation_request(data_dir: &Path) -> anyhow::Result<Option<String>> {
    let path = activation_request(data_dir);
    let name = match std::fs::read_to_string(&path) {
        Ok(n) => n.trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
    };
    std::fs::remove_file(&path)?;
    Ok(Some(name.trim_end_matches(".json").to_string()))
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

/// Stores `reranker` ([`store`]) and asks the server to activate it at its next start.
pub fn install(data_dir: &Path, reranker: &Reranker) -> anyhow::Result<PathBuf> {
    let path = store(data_dir, reranker)?;
    let name = format!("{}.json", reranker.id());
    crate::text::index::write_atomic(&activation_request(data_dir), name.as_bytes())?;
    Ok(path)
}

/// Seconds spent in each phase of one search, for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseTimes {
    pub retrieve: f64,
    pub features: f64,
    pub rerank: f64,
}

/// Checks that the page fits in the window and the window in its limit.
pub fn validate_window(k: usize, offset: usize, window: usize) -> Result<(), SearchError> {
    crate::text::search::validate_window(k, offset)?;
    if window == 0 || window > MAX_WINDOW {
        return Err(SearchError::Param {
            field: "window",
            message: format!("window must be between 1 and {MAX_WINDOW}, got {window}"),
        });
    }
    if offset + k > window {
        return Err(SearchError::Param {
            field: "offset",
            message: format!(
                "offset + k = {} exceeds the rerank window of {window}; ask for a larger window or rerank=false",
                offset + k
            ),
        });
    }
    Ok(())
}

/// Searches with the first-phase model of `req`, reranks its top `window` with `model`.
pub fn search(
    index: &TextIndex,
    links: Option<&LinkData>,
    model: &ActiveModel,
    req: &SearchRequest,
    window: usize,
) -> Result<(SearchResults, PhaseTimes), SearchError> {
    let start = Instant::now();
    validate_window(req.k, req.offset, window)?;
    let mut times = PhaseTimes::default();
    let searcher = index.reader.searcher();
    let mut results = SearchResults {
        query: req.q.clone(),
        model: req.model.to_string(),
        reranker: Some(model.id().to_string()),
        total_hits: 0,
        took_ms: 0.0,
        hits: Vec::new(),
    };
    let Some(bound) = index.bind(&searcher, req.model, req.field.as_deref(), &req.q)? else {
        results.took_ms = start.elapsed().as_secs_f64() * 1e3;
        return Ok((results, times));
    };
    let top = bound.top(&searcher, window, 0)?;
    results.total_hits = bound.count(&searcher)?;
    times.retrieve = start.elapsed().as_secs_f64();

    let t = Instant::now();
    let candidates: Vec<Candidate> = top
        .iter()
        .map(|&(score, address)| Candidate { address, score })
        .collect();
    let m = features::extract(
        index,
        &searcher,
        links,
        FeatureSet::current(),
        &req.q,
        &candidates,
        model.prf(),
    )?;
    times.features = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let scores = model
        .score(&m)
        .map_err(|e| SearchError::Internal(anyhow::anyhow!("reranker {}: {e}", model.id())))?;
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let page: Vec<usize> = order.into_iter().skip(req.offset).take(req.k).collect();
    times.rerank = t.elapsed().as_secs_f64();

    let ranked: Vec<(Score, DocAddress)> = page.iter().map(|&i| (scores[i], top[i].1)).collect();
    let mut hits = index.hits(&searcher, &bound, req, &ranked, req.offset)?;
    if req.explain {
        for (hit, &row) in hits.iter_mut().zip(&page) {
            let mut e = model.explain(&m, row, scores[row]);
            if let Some(first) = hit.explain.take() {
                e["first_phase"] = first;
            }
            e["first_phase_rank"] = json!(row + 1);
            hit.explain = Some(e);
        }
    }
    results.hits = hits;
    results.took_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok((results, times))
}
