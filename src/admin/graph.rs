//! The graph job: recompute every link score of the index (SPEC §2) with the operator's
//! TrustRank seeds, store them beside the index, and swap them into the serving state; and
//! the bookkeeping that tells an operator when the served scores lag behind the documents.

use std::sync::Mutex;
use std::time::Instant;

use serde_json::{json, Value};

use super::{Cancelled, JobContext};
use crate::graph::{GraphError, LinkScoreOptions};
use crate::links::{self, LinkData};
use crate::search::Engine;

/// Runs inside a job. `seeds` are document ids (SPEC §2.5); `None` uses the default choice
/// (top inverse-PageRank candidates). The caller holds the index write lock, so the index
/// cannot change underneath.
///
/// Cancellation is observed before the graph is built and between algorithms; the new scores
/// are written (atomically) and swapped into `serving` only after the last check, so a
/// cancelled job leaves the stored file and the served scores exactly as they were. A cancel
/// that arrives after that point is too late: the job succeeds.
pub fn recompute(
    engine: &Engine,
    seeds: Option<Vec<String>>,
    freshness: &Mutex<Freshness>,
    ctx: &JobContext,
) -> anyhow::Result<Value> {
    let index = &engine.index;
    ctx.check_cancelled()?;
    let start = Instant::now();
    ctx.log(&format!(
        "computing link scores of {} documents with {}",
        index.num_docs(),
        match &seeds {
            Some(s) => format!("{} stored TrustRank seeds", s.len()),
            None => "the top inverse-PageRank TrustRank seed candidates".into(),
        }
    ));
    let generation = links::generation_key(index)?;
    let options = LinkScoreOptions::default();
    let computed = links::compute(
        index,
        &options,
        seeds.as_deref(),
        &mut |p| {
            ctx.progress(p.step as f64 / p.steps.max(1) as f64, p.stage);
        },
        ctx.cancel_flag(),
    );
    let (scores, stats) = match computed {
        Err(e) if matches!(e.downcast_ref::<GraphError>(), Some(GraphError::Cancelled)) => {
            ctx.log("cancelled between algorithms; the stored and served scores are unchanged");
            return Err(Cancelled.into());
        }
        other => other?,
    };
    let nodes = scores.n();
    let data = LinkData::new(scores)?;
    ctx.check_cancelled()?;
    links::store(index, &generation, &data.scores)?;
    engine.set_links(Some(std::sync::Arc::new(data)));
    freshness
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .computed();
    let seconds = start.elapsed().as_secs_f64();
    ctx.log(&format!(
        "{nodes} nodes, {} links, {seconds:.2}s; now serving",
        stats.edges
    ));
    Ok(json!({
        "nodes": nodes,
        "edges": stats.edges,
        "seeds": seeds.map(|s| s.len()),
        "seconds": seconds,
    }))
}

/// How far the served link scores lag behind the index: document batches committed since
/// they were computed, and whether the scores loaded at start-up were written for another
/// version of the index. Coverage (documents added or deleted since) is measured on demand
/// with [`LinkData::coverage`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Freshness {
    /// The scores loaded at start-up were written before a later change of the index.
    pub stale_at_start: bool,
    /// Document batches (adds, updates or deletes) committed since the scores were computed.
    pub batches_since: u64,
    /// Documents those batches added, replaced or deleted.
    pub documents_changed: u64,
    /// When the first of those batches was committed (ms since the epoch).
    pub stale_since: Option<i64>,
}

impl Freshness {
    /// A committed batch that changed `documents` documents.
    pub fn batch(&mut self, documents: u64) {
        self.batches_since += 1;
        self.documents_changed += documents;
        self.stale_since.get_or_insert_with(crate::db::now_ms);
    }

    /// New scores computed from the index as it is.
    pub fn computed(&mut self) {
        *self = Freshness::default();
    }

    /// Whether the scores may describe another version of the index.
    pub fn is_stale(&self) -> bool {
        self.stale_at_start || self.batches_since > 0
    }
}
