//! `rankd eval`: run every query of a test collection against the index with one model and
//! score the run under SPEC §4's conventions (numbers agree with trec_eval on the same files).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{progress, DataArgs};
use crate::corpus::cranfield::{self, Judgments};
use crate::error::Invalid;
use crate::eval::{self, EvalOptions, Gain, Qrels, Run};
use crate::search::evaluate::{ranked_by, run_queries, Evaluation};
use crate::search::model::ActiveModel;
use crate::search::request::EvalRequest;
use crate::search::Engine;
use crate::text::TextIndex;

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

impl GainArg {
    /// The report the evaluating commands print: cutoffs 1..100, every query counted, this
    /// gain.
    pub fn report_options(self) -> EvalOptions {
        EvalOptions {
            cutoffs: vec![1, 3, 5, 10, 20, 100],
            gain: match self {
                GainArg::Linear => Gain::Linear,
                GainArg::Exponential => Gain::Exponential,
            },
            complete: true,
            ..EvalOptions::default()
        }
    }
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
    /// A model of SPEC §1, `dense` or `hybrid` (SPEC §10; needs `rankd embed`), or `fusion`
    /// (with --inputs and --fusion).
    #[arg(long, default_value = "bm25")]
    pub model: String,
    /// With --model fusion: the fused models, comma-separated (e.g. bm25f,lm,bm25prox).
    #[arg(long)]
    pub inputs: Option<String>,
    /// With --model fusion: rrf, combsum, combmnz, borda or condorcet (SPEC §6); with
    /// --model hybrid: rrf or linear.
    #[arg(long)]
    pub fusion: Option<String>,
    /// With --model hybrid: the dense list's weight in [0, 1].
    #[arg(long)]
    pub hybrid_ratio: Option<f64>,
    /// RRF's k (default 60).
    #[arg(long)]
    pub fusion_k: Option<f64>,
    /// How combsum, combmnz and hybrid's linear fusion normalise scores: minmax (default),
    /// zscore or l2.
    #[arg(long)]
    pub fusion_norm: Option<String>,
    /// One positive weight per input, comma-separated.
    #[arg(long)]
    pub fusion_weights: Option<String>,
    /// How many of each input's top documents are fused (default: --depth).
    #[arg(long)]
    pub fusion_depth: Option<usize>,
    /// The field single-field models rank by (default: the configured `all`).
    #[arg(long)]
    pub field: Option<String>,
    /// Depth of each ranking, at most 1000 (default 1000).
    #[arg(long)]
    pub depth: Option<usize>,
    /// NDCG gain; linear is trec_eval's `ndcg_cut`.
    #[arg(long, value_enum, default_value = "linear")]
    pub gain: GainArg,
    /// Write the run in TREC format.
    #[arg(long)]
    pub run: Option<PathBuf>,
    /// Rerank each query's first-phase window with this model file (SPEC §3).
    #[arg(long)]
    pub rerank: Option<PathBuf>,
    /// The reranked or boosted window (default 100; the run then holds `window` documents
    /// per query).
    #[arg(long)]
    pub window: Option<usize>,
    /// Add SPEC §1.8's static PageRank boost with this weight to the first-phase top
    /// `--window` and re-sort them, as `/search?boost=pagerank` does (needs `rankd graph`).
    #[arg(long)]
    pub boost_pagerank: Option<f32>,
    /// The embedder of `--model dense|hybrid` (default: the one that computed the index's
    /// vectors).
    #[arg(long, env = "RANKD_EMBEDDER_DIR")]
    pub embedder: Option<PathBuf>,
    /// Stop at the first query that cannot be run (default: report it and go on).
    #[arg(long)]
    pub strict: bool,
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

impl EvalArgs {
    /// The evaluation these flags ask for, in the library's terms (`--rerank FILE` asks for
    /// reranking with that model, `--boost-pagerank W` for `boost=pagerank` with weight W).
    fn request(&self) -> EvalRequest {
        EvalRequest {
            model: self.model.clone(),
            inputs: self.inputs.clone(),
            fusion: self.fusion.clone(),
            hybrid_ratio: self.hybrid_ratio,
            fusion_k: self.fusion_k,
            fusion_norm: self.fusion_norm.clone(),
            fusion_weights: self.fusion_weights.clone(),
            fusion_depth: self.fusion_depth,
            field: self.field.clone(),
            rerank: self.rerank.is_some().then_some(true),
            window: self.window,
            boost: self.boost_pagerank.map(|_| "pagerank".to_string()),
            boost_weight: self.boost_pagerank,
            depth: self.depth,
        }
    }
}

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    let query = args.request().into_query()?;
    let index = TextIndex::open(&args.data.data_dir, args.data.config()?)?;
    let queries = read_queries(&args.queries, args.format)?;
    let qrels = read_qrels(&args.qrels, args.format, args.judgments)?;
    let links = crate::links::load(&index)?;
    let active = match &args.rerank {
        Some(path) => Some(ActiveModel::load(path)?),
        None => None,
    };
    let reads_dense = active.as_ref().is_some_and(ActiveModel::reads_dense);
    let dense = if query.dense || query.fusion.as_ref().is_some_and(|f| f.uses_dense()) {
        let dense = crate::dense::load(&index, args.embedder.as_deref())?;
        Some(dense.ok_or_else(|| {
            crate::error::Invalid(format!(
                "{} has no document vectors: run `rankd embed --data-dir {}` first",
                args.data.data_dir.display(),
                args.data.data_dir.display()
            ))
        })?)
    } else if reads_dense {
        let dense = crate::dense::load(&index, args.embedder.as_deref())?;
        if dense.is_none() {
            eprintln!(
                "note: the reranker reads dense.similarity but {} has no document vectors: \
                 the feature keeps its default (run `rankd embed` first)",
                args.data.data_dir.display()
            );
        }
        dense
    } else {
        None
    };
    let engine = Engine::new(index).with_links(links).with_model(active);
    engine.set_dense(dense.map(Arc::new));
    let name = ranked_by(&engine, &query);
    let bar = progress(queries.len() as u64, "queries", args.json);
    let (run, failed) = run_queries(&engine, &queries, &query, args.strict, &|| bar.inc(1))?;
    bar.finish_and_clear();
    if let Some(path) = &args.run {
        save_run(path, &run, &format!("rankd-{name}"))?;
    }
    let options = args.gain.report_options();
    let mut report = eval::evaluate(&run, &qrels, &options)?;
    report.model = Some(name);
    let evaluation = Evaluation {
        report,
        failed_queries: failed,
    };
    for f in &evaluation.failed_queries {
        eprintln!("warning: query {} was not run: {}", f.qid, f.error);
    }
    if args.json {
        println!("{}", serde_json::to_string(&evaluation)?);
    } else {
        evaluation
            .report
            .write_table(&mut std::io::stdout(), args.per_query)?;
        if !evaluation.failed_queries.is_empty() {
            println!(
                "{} of {} queries could not be run (scored 0; --strict to stop instead)",
                evaluation.failed_queries.len(),
                queries.len()
            );
        }
    }
    Ok(())
}

pub(super) fn read_queries(
    path: &Path,
    format: QueryFormat,
) -> anyhow::Result<Vec<(String, String)>> {
    match format {
        QueryFormat::Cranfield => Ok(cranfield::read_queries(path)?
            .into_iter()
            .map(|q| (q.id, q.text))
            .collect()),
        QueryFormat::Trec => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Invalid(format!("cannot read {}: {e}", path.display())))?;
            text.lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(i, l)| {
                    let (qid, q) = l.trim().split_once(char::is_whitespace).ok_or_else(|| {
                        Invalid(format!("{}:{}: expected `qid text`", path.display(), i + 1))
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
    Ok(qrels?)
}
