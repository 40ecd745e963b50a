//! Single-machine PageRank baselines for the link-analysis benchmark (`bench/graph_dataflow.py`,
//! docs/BENCHMARKS.md "Link analysis beyond one machine"): rankd's CSR engine on one thread
//! and `webgraph-algo`'s PageRank (the "cost to beat" of McSherry, Isard & Murray's COST
//! paper), each for a fixed number of iterations on the same graph, one engine per process so
//! that peak memory is the engine's own.
//!
//! ```text
//! cargo run --release --example pagerank_baselines -- (--rmat SCALE | --edges FILE) \
//!     --engine csr|webgraph [--iterations 20]
//! ```
//! Prints one JSON object. webgraph-algo's PageRank is Gauss–Seidel, parallel with rayon: run
//! it with `RAYON_NUM_THREADS=1` for the one-thread figure. Its iterations converge faster
//! than power iterations, so per-iteration times compare the cost of a pass over the edges,
//! and `l1_to_csr_fixed_point` says how close each result is to the same fixed point.

use std::time::Instant;

use rankd::graph::convergence::Convergence;
use rankd::graph::pagerank::{pagerank, PageRankParams};
use rankd::graph::rmat::{rmat, RmatParams};
use rankd::graph::Csr;
use webgraph::graphs::vec_graph::VecGraph;
use webgraph_algo::rank::pagerank::{preds, PageRank};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let engine = value("--engine").unwrap_or_else(|| "csr".into());
    let iterations: usize = value("--iterations").map_or(Ok(20), |s| s.parse())?;
    let load = Instant::now();
    let csr = if let Some(scale) = value("--rmat") {
        let params = RmatParams::graph500(scale.parse()?, 1);
        let mut edges = Vec::with_capacity(params.edges() as usize);
        rmat(&params, |u, v| edges.push((u, v)))?;
        Csr::from_edges(params.nodes() as usize, &edges)?.0
    } else if let Some(path) = value("--edges") {
        rankd::graph::load_graph_file(std::path::Path::new(&path))?.csr
    } else {
        anyhow::bail!("give --rmat SCALE or --edges FILE");
    };
    let (n, m) = (csr.n(), csr.m());
    let load_seconds = load.elapsed().as_secs_f64();
    let fixed = |iterations| PageRankParams {
        convergence: Convergence {
            tol_per_node: 0.0,
            max_iter: iterations,
            top_k: 0,
            stop_when_top_stable_for: None,
        },
        parallel: Some(false),
        ..PageRankParams::default()
    };
    let (seconds, ranks) = match engine.as_str() {
        "csr" => {
            let start = Instant::now();
            let (x, _) = pagerank(&csr, &fixed(iterations))?;
            (start.elapsed().as_secs_f64(), x)
        }
        "webgraph" => {
            // webgraph-algo takes the transpose as a random-access graph.
            let transpose = VecGraph::from_arcs(csr.edges().map(|(u, v)| (v as usize, u as usize)));
            let mut transpose = transpose;
            if n > 0 {
                transpose.add_node(n - 1);
            }
            let mut pr = PageRank::new(&transpose);
            pr.alpha(0.85);
            let start = Instant::now();
            pr.run(preds::MaxIter::from(iterations));
            (start.elapsed().as_secs_f64(), pr.rank().to_vec())
        }
        other => anyhow::bail!("unknown engine {other}"),
    };
    let (reference, _) = pagerank(&csr, &fixed(200))?;
    let l1: f64 = ranks
        .iter()
        .zip(&reference)
        .map(|(a, b)| (a - b).abs())
        .sum();
    println!(
        "{}",
        serde_json::json!({
            "engine": engine, "nodes": n, "edges": m, "iterations": iterations,
            "load_seconds": load_seconds, "seconds": seconds,
            "seconds_per_iteration": seconds / iterations as f64,
            "edges_per_second": m as f64 * iterations as f64 / seconds,
            "l1_to_csr_fixed_point": l1,
            "peak_rss_mb": rankd::cli::ingest::peak_rss_mb(),
            "threads": std::env::var("RAYON_NUM_THREADS").ok(),
        })
    );
    Ok(())
}
