//! The graph job: recompute every link score of the index (SPEC §2) with the operator's
//! TrustRank seeds, store them beside the index, and swap them into the serving state.

use std::time::Instant;

use arc_swap::ArcSwapOption;
use serde_json::{json, Value};

use super::JobContext;
use crate::graph::LinkScoreOptions;
use crate::links::{self, LinkData};
use crate::text::TextIndex;

/// Runs inside a job. `seeds` are document ids (SPEC §2.5); `None` uses the default choice
/// (top inverse-PageRank candidates). The new scores replace `serving` only once they are
/// complete and stored, so searches see the old scores or the new ones, never a mix.
///
/// The computation itself has no cancellation points: a cancel request is honoured before
/// it starts and, after it, by not swapping the new scores in.
pub fn recompute(
    index: &TextIndex,
    seeds: Option<Vec<String>>,
    serving: &ArcSwapOption<LinkData>,
    ctx: &JobContext,
) -> anyhow::Result<Value> {
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
    let options = LinkScoreOptions::default();
    let (scores, stats) = links::compute_and_store(index, &options, seeds.as_deref(), &mut |p| {
        ctx.progress(p.step as f64 / p.steps.max(1) as f64, p.stage);
    })?;
    let nodes = scores.n();
    let data = LinkData::new(scores)?;
    ctx.check_cancelled()?;
    serving.store(Some(std::sync::Arc::new(data)));
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
