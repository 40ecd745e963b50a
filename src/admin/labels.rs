//! The next batch to label (SPEC §5) over the index: the pool is every unjudged, unreserved
//! (query, document) pair among the first-phase windows of the stored queries, scored by the
//! active reranker when there is one (else by the first-phase score); [`crate::active`] picks
//! the batch, by the angle-diverse criterion or the loss-based one (seed 002 ch. 4, which
//! also reads the judged pairs of each window: they fit its pairwise probabilities). Features are the serving features (SPEC §3.1), extracted per window as
//! `crate::judgments` does for training.

use std::collections::{HashMap, HashSet};

use crate::active::loss::{labelled_pairs, select_loss_batch, LossParams, LossPick};
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
    pub strategy: BatchStrategy,
    /// Stored grades by (query id, document id): the loss-based batch's labelled pairs.
    pub grades: &'a HashMap<(String, String), i32>,
}

/// How the batch is picked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BatchStrategy {
    /// SPEC §5's angle-diverse batch with this λ.
    Angle { lambda: f64 },
    /// The loss-based batch (`crate::active::loss`).
    Loss(LossParams),
}

/// What a pick was chosen on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Picked {
    Angle(Pick),
    Loss(LossPick),
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
    pub pick: Picked,
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
    let mut labelled = Vec::new();
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
        let grades: Vec<Option<i32>> = ids
            .iter()
            .map(|id| spec.grades.get(&(qid.clone(), id.clone())).copied())
            .collect();
        labelled.extend(labelled_pairs(&scores, &grades));
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
    let picks: Vec<(usize, Picked)> = match spec.strategy {
        BatchStrategy::Angle { lambda } => {
            let gaps = active::neighbor_gaps(&lists, &pool);
            let unit = active::unit_rows(&x, d);
            active::select_batch(&unit, d, &gaps, spec.k, lambda)
                .map_err(|e| SearchError::Internal(e.into()))?
                .into_iter()
                .map(|p| (p.item, Picked::Angle(p)))
                .collect()
        }
        BatchStrategy::Loss(params) => {
            let margins: Vec<f64> = active::neighbor_margins(&lists, &pool)
                .into_iter()
                .map(|m| m.unwrap_or(f64::INFINITY))
                .collect();
            select_loss_batch(&margins, &labelled, spec.k, &params)
                .map_err(|e| SearchError::Internal(e.into()))?
                .into_iter()
                .map(|p| (p.item, Picked::Loss(p)))
                .collect()
        }
    };
    let items = picks
        .into_iter()
        .map(|(item, pick)| {
            let (list, pos) = pool[item];
            let (qi, doc_id) = &meta[item];
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
