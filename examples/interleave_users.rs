//! Interleaving on simulated users (issue 32's acceptance; results in docs/EVALUATION.md):
//! the judged queries of a data directory are ranked by two rankers, and team-draft
//! interleaving of the two (`rankd::interleave`) is shown to users who click by the
//! position-based model (examination `(1/rank)^η`, click probability from the judged grade,
//! `rankd::interleave::simulate`). Reports, over `--runs` runs: how many impressions until
//! the sign test gives p < alpha (median and quartiles), how often the better ranker was the
//! one preferred, the share of runs preferring the better ranker at fixed numbers of
//! impressions (the test's power), and an A/A test (the better ranker against itself, a
//! fixed number of impressions per run): the share of runs that reject at alpha, and the
//! share that would have rejected at some impression had the p-value been watched after
//! each one (why a verdict needs a horizon fixed in advance: `min_impressions`), against the
//! same for the always-valid p-value that promotion on win watches.
//!
//! ```text
//! cargo run --release --example interleave_users -- --data-dir DEMO_DATA \
//!     [--better MODEL.json|first-phase] [--worse MODEL.json|first-phase] \
//!     [--queries Q --qrels QRELS] [--runs 100] [--aa-impressions 2000] [--eta 1]
//! ```
//! `rankd demo`'s data directory has the reranker in `models/` and its held-out judged
//! queries in `known-items/test.{queries,qrels}` (the defaults); `--better` defaults to the
//! active model (`models/ACTIVE`, else the newest), `--worse` to the first phase alone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use rankd::interleave::simulate::{self, ClickModel, Horizon, JudgedRankings};
use rankd::interleave::Team;
use rankd::search::model::{self, ActiveModel};
use rankd::search::{Engine, Ranking, SearchQuery, DEFAULT_WINDOW};
use rankd::text::TextIndex;
use serde_json::json;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    data_dir: PathBuf,
    /// The better ranker: a model file, or `first-phase` (default: the active model).
    #[arg(long)]
    better: Option<String>,
    /// The worse ranker: a model file, or `first-phase`.
    #[arg(long, default_value = "first-phase")]
    worse: String,
    /// `QID TEXT` per line (default: DATA/known-items/test.queries).
    #[arg(long)]
    queries: Option<PathBuf>,
    /// TREC qrels (default: DATA/known-items/test.qrels).
    #[arg(long)]
    qrels: Option<PathBuf>,
    #[arg(long, default_value_t = 100)]
    runs: u64,
    /// Most impressions of an A/B run (a run that has not decided by then counts as never).
    #[arg(long, default_value_t = 20_000)]
    max_impressions: u64,
    /// Impressions of each A/A run.
    #[arg(long, default_value_t = 2_000)]
    aa_impressions: u64,
    /// Fixed horizons at which the A/B test's power is reported (share of runs with
    /// p < alpha after exactly this many impressions).
    #[arg(long, value_delimiter = ',', default_values_t = [100u64, 200, 500, 1000])]
    ab_horizons: Vec<u64>,
    #[arg(long, default_value_t = 10)]
    page: usize,
    #[arg(long, default_value_t = 1.0)]
    eta: f64,
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// A ranker's top `page` ids for `text`.
fn ranked(engine: &Engine, text: &str, page: usize, rerank: bool) -> anyhow::Result<Vec<String>> {
    let ranking = match rerank {
        true => Ranking::Rerank {
            window: DEFAULT_WINDOW,
        },
        false => Ranking::FirstPhase,
    };
    let q = SearchQuery::new(text, page).ranking(ranking);
    Ok(engine.search(&q)?.hits.into_iter().map(|h| h.id).collect())
}

/// Every query's list by the ranker `spec` (`first-phase` or a model file).
fn rank_all(
    engine: &Engine,
    spec: &str,
    queries: &[(String, String)],
    page: usize,
) -> anyhow::Result<(String, Vec<Vec<String>>)> {
    let (name, rerank) = match spec {
        "first-phase" => (
            format!("{} alone", engine.index.config.default_model),
            false,
        ),
        path => {
            let m = ActiveModel::load(Path::new(path))?;
            let name = format!("reranker {} ({})", m.id(), m.reranker.kind());
            engine.set_model(Some(std::sync::Arc::new(m)));
            (name, true)
        }
    };
    let lists = queries
        .iter()
        .map(|(_, text)| ranked(engine, text, page, rerank))
        .collect::<anyhow::Result<_>>()?;
    Ok((name, lists))
}

fn quantile(sorted: &[u64], p: f64) -> Option<u64> {
    (!sorted.is_empty()).then(|| sorted[((sorted.len() - 1) as f64 * p).round() as usize])
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let data = &args.data_dir;
    let index = TextIndex::open(data, None)?;
    let links = rankd::links::load(&index)?;
    let engine = Engine::new(index).with_links(links);
    let better = match &args.better {
        Some(b) => b.clone(),
        None => {
            let active = model::activation_request_id(data)?
                .map(|id| model::model_files(data).map(|f| (id, f)))
                .transpose()?
                .and_then(|(id, files)| {
                    files
                        .into_iter()
                        .find(|p| p.file_stem().is_some_and(|s| s == id.as_str()))
                });
            let path = match active {
                Some(p) => p,
                None => model::model_files(data)?
                    .into_iter()
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("no model in {}", data.display()))?,
            };
            path.display().to_string()
        }
    };
    let queries_path = args
        .queries
        .clone()
        .unwrap_or_else(|| data.join("known-items/test.queries"));
    let qrels_path = args
        .qrels
        .clone()
        .unwrap_or_else(|| data.join("known-items/test.qrels"));
    let qrels = rankd::eval::trec::read_qrels(&qrels_path)?;
    let queries: Vec<(String, String)> = std::fs::read_to_string(&queries_path)?
        .lines()
        .filter_map(|l| l.split_once(char::is_whitespace))
        .filter(|(qid, _)| qrels.get(qid).is_some())
        .map(|(q, t)| (q.to_string(), t.trim().to_string()))
        .collect();
    let t = Instant::now();
    let (better_name, better_lists) = rank_all(&engine, &better, &queries, args.page)?;
    let (worse_name, worse_lists) = rank_all(&engine, &args.worse, &queries, args.page)?;
    let ranking_seconds = t.elapsed().as_secs_f64();
    let mut max_grade = 1;
    let mut ab = Vec::new();
    let mut aa = Vec::new();
    for (((qid, _), good), bad) in queries.iter().zip(better_lists).zip(worse_lists) {
        let grades: HashMap<String, i32> = qrels
            .get(qid)
            .map(|g| g.iter().map(|(d, &g)| (d.clone(), g)).collect())
            .unwrap_or_default();
        max_grade = grades.values().copied().fold(max_grade, i32::max);
        if good.is_empty() && bad.is_empty() {
            continue;
        }
        ab.push(JudgedRankings {
            a: bad,
            b: good.clone(),
            grades: grades.clone(),
        });
        aa.push(JudgedRankings {
            a: good.clone(),
            b: good,
            grades,
        });
    }
    let users = ClickModel {
        eta: args.eta,
        ..ClickModel::pbm(max_grade)
    };
    let t = Instant::now();
    // A/B: the worse ranker as the active one (A), the better as the candidate (B).
    let until = Horizon {
        impressions: args.max_impressions,
        until_significant: true,
    };
    let ab_runs: Vec<simulate::Run> = (0..args.runs)
        .map(|r| simulate::run(&ab, &users, args.page, until, args.alpha, args.seed + r))
        .collect();
    let mut decided: Vec<u64> = ab_runs.iter().filter_map(|r| r.first_significant).collect();
    let right = ab_runs
        .iter()
        .filter(|r| r.first_significant.is_some() && r.leader == Some(Team::B))
        .count();
    decided.sort_unstable();
    let mut sequential: Vec<u64> = ab_runs.iter().filter_map(|r| r.first_sequential).collect();
    sequential.sort_unstable();
    let fixed = Horizon {
        impressions: args.aa_impressions,
        until_significant: false,
    };
    let aa_runs: Vec<simulate::Run> = (0..args.runs)
        .map(|r| {
            let seed = args.seed + 1_000_000 + r;
            simulate::run(&aa, &users, args.page, fixed, args.alpha, seed)
        })
        .collect();
    let rejected = aa_runs.iter().filter(|r| r.p_value < args.alpha).count();
    let power: serde_json::Map<String, serde_json::Value> = args
        .ab_horizons
        .iter()
        .map(|&n| {
            let horizon = Horizon {
                impressions: n,
                until_significant: false,
            };
            let rejecting = (0..args.runs)
                .map(|r| simulate::run(&ab, &users, args.page, horizon, args.alpha, args.seed + r))
                .filter(|r| r.p_value < args.alpha && r.leader == Some(Team::B))
                .count();
            (n.to_string(), json!(rejecting as f64 / args.runs as f64))
        })
        .collect();
    let peeked = aa_runs
        .iter()
        .filter(|r| r.first_significant.is_some())
        .count();
    let peeked_sequential = aa_runs
        .iter()
        .filter(|r| r.first_sequential.is_some())
        .count();
    let mean = |f: &dyn Fn(&simulate::Run) -> u64, runs: &[simulate::Run]| {
        runs.iter().map(f).sum::<u64>() as f64 / runs.len().max(1) as f64
    };
    let report = json!({
        "queries": ab.len(),
        "better": better_name,
        "worse": worse_name,
        "click_model": {"eta": users.eta, "eps_minus": users.eps_minus, "eps_plus": users.eps_plus,
                        "max_grade": users.max_grade, "page": args.page},
        "alpha": args.alpha,
        "runs": args.runs,
        "ab": {
            "decided_runs": decided.len(),
            "decided_for_the_better": right,
            "impressions_to_p_below_alpha": {
                "median": simulate::median(&mut decided.clone()),
                "p25": quantile(&decided, 0.25),
                "p75": quantile(&decided, 0.75),
                "max": decided.last(),
            },
            "always_valid_decided_runs": sequential.len(),
            "impressions_to_always_valid_p_below_alpha": {
                "median": simulate::median(&mut sequential.clone()),
                "p25": quantile(&sequential, 0.25),
                "p75": quantile(&sequential, 0.75),
                "max": sequential.last(),
            },
            "max_impressions": args.max_impressions,
            "power_at_fixed_impressions": power,
            "mean_wins_better_per_100_impressions": 100.0 * mean(&|r| r.tally.wins_b, &ab_runs)
                / mean(&|r| r.tally.impressions, &ab_runs),
            "mean_wins_worse_per_100_impressions": 100.0 * mean(&|r| r.tally.wins_a, &ab_runs)
                / mean(&|r| r.tally.impressions, &ab_runs),
        },
        "aa": {
            "impressions_per_run": args.aa_impressions,
            "rejected_at_alpha": rejected,
            "false_positive_rate": rejected as f64 / args.runs as f64,
            "rejected_at_any_impression_when_peeking": peeked,
            "always_valid_rejected_at_any_impression": peeked_sequential,
        },
        "ranking_seconds": ranking_seconds,
        "simulation_seconds": t.elapsed().as_secs_f64(),
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
