//! `rankd eval`: run every query of a test collection against the index with one model and
//! score the run under SPEC §4's conventions (numbers agree with trec_eval on the same files).

use std::path::{Path, PathBuf};

use super::{progress, BadInput, DataArgs};
use crate::corpus::cranfield::{self, Judgments};
use crate::eval::{self, EvalOptions, Gain, Qrels, Run};
use crate::text::{ModelKind, SearchRequest, TextIndex};

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryFormat {
    /// `cran.qry` (positional query ids) and `cranqrel`.
    Cranfield,
    /// One `qid<whitespace>text` per line, and TREC qrels.
    Trec,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgmentVariant {
    A,
    B,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GainArg {
    /// grade (trec_eval's ndcg_cut).
    Linear,
    /// 2^grade − 1.
    Exponential,
}

#[derive(clap::Args, Debug)]
pub struct EvalArgs {
    #[arg(long)]
    pub queries: PathBuf,
    #[arg(long)]
    pub qrels: PathBuf,
    #[arg(long, value_enum, default_value = "trec")]
    pub format: QueryFormat,
    /// Cranfield judgment variant (data README): A = codes 1..4 relevant, B = all listed pairs.
    #[arg(
        long = "cranfield-variant",
        alias = "judgments",
        value_enum,
        default_value = "a"
    )]
    pub judgments: JudgmentVariant,
    #[arg(long, default_value = "bm25")]
    pub model: String,
    /// The field single-field models rank by (default: the configured `all`).
    #[arg(long)]
    pub field: Option<String>,
    /// Depth of each ranking.
    #[arg(long, default_value_t = 1000)]
    pub depth: usize,
    /// NDCG gain; linear is trec_eval's `ndcg_cut`.
    #[arg(long, value_enum, default_value = "linear")]
    pub gain: GainArg,
    /// Write the run in TREC format.
    #[arg(long)]
    pub run: Option<PathBuf>,
    /// Rerank each query's first-phase window with this model file (SPEC §3).
    #[arg(long)]
    pub rerank: Option<PathBuf>,
    /// The reranked window (the run then holds `window` documents per query).
    #[arg(long, default_value_t = crate::second_phase::DEFAULT_WINDOW)]
    pub window: usize,
    /// Add SPEC §1.8's static PageRank boost with this weight over the first `--depth`
    /// results (needs `rankd graph`).
    #[arg(long)]
    pub boost_pagerank: Option<f32>,
    /// Print per-query values too.
    #[arg(long)]
    pub per_query: bool,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub data: DataArgs,
}

/// Writes `run` in TREC format to `path` atomically (a temporary file renamed into place).
pub(super) fn save_run(path: &Path, run: &Run, tag: &str) -> anyhow::Result<()> {
    let mut text = Vec::new();
    eval::trec::write_run(&mut text, run, tag)?;
    crate::text::index::write_atomic(path, &text)
}

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    let model: ModelKind = args.model.parse().map_err(BadInput)?;
    let index = TextIndex::open(&args.data.data_dir, args.data.config()?)?;
    let queries = read_queries(&args.queries, args.format)?;
    let qrels = read_qrels(&args.qrels, args.format, args.judgments)?;
    let links = match args.boost_pagerank {
        Some(_) => Some(crate::links::load(&index)?.ok_or_else(|| {
            BadInput("--boost-pagerank needs link scores; run `rankd graph` first".into())
        })?),
        None => None,
    };
    let ranking = match &args.rerank {
        Some(path) => {
            let model = crate::second_phase::ActiveModel::load(path)
                .map_err(|e| BadInput(e.to_string()))?;
            Ranking::Rerank {
                model: Box::new(model),
                links: crate::links::load(&index)?,
                window: args.window,
            }
        }
        None => Ranking::FirstPhase {
            depth: args.depth,
            boost: args.boost_pagerank.zip(links),
        },
    };
    let run = run_queries(
        &index,
        &queries,
        model,
        args.field.as_deref(),
        &ranking,
        args.json,
    )?;
    if let Some(path) = &args.run {
        save_run(path, &run, &format!("rankd-{model}"))?;
    }
    let options = EvalOptions {
        cutoffs: vec![1, 3, 5, 10, 20, 100],
        gain: match args.gain {
            GainArg::Linear => Gain::Linear,
            GainArg::Exponential => Gain::Exponential,
        },
        complete: true,
        ..EvalOptions::default()
    };
    let mut report = eval::evaluate(&run, &qrels, &options).map_err(|e| BadInput(e.to_string()))?;
    report.model = Some(model.to_string());
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        report.write_table(&mut std::io::stdout(), args.per_query)?;
    }
    Ok(())
}

/// Runs each `(qid, text)` and collects the top `depth` of every query.
/// How a query's ranking is produced.
pub enum Ranking {
    /// The first-phase model's top `depth`, optionally with the PageRank boost (weight).
    FirstPhase {
        depth: usize,
        boost: Option<(f32, crate::links::LinkData)>,
    },
    /// The first-phase top `window`, reranked.
    Rerank {
        model: Box<crate::second_phase::ActiveModel>,
        links: Option<crate::links::LinkData>,
        window: usize,
    },
}

pub fn run_queries(
    index: &TextIndex,
    queries: &[(String, String)],
    model: ModelKind,
    field: Option<&str>,
    ranking: &Ranking,
    quiet: bool,
) -> anyhow::Result<Run> {
    let bar = progress(queries.len() as u64, "queries", quiet);
    let mut run = Run::new();
    for (qid, text) in queries {
        let depth = match ranking {
            Ranking::FirstPhase { depth, .. } => *depth,
            Ranking::Rerank { window, .. } => *window,
        };
        let mut req = SearchRequest::new(text.clone(), model, depth);
        req.field = field.map(str::to_string);
        let results = match ranking {
            Ranking::FirstPhase { boost, .. } => index.search(&req).map(|mut r| {
                if let Some((weight, links)) = boost {
                    crate::links::apply_boost(&mut r, links, *weight, 0, depth);
                }
                r
            }),
            Ranking::Rerank {
                model,
                links,
                window,
            } => crate::second_phase::search(index, links.as_ref(), model, &req, *window)
                .map(|(r, _)| r),
        }
        .map_err(|e| BadInput(format!("query {qid}: {e}")))?;
        for hit in results.hits {
            run.push(qid, hit.id, f64::from(hit.score));
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(run)
}

pub(super) fn read_queries(
    path: &Path,
    format: QueryFormat,
) -> anyhow::Result<Vec<(String, String)>> {
    match format {
        QueryFormat::Cranfield => Ok(cranfield::read_queries(path)
            .map_err(|e| BadInput(e.to_string()))?
            .into_iter()
            .map(|q| (q.id, q.text))
            .collect()),
        QueryFormat::Trec => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?;
            text.lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(i, l)| {
                    let (qid, q) = l.trim().split_once(char::is_whitespace).ok_or_else(|| {
                        BadInput(format!("{}:{}: expected `qid text`", path.display(), i + 1))
                    })?;
                    Ok((qid.to_string(), q.trim().to_string()))
                })
                .collect()
        }
    }
}

pub(super) fn read_qrels(
    path: &Path,
    format: QueryFormat,
    variant: JudgmentVariant,
) -> anyhow::Result<Qrels> {
    let qrels = match format {
        QueryFormat::Cranfield => cranfield::read_qrels(
            path,
            match variant {
                JudgmentVariant::A => Judgments::A,
                JudgmentVariant::B => Judgments::B,
            },
        ),
        QueryFormat::Trec => eval::trec::read_qrels(path),
    };
    qrels.map_err(|e| BadInput(e.to_string()).into())
}
