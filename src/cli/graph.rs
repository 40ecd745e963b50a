//! `rankd graph`: build the link graph of the index, compute every link score (SPEC §2) and
//! store them beside the index; prints the inverse-PageRank TrustRank seed candidates.

use std::time::Instant;

use super::{progress, DataArgs};
use crate::graph::{trustrank, LinkScoreOptions};
use crate::links;
use crate::text::TextIndex;

#[derive(clap::Args, Debug)]
pub struct GraphArgs {
    /// A file of trusted document ids, one per line (SPEC §2.5). Default: the top
    /// inverse-PageRank candidates, unreviewed.
    #[arg(long)]
    pub seeds: Option<std::path::PathBuf>,
    /// How many inverse-PageRank seed candidates to print.
    #[arg(long, default_value_t = 20)]
    pub candidates: usize,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub data: DataArgs,
}

pub fn run(args: GraphArgs) -> anyhow::Result<()> {
    let index = TextIndex::open(&args.data.data_dir, args.data.config()?)?;
    let summary = compute(&index, args.seeds.as_deref(), args.json)?;
    let scores = &summary.0;
    let candidates: Vec<&str> =
        trustrank::seed_candidates(&scores.inverse_pagerank, args.candidates)
            .into_iter()
            .map(|n| scores.keys[n as usize].as_str())
            .collect();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "nodes": scores.n(),
                "edges": summary.1,
                "seconds": summary.2,
                "seed_candidates": candidates,
            })
        );
    } else {
        eprintln!(
            "link scores for {} documents and {} links computed in {:.1}s",
            scores.n(),
            summary.1,
            summary.2
        );
        println!("TrustRank seed candidates (highest inverse PageRank first):");
        for c in candidates {
            println!("  {c}");
        }
    }
    Ok(())
}

/// Computes and stores the link scores; returns them, the edge count and the seconds taken.
pub fn compute(
    index: &TextIndex,
    seeds: Option<&std::path::Path>,
    quiet: bool,
) -> anyhow::Result<(crate::graph::LinkScores, usize, f64)> {
    let start = Instant::now();
    let trusted = seeds.map(read_seed_ids).transpose()?;
    let bar = progress(6, "link scores", quiet);
    let options = LinkScoreOptions::default();
    let (scores, stats) =
        links::compute_and_store(index, &options, trusted.as_deref(), &mut |p| {
            bar.set_position(p.step as u64);
            bar.set_message(p.stage);
        })?;
    bar.finish_and_clear();
    Ok((scores, stats.edges, start.elapsed().as_secs_f64()))
}

/// The document ids of a seed file: one per line, `#` comments and blank lines ignored.
fn read_seed_ids(path: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        crate::error::Invalid(format!("cannot read seed file {}: {e}", path.display()))
    })?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect())
}
