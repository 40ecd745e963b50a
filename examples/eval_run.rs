//! Scores a TREC run file against a qrels file and prints rankd's report — the Rust side of
//! `bench/trec_crosscheck.py`, until `rankd eval` reads run files itself.
//!
//! ```text
//! cargo run --example eval_run -- --run RUN --qrels QRELS [--json] [--gain linear]
//!     [--no-relevant skip|score|ndcg-one] [--cutoffs 5,10,100] [--complete]
//!     [--compare OTHER_RUN]
//! ```
//! Exit status 2 on bad input (the message names file and line), as rankd's CLI.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use rankd::eval::{self, trec, EvalOptions, Gain, NoRelevant, RunOrder};

#[derive(Parser)]
#[command(about = "Score a TREC run against qrels with rankd's metrics (SPEC §4)")]
struct Args {
    #[arg(long)]
    run: PathBuf,
    #[arg(long)]
    qrels: PathBuf,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// With the table: one line per query and metric, as trec_eval -q.
    #[arg(long)]
    per_query: bool,
    #[arg(long, default_value = "exponential", value_parser = ["exponential", "linear"])]
    gain: String,
    #[arg(long, default_value = "skip", value_parser = ["skip", "score", "ndcg-one"])]
    no_relevant: String,
    #[arg(long, default_value = "trec-eval", value_parser = ["trec-eval", "as-given"])]
    order: String,
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 3, 5, 10, 20, 100])]
    cutoffs: Vec<usize>,
    #[arg(long, default_value_t = 1)]
    relevance_threshold: i32,
    /// Score judged queries missing from the run as empty rankings (trec_eval -c).
    #[arg(long)]
    complete: bool,
    /// Instead of scoring, print Kendall tau_b and Spearman rho between --run and this run.
    #[arg(long)]
    compare: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let run = trec::read_run(&args.run).map_err(|e| e.to_string())?;
    if let Some(other) = &args.compare {
        let other = trec::read_run(other).map_err(|e| e.to_string())?;
        let correlation = eval::compare_runs(&run, &other);
        println!(
            "{}",
            serde_json::to_string_pretty(&correlation).expect("serialisable")
        );
        return Ok(());
    }
    let qrels = trec::read_qrels(&args.qrels).map_err(|e| e.to_string())?;
    let options = EvalOptions {
        cutoffs: args.cutoffs.clone(),
        gain: match args.gain.as_str() {
            "linear" => Gain::Linear,
            _ => Gain::Exponential,
        },
        no_relevant: match args.no_relevant.as_str() {
            "score" => NoRelevant::Score,
            "ndcg-one" => NoRelevant::NdcgOne,
            _ => NoRelevant::Skip,
        },
        relevance_threshold: args.relevance_threshold,
        order: match args.order.as_str() {
            "as-given" => RunOrder::AsGiven,
            _ => RunOrder::TrecEval,
        },
        complete: args.complete,
    };
    let report = eval::evaluate(&run, &qrels, &options).map_err(|e| e.to_string())?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("serialisable")
        );
    } else {
        report
            .write_table(std::io::stdout().lock(), args.per_query)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
