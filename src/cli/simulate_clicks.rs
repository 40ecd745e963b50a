//! `rankd simulate-clicks`: sessions drawn from a LETOR file's labels by the semi-synthetic
//! protocol (SPEC §11, `crate::user_clicks::semi_synthetic`), for `rankd eval-letor --train-clicks`.
//!
//! The logging ranker is trained here, on a small share of the training queries' labels (a
//! weak ranker, as the protocol asks), with the linear model and its LETOR defaults.

use std::path::PathBuf;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::learn::{rank_sets, read_letor, run_training};
use crate::error::Invalid;
use crate::rerank::MetricConvention;
use crate::training::{ModelChoice, TrainSettings};
use crate::user_clicks::semi_synthetic::{simulate, Behaviour, Protocol};
use crate::user_clicks::sessions;

#[derive(clap::Args, Debug)]
pub struct SimulateClicksArgs {
    /// The LETOR training file whose labels the simulated users follow (`--train` is
    /// accepted too, as `eval-letor` names it).
    #[arg(long = "letor", alias = "train")]
    pub train: PathBuf,
    /// Group-size file for `--letor` (default: `LETOR.query` if it exists, else `qid:`).
    #[arg(long = "letor-query", alias = "train-query")]
    pub train_query: Option<PathBuf>,
    /// Where to write the sessions (JSON lines; README, "Learning from clicks").
    #[arg(long)]
    pub out: PathBuf,
    /// Sessions to draw (queries uniformly at random).
    #[arg(long, default_value_t = Protocol::default().sessions)]
    pub sessions: usize,
    /// How users examine the list: pbm (examination (1/k)^η) or cascade (top down, stop at
    /// the first click).
    #[arg(
        long = "click-model",
        alias = "behaviour",
        value_enum,
        default_value_t = Protocol::default().behaviour
    )]
    pub behaviour: Behaviour,
    /// Position-bias strength η of the PBM's examination (1/k)^η.
    #[arg(long, default_value_t = Protocol::default().eta)]
    pub eta: f64,
    /// Click probability of an examined document of grade 0 (ε⁻).
    #[arg(long, default_value_t = Protocol::default().eps_minus)]
    pub eps_minus: f64,
    /// Click probability of an examined document of the highest grade (ε⁺).
    #[arg(long, default_value_t = Protocol::default().eps_plus)]
    pub eps_plus: f64,
    /// Documents shown per session.
    #[arg(long, default_value_t = Protocol::default().top)]
    pub top: usize,
    /// Share of sessions whose rank 1 trades places with a random lower rank (RandPair), the
    /// intervention that lets position bias be estimated from the log.
    #[arg(long, default_value_t = Protocol::default().swap_share)]
    pub swap_share: f64,
    /// Share of the training queries whose labels train the logging ranker (at least 2).
    #[arg(long, default_value_t = 0.01)]
    pub logging_fraction: f64,
    /// Seed of the logging ranker's queries, its training and the sessions.
    #[arg(long, default_value_t = Protocol::default().seed)]
    pub seed: u64,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Summary<'a> {
    out: &'a std::path::Path,
    protocol: &'a Protocol,
    logging_queries: usize,
    /// NDCG@10 of the logging ranker on the training file's labels (LightGBM's convention).
    logging_ndcg10: f64,
    clicks: usize,
    /// Click-through rate per rank (index 0: rank 1).
    ctr_at: Vec<f64>,
    /// The protocol's examination probability per rank (the truth a propensity estimate
    /// is compared with).
    examination_at: Vec<f64>,
}

pub fn run(args: SimulateClicksArgs) -> anyhow::Result<()> {
    let protocol = Protocol {
        sessions: args.sessions,
        behaviour: args.behaviour,
        eta: args.eta,
        eps_minus: args.eps_minus,
        eps_plus: args.eps_plus,
        top: args.top,
        swap_share: args.swap_share,
        seed: args.seed,
    };
    protocol.validate()?;
    if !(args.logging_fraction > 0.0 && args.logging_fraction <= 1.0) {
        return Err(Invalid(format!(
            "--logging-fraction must be in (0, 1], got {}",
            args.logging_fraction
        ))
        .into());
    }
    let letor = read_letor(&args.train, args.train_query.as_deref())?;
    let set = rank_sets(&[&letor])?.remove(0);
    let n = set.queries.len();
    if n < 3 {
        return Err(Invalid(format!(
            "{} has {n} queries; the logging ranker needs 2 and the sessions the rest",
            args.train.display()
        ))
        .into());
    }
    // The logging ranker: the linear model on a seeded share of the queries.
    let k = ((n as f64 * args.logging_fraction).round() as usize).clamp(2, n);
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(args.seed));
    let mut picked = order[..k].to_vec();
    picked.sort_unstable();
    let logging_set = set.subset(&picked);
    let mut settings = TrainSettings::letor_for(Some(ModelChoice::Linear), None);
    settings.seed = args.seed;
    let config = settings.config(args.train.display().to_string(), MetricConvention::Letor);
    let logger = run_training(&logging_set, None, &config, true)?.model;
    let (scores, logging) = super::gbdt::score_set(&logger, &set)?;

    let drawn = simulate(&protocol, &set, &scores)?;
    sessions::write(&args.out, &drawn)?;

    let mut shown_at = vec![0usize; protocol.top];
    let mut clicked_at = vec![0usize; protocol.top];
    for s in &drawn {
        for (k, row) in s.shown.iter().enumerate() {
            shown_at[k] += 1;
            clicked_at[k] += usize::from(s.clicks.contains(row));
        }
    }
    let ctr_at: Vec<f64> = clicked_at
        .iter()
        .zip(&shown_at)
        .filter(|(_, &n)| n > 0)
        .map(|(&c, &n)| c as f64 / n as f64)
        .collect();
    let summary = Summary {
        out: &args.out,
        protocol: &protocol,
        logging_queries: k,
        logging_ndcg10: logging.ndcg10,
        clicks: clicked_at.iter().sum(),
        examination_at: (1..=ctr_at.len())
            .map(|r| protocol.examination(r))
            .collect(),
        ctr_at,
    };
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "{} sessions ({} clicks) over {n} queries written to {}",
            protocol.sessions,
            summary.clicks,
            args.out.display()
        );
        println!(
            "logging ranker: linear, trained on the labels of {k} queries; NDCG@10 {:.4} on \
             the training file",
            summary.logging_ndcg10
        );
        let ctr: Vec<String> = summary.ctr_at.iter().map(|c| format!("{c:.3}")).collect();
        println!("CTR by rank: {}", ctr.join(" "));
    }
    Ok(())
}
