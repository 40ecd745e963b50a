//! The next batch to label (SPEC §5) over the index: the pool is every unjudged, unreserved
//! (query, document) pair among the first-phase windows of the stored queries, scored by the
//! active reranker when there is one (else by the first-phase score); [`crate::active`] picks
//! the batch. Features are the serving features (SPEC §3.1), extracted per window as
//! `crate::judgments` does for training.

use std::collections::HashSet;

use crate::active::{self, Pick};
use crate::features::{self, FeatureSet};
use crate::search::model::ActiveModel;
use crate::search::Engine;
use crate::search::SearchError;
use crate::text::ModelKind;

/// What the pool is drawn from and how the batch is chosen.
#[derive(Debug, Clone)]
pub struct PoolSpec<'a> {
    /// `(query_id, text)`, in the order the pool lists them.
    pub queries: &'a [(String, String)],
    /// Pairs judged or reserved now.
    pub unavailable: &'a HashSet<(String, String)>,
    pub first_phase: ModelKind,
    pub window: usize,
    pub k: usize,
    pub lambda: f64,
}

/// One chosen pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Chosen {
    pub query_id: String,
    pub query: String,
    pub doc_id: String,
    /// The score f(x) the margin was computed from (reranker or first phase).
    pub score: f32,
    /// 1-based rank in the query's first-phase window.
    pub first_phase_rank: usize,
    pub pick: Pick,
}

/// A selection and what it was drawn from.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    pub items: Vec<Chosen>,
    pub pool_size: usize,
    /// Queries whose window was searched, and those whose text could not be searched (no
    /// searchable term, or refused by the query parser).
    pub queries: usize,
    pub skipped_queries: Vec<String>,
    /// The reranker that scored the pool (`None`: the first-phase score did).
    pub model: Option<String>,
}

/// Builds the pool and picks the batch.
pub fn select(engine: &Engine, spec: &PoolSpec) -> Result<Selection, SearchError> {
    let reranker = engine.model();
    let reranker = reranker.as_deref();
    let searcher = engine.index.reader.searcher();
    let set = FeatureSet::current();
    let d = set.len();
    let mut lists: Vec<Vec<f32>> = Vec::new();
    // Per pool item: (list, position); its features; who it is.
    let mut pool: Vec<(usize, usize)> = Vec::new();
    let mut x: Vec<f32> = Vec::new();
    let mut meta: Vec<(usize, String)> = Vec::new();
    let mut skipped = Vec::new();
    let mut searched = 0;
    for (qi, (qid, text)) in spec.queries.iter().enumerate() {
        let prf = reranker.map_or(features::Prf::Skip, ActiveModel::prf);
        let window = match engine.window(&searcher, text, spec.first_phase, spec.window, prf) {
            Ok(Some(w)) => w,
            // No searchable term, or a text the query parser refuses: nothing to retrieve.
            Ok(None) | Err(SearchError::Query(_)) => {
                skipped.push(qid.clone());
                continue;
            }
            Err(e) => return Err(e),
        };
        searched += 1;
        let (candidates, m) = (window.candidates, window.features);
        if candidates.is_empty() {
            continue;
        }
        let ids = features::candidate_ids(&searcher, &candidates)?;
        let scores = match reranker {
            Some(model) => model.score(&m).map_err(|e| {
                SearchError::Internal(anyhow::anyhow!("reranker {}: {e}", model.id()))
            })?,
            None => candidates.iter().map(|c| c.score).collect(),
        };
        let list = lists.len();
        for (pos, id) in ids.into_iter().enumerate() {
            if spec.unavailable.contains(&(qid.clone(), id.clone())) {
                continue;
            }
            pool.push((list, pos));
            x.extend_from_slice(m.row(pos));
            meta.push((qi, id));
        }
        lists.push(scores);
    }
    let gaps = active::neighbor_gaps(&lists, &pool);
    let unit = active::unit_rows(&x, d);
    let picks = active::select_batch(&unit, d, &gaps, spec.k, spec.lambda)
        .map_err(|e| SearchError::Internal(e.into()))?;
    let items = picks
        .into_iter()
        .map(|pick| {
            let (list, pos) = pool[pick.item];
            let (qi, doc_id) = &meta[pick.item];
            let (query_id, query) = &spec.queries[*qi];
            Chosen {
                query_id: query_id.clone(),
                query: query.clone(),
                doc_id: doc_id.clone(),
                score: lists[list][pos],
                first_phase_rank: pos + 1,
                pick,
            }
        })
        .collect();
    Ok(Selection {
        items,
        pool_size: pool.len(),
        queries: searched,
        skipped_queries: skipped,
        model: reranker.map(|m| m.id().to_string()),
    })
}
