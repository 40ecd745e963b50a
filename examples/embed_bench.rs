//! Embedding speed (docs/BENCHMARKS.md, "Sentence embeddings"): per-query latency and
//! documents per second of `rankd::embed::Embedder` (a transformer) or, with `--static`,
//! `rankd::embed::StaticEmbedder` (a Model2Vec table), for `bench/embed_bench.py`, which runs
//! sentence-transformers and model2vec on the same texts with the same threads in the same run.
//!
//! ```text
//! RAYON_NUM_THREADS=1 cargo run --release --example embed_bench -- TEXTS.json [MODEL_DIR] \
//!     [--static] [--rounds 10] [--doc-repeat 1]
//! ```
//! TEXTS.json is `{"queries": [..], "docs": [..]}`. Each query is embedded alone (after one
//! warm-up pass) `--rounds` times; p50/p99 over all of them. The documents are embedded with
//! `embed_batch` (the transformer: batches of 32, sorted by length) three times, each time
//! `--doc-repeat` times over (a static model embeds the 200 documents in a few milliseconds);
//! the median run gives documents/s. Prints one JSON object.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rankd::embed::{EmbedError, Embedder, StaticEmbedder};

#[derive(serde::Deserialize)]
struct Texts {
    queries: Vec<String>,
    docs: Vec<String>,
}

/// The embedder under test.
enum Engine {
    Transformer(Box<Embedder>),
    Static(Box<StaticEmbedder>),
}

impl Engine {
    fn load(dir: Option<&Path>, is_static: bool) -> anyhow::Result<Engine> {
        Ok(if is_static {
            let dir = dir.ok_or_else(|| anyhow::anyhow!("--static needs MODEL_DIR"))?;
            Engine::Static(Box::new(StaticEmbedder::load(dir)?))
        } else {
            Engine::Transformer(Box::new(Embedder::load_or_default(dir)?))
        })
    }

    fn embed(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        match self {
            Engine::Transformer(e) => e.embed(text),
            Engine::Static(e) => e.embed(text),
        }
    }

    fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self {
            Engine::Transformer(e) => e.embed_batch(texts),
            Engine::Static(e) => e.embed_batch(texts),
        }
    }

    fn token_count(&self, text: &str) -> Result<usize, EmbedError> {
        match self {
            Engine::Transformer(e) => e.token_ids(text).map(|t| t.len()),
            Engine::Static(e) => e.token_ids(text).map(|t| t.len()),
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut positional = Vec::new();
    let mut rounds = 10;
    let mut doc_repeat = 1;
    let mut is_static = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => rounds = args.next().expect("--rounds N").parse()?,
            "--doc-repeat" => doc_repeat = args.next().expect("--doc-repeat N").parse()?,
            "--static" => is_static = true,
            _ => positional.push(a),
        }
    }
    let texts: Texts = serde_json::from_str(&std::fs::read_to_string(&positional[0])?)?;
    let dir = positional.get(1).map(PathBuf::from);
    let engine = Engine::load(dir.as_deref(), is_static)?;

    for q in &texts.queries {
        engine.embed(q)?;
    }
    let mut latencies = Vec::new();
    for _ in 0..rounds {
        for q in &texts.queries {
            let start = Instant::now();
            std::hint::black_box(engine.embed(q)?);
            latencies.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    latencies.sort_by(f64::total_cmp);

    let mut runs = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        for _ in 0..doc_repeat {
            std::hint::black_box(engine.embed_batch(&texts.docs)?);
        }
        runs.push(start.elapsed().as_secs_f64());
    }
    runs.sort_by(f64::total_cmp);
    let tokens: usize = texts
        .docs
        .iter()
        .map(|d| engine.token_count(d))
        .sum::<Result<_, _>>()?;
    let out = serde_json::json!({
        "threads": std::env::var("RAYON_NUM_THREADS").ok(),
        "query_p50_ms": percentile(&latencies, 0.5),
        "query_p99_ms": percentile(&latencies, 0.99),
        "docs": texts.docs.len(),
        "doc_tokens_mean": tokens as f64 / texts.docs.len() as f64,
        "docs_per_s": (texts.docs.len() * doc_repeat) as f64 / runs[1],
    });
    println!("{out}");
    Ok(())
}
