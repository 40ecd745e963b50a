//! Link analysis on a bare graph file (edge list or Hollins layout), without an index.
//!
//! ```text
//! cargo run --release --example graph_scores -- dump FILE [--tol T]
//!     TSV on stdout: label, pagerank, hits_hub, hits_authority, salsa_hub, salsa_authority
//!     (what bench/graph_crosscheck.py compares with networkx).
//! cargo run --release --example graph_scores -- time FILE [--reps R] [--tol T]
//!     One JSON line of medians over R runs (PageRank to per-node tolerance T, default 1e-9;
//!     HITS, SALSA closed form, TrustRank, SimRank single-source top 10 from the 20
//!     highest-PageRank pages, each the median of R, and SimRank's diagonal once) plus the measured
//!     memory bandwidth and the bytes PageRank touches per iteration (bench/graph_bench.py).
//! cargo run --release --example graph_scores -- similar FILE [--reps R] [--samples S]
//!         [--walk-error E] [--push-error E] [--source LABEL]...
//!     SimRank single-source top 10 per source (default: the 20 highest-PageRank pages): latency
//!     (median of R), levels, links read and the top 10 by label; median and max on stderr.
//! cargo run --release --example graph_scores -- pagerank FILE [--tol T]
//!     Load and run PageRank once, nothing else: the process whose peak memory is reported.
//! ```

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use rankd::graph::convergence::{top_k, Convergence};
use rankd::graph::pagerank::{pagerank, PageRankParams};
use rankd::graph::{hits, load_graph_file, salsa, simrank, trustrank, Csr};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: graph_scores dump|time|similar|pagerank FILE [--tol T] [--reps R]";
    let (mode, file) = match args.as_slice() {
        [m, f, ..] => (m.as_str(), f.as_str()),
        _ => return Err(usage.into()),
    };
    let flag = |name: &str| -> Result<Option<f64>, Box<dyn std::error::Error>> {
        match args.iter().position(|a| a == name) {
            Some(i) => Ok(Some(args.get(i + 1).ok_or(usage)?.parse()?)),
            None => Ok(None),
        }
    };
    let tol = flag("--tol")?.unwrap_or(1e-9);
    let reps = flag("--reps")?.unwrap_or(7.0) as usize;
    let g = load_graph_file(Path::new(file))?;
    let convergence = Convergence {
        tol_per_node: tol,
        max_iter: 100_000,
        top_k: 0,
        ..Convergence::default()
    };
    let pr_params = PageRankParams {
        convergence,
        ..PageRankParams::default()
    };
    match mode {
        "dump" => {
            let (pr, _) = pagerank(&g.csr, &pr_params)?;
            let (h, _) = hits::hits(&g.csr, &convergence, None)?;
            let s = salsa::salsa(&g.csr);
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            writeln!(
                out,
                "label\tpagerank\thits_hub\thits_authority\tsalsa_hub\tsalsa_authority"
            )?;
            for (i, label) in g.labels.iter().enumerate() {
                writeln!(
                    out,
                    "{label}\t{:e}\t{:e}\t{:e}\t{:e}\t{:e}",
                    pr[i], h.hub[i], h.authority[i], s.hub[i], s.authority[i]
                )?;
            }
            out.flush()?;
        }
        "pagerank" => {
            let start = Instant::now();
            let (_, report) = pagerank(&g.csr, &pr_params)?;
            println!(
                "{{\"seconds\":{},\"iterations\":{}}}",
                start.elapsed().as_secs_f64(),
                report.iterations
            );
        }
        "time" => time(&g.csr, &pr_params, reps)?,
        "similar" => similar(&g, &pr_params, reps, flag("--samples")?.map(|x| x as usize))?,
        _ => return Err(usage.into()),
    }
    Ok(())
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64()
}

fn timed<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        last = Some(std::hint::black_box(f()));
        times.push(start.elapsed());
    }
    (median(times), last.expect("at least one repetition"))
}

fn time(g: &Csr, params: &PageRankParams, reps: usize) -> Result<(), Box<dyn std::error::Error>> {
    let (n, m) = (g.n(), g.m());
    let (pr_s, (pr, report)) = timed(reps, || pagerank(g, params).expect("valid parameters"));
    // Rank stability (SPEC §2, book ch. 9): when did the top-100 order last change?
    let tracked = PageRankParams {
        convergence: Convergence {
            top_k: 100,
            ..params.convergence
        },
        ..params.clone()
    };
    let (tracked_s, (_, tracked_report)) = timed(reps, || pagerank(g, &tracked).expect("valid"));
    let (hits_s, _) = timed(reps, || {
        hits::hits(g, &params.convergence, None).expect("valid")
    });
    let (salsa_s, _) = timed(reps, || salsa::salsa(g));
    let (inv, _) = trustrank::inverse_pagerank(g, params)?;
    let seeds = trustrank::seed_candidates(&inv, trustrank::DEFAULT_CANDIDATES);
    let (trust_s, _) = timed(reps, || {
        trustrank::trustrank(g, &seeds, &trustrank::default_params()).expect("valid seeds")
    });
    // SimRank single-source top 10 from the 20 highest-PageRank pages (where /similar is
    // most often asked), default parameters; median latency per query. The diagonal correction
    // is estimated once per graph (by `rankd graph`), timed once: it is seconds, not ms.
    let sources = top_k(&pr, 20);
    let start = Instant::now();
    let diagonal = simrank::simrank_diagonal(g, &simrank::DiagonalParams::default())?;
    let diagonal_s = start.elapsed().as_secs_f64();
    let index = simrank::SimRankIndex::new(g, diagonal)?;
    let query = simrank::QueryParams::default();
    let mut latencies = Vec::new();
    for &s in &sources {
        let (secs, _) = timed(reps, || {
            index.top_k(g, s, 10, &query).expect("valid source")
        });
        latencies.push(Duration::from_secs_f64(secs));
    }
    let simrank_min_s = latencies.iter().min().map_or(0.0, |d| d.as_secs_f64());
    let simrank_max_s = latencies.iter().max().map_or(0.0, |d| d.as_secs_f64());
    let simrank_s = median(latencies);
    // Unique bytes one PageRank iteration reads or writes, each array counted once: in-offsets,
    // the previous iterate, 1/outdeg, the share array it gathers from, the new iterate and the
    // new share array (8 bytes per node each), and in-sources (4 bytes per edge).
    let bytes_per_iter = 48 * n + 4 * m;
    let bandwidth_dram = bandwidth(512 << 20);
    let bandwidth_cache = bandwidth(bytes_per_iter.next_power_of_two());
    println!(
        "{{\"nodes\":{n},\"edges\":{m},\"pagerank_s\":{pr_s},\"pagerank_iterations\":{},\
         \"pagerank_tracked_s\":{tracked_s},\"top100_last_changed\":{},\
         \"hits_s\":{hits_s},\"salsa_s\":{salsa_s},\"trustrank_s\":{trust_s},\
         \"simrank_top10_s\":{simrank_s},\"simrank_top10_min_s\":{simrank_min_s},\"simrank_top10_max_s\":{simrank_max_s},\"simrank_diagonal_s\":{diagonal_s},\"simrank_error_bound\":{},\"bytes_per_iteration\":{bytes_per_iter},\
         \"bandwidth_dram_bytes_s\":{bandwidth_dram},\"bandwidth_cache_bytes_s\":{bandwidth_cache}}}",
        report.iterations,
        tracked_report.top_order_last_changed,
        query.error_bound()
    );
    Ok(())
}

/// Sequential read bandwidth (bytes/s) over a buffer of `bytes`: the median over repeated
/// sums of a u64 array, single thread (PageRank below the parallel threshold is single-threaded).
fn bandwidth(bytes: usize) -> f64 {
    let words = (bytes / 8).max(1024);
    let data: Vec<u64> = (0..words as u64).collect();
    let passes = ((1usize << 30) / (words * 8)).clamp(1, 4096);
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let mut total = 0u64;
        for _ in 0..passes {
            total = total.wrapping_add(
                std::hint::black_box(&data)
                    .iter()
                    .fold(0u64, |a, &b| a.wrapping_add(b)),
            );
        }
        std::hint::black_box(total);
        times.push(start.elapsed() / passes as u32);
    }
    (words * 8) as f64 / median(times)
}

/// SimRank single-source for the 20 highest-PageRank pages: per source the latency (median of
/// R), links read and the top 10 by label; the diagonal is estimated once first.
fn similar(
    g: &rankd::graph::LabeledGraph,
    params: &PageRankParams,
    reps: usize,
    samples: Option<usize>,
) -> Result<(), Box<dyn std::error::Error>> {
    let (pr, _) = pagerank(&g.csr, params)?;
    let start = Instant::now();
    let defaults = simrank::DiagonalParams::default();
    let dp = simrank::DiagonalParams {
        samples: samples.unwrap_or(defaults.samples),
        ..defaults
    };
    let diagonal = simrank::simrank_diagonal(&g.csr, &dp)?;
    eprintln!("diagonal: {:.2} s", start.elapsed().as_secs_f64());
    let index = simrank::SimRankIndex::new(&g.csr, diagonal)?;
    let defaults = simrank::QueryParams::default();
    let error = |name: &str, default: f64| -> Result<f64, Box<dyn std::error::Error>> {
        let args: Vec<String> = std::env::args().collect();
        match args.iter().position(|a| a == name) {
            Some(i) => Ok(args.get(i + 1).ok_or("missing value")?.parse()?),
            None => Ok(default),
        }
    };
    let query = simrank::QueryParams {
        walk_error: error("--walk-error", defaults.walk_error)?,
        push_error: error("--push-error", defaults.push_error)?,
    };
    let mut latencies = Vec::new();
    // `--source LABEL` (repeatable) instead of the 20 highest-PageRank pages.
    let args: Vec<String> = std::env::args().collect();
    let mut sources: Vec<u32> = args
        .windows(2)
        .filter(|w| w[0] == "--source")
        .map(|w| {
            g.labels
                .iter()
                .position(|l| *l == w[1])
                .map(|i| i as u32)
                .ok_or_else(|| format!("no node labelled {}", w[1]))
        })
        .collect::<Result<_, _>>()?;
    if sources.is_empty() {
        sources = top_k(&pr, 20);
    }
    for s in sources {
        let (secs, top) = timed(reps, || index.top_k(&g.csr, s, 10, &query).expect("valid"));
        let all = index.single_source(&g.csr, s, &query)?;
        latencies.push(secs);
        let top: Vec<String> = top
            .iter()
            .map(|&(v, x)| format!("{}={x:.4}", g.labels[v as usize]))
            .collect();
        println!(
            "{}\t{:.2} ms\tlevels {}\tlinks {}\t{}",
            g.labels[s as usize],
            secs * 1e3,
            all.levels,
            all.links_read,
            top.join(" ")
        );
    }
    latencies.sort_by(f64::total_cmp);
    eprintln!(
        "median {:.2} ms, max {:.2} ms (error bound {} + diagonal)",
        latencies[latencies.len() / 2] * 1e3,
        latencies[latencies.len() - 1] * 1e3,
        query.error_bound()
    );
    Ok(())
}
