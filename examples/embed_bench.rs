//! Embedding speed (docs/BENCHMARKS.md, "Sentence embeddings"): per-query latency and
//! documents per second of `rankd::embed::Embedder`, for `bench/embed_bench.py`, which runs
//! sentence-transformers on the same texts with the same threads in the same run.
//!
//! ```text
//! RAYON_NUM_THREADS=1 cargo run --example embed_bench -- TEXTS.json [MODEL_DIR] [--rounds 10]
//! ```
//! TEXTS.json is `{"queries": [..], "docs": [..]}`. Each query is embedded alone (after one
//! warm-up pass) `--rounds` times; p50/p99 over all of them. The documents are embedded with
//! `embed_batch` (batches of 32, sorted by length) three times; the median run gives
//! documents/s. Prints one JSON object.

use std::path::PathBuf;
use std::time::Instant;

use rankd::embed::Embedder;

#[derive(serde::Deserialize)]
struct Texts {
    queries: Vec<String>,
    docs: Vec<String>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut positional = Vec::new();
    let mut rounds = 10;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => rounds = args.next().expect("--rounds N").parse()?,
            _ => positional.push(a),
        }
    }
    let texts: Texts = serde_json::from_str(&std::fs::read_to_string(&positional[0])?)?;
    let dir = positional.get(1).map(PathBuf::from);
    let embedder = Embedder::load_or_default(dir.as_deref())?;

    for q in &texts.queries {
        embedder.embed(q)?;
    }
    let mut latencies = Vec::new();
    for _ in 0..rounds {
        for q in &texts.queries {
            let start = Instant::now();
            std::hint::black_box(embedder.embed(q)?);
            latencies.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    latencies.sort_by(f64::total_cmp);

    let mut runs = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        std::hint::black_box(embedder.embed_batch(&texts.docs)?);
        runs.push(start.elapsed().as_secs_f64());
    }
    runs.sort_by(f64::total_cmp);
    let tokens: usize = texts
        .docs
        .iter()
        .map(|d| embedder.token_ids(d).map(|t| t.len()))
        .sum::<Result<_, _>>()?;
    let out = serde_json::json!({
        "threads": std::env::var("RAYON_NUM_THREADS").ok(),
        "query_p50_ms": percentile(&latencies, 0.5),
        "query_p99_ms": percentile(&latencies, 0.99),
        "docs": texts.docs.len(),
        "doc_tokens_mean": tokens as f64 / texts.docs.len() as f64,
        "docs_per_s": texts.docs.len() as f64 / runs[1],
    });
    println!("{out}");
    Ok(())
}
