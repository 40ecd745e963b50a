//! `rankd click-model`: fits click models (SPEC §11; `crate::user_clicks`) to a sessions file and
//! compares them on held-out sessions by log-likelihood and perplexity.
//!
//! The sessions are those `rankd simulate-clicks` writes (README, "Learning from clicks"), a
//! document being a row of its query, or, with `--from-db`, the server's own log: every first
//! page it answered and the clicks reported on it. Without `--test`, the last `--holdout`
//! share of the sessions (file or log order) is held out, so a model is never judged on the
//! clicks it was fitted to.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::learn::{rank_sets, read_letor};
use crate::error::Invalid;
use crate::rerank::RankSet;
use crate::user_clicks::sessions::{self, RowSession};
use crate::user_clicks::{
    fit_and_evaluate, pbm, BetaPrior, Features, ModelKind, ModelReport, Session,
};

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["sessions", "from_db"])))]
pub struct ClickModelArgs {
    /// Sessions to fit the models to (JSON lines `{"qid","shown","clicks"}`).
    #[arg(long)]
    pub sessions: Option<PathBuf>,
    /// Fit the models to the server's own log instead: every logged first page (`rankd
    /// serve`'s impressions) and the clicks `POST /events` reported on it, oldest first.
    #[arg(long, conflicts_with_all = ["letor", "test"])]
    pub from_db: bool,
    /// The database for `--from-db` (default: `RANKD_DATABASE_URL`, `DATABASE_URL`, else the
    /// SQLite file in the data directory).
    #[arg(long, requires = "from_db")]
    pub database_url: Option<String>,
    #[command(flatten)]
    pub data: super::DataArgs,
    /// The LETOR file the sessions' rows are in: checks every session against it, and gives
    /// regression EM the documents' features (with it, the default models include
    /// regression EM).
    #[arg(long, requires = "sessions")]
    pub letor: Option<PathBuf>,
    /// Group-size file for `--letor` (default: `LETOR.query` if it exists, else `qid:`).
    #[arg(long, requires = "letor")]
    pub letor_query: Option<PathBuf>,
    /// Held-out sessions to evaluate on (default: the last `--holdout` share of the sessions).
    #[arg(long, requires = "sessions")]
    pub test: Option<PathBuf>,
    /// Share of the sessions held out for evaluation when `--test` is not given.
    #[arg(long, default_value_t = 0.2)]
    pub holdout: f64,
    /// Which models to fit (repeat or comma-separate; default: pbm, ubm, cascade, dbn, and
    /// regression-em with `--letor`).
    #[arg(long = "model", value_enum, value_delimiter = ',')]
    pub models: Vec<ModelKind>,
    /// EM iterations (PBM, UBM, DBN).
    #[arg(long, default_value_t = pbm::DEFAULT_ITERATIONS)]
    pub iterations: usize,
    /// Beta prior on each (query, document) pair's attractiveness (and the DBN's
    /// satisfaction), as pseudo-counts `CLICKS,SKIPS`; `0,0` is maximum likelihood.
    #[arg(long, value_parser = parse_prior, default_value = "1,4")]
    pub prior: BetaPrior,
    /// A directory to write each fitted model's parameters to, as `MODEL.json`.
    #[arg(long)]
    pub parameters: Option<PathBuf>,
    /// Print a JSON report instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_prior(text: &str) -> Result<BetaPrior, String> {
    let (clicks, skips) = text
        .split_once(',')
        .ok_or_else(|| format!("expected CLICKS,SKIPS (e.g. 1,4), got {text:?}"))?;
    let number = |s: &str| {
        s.trim()
            .parse::<f64>()
            .map_err(|_| format!("{s:?} in {text:?} is not a number"))
    };
    let prior = BetaPrior {
        clicks: number(clicks)?,
        skips: number(skips)?,
    };
    prior.validate().map_err(|e| e.0)?;
    Ok(prior)
}

#[derive(Serialize)]
struct Report {
    train_sessions: usize,
    test_sessions: usize,
    iterations: usize,
    prior: BetaPrior,
    models: Vec<ModelReport>,
}

/// The last `holdout` share of `all`, split off; `what` names the source for the error.
fn hold_out<T>(mut all: Vec<T>, holdout: f64, what: &str) -> anyhow::Result<(Vec<T>, Vec<T>)> {
    if !(holdout > 0.0 && holdout < 1.0) {
        return Err(Invalid(format!("--holdout must be in (0, 1), got {holdout}")).into());
    }
    let keep = ((all.len() as f64) * (1.0 - holdout)).round() as usize;
    if keep == 0 || keep == all.len() {
        return Err(Invalid(format!(
            "{what} holds {} sessions: too few to hold {holdout} of them out",
            all.len()
        ))
        .into());
    }
    let test = all.split_off(keep);
    Ok((all, test))
}

/// The server's logged first pages and their clicks, as sessions.
fn logged_sessions(args: &ClickModelArgs) -> anyhow::Result<Vec<Session>> {
    let config = args.data.server_config(args.database_url.clone())?;
    let pages = super::logged_first_pages(&config)?;
    Ok(pages
        .into_iter()
        .map(|p| Session {
            query: p.query,
            shown: p.shown,
            clicks: p.clicked,
        })
        .collect())
}

pub fn run(args: ClickModelArgs) -> anyhow::Result<()> {
    let mut rows: Option<(Vec<RowSession>, RankSet)> = None;
    let (train, test): (Vec<Session>, Vec<Session>) = match &args.sessions {
        None => hold_out(logged_sessions(&args)?, args.holdout, "the log")?,
        Some(path) => {
            let all = sessions::read(path)?;
            let (train, test) = match &args.test {
                Some(test) => (all, sessions::read(test)?),
                None => hold_out(all, args.holdout, &path.display().to_string())?,
            };
            if let Some(letor) = &args.letor {
                let letor = read_letor(letor, args.letor_query.as_deref())?;
                let set = rank_sets(&[&letor])?.remove(0);
                let named = |file: &std::path::Path| {
                    let file = file.display().to_string();
                    move |e: Invalid| Invalid(format!("{file}: {}", e.0))
                };
                sessions::check(&train, &set).map_err(named(path))?;
                sessions::check(&test, &set)
                    .map_err(named(args.test.as_deref().unwrap_or(path)))?;
                rows = Some((train.clone(), set));
            }
            let generic = |s: &[RowSession]| s.iter().map(RowSession::to_session).collect();
            (generic(&train), generic(&test))
        }
    };
    let features = rows
        .as_ref()
        .map(|(sessions, set)| Features { sessions, set });
    let kinds = if !args.models.is_empty() {
        args.models.clone()
    } else if features.is_some() {
        let mut all = ModelKind::ALL.to_vec();
        all.push(ModelKind::RegressionEm);
        all
    } else {
        ModelKind::ALL.to_vec()
    };
    let bar = super::progress(kinds.len() as u64, "click models", args.json);
    let mut models = Vec::new();
    for kind in kinds {
        models.push(fit_and_evaluate(
            kind,
            &train,
            &test,
            features,
            args.iterations,
            args.prior,
        )?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(dir) = &args.parameters {
        write_parameters(dir, &models)?;
    }
    let report = Report {
        train_sessions: train.len(),
        test_sessions: test.len(),
        iterations: args.iterations,
        prior: args.prior,
        models,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    Ok(())
}

fn write_parameters(dir: &Path, models: &[ModelReport]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Invalid(format!("cannot create {}: {e}", dir.display())))?;
    for m in models {
        let path = dir.join(format!("{}.json", m.parameters.model));
        crate::durable::write_atomic(&path, &serde_json::to_vec_pretty(&m.parameters)?)?;
    }
    Ok(())
}

fn print_text(report: &Report) {
    println!(
        "{} sessions fitted, {} held out ({} EM iterations, prior {} clicks {} skips per pair)",
        report.train_sessions,
        report.test_sessions,
        report.iterations,
        report.prior.clicks,
        report.prior.skips
    );
    println!(
        "{:<13} {:>12} {:>12} {:>11}  examination relative to rank 1",
        "model", "train LL", "test LL", "perplexity"
    );
    for m in &report.models {
        let name = m.parameters.model;
        let exam = if m.examination_relative.is_empty() {
            m.continuation
                .map_or("depends on the list".to_string(), |g| {
                    format!("depends on the list; perseverance γ {g:.4}")
                })
        } else {
            m.examination_relative
                .iter()
                .map(|e| format!("{e:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "{name:<13} {:>12.6} {:>12.6} {:>11.4}  {exam}",
            m.train_log_likelihood, m.test.log_likelihood, m.test.perplexity
        );
    }
}
