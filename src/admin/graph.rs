//! The graph job: recompute every link score of the index (SPEC §2) with the operator's
//! TrustRank seeds, store them beside the index, and swap them into the serving state; and
//! the bookkeeping that tells an operator when the served scores lag behind the documents.

use crate::sync::Recover;
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{json, Value};

use super::{Cancelled, JobContext};
use crate::graph::{GraphError, LinkScoreOptions};
use crate::links::{self, LinkData};
use crate::search::Engine;

/// Runs inside a job. `seeds` are document ids (SPEC §2.5); `None` uses the default choice
/// (top inverse-PageRank candidates). `writes` is the index write lock.
///
/// Document batches go on while the job computes: under the write lock, briefly, the job takes
/// a point-in-time view of the index (a tantivy searcher, which later commits do not change),
/// that view's generation key and a [`Mark`] of the batches counted so far; it builds the graph
/// and computes every score from that view without the lock; then, under the lock again,
/// stores the scores with the view's key and swaps them in. The scores describe the view
/// exactly, so batches committed meanwhile leave them stale, and the freshness bookkeeping
/// says so ([`Freshness::computed_from`]): as stale as a batch right after the job would.
/// Holding the lock for the whole job made every write wait for it (a 0.1 s batch took 27.6 s
/// behind a Rust-docs graph job, and writes ended in 408 when a job outlasted the timeout).
///
/// Cancellation is observed before the graph is built and between algorithms; the new scores
/// are written (atomically) and swapped into `serving` only after the last check, so a
/// cancelled job leaves the stored file and the served scores exactly as they were. A cancel
/// that arrives after that point is too late: the job succeeds.
pub(crate) fn recompute(
    engine: &Engine,
    seeds: Option<Vec<String>>,
    writes: &tokio::sync::Mutex<()>,
    freshness: &Mutex<Freshness>,
    ctx: &JobContext,
) -> anyhow::Result<Value> {
    let index = &engine.index;
    ctx.check_cancelled()?;
    let start = Instant::now();
    let (searcher, generation, mark) = {
        let _writing = writes.blocking_lock();
        let mark = freshness.locked().mark();
        (index.reader.searcher(), links::generation_key(index)?, mark)
    };
    ctx.log(&format!(
        "computing link scores of {} documents with {}",
        searcher.num_docs(),
        match &seeds {
            Some(s) => format!("{} stored TrustRank seeds", s.len()),
            None => "the top inverse-PageRank TrustRank seed candidates".into(),
        }
    ));
    let options = LinkScoreOptions::default();
    let computed = links::compute(
        index,
        &searcher,
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
    let batches_meanwhile = {
        let _writing = writes.blocking_lock();
        links::store(index, &generation, &data.scores)?;
        engine.set_links(Some(std::sync::Arc::new(data)));
        let mut f = freshness.locked();
        f.computed_from(mark);
        f.batches_since
    };
    let seconds = start.elapsed().as_secs_f64();
    ctx.log(&format!(
        "{nodes} nodes, {} links, {seconds:.2}s; now serving{}",
        stats.edges,
        if batches_meanwhile > 0 {
            format!(" ({batches_meanwhile} document batches committed meanwhile: stale)")
        } else {
            String::new()
        }
    ));
    Ok(json!({
        "nodes": nodes,
        "edges": stats.edges,
        "seeds": seeds.map(|s| s.len()),
        "seconds": seconds,
        "batches_meanwhile": batches_meanwhile,
    }))
}

/// How far the served link scores lag behind the index: document batches committed since
/// the index view they were computed from, and whether the scores loaded at start-up were
/// written for another version of the index. Coverage (documents added or deleted since) is
/// measured on demand with [`LinkData::coverage`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Freshness {
    /// The scores loaded at start-up were written before a later change of the index.
    pub stale_at_start: bool,
    /// Document batches (adds, updates or deletes) committed since the scores' index view.
    pub batches_since: u64,
    /// Documents those batches added, replaced or deleted.
    pub documents_changed: u64,
    /// When the first of those batches was committed (ms since the epoch).
    pub stale_since: Option<i64>,
    /// Every batch since start-up, and its documents: what a [`Mark`] counts from.
    batches_total: u64,
    documents_total: u64,
    /// The running graph job's mark, and when the first batch after it was committed.
    marked: Option<(Mark, Option<i64>)>,
}

/// The batches counted when a graph job took its view of the index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mark {
    batches: u64,
    documents: u64,
}

impl Freshness {
    /// A committed batch that changed `documents` documents.
    pub fn batch(&mut self, documents: u64) {
        let now = crate::db::now_ms();
        self.batches_since += 1;
        self.documents_changed += documents;
        self.stale_since.get_or_insert(now);
        self.batches_total += 1;
        self.documents_total += documents;
        if let Some((_, first)) = &mut self.marked {
            first.get_or_insert(now);
        }
    }

    /// A graph job takes its view of the index now (called under the write lock, so no batch
    /// is half counted).
    pub fn mark(&mut self) -> Mark {
        let mark = Mark {
            batches: self.batches_total,
            documents: self.documents_total,
        };
        self.marked = Some((mark, None));
        mark
    }

    /// New scores computed from the view taken at `mark`: stale by exactly the batches
    /// committed since.
    pub fn computed_from(&mut self, mark: Mark) {
        let first_after = match self.marked.take() {
            Some((m, first)) if m == mark => first,
            _ => None,
        };
        let batches = self.batches_total - mark.batches;
        self.stale_at_start = false;
        self.batches_since = batches;
        self.documents_changed = self.documents_total - mark.documents;
        self.stale_since = if batches > 0 {
            first_after.or(Some(crate::db::now_ms()))
        } else {
            None
        };
    }

    /// New scores computed from the index as it is.
    pub fn computed(&mut self) {
        let mark = self.mark();
        self.computed_from(mark);
    }

    /// Whether the scores may describe another version of the index.
    pub fn is_stale(&self) -> bool {
        self.stale_at_start || self.batches_since > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_during_a_job_leave_its_scores_stale() {
        let mut f = Freshness::default();
        f.batch(3);
        let mark = f.mark();
        assert!(f.is_stale());
        f.batch(5);
        f.batch(2);
        f.computed_from(mark);
        assert_eq!((f.batches_since, f.documents_changed), (2, 7));
        assert!(f.is_stale() && f.stale_since.is_some());
        // A job with no batch meanwhile leaves the scores fresh.
        let mark = f.mark();
        f.computed_from(mark);
        assert!(!f.is_stale());
        assert_eq!(
            (f.batches_since, f.documents_changed, f.stale_since),
            (0, 0, None)
        );
        f.batch(1);
        assert_eq!(f.batches_since, 1);
        f.computed();
        assert!(!f.is_stale());
    }
}
