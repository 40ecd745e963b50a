//! `rankd cv`: k-fold cross-validation of the reranker on judgments over the index
//! (`crate::training::cv`, SPEC §3.5): flags in, the judged windows built, the report
//! printed. With `--select`, each fold also chooses its features and weight decay
//! (`rerank::select`) from its own training queries.

use serde_json::json;

use super::eval::GainArg;
use super::features::JudgedArgs;
use super::learn::{LearnArgs, SelectArgs};
use super::{progress, DataArgs};
use crate::error::Invalid;
use crate::eval::significance::PairedTest;
use crate::eval::Report;
use crate::features::FeatureSet;
use crate::text::{ModelKind, TextIndex};
use crate::training::cv::{cross_validate, CvPlan};
use crate::training::{judged_windows, TrainSettings};

#[derive(clap::Args, Debug)]
pub struct CvArgs {
    #[command(flatten)]
    pub judged: JudgedArgs,
    /// The first-phase model whose window is reranked.
    #[arg(long, default_value_t = crate::training::DEFAULT_FIRST_PHASE.to_string())]
    pub first_phase: String,
    #[arg(long, default_value_t = crate::search::model::DEFAULT_WINDOW)]
    pub window: usize,
    #[arg(long, default_value_t = crate::training::cv::DEFAULT_FOLDS)]
    pub folds: usize,
    /// Gain of NDCG (as `rankd eval`).
    #[arg(long, value_enum, default_value = "linear")]
    pub gain: GainArg,
    /// Also rank each window by this one feature (no training; repeatable), e.g. `rm3.bm25`,
    /// and test it against the first phase the same way (SPEC §3.5's best single feature).
    #[arg(long = "single-feature", value_name = "NAME")]
    pub single_features: Vec<String>,
    /// Train on these features only (comma-separated names; default: the whole feature set).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub features: Vec<String>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Write the cross-validated reranked run (every query scored by the model of the fold
    /// that held it out) in TREC format, for trec_eval or a per-query comparison of runs.
    #[arg(long)]
    pub run: Option<std::path::PathBuf>,
    /// Random sign assignments of the significance test.
    #[arg(long, default_value_t = crate::eval::significance::DEFAULT_SAMPLES)]
    pub samples: u64,
    #[command(flatten)]
    pub learn: LearnArgs,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub data: DataArgs,
}

pub fn run(args: CvArgs) -> anyhow::Result<()> {
    let first_phase: ModelKind = args.first_phase.parse().map_err(Invalid)?;
    crate::search::check_window(args.window)?;
    let set = FeatureSet::current();
    let single_features: Vec<(String, usize)> = args
        .single_features
        .iter()
        .cloned()
        .zip(super::train::feature_columns(
            "--single-feature",
            &args.single_features,
        )?)
        .collect();
    let mut columns = super::train::feature_columns("--features", &args.features)?;
    if columns.is_empty() {
        columns = (0..set.len()).collect();
    }
    let settings = args.learn.apply(TrainSettings::on_index())?;
    let grid = args.select.grid(&settings)?;
    let index = TextIndex::open(&args.data.data_dir, args.data.config()?)?;
    let links = crate::links::load(&index)?;
    let (queries, qrels) = args.judged.load()?;
    let bar = progress(queries.len() as u64, "features", args.json);
    let read: Vec<usize> = columns
        .iter()
        .copied()
        .chain(single_features.iter().map(|&(_, c)| c))
        .collect();
    let prf = set.prf_for(&read);
    let engine = crate::search::Engine::new(index)
        .with_links(links)
        .with_stored_vectors(None)?;
    let (windows, stats) =
        judged_windows(&engine, &queries, first_phase, args.window, prf, &|| {
            bar.inc(1)
        })?;
    bar.finish_and_clear();
    let plan = CvPlan {
        folds: args.folds,
        settings,
        columns: columns.clone(),
        single_features,
        grid: grid.clone(),
        eval: args.gain.report_options(),
        samples: args.samples,
    };
    let quiet = args.json;
    let report = cross_validate(&windows, &qrels, &plan, &mut |f| {
        if quiet {
            return;
        }
        eprintln!(
            "fold {}/{}: {} test queries, best epoch {}",
            f.fold, plan.folds, f.test_queries, f.best_epoch
        );
        if let Some(s) = &f.selection {
            eprintln!(
                "  selected {} features (weight decay {}, validation MAP {:.4}): {}",
                s.features.len(),
                s.weight_decay,
                s.valid_map,
                s.features.join(",")
            );
        }
    })?;
    if let Some(path) = &args.run {
        super::eval::save_run(path, &report.reranked_run, "rankd-cv")?;
    }
    let significance = |tests: &[(String, PairedTest)]| {
        tests
            .iter()
            .map(|(m, t)| (m.clone(), json!(t)))
            .collect::<serde_json::Map<_, _>>()
    };
    let train_names: Vec<&String> = columns.iter().map(|&c| &set.names()[c]).collect();
    if args.json {
        let out = json!({
            "first_phase": first_phase.to_string(),
            "window": args.window,
            "folds": report.folds,
            "windows": stats,
            "objective": format!("{:?}", plan.settings.objective),
            "features": train_names,
            "selection_grid": grid.as_ref().map(|g| json!({
                "top_k": g.top_k,
                "weight_decay": g.weight_decay,
                "anchor": g.anchor,
                "rule": g.rule,
            })),
            "baseline": report.baseline.means,
            "reranked": report.reranked.means,
            "significance": significance(&report.significance),
            "single_features": report.single_features.iter().map(|s| {
                (s.name.clone(), json!({
                    "means": s.report.means,
                    "significance": significance(&s.significance),
                }))
            }).collect::<serde_json::Map<_, _>>(),
        });
        println!("{out}");
    } else {
        let base = &report.baseline;
        println!(
            "queries {}  (window {} of {first_phase})",
            report.reranked.queries, args.window
        );
        println!(
            "{:<10} {:>10} {:>10} {:>10} {:>10}",
            "metric",
            first_phase.to_string(),
            "reranked",
            "diff",
            "p"
        );
        // One line per metric: the first phase, the other run, their difference and p.
        let print_against = |other: &Report, tests: &[(String, PairedTest)]| {
            for (m, t) in tests {
                println!(
                    "{m:<10} {:>10.4} {:>10.4} {:>+10.4} {:>10.4}",
                    base.means.get(m).unwrap_or(f64::NAN),
                    other.means.get(m).unwrap_or(f64::NAN),
                    t.mean_difference,
                    t.p_value
                );
            }
        };
        print_against(&report.reranked, &report.significance);
        for s in &report.single_features {
            println!("single feature {} (no training) vs {first_phase}:", s.name);
            print_against(&s.report, &s.significance);
        }
    }
    Ok(())
}
