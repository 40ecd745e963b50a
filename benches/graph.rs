//! Link-analysis kernels on wiki-Vote (7 115 nodes, 103 689 edges), or on the graph file named
//! by `RANKD_GRAPH` (edge list or Hollins layout):
//! `cargo bench --bench graph` (`RANKD_GRAPH=path cargo bench --bench graph`).
//! PageRank runs to the SPEC tolerance (per-node 1e-9), serial and rayon-parallel — the
//! comparison behind `PARALLEL_MIN_EDGES`.

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion};
use rankd::graph::convergence::{top_k, Convergence};
use rankd::graph::pagerank::{pagerank, PageRankParams};
use rankd::graph::{hits, load_graph_file, salsa, simrank, trustrank};

fn graph_path() -> PathBuf {
    std::env::var_os("RANKD_GRAPH")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../shared/data/graphs/wiki-Vote.txt"
            ))
        })
}

fn bench(c: &mut Criterion) {
    let g = load_graph_file(&graph_path()).expect("graph file").csr;
    let convergence = Convergence {
        top_k: 0,
        ..Convergence::default()
    };
    let mut group = c.benchmark_group("graph");
    group.sample_size(20);
    for (name, parallel) in [("pagerank_serial", false), ("pagerank_parallel", true)] {
        let params = PageRankParams {
            convergence,
            parallel: Some(parallel),
            ..PageRankParams::default()
        };
        group.bench_function(name, |b| b.iter(|| pagerank(&g, &params).unwrap()));
    }
    let tracked = PageRankParams::default();
    group.bench_function("pagerank_with_top100_tracking", |b| {
        b.iter(|| pagerank(&g, &tracked).unwrap())
    });
    group.bench_function("hits", |b| {
        b.iter(|| hits::hits(&g, &convergence, None).unwrap())
    });
    group.bench_function("salsa_closed_form", |b| b.iter(|| salsa::salsa(&g)));
    let (inv, _) = trustrank::inverse_pagerank(&g, &PageRankParams::default()).unwrap();
    let seeds = trustrank::seed_candidates(&inv, trustrank::DEFAULT_CANDIDATES);
    group.bench_function("trustrank_20_iterations", |b| {
        b.iter(|| trustrank::trustrank(&g, &seeds, &trustrank::default_params()).unwrap())
    });
    let (pr, _) = pagerank(&g, &PageRankParams::default()).unwrap();
    let source = top_k(&pr, 1)[0];
    let diagonal = simrank::simrank_diagonal(&g, &simrank::DiagonalParams::default()).unwrap();
    let index = simrank::SimRankIndex::new(&g, diagonal).unwrap();
    let query = simrank::QueryParams::default();
    group.bench_function("simrank_single_source_top10", |b| {
        b.iter(|| index.top_k(&g, source, 10, &query).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
