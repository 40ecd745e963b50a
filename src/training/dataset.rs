//! The first-phase window of each judged query, with features and labels.

use std::collections::HashMap;

use crate::features::{self, FeatureMatrix, FeatureSet};
use crate::search::Engine;
use crate::search::SearchError;
use crate::text::{ModelKind, TextIndex};

/// The first-phase model whose window training reranks unless told otherwise (`rankd
/// train`, `rankd cv`, `rankd features`, `POST /admin/train`, the demo).
pub const DEFAULT_FIRST_PHASE: ModelKind = ModelKind::Bm25F;

/// A query and its graded judgments (`doc id → grade`).
#[derive(Debug, Clone, PartialEq)]
pub struct JudgedQuery {
    pub qid: String,
    pub text: String,
    pub grades: HashMap<String, i32>,
}

/// One query's candidate window: feature rows, their labels (unjudged = 0) and ids.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub qid: String,
    pub features: FeatureMatrix,
    /// Document id of each row.
    pub ids: Vec<String>,
    pub labels: Vec<i32>,
}

/// What the windows hold, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct WindowStats {
    pub queries: usize,
    pub rows: usize,
    /// Judged-relevant (grade ≥ 1) documents found inside the windows, and in all.
    pub relevant_in_window: usize,
    pub relevant_judged: usize,
    /// Queries with no relevant document in their window (nothing to learn from; they still
    /// count in evaluation).
    pub without_relevant: usize,
    /// Judged documents that are not in the index.
    pub unknown_documents: usize,
}

/// Runs `model` for every query, keeps the top `window` and extracts their features: the
/// engine's rerank path ([`Engine::window`]), so training sees what serving reranks.
/// `progress` is called once per query.
pub fn judged_windows(
    engine: &Engine,
    queries: &[JudgedQuery],
    model: ModelKind,
    window: usize,
    prf: features::Prf,
    progress: &(dyn Fn() + Sync),
) -> Result<(Vec<Window>, WindowStats), SearchError> {
    let index = &engine.index;
    let searcher = index.reader.searcher();
    let mut stats = WindowStats::default();
    let known = known_ids(index, queries)?;
    let mut out = Vec::with_capacity(queries.len());
    for q in queries {
        progress();
        stats.queries += 1;
        stats.relevant_judged += q.grades.values().filter(|&&g| g >= 1).count();
        stats.unknown_documents += q.grades.keys().filter(|id| !known[*id]).count();
        // A query of stop words retrieves nothing: an empty window.
        let (candidates, features) = match engine.window(&searcher, &q.text, model, window, prf)? {
            Some(w) => (w.candidates, w.features),
            None => (
                Vec::new(),
                FeatureMatrix::empty(FeatureSet::current().len()),
            ),
        };
        let ids = features::candidate_ids(&searcher, &candidates)?;
        let labels: Vec<i32> = ids
            .iter()
            .map(|id| q.grades.get(id).copied().unwrap_or(0))
            .collect();
        let relevant = labels.iter().filter(|&&g| g >= 1).count();
        stats.rows += labels.len();
        stats.relevant_in_window += relevant;
        if relevant == 0 {
            stats.without_relevant += 1;
        }
        out.push(Window {
            qid: q.qid.clone(),
            features,
            ids,
            labels,
        });
    }
    Ok((out, stats))
}

/// Which judged ids exist in the index.
fn known_ids(
    index: &TextIndex,
    queries: &[JudgedQuery],
) -> Result<HashMap<String, bool>, SearchError> {
    let searcher = index.reader.searcher();
    let mut known = HashMap::new();
    for q in queries {
        for id in q.grades.keys() {
            if known.contains_key(id) {
                continue;
            }
            let term = tantivy::Term::from_field_text(index.fields.id, id);
            known.insert(id.clone(), searcher.doc_freq(&term)? > 0);
        }
    }
    Ok(known)
}

/// The windows as a training set for `crate::rerank` (feature names of the current set;
/// windows without candidates are left out, as there is nothing to rank), over the default
/// training columns ([`FeatureSet::default_training_columns`]: every feature but RM3, and
/// the dense similarity when the windows have it, i.e. the index had vectors).
pub fn rank_set(windows: &[Window]) -> Result<crate::rerank::RankSet, crate::rerank::RerankError> {
    let set = FeatureSet::current();
    let col = set
        .get(crate::features::DENSE_SIMILARITY)
        .expect("in the set");
    let dense = windows
        .iter()
        .any(|w| (0..w.features.rows).any(|r| w.features.row(r)[col] != 0.0));
    rank_set_columns(windows, &set.default_training_columns(dense))
}

/// The training set of the windows over the feature-set columns `cols`, in that order.
pub fn rank_set_columns(
    windows: &[Window],
    cols: &[usize],
) -> Result<crate::rerank::RankSet, crate::rerank::RerankError> {
    let set = FeatureSet::current();
    let names = cols.iter().map(|&c| set.names()[c].clone()).collect();
    let projected: Vec<Window> = windows.iter().map(|w| project(w, cols)).collect();
    rank_set_named(&projected, names)
}

/// The window with only the columns `cols`, in that order.
pub fn project(w: &Window, cols: &[usize]) -> Window {
    let mut features = FeatureMatrix {
        rows: w.features.rows,
        cols: cols.len(),
        values: Vec::with_capacity(w.features.rows * cols.len()),
    };
    for row in 0..w.features.rows {
        let r = w.features.row(row);
        features.values.extend(cols.iter().map(|&c| r[c]));
    }
    Window {
        qid: w.qid.clone(),
        features,
        ids: w.ids.clone(),
        labels: w.labels.clone(),
    }
}

/// As [`rank_set`] for windows whose columns are `names` (a subset of the feature set).
pub fn rank_set_named(
    windows: &[Window],
    names: Vec<String>,
) -> Result<crate::rerank::RankSet, crate::rerank::RerankError> {
    let mut x = Vec::new();
    let mut labels = Vec::new();
    let mut ids = Vec::new();
    let mut queries = Vec::new();
    for w in windows.iter().filter(|w| !w.labels.is_empty()) {
        let start = labels.len();
        x.extend_from_slice(&w.features.values);
        labels.extend_from_slice(&w.labels);
        ids.extend(w.ids.iter().cloned());
        queries.push(crate::rerank::QueryGroup::new(
            w.qid.clone(),
            start..labels.len(),
        ));
    }
    crate::rerank::RankSet::new(names, x, labels, queries, Some(ids))
}

/// Trains a reranker on judged windows, holding out `valid_fraction` of the queries for
/// early stopping (SPEC §3.5).
pub fn train_on_windows(
    windows: &[Window],
    config: &crate::rerank::TrainConfig,
    valid_fraction: f64,
    observer: &mut dyn FnMut(&crate::rerank::EpochLog),
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<crate::rerank::TrainOutcome, crate::rerank::RerankError> {
    let all = rank_set(windows)?;
    let (train, valid) = all.split_validation(valid_fraction, config.seed)?;
    crate::rerank::train(&train, Some(&valid), config, observer, cancel)
}
