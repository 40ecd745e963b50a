//! `rankd active-replay`: the offline replay of SPEC §5 (seed note 002 §6.5) on a judged
//! LETOR set: random, plain-margin (λ = 1) and angle-diverse batches compared on held-out
//! MAP per round. See `crate::active::replay` for the protocol.

use std::path::PathBuf;

use super::learn::{rank_sets, read_letor, LearnArgs};
use super::progress;
use crate::active::replay::{self, ReplayConfig};
use crate::error::Invalid;
use crate::rerank::RankSet;
use crate::training::TrainSettings;

#[derive(clap::Args, Debug)]
pub struct ActiveReplayArgs {
    /// LETOR/SVMlight files whose queries (all of them, pooled) are replayed; group files
    /// default to `FILE.query` when it exists, else rows need `qid:`.
    #[arg(long = "letor", required = true, num_args = 1..)]
    pub letor: Vec<PathBuf>,
    #[arg(long, value_delimiter = ',', default_values_t = ReplayConfig::default().seeds)]
    pub seeds: Vec<u64>,
    #[arg(long, default_value_t = ReplayConfig::default().folds)]
    pub folds: usize,
    /// Queries labelled at the start (the first ones of each training part).
    #[arg(long, default_value_t = ReplayConfig::default().initial_queries)]
    pub initial_queries: usize,
    /// Labels revealed per round (the learning options' `--batch` is queries per step).
    #[arg(long, default_value_t = ReplayConfig::default().batch)]
    pub label_batch: usize,
    #[arg(long, default_value_t = ReplayConfig::default().rounds)]
    pub rounds: usize,
    /// λ grid of the angle-diverse batch (tuned per fold on the validation fold).
    #[arg(long, value_delimiter = ',', default_values_t = ReplayConfig::default().lambdas)]
    pub lambdas: Vec<f64>,
    #[command(flatten)]
    pub learn: LearnArgs,
    /// Print the whole report as JSON on stdout (no progress bar).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ActiveReplayArgs) -> anyhow::Result<()> {
    let sets = args
        .letor
        .iter()
        .map(|p| read_letor(p, None))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let all = concat(rank_sets(&sets.iter().collect::<Vec<_>>())?)?;
    let settings = args.learn.apply(TrainSettings::letor_network())?;
    let config = ReplayConfig {
        seeds: args.seeds.clone(),
        folds: args.folds,
        initial_queries: args.initial_queries,
        batch: args.label_batch,
        rounds: args.rounds,
        lambdas: args.lambdas.clone(),
    };
    let train = settings.config(
        format!("active replay over {:?}", args.letor),
        crate::rerank::MetricConvention::Letor,
    );
    let bar = progress(replay::trainings(&config), "trainings", args.json);
    let started = std::time::Instant::now();
    let report = replay::replay(&all, &config, &train, &|| bar.inc(1))?;
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        let mut out = serde_json::to_value(&report)?;
        out["seconds"] = serde_json::json!(seconds);
        out["model"] = serde_json::json!(settings.model.to_string());
        out["objective"] = serde_json::to_value(settings.objective)?;
        println!("{out}");
        return Ok(());
    }
    println!(
        "{} queries, {} folds (3/1/1), {} initial queries, {} rounds of {}, seeds {:?}, {seconds:.0}s",
        all.queries.len(),
        report.folds,
        report.initial_queries,
        report.rounds,
        report.batch,
        report.seeds
    );
    println!("held-out MAP, mean ± std over seeds of the fold means:");
    print!("{:<32}", "labels");
    for l in &report.curves[0].labels {
        print!(" {l:>15.0}");
    }
    println!();
    for c in &report.curves {
        print!("{:<32}", c.strategy);
        for m in &c.test_map {
            print!(" {:>7.4} ± {:.4}", m.mean, m.std);
        }
        println!();
    }
    println!(
        "λ chosen on the validation folds: {:?}",
        report.tuned_lambdas
    );
    Ok(())
}

/// The queries of several sets (same features) as one set, in order; query ids are prefixed
/// with their file's number, since files number their queries independently.
fn concat(sets: Vec<RankSet>) -> anyhow::Result<RankSet> {
    if sets.is_empty() {
        return Err(Invalid("no LETOR file".into()).into());
    }
    let renamed: Vec<RankSet> = sets
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            for q in &mut s.queries {
                q.qid = format!("{}:{}", i + 1, q.qid);
            }
            s.doc_ids = None;
            s
        })
        .collect();
    Ok(RankSet::concat(&renamed)?)
}
