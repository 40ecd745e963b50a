//! Latency of the second phase (issue 5, docs/BENCHMARKS.md "Reranking latency"): for every
//! query of a file, a first-phase BM25F search of the top 10 (what `/search?rerank=false`
//! computes, snippets included) and a two-phase search reranking windows of 100 and 1000 with
//! the index's active model (page of 10, snippets included), interleaved per query so machine
//! noise hits them alike. Reports p50/p99 of the totals and of the retrieve / features /
//! rerank phases, and what the second phase adds per query (its retrieve + features + rerank
//! minus the first phase's own top-10 ranking without snippets), medians over passes, as JSON
//! on stdout.
//!
//! ```text
//! cargo run --release --example rerank_latency -- --data-dir DIR --queries FILE [--passes 3]
//! ```

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use rankd::second_phase::{self, ActiveModel, PhaseTimes};
use rankd::text::{ModelKind, SearchRequest, TextIndex};
use serde_json::json;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    data_dir: PathBuf,
    #[arg(long)]
    queries: PathBuf,
    #[arg(long, default_value_t = 3)]
    passes: usize,
    /// A model file (default: the newest in the index's model directory).
    #[arg(long)]
    model: Option<PathBuf>,
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let i = ((values.len() as f64 - 1.0) * p).round() as usize;
    values[i]
}

fn median(mut v: Vec<f64>) -> f64 {
    percentile(&mut v, 0.5)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let index = TextIndex::open(&args.data_dir, None)?;
    let links = rankd::links::load(&index)?;
    let model = match &args.model {
        Some(p) => ActiveModel::load(p)?,
        None => {
            let newest = second_phase::model_files(&args.data_dir)?
                .into_iter()
                .next()
                .ok_or_else(|| anyhow::anyhow!("no model in {}", args.data_dir.display()))?;
            ActiveModel::load(&newest)?
        }
    };
    let queries: Vec<String> = std::fs::read_to_string(&args.queries)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    // name → per-pass (p50, p99) in ms
    let names = [
        "first_phase_total",
        "w100_total",
        "w100_retrieve",
        "w100_features",
        "w100_rerank",
        "w1000_total",
        "w1000_retrieve",
        "w1000_features",
        "w1000_rerank",
        "first_phase_retrieve",
        "w100_added",
        "w1000_added",
    ];
    let mut per_pass: Vec<Vec<(f64, f64)>> = vec![Vec::new(); names.len()];
    for _ in 0..args.passes {
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        for q in &queries {
            let mut req = SearchRequest::new(q.clone(), ModelKind::Bm25F, 10);
            req.snippets = true;
            let t = Instant::now();
            index.search(&req)?;
            samples[0].push(t.elapsed().as_secs_f64() * 1e3);
            // The first phase's ranking alone (no snippets): what the second phase's
            // retrieve + features + rerank replace, so their difference is what it adds.
            let mut bare = req.clone();
            bare.snippets = false;
            let t = Instant::now();
            index.search(&bare)?;
            let first_ms = t.elapsed().as_secs_f64() * 1e3;
            samples[9].push(first_ms);
            for (base, window, added) in [(1usize, 100usize, 10usize), (5, 1000, 11)] {
                let t = Instant::now();
                let (_, times): (_, PhaseTimes) =
                    second_phase::search(&index, links.as_ref(), &model, &req, window)?;
                samples[base].push(t.elapsed().as_secs_f64() * 1e3);
                samples[base + 1].push(times.retrieve * 1e3);
                samples[base + 2].push(times.features * 1e3);
                samples[base + 3].push(times.rerank * 1e3);
                samples[added]
                    .push((times.retrieve + times.features + times.rerank) * 1e3 - first_ms);
            }
        }
        for (i, s) in samples.iter_mut().enumerate() {
            per_pass[i].push((percentile(s, 0.5), percentile(s, 0.99)));
        }
    }
    let mut out = serde_json::Map::new();
    for (i, name) in names.iter().enumerate() {
        out.insert(
            name.to_string(),
            json!({
                "p50_ms": median(per_pass[i].iter().map(|p| p.0).collect()),
                "p99_ms": median(per_pass[i].iter().map(|p| p.1).collect()),
            }),
        );
    }
    out.insert("queries".into(), json!(queries.len()));
    out.insert("passes".into(), json!(args.passes));
    out.insert("model".into(), json!(model.id()));
    out.insert("model_kind".into(), json!(model.reranker.kind()));
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
