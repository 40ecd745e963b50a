//! Single-thread query latency of every text model, in-process and through HTTP — the Rust side
//! of `bench/text_bench.sh` (docs/BENCHMARKS.md, "Text core", issue 2).
//!
//! ```text
//! cargo run --release --example query_latency -- --data-dir DIR --queries FILE
//!     [--passes 5] [--http 127.0.0.1:PORT] [--top-out FILE]
//! ```
//! In-process: every query of FILE through `TextIndex::search` for each model at k = 10 and
//! k = 100 without snippets, and at k = 10 with snippets (what `/search` computes). HTTP: every
//! query as `GET /search?q=..&k=10&model=M` on one keep-alive connection, response body read in
//! full. Each pass runs every configuration once over all queries (configurations interleaved
//! so machine noise hits them alike); p50/p99 are taken per pass and the median over passes is
//! printed as JSON on stdout.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use rankd::search::{Engine, Returns, SearchQuery};
use rankd::text::{ModelKind, TextIndex};
use serde::Serialize;

#[derive(Parser)]
#[command(about = "Query latency p50/p99 per text model, in-process and over HTTP")]
struct Args {
    #[arg(long)]
    data_dir: PathBuf,
    /// One query per line.
    #[arg(long)]
    queries: PathBuf,
    /// Timed passes over all queries; medians over passes are reported.
    #[arg(long, default_value_t = 5)]
    passes: usize,
    /// Also time `/search` on a rankd server at this address (loopback only).
    #[arg(long)]
    http: Option<std::net::SocketAddr>,
    /// Write bm25's top-10 ids per query here as JSONL `{"q", "ids"}` (compared with bm25s).
    #[arg(long)]
    top_out: Option<PathBuf>,
}

/// One measured configuration.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    InProcess { k: usize, snippets: bool },
    Http,
}

#[derive(Serialize)]
struct Row {
    model: &'static str,
    /// "lib" (in-process) or "http".
    via: &'static str,
    k: usize,
    snippets: bool,
    p50_ms: f64,
    p99_ms: f64,
    mean_ms: f64,
    /// p50 of each pass, to show the spread.
    pass_p50_ms: Vec<f64>,
    mean_hits: f64,
    /// HTTP rows only: what HTTP adds to each request, client latency minus the server's own
    /// search time (`took_ms` of the same response); median over passes of the per-pass p50/p99.
    #[serde(skip_serializing_if = "Option::is_none")]
    http_overhead_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_overhead_p99_ms: Option<f64>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.passes == 0 {
        anyhow::bail!("--passes must be at least 1");
    }
    if let Some(addr) = args.http {
        if !addr.ip().is_loopback() {
            anyhow::bail!("--http must be a loopback address, got {addr}");
        }
    }
    let text = std::fs::read_to_string(&args.queries)?;
    let queries: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if queries.is_empty() {
        anyhow::bail!("{}: no queries", args.queries.display());
    }
    let engine = Engine::new(TextIndex::open(&args.data_dir, None)?);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();

    let mut configs: Vec<(ModelKind, Mode)> = Vec::new();
    for model in ModelKind::ALL {
        for (k, snippets) in [(10, false), (100, false), (10, true)] {
            configs.push((model, Mode::InProcess { k, snippets }));
        }
        if args.http.is_some() {
            configs.push((model, Mode::Http));
        }
    }

    // One query runs one configuration; returns the number of hits and, over HTTP, the
    // server's own search time.
    let run = |model: ModelKind, mode: Mode, q: &str| -> anyhow::Result<(usize, Option<f64>)> {
        match mode {
            Mode::InProcess { k, snippets } => {
                let mut req = SearchQuery::new(q, k).model(model);
                if snippets {
                    req.returns = Returns::ALL;
                }
                Ok((engine.search(&req)?.hits.len(), None))
            }
            Mode::Http => {
                let addr = args.http.expect("Http mode only with --http");
                let body = agent
                    .get(format!("http://{addr}/search"))
                    .query("q", q)
                    .query("k", "10")
                    .query("model", model.name())
                    .call()?
                    .body_mut()
                    .read_to_string()?;
                let v: serde_json::Value = serde_json::from_str(&body)?;
                Ok((
                    v["hits"].as_array().map_or(0, Vec::len),
                    v["took_ms"].as_f64(),
                ))
            }
        }
    };

    if let Some(path) = &args.top_out {
        let mut lines = String::new();
        for q in &queries {
            let hits = engine
                .search(&SearchQuery::new(*q, 10).model(ModelKind::Bm25))?
                .hits;
            let ids: Vec<String> = hits.into_iter().map(|h| h.id).collect();
            lines.push_str(&serde_json::json!({ "q": q, "ids": ids }).to_string());
            lines.push('\n');
        }
        std::fs::write(path, lines)?;
    }

    // Warm-up: every model over every query at k = 100 (touches the postings and stored
    // documents the timed configurations read), then a few requests per HTTP configuration.
    for model in ModelKind::ALL {
        for q in &queries {
            run(
                model,
                Mode::InProcess {
                    k: 100,
                    snippets: false,
                },
                q,
            )?;
        }
    }
    for &(model, mode) in configs.iter().filter(|(_, m)| *m == Mode::Http) {
        for q in queries.iter().take(20) {
            run(model, mode, q)?;
        }
    }

    let mut samples: Vec<Vec<Vec<f64>>> = vec![Vec::new(); configs.len()];
    let mut overheads: Vec<Vec<Vec<f64>>> = vec![Vec::new(); configs.len()];
    let mut hits = vec![0usize; configs.len()];
    for _ in 0..args.passes {
        for (c, &(model, mode)) in configs.iter().enumerate() {
            let mut times = Vec::with_capacity(queries.len());
            let mut overhead = Vec::new();
            for q in &queries {
                let start = Instant::now();
                let (n, server_ms) = run(model, mode, q)?;
                let ms = start.elapsed().as_secs_f64() * 1e3;
                hits[c] += n;
                times.push(ms);
                if let Some(server_ms) = server_ms {
                    overhead.push(ms - server_ms);
                }
            }
            samples[c].push(times);
            overheads[c].push(overhead);
        }
    }

    let rows: Vec<Row> = configs
        .iter()
        .zip(samples)
        .zip(hits)
        .zip(overheads)
        .map(|(((&(model, mode), passes), hits), overhead)| {
            let overhead_at = |p: f64| {
                (mode == Mode::Http).then(|| {
                    median(
                        &overhead
                            .iter()
                            .map(|t| percentile(t, p))
                            .collect::<Vec<_>>(),
                    )
                })
            };
            let (via, k, snippets) = match mode {
                Mode::InProcess { k, snippets } => ("lib", k, snippets),
                Mode::Http => ("http", 10, true),
            };
            let pass_p50: Vec<f64> = passes.iter().map(|t| percentile(t, 0.50)).collect();
            Row {
                model: model.name(),
                via,
                k,
                snippets,
                p50_ms: median(&pass_p50),
                p99_ms: median(
                    &passes
                        .iter()
                        .map(|t| percentile(t, 0.99))
                        .collect::<Vec<_>>(),
                ),
                mean_ms: median(
                    &passes
                        .iter()
                        .map(|t| t.iter().sum::<f64>() / t.len() as f64)
                        .collect::<Vec<_>>(),
                ),
                pass_p50_ms: pass_p50,
                mean_hits: hits as f64 / (args.passes * queries.len()) as f64,
                http_overhead_p50_ms: overhead_at(0.50),
                http_overhead_p99_ms: overhead_at(0.99),
            }
        })
        .collect();
    let out = serde_json::json!({
        "queries": queries.len(),
        "passes": args.passes,
        "num_docs": engine.index.num_docs(),
        "rows": rows,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// Nearest-rank percentile (`p` in 0..=1) of unsorted samples.
fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = (p * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

fn median(values: &[f64]) -> f64 {
    percentile(values, 0.5)
}
