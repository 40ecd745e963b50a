//! Latency of the second phase (issue 5, docs/BENCHMARKS.md "Reranking latency"): for every
//! query of a file, a first-phase BM25F search of the top 10 (what `/search?rerank=false`
//! computes, snippets included) and a two-phase search reranking windows of 100 and 1000 with
//! the index's active model (page of 10, snippets included), interleaved per query so machine
//! noise hits them alike. Reports p50/p99 of the totals and of the retrieve / features /
//! rerank phases, and what the second phase adds per query (its retrieve + features + rerank
//! minus the first phase's own top-10 ranking without snippets), medians over passes, as JSON
//! on stdout; `--per-query FILE` also writes every query's times of the last pass.
//!
//! ```text
//! cargo run --release --example rerank_latency -- --data-dir DIR --queries FILE [--passes 3]
//! ```

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use rankd::search::model::{self, ActiveModel};
use rankd::search::{Engine, PhaseTimes, Ranking, Returns, SearchQuery};
use rankd::text::{ModelKind, TextIndex};
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
    /// Rerank windows to time (e.g. `--windows 100` alone, for a profile of the default).
    #[arg(long, value_delimiter = ',', default_values_t = [100, 1000])]
    windows: Vec<usize>,
    /// Also write each query's times of the last pass as JSON lines (ms), to find the queries
    /// behind a p99.
    #[arg(long)]
    per_query: Option<PathBuf>,
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let i = ((values.len() as f64 - 1.0) * p).round() as usize;
    values[i]
}

/// The demo's search of `q` (BM25F, page of 10) with the given ranking and returned fields.
fn query(q: &str, ranking: Ranking, returns: Returns) -> SearchQuery {
    let mut req = SearchQuery::new(q, 10)
        .model(ModelKind::Bm25F)
        .ranking(ranking);
    req.returns = returns;
    req
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
            let newest = model::model_files(&args.data_dir)?
                .into_iter()
                .next()
                .ok_or_else(|| anyhow::anyhow!("no model in {}", args.data_dir.display()))?;
            ActiveModel::load(&newest)?
        }
    };
    let model_id = model.id().to_string();
    let model_kind = model.reranker.kind();
    let engine = Engine::new(index).with_links(links).with_model(Some(model));
    let queries: Vec<String> = std::fs::read_to_string(&args.queries)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    // name → per-pass (p50, p99) in ms: the first phase's two, then six per window.
    let mut names = vec![
        "first_phase_total".to_string(),
        "first_phase_retrieve".to_string(),
    ];
    for w in &args.windows {
        for part in ["total", "retrieve", "features", "rerank", "hits", "added"] {
            names.push(format!("w{w}_{part}"));
        }
    }
    let mut per_pass: Vec<Vec<(f64, f64)>> = vec![Vec::new(); names.len()];
    // One warm-up pass over every configuration (postings, columns, snippet passages).
    for q in &queries {
        for &window in &args.windows {
            let req = query(q, Ranking::Rerank { window }, Returns::ALL);
            engine.search(&req)?;
        }
    }
    let mut rows = Vec::new();
    for _ in 0..args.passes {
        rows.clear();
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        for q in &queries {
            let mut row = serde_json::Map::new();
            row.insert("query".into(), json!(q));
            let req = query(q, Ranking::FirstPhase, Returns::ALL);
            let t = Instant::now();
            engine.search(&req)?;
            samples[0].push(t.elapsed().as_secs_f64() * 1e3);
            // The first phase's ranking alone (no snippets): what the second phase's
            // retrieve + features + rerank replace, so their difference is what it adds.
            let bare = query(q, Ranking::FirstPhase, Returns::IDS);
            let t = Instant::now();
            engine.search(&bare)?;
            let first_ms = t.elapsed().as_secs_f64() * 1e3;
            samples[1].push(first_ms);
            row.insert("first_phase_retrieve".into(), json!(first_ms));
            for (i, &window) in args.windows.iter().enumerate() {
                let base = 2 + 6 * i;
                let req = query(q, Ranking::Rerank { window }, Returns::ALL);
                let t = Instant::now();
                let times: PhaseTimes = engine.search(&req)?.times;
                samples[base].push(t.elapsed().as_secs_f64() * 1e3);
                samples[base + 1].push(times.retrieve * 1e3);
                samples[base + 2].push(times.features * 1e3);
                samples[base + 3].push(times.rerank * 1e3);
                samples[base + 4].push(times.hits * 1e3);
                let added = (times.retrieve + times.features + times.rerank) * 1e3 - first_ms;
                samples[base + 5].push(added);
                for (part, ms) in [
                    ("retrieve", times.retrieve * 1e3),
                    ("features", times.features * 1e3),
                    ("rerank", times.rerank * 1e3),
                    ("added", added),
                ] {
                    row.insert(format!("w{window}_{part}"), json!(ms));
                }
            }
            rows.push(serde_json::Value::Object(row));
        }
        for (i, s) in samples.iter_mut().enumerate() {
            per_pass[i].push((percentile(s, 0.5), percentile(s, 0.99)));
        }
    }
    if let Some(path) = &args.per_query {
        let lines: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
        std::fs::write(path, lines.join("\n") + "\n")?;
    }
    let mut out = serde_json::Map::new();
    for (i, name) in names.iter().enumerate() {
        out.insert(
            name.clone(),
            json!({
                "p50_ms": median(per_pass[i].iter().map(|p| p.0).collect()),
                "p99_ms": median(per_pass[i].iter().map(|p| p.1).collect()),
            }),
        );
    }
    out.insert("queries".into(), json!(queries.len()));
    out.insert("passes".into(), json!(args.passes));
    out.insert("model".into(), json!(model_id));
    out.insert("model_kind".into(), json!(model_kind));
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
