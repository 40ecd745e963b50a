//! `rankd graph`: compute every link score (SPEC §2). On an index (the default input) the
//! scores are stored beside it and the inverse-PageRank TrustRank seed candidates printed; on a
//! bare graph (`--edges`, `--bvgraph`, `--rmat`) they are written as a table to `--output`.
//!
//! The in-process CSR engine runs by default. `--workers N` runs the job on timely dataflow
//! with N threads, and `--processes P --process I --hostfile FILE` across P processes
//! (`crate::graph::dataflow`): every process runs the same command with its own `--process`,
//! and only process 0 writes. A failed job writes nothing (the served scores stay as they
//! were) and, with `--checkpoint-dir`, records `status.json` there.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{progress, DataArgs};
use crate::graph::convergence::Convergence;
use crate::graph::dataflow::{self, Checkpointing, Cluster, DataflowScores, Input};
use crate::graph::rmat::RmatParams;
use crate::graph::{trustrank, LinkScoreOptions};
use crate::links;
use crate::text::TextIndex;

#[derive(clap::Args, Debug)]
pub struct GraphArgs {
    /// A file of trusted document ids, one per line (SPEC §2.5). Default: the top
    /// inverse-PageRank candidates, unreviewed.
    #[arg(long)]
    pub seeds: Option<PathBuf>,
    /// How many inverse-PageRank seed candidates to print.
    #[arg(long, default_value_t = 20)]
    pub candidates: usize,
    /// A bare graph instead of the index: a SNAP edge list (or Hollins file).
    #[arg(long, conflicts_with_all = ["bvgraph", "rmat"])]
    pub edges: Option<PathBuf>,
    /// A bare graph instead of the index: a WebGraph BVGraph basename (BASE.graph,
    /// BASE.properties).
    #[arg(long, conflicts_with = "rmat")]
    pub bvgraph: Option<PathBuf>,
    /// A bare graph instead of the index: an R-MAT graph with Graph500's parameters on 2^SCALE
    /// nodes and 16·2^SCALE edges.
    #[arg(long, value_name = "SCALE")]
    pub rmat: Option<u32>,
    #[arg(long, default_value_t = 1)]
    pub rmat_seed: u64,
    /// Where a bare graph's scores go (a tab-separated table, one row per node).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Run on timely dataflow with this many worker threads per process.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Processes of a timely job (each runs this command with its own --process).
    #[arg(long, default_value_t = 1)]
    pub processes: usize,
    /// This process's index, 0-based; process 0 writes the result.
    #[arg(long, default_value_t = 0)]
    pub process: usize,
    /// One `host:port` per process, in process order.
    #[arg(long)]
    pub hostfile: Option<PathBuf>,
    /// Seconds to wait for every process to connect.
    #[arg(long, default_value_t = 30.0)]
    pub connect_timeout: f64,
    /// Checkpoint the timely job here and resume from it when restarted.
    #[arg(long)]
    pub checkpoint_dir: Option<PathBuf>,
    /// Iterations between checkpoints.
    #[arg(long, default_value_t = 10)]
    pub checkpoint_every: usize,
    /// PageRank and HITS tolerance per node (SPEC §2: 1e-9); PageRank stops on its error bound.
    #[arg(long)]
    pub tolerance: Option<f64>,
    /// PageRank and HITS iteration limit (SPEC §2: 200).
    #[arg(long)]
    pub max_iter: Option<usize>,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub data: DataArgs,
}

impl GraphArgs {
    fn bare_input(&self) -> Option<Input> {
        if let Some(p) = &self.edges {
            Some(Input::EdgeList(p.clone()))
        } else if let Some(b) = &self.bvgraph {
            Some(Input::BvGraph(b.clone()))
        } else {
            self.rmat
                .map(|scale| Input::Rmat(RmatParams::graph500(scale, self.rmat_seed)))
        }
    }

    fn options(&self) -> anyhow::Result<LinkScoreOptions> {
        let mut options = LinkScoreOptions::default();
        let mut conv: Convergence = options.pagerank.convergence;
        if let Some(t) = self.tolerance {
            conv.tol_per_node = t;
        }
        if let Some(m) = self.max_iter {
            conv.max_iter = m;
        }
        conv.check()
            .map_err(|e| crate::error::Invalid(format!("--tolerance: {e}")))?;
        options.pagerank.convergence = conv;
        options.hits = conv;
        Ok(options)
    }

    fn cluster(&self) -> anyhow::Result<Option<Cluster>> {
        if self.workers.is_none() && self.processes == 1 && self.hostfile.is_none() {
            return Ok(None);
        }
        let hosts = match &self.hostfile {
            Some(path) => Cluster::read_hostfile(path)
                .map_err(|e| crate::error::Invalid(format!("--hostfile: {e}")))?,
            None if self.processes > 1 => {
                return Err(
                    crate::error::Invalid("--processes above 1 needs --hostfile".into()).into(),
                )
            }
            None => Vec::new(),
        };
        let connect_timeout = Duration::try_from_secs_f64(self.connect_timeout)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                crate::error::Invalid(format!(
                    "--connect-timeout {} is not a positive number of seconds",
                    self.connect_timeout
                ))
            })?;
        Ok(Some(Cluster {
            threads: self.workers.unwrap_or(1),
            processes: self.processes,
            process: self.process,
            hosts,
            connect_timeout,
        }))
    }
}

pub fn run(args: GraphArgs) -> anyhow::Result<()> {
    let options = args.options()?;
    let cluster = args.cluster()?;
    if args.bare_input().is_some() && args.output.is_none() {
        return Err(crate::error::Invalid(
            "a bare graph (--edges, --bvgraph or --rmat) needs --output FILE for its scores".into(),
        )
        .into());
    }
    let checkpointing = args.checkpoint_dir.as_ref().map(|dir| Checkpointing {
        dir: dir.clone(),
        every: args.checkpoint_every,
    });
    let status = |state: &str, error: Option<String>| {
        if let Some(c) = &checkpointing {
            let body = serde_json::json!({
                "state": state, "process": args.process, "error": error,
                "at": crate::features::social::unix_now(),
            });
            let _ = std::fs::create_dir_all(&c.dir);
            let _ = crate::durable::write_atomic(
                &c.dir.join(format!("status.{}.json", args.process)),
                body.to_string().as_bytes(),
            );
        }
    };
    status("running", None);
    let outcome = match &cluster {
        None => run_csr(&args, &options),
        Some(cluster) => run_dataflow(&args, &options, cluster, checkpointing.as_ref()),
    };
    match &outcome {
        Ok(()) => status("done", None),
        Err(e) => status("failed", Some(format!("{e:#}"))),
    }
    outcome
}

/// The in-process CSR engine.
fn run_csr(args: &GraphArgs, options: &LinkScoreOptions) -> anyhow::Result<()> {
    let start = Instant::now();
    if let Some(input) = args.bare_input() {
        let mut edges = Vec::new();
        let (n, labels) = input.read_edges(|u, v| edges.push((u, v)))?;
        let (csr, _) = crate::graph::Csr::from_edges(n, &edges)?;
        drop(edges);
        let load_seconds = start.elapsed().as_secs_f64();
        let keys = labels
            .clone()
            .unwrap_or_else(|| (0..csr.n()).map(|i| i.to_string()).collect());
        let bar = progress(7, "link scores", args.json);
        let scores = crate::graph::scores::compute_node_scores(&csr, keys, options, &mut |p| {
            bar.set_position(p.step as u64);
            bar.set_message(p.stage);
        })?;
        bar.finish_and_clear();
        let table = DataflowScores::from_link_scores(scores, labels);
        let output = args.output.as_deref().expect("checked");
        table.write_table(output)?;
        return summarise(args, &table, start, load_seconds, &[]);
    }
    if let Some(dirs) = crate::cluster::existing_shard_dirs(&args.data.data_dir)? {
        // A collection split over shards: one graph over all of them, stored in each.
        let config = args.data.config()?;
        let shards = dirs
            .iter()
            .map(|d| TextIndex::open(d, config.clone()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let trusted = args.seeds.as_deref().map(read_seed_ids).transpose()?;
        let bar = progress(6, "link scores", args.json);
        let (scores, stats) =
            links::compute_and_store_sharded(&shards, options, trusted.as_deref(), &mut |p| {
                bar.set_position(p.step as u64);
                bar.set_message(p.stage);
            })?;
        bar.finish_and_clear();
        return print_index_summary(
            args,
            &scores,
            stats.edges,
            start.elapsed().as_secs_f64(),
            serde_json::json!({"engine": "csr", "shards": shards.len()}),
        );
    }
    let index = TextIndex::open(&args.data.data_dir, args.data.config()?)?;
    let (scores, edges, seconds) = compute(&index, args.seeds.as_deref(), options, args.json)?;
    print_index_summary(
        args,
        &scores,
        edges,
        seconds,
        serde_json::json!({"engine": "csr"}),
    )
}

/// The timely job.
fn run_dataflow(
    args: &GraphArgs,
    options: &LinkScoreOptions,
    cluster: &Cluster,
    checkpointing: Option<&Checkpointing>,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let lead = cluster.process == 0;
    let bar = progress(6, "link scores", args.json || !lead);
    let progress_fn: dataflow::ProgressFn = {
        let bar = bar.clone();
        Arc::new(move |p| {
            bar.set_position(p.step as u64);
            bar.set_message(p.stage);
        })
    };
    // Timely prints its connection attempts on stdout: keep stdout for the result.
    let _stdout = StdoutToStderr::new(args.json);
    if let Some(input) = args.bare_input() {
        let report = dataflow::run(&input, options, cluster, checkpointing, Some(progress_fn))?;
        bar.finish_and_clear();
        drop(_stdout);
        return match &report.scores {
            Some(table) => {
                table.write_table(args.output.as_deref().expect("checked"))?;
                summarise(args, table, start, report.load_seconds, &report.stats)
            }
            None => summarise_worker(args, &report, start),
        };
    }
    let index = TextIndex::open(&args.data.data_dir, args.data.config()?)?;
    let generation = links::generation_key(&index)?;
    let trusted = args.seeds.as_deref().map(read_seed_ids).transpose()?;
    let (scores, report) = links::compute_on_dataflow(
        &index,
        options,
        trusted.as_deref(),
        cluster,
        checkpointing,
        Some(progress_fn),
    )?;
    bar.finish_and_clear();
    drop(_stdout);
    match scores {
        Some(scores) => {
            links::store(&index, &generation, &scores)?;
            let extra = serde_json::json!({
                "engine": "timely", "stats": report.stats, "load_seconds": report.load_seconds,
                "peak_rss_mb": super::ingest::peak_rss_mb(),
            });
            print_index_summary(
                args,
                &scores,
                report.edges,
                start.elapsed().as_secs_f64(),
                extra,
            )
        }
        None => summarise_worker(args, &report, start),
    }
}

fn print_index_summary(
    args: &GraphArgs,
    scores: &crate::graph::LinkScores,
    edges: usize,
    seconds: f64,
    extra: serde_json::Value,
) -> anyhow::Result<()> {
    let candidates: Vec<&str> =
        trustrank::seed_candidates(&scores.inverse_pagerank, args.candidates)
            .into_iter()
            .map(|n| scores.keys[n as usize].as_str())
            .collect();
    if args.json {
        let mut out = serde_json::json!({
            "nodes": scores.n(),
            "edges": edges,
            "seconds": seconds,
            "seed_candidates": candidates,
        });
        if let (Some(o), Some(e)) = (out.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        println!("{out}");
    } else {
        eprintln!(
            "link scores for {} documents and {} links computed in {:.1}s",
            scores.n(),
            edges,
            seconds
        );
        println!("TrustRank seed candidates (highest inverse PageRank first):");
        for c in candidates {
            println!("  {c}");
        }
    }
    Ok(())
}

/// Process 0's summary of a bare graph's job.
fn summarise(
    args: &GraphArgs,
    table: &DataflowScores,
    start: Instant,
    load_seconds: f64,
    stats: &[dataflow::AlgorithmStats],
) -> anyhow::Result<()> {
    let seconds = start.elapsed().as_secs_f64();
    let output = args.output.as_deref().map(Path::display);
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "process": args.process, "nodes": table.n(), "edges": table.edges,
                "seconds": seconds, "load_seconds": load_seconds, "reports": table.reports,
                "stats": stats, "peak_rss_mb": super::ingest::peak_rss_mb(),
                "output": output.map(|o| o.to_string()),
            })
        );
    } else {
        eprintln!(
            "link scores for {} nodes and {} edges computed in {seconds:.1}s (loading {load_seconds:.1}s); written to {}",
            table.n(),
            table.edges,
            output.map(|o| o.to_string()).unwrap_or_default()
        );
    }
    Ok(())
}

/// The summary of a process other than 0 (which writes nothing).
fn summarise_worker(
    args: &GraphArgs,
    report: &dataflow::JobReport,
    start: Instant,
) -> anyhow::Result<()> {
    let seconds = start.elapsed().as_secs_f64();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "process": args.process, "nodes": report.nodes, "seconds": seconds,
                "load_seconds": report.load_seconds, "stats": report.stats,
                "peak_rss_mb": super::ingest::peak_rss_mb(),
            })
        );
    } else {
        eprintln!(
            "process {}: its part of the job finished in {seconds:.1}s; process 0 writes the scores",
            args.process
        );
    }
    Ok(())
}

/// Points file descriptor 1 at standard error while alive (when `active`), so that timely's
/// connection messages do not mix with a `--json` result; restored on drop.
struct StdoutToStderr(Option<i32>);

impl StdoutToStderr {
    fn new(active: bool) -> Self {
        if !active {
            return StdoutToStderr(None);
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
        // SAFETY: dup and dup2 on the process's own standard descriptors; the saved copy is
        // restored and closed on drop.
        let saved = unsafe { libc::dup(1) };
        if saved < 0 || unsafe { libc::dup2(2, 1) } < 0 {
            return StdoutToStderr(None);
        }
        StdoutToStderr(Some(saved))
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        if let Some(saved) = self.0.take() {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            // SAFETY: `saved` is the descriptor duplicated in `new`.
            unsafe {
                libc::dup2(saved, 1);
                libc::close(saved);
            }
        }
    }
}

/// Computes and stores the link scores; returns them, the edge count and the seconds taken.
pub fn compute(
    index: &TextIndex,
    seeds: Option<&Path>,
    options: &LinkScoreOptions,
    quiet: bool,
) -> anyhow::Result<(crate::graph::LinkScores, usize, f64)> {
    let start = Instant::now();
    let trusted = seeds.map(read_seed_ids).transpose()?;
    let bar = progress(6, "link scores", quiet);
    let (scores, stats) = links::compute_and_store(index, options, trusted.as_deref(), &mut |p| {
        bar.set_position(p.step as u64);
        bar.set_message(p.stage);
    })?;
    bar.finish_and_clear();
    Ok((scores, stats.edges, start.elapsed().as_secs_f64()))
}

/// The document ids of a seed file: one per line, `#` comments and blank lines ignored.
fn read_seed_ids(path: &Path) -> anyhow::Result<Vec<String>> {
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
