//! `rankd fuse`: fuse TREC run files into one (SPEC §6); the fused run goes to standard
//! output, the agreement of each input with it (Kendall τ_b, book §23.3.10) to standard error.

use std::io::Write;
use std::path::PathBuf;

use crate::error::Invalid;
use crate::eval::{trec, Run, RunOrder};
use crate::search::fusion::{agreement, Fusion};

#[derive(clap::Args, Debug)]
pub struct FuseArgs {
    /// rrf, combsum, combmnz, borda or condorcet.
    #[arg(long)]
    pub method: String,
    /// RRF's k (default 60).
    #[arg(long)]
    pub k: Option<f64>,
    /// How combsum and combmnz normalise each list's scores: minmax (default) or zscore.
    #[arg(long)]
    pub norm: Option<String>,
    /// One positive weight per run, comma-separated (default: all 1).
    #[arg(long, value_delimiter = ',')]
    pub weights: Option<Vec<f64>>,
    /// The run tag of the fused run (default `rankd-fuse-METHOD`).
    #[arg(long)]
    pub tag: Option<String>,
    /// Print the agreement summary to standard error as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Two or more TREC run files. Each query's list is ranked by trec_eval's rule (score
    /// descending, then doc id descending) before fusing; a query missing from a run is an
    /// empty list there.
    #[arg(required = true, num_args = 2..)]
    pub runs: Vec<PathBuf>,
}

pub fn run(args: FuseArgs) -> anyhow::Result<()> {
    for (i, path) in args.runs.iter().enumerate() {
        if args.runs[..i].contains(path) {
            return Err(Invalid(format!(
                "run {} is given twice (weigh a run with --weights instead)",
                path.display()
            ))
            .into());
        }
    }
    let fusion = Fusion::from_names(
        &args.method,
        args.runs.len(),
        args.k,
        args.norm.as_deref(),
        args.weights.clone(),
    )
    .map_err(|e| Invalid(e.to_string()))?;
    let method = fusion.method;
    let runs: Vec<Run> = args
        .runs
        .iter()
        .map(|p| trec::read_run(p).map_err(|e| Invalid(format!("{e}"))))
        .collect::<Result<_, _>>()?;
    let (fused, taus) = fuse_runs(&fusion, &runs)?;
    let tag = args
        .tag
        .clone()
        .unwrap_or_else(|| format!("rankd-fuse-{method}"));
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    trec::write_run(&mut out, &fused, &tag)?;
    out.flush()?;
    let summary: Vec<serde_json::Value> = args
        .runs
        .iter()
        .zip(&taus)
        .map(|(path, t)| {
            serde_json::json!({
                "run": path.display().to_string(),
                "mean_kendall_tau_b": t.mean(),
                "queries": t.values.len(),
            })
        })
        .collect();
    if args.json {
        eprintln!(
            "{}",
            serde_json::json!({ "method": method.name(), "inputs": summary })
        );
    } else {
        for (path, t) in args.runs.iter().zip(&taus) {
            match t.mean() {
                Some(m) => eprintln!(
                    "{}: Kendall τ_b with the fused run {m:.4} (mean over {} queries)",
                    path.display(),
                    t.values.len()
                ),
                None => eprintln!("{}: Kendall τ_b undefined on every query", path.display()),
            }
        }
    }
    Ok(())
}

/// Per-query Kendall τ_b values of one input against the fused run.
#[derive(Debug, Default)]
pub(crate) struct Agreement {
    pub values: Vec<f64>,
}

impl Agreement {
    pub fn mean(&self) -> Option<f64> {
        (!self.values.is_empty())
            .then(|| self.values.iter().sum::<f64>() / self.values.len() as f64)
    }
}

/// Fuses every query of the union of the runs' queries, and each input's agreement with the
/// result.
pub(crate) fn fuse_runs(fusion: &Fusion, runs: &[Run]) -> anyhow::Result<(Run, Vec<Agreement>)> {
    let mut qids: Vec<&str> = runs.iter().flat_map(|r| r.iter().map(|(q, _)| q)).collect();
    qids.sort_unstable();
    qids.dedup();
    let mut fused = Run::new();
    let mut taus: Vec<Agreement> = runs.iter().map(|_| Agreement::default()).collect();
    for qid in qids {
        let lists: Vec<Vec<(String, f64)>> = runs
            .iter()
            .map(|r| {
                RunOrder::TrecEval
                    .apply(r.get(qid).unwrap_or(&[]))
                    .into_iter()
                    .map(|d| (d.doc.clone(), d.score))
                    .collect()
            })
            .collect();
        let out = fusion
            .fuse(&lists)
            .map_err(|e| Invalid(format!("query {qid}: {e}")))?;
        for (list, tau) in lists.iter().zip(&mut taus) {
            if let Some(t) = agreement(list, &out) {
                tau.values.push(t);
            }
        }
        fused.insert(
            qid,
            out.into_iter()
                .map(|(doc, s)| crate::eval::ScoredDoc::new(doc, s))
                .collect(),
        );
    }
    Ok((fused, taus))
}
