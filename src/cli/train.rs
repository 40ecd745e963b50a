//! `rankd train`: train a reranker and write its model file (SPEC §3.5, INTERFACE.md).
//!
//! Training data comes from a [`Source`]: LETOR/SVMlight files, or judgments on the index
//! (queries + qrels), whose first-phase windows get the feature set of SPEC §3.1. A model
//! trained on the index can be activated for serving (`--activate`).

use std::path::PathBuf;

use super::learn::{rank_sets, read_letor, run_training, LearnArgs};
use super::BadInput;
use crate::rerank::RankSet;

#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// Training data: a LETOR/SVMlight file (`label [qid:Q] index:value ...`).
    #[arg(long, required_unless_present = "queries", conflicts_with = "queries")]
    pub letor: Option<PathBuf>,
    /// Training data: judged queries on the index (`qid text` lines, or Cranfield's
    /// `cran.qry` with `--format cranfield`), with `--qrels`.
    #[arg(long, requires = "qrels")]
    pub queries: Option<PathBuf>,
    #[arg(long, requires = "queries")]
    pub qrels: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "trec")]
    pub format: super::eval::QueryFormat,
    /// Cranfield judgment variant (see `rankd eval`).
    #[arg(long, value_enum, default_value = "a")]
    pub judgments: super::eval::JudgmentVariant,
    /// With judgments on the index: the first-phase model and window to rerank.
    #[arg(long, default_value = "bm25f")]
    pub first_phase: String,
    #[arg(long, default_value_t = crate::second_phase::DEFAULT_WINDOW)]
    pub window: usize,
    /// With judgments on the index: also store the model in the index's model directory
    /// and make it the active reranker.
    #[arg(long, requires = "queries")]
    pub activate: bool,
    #[command(flatten)]
    pub data: super::DataArgs,
    /// Group-size file for `--letor` (default: `TRAIN.query` if it exists, else `qid:`).
    #[arg(long)]
    pub letor_query: Option<PathBuf>,
    /// Validation data for early stopping (default: hold out `--valid-fraction` of the
    /// training queries).
    #[arg(long)]
    pub valid: Option<PathBuf>,
    #[arg(long)]
    pub valid_query: Option<PathBuf>,
    /// Where to write the model file.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub learn: LearnArgs,
    /// Print a JSON summary on stdout instead of the log.
    #[arg(long)]
    pub json: bool,
}

/// Where training data comes from.
pub enum Source {
    Letor {
        data: PathBuf,
        groups: Option<PathBuf>,
        valid: Option<(PathBuf, Option<PathBuf>)>,
    },
    /// Judged queries' first-phase windows on the index.
    Index {
        judged: super::features::JudgedArgs,
        data: super::DataArgs,
        first_phase: crate::text::ModelKind,
        window: usize,
    },
}

impl Source {
    /// `(train, validation)` sets; validation is a query split of the training data when the
    /// source has none of its own.
    pub fn load(&self, learn: &LearnArgs) -> anyhow::Result<(RankSet, RankSet, String)> {
        match self {
            Source::Letor {
                data,
                groups,
                valid,
            } => {
                let train = read_letor(data, groups.as_deref())?;
                match valid {
                    Some((vdata, vgroups)) => {
                        let valid = read_letor(vdata, vgroups.as_deref())?;
                        let mut sets = rank_sets(&[&train, &valid])?.into_iter();
                        let (t, v) = (sets.next().expect("two"), sets.next().expect("two"));
                        Ok((t, v, data.display().to_string()))
                    }
                    None => {
                        let all = rank_sets(&[&train])?.remove(0);
                        let (t, v) = all
                            .split_validation(learn.valid_fraction, learn.seed)
                            .map_err(|e| BadInput(e.to_string()))?;
                        Ok((t, v, data.display().to_string()))
                    }
                }
            }
            Source::Index {
                judged,
                data,
                first_phase,
                window,
            } => {
                crate::second_phase::validate_window(1, 0, *window)
                    .map_err(|e| BadInput(e.to_string()))?;
                let index = crate::text::TextIndex::open(&data.data_dir, data.config()?)?;
                let links = crate::links::load(&index)?;
                let (queries, _) = judged.load()?;
                let bar = super::progress(queries.len() as u64, "features", false);
                let (windows, _) = crate::judgments::judged_windows(
                    &index,
                    links.as_ref(),
                    &queries,
                    *first_phase,
                    *window,
                    &|| bar.inc(1),
                )
                .map_err(|e| BadInput(e.to_string()))?;
                bar.finish_and_clear();
                let all =
                    crate::judgments::rank_set(&windows).map_err(|e| BadInput(e.to_string()))?;
                let (t, v) = all
                    .split_validation(learn.valid_fraction, learn.seed)
                    .map_err(|e| BadInput(e.to_string()))?;
                Ok((t, v, judged.qrels.display().to_string()))
            }
        }
    }
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let judged = match (&args.queries, &args.qrels) {
        (Some(queries), Some(qrels)) => Some(super::features::JudgedArgs {
            queries: queries.clone(),
            qrels: qrels.clone(),
            format: args.format,
            judgments: args.judgments,
        }),
        _ => None,
    };
    let source = match (&args.letor, judged) {
        (Some(letor), _) => Source::Letor {
            data: letor.clone(),
            groups: args.letor_query.clone(),
            valid: args.valid.clone().map(|v| (v, args.valid_query.clone())),
        },
        (None, Some(judged)) => Source::Index {
            judged,
            data: args.data.clone(),
            first_phase: args.first_phase.parse().map_err(BadInput)?,
            window: args.window,
        },
        (None, None) => {
            return Err(BadInput("give --letor FILE or --queries/--qrels".into()).into())
        }
    };
    let (train, valid, name) = source.load(&args.learn)?;
    let mut config = args.learn.config(name);
    if matches!(source, Source::Index { .. }) {
        config.convention = crate::rerank::MetricConvention::Trec;
    }
    let outcome = run_training(&train, Some(&valid), &config, args.json)?;
    outcome.model.save(&args.out)?;
    if args.activate {
        let path = crate::second_phase::install(&args.data.data_dir, &outcome.model)?;
        eprintln!(
            "model {} is now the active reranker ({})",
            outcome.model.id(),
            path.display()
        );
    }
    let m = &outcome.model;
    if args.json {
        let summary = serde_json::json!({
            "model": args.out,
            "id": m.id(),
            "objective": m.training.objective,
            "train_queries": train.queries.len(),
            "valid_queries": valid.queries.len(),
            "coverage": outcome.coverage,
            "best_epoch": m.training.best_epoch,
            "epochs_run": m.training.epochs_run,
            "metrics": m.training.metrics,
            "log": outcome.log,
        });
        println!("{summary}");
    } else {
        let v = m.training.metrics.valid.as_ref();
        println!(
            "model {} written to {} (best epoch {} of {}; validation MAP {:.4}, NDCG@10 {:.4})",
            m.id(),
            args.out.display(),
            m.training.best_epoch,
            m.training.epochs_run,
            v.map_or(f64::NAN, |v| v.map),
            v.map_or(f64::NAN, |v| v.ndcg10),
        );
    }
    Ok(())
}
