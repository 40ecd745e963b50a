//! `rankd features` (feature logging: the judged windows as SVMlight/LETOR, for any external
//! learner) and `rankd known-items` (the Rust-docs known-item judgments as TREC files).

use std::io::Write;
use std::path::PathBuf;

use super::eval::{read_qrels, read_queries, JudgmentVariant, QueryFormat};
use super::{progress, DataArgs};
use crate::error::Invalid;
use crate::eval::Qrels;
use crate::features::FeatureSet;
use crate::judgments::{known_items, write_svmlight, QueryClass};
use crate::text::{ModelKind, TextIndex};
use crate::training::{judged_windows, JudgedQuery};

/// Judged queries for training or evaluation on the index.
#[derive(clap::Args, Debug, Clone)]
pub struct JudgedArgs {
    /// Queries: `qid text` per line (trec) or Cranfield's `cran.qry`.
    #[arg(long)]
    pub queries: PathBuf,
    /// Judgments: TREC qrels (`qid 0 doc grade`) or Cranfield's `cranqrel`.
    #[arg(long)]
    pub qrels: PathBuf,
    #[command(flatten)]
    pub formats: JudgedFormats,
}

/// How query and judgment files are written (`rankd features`, `cv`, `train`).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct JudgedFormats {
    #[arg(long, value_enum, default_value = "trec")]
    pub format: QueryFormat,
    /// Cranfield judgment variant (see `rankd eval`).
    #[arg(long, value_enum, default_value = "a")]
    pub cranfield_variant: JudgmentVariant,
}

impl JudgedArgs {
    /// Queries with their judgments, and the judgments as read; a query without judgments
    /// is dropped (nothing to learn or measure), judgments of unknown queries are an error.
    pub fn load(&self) -> anyhow::Result<(Vec<JudgedQuery>, Qrels)> {
        let JudgedFormats {
            format,
            cranfield_variant,
        } = self.formats;
        let queries = read_queries(&self.queries, format)?;
        let qrels = read_qrels(&self.qrels, format, cranfield_variant)?;
        Ok((judged(queries, &qrels)?, qrels))
    }
}

fn judged(queries: Vec<(String, String)>, qrels: &Qrels) -> anyhow::Result<Vec<JudgedQuery>> {
    let known: std::collections::HashSet<&str> = queries.iter().map(|(q, _)| q.as_str()).collect();
    if let Some((qid, _)) = qrels.iter().find(|(q, _)| !known.contains(q)) {
        return Err(Invalid(format!(
            "the qrels judge query `{qid}`, which the queries file lacks"
        ))
        .into());
    }
    Ok(queries
        .into_iter()
        .filter_map(|(qid, text)| {
            let grades = qrels
                .get(&qid)?
                .iter()
                .map(|(d, g)| (d.clone(), *g))
                .collect();
            Some(JudgedQuery { qid, text, grades })
        })
        .collect())
}

#[derive(clap::Args, Debug)]
pub struct FeaturesArgs {
    #[command(flatten)]
    pub judged: JudgedArgs,
    /// The first-phase model whose window is logged.
    #[arg(long, default_value_t = crate::training::DEFAULT_FIRST_PHASE.to_string())]
    pub model: String,
    #[arg(long, default_value_t = crate::search::model::DEFAULT_WINDOW)]
    pub window: usize,
    /// The SVMlight/LETOR file to write.
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub data: DataArgs,
}

pub(crate) fn run_features(args: FeaturesArgs) -> anyhow::Result<()> {
    let model: ModelKind = args.model.parse().map_err(Invalid)?;
    crate::search::check_window(args.window)?;
    let index = TextIndex::open(&args.data.data_dir, args.data.config()?)?;
    let links = crate::links::load(&index)?;
    let engine = crate::search::Engine::new(index)
        .with_links(links)
        .with_stored_vectors(None)?;
    let (queries, _) = args.judged.load()?;
    let bar = progress(queries.len() as u64, "features", args.json);
    let (windows, stats) = judged_windows(
        &engine,
        &queries,
        model,
        args.window,
        crate::features::Prf::Compute,
        &|| bar.inc(1),
    )?;
    bar.finish_and_clear();
    let mut bytes = Vec::new();
    write_svmlight(&mut bytes, FeatureSet::current(), &windows)?;
    crate::text::index::write_atomic(&args.out, &bytes)?;
    if args.json {
        println!("{}", serde_json::to_string(&stats)?);
    } else {
        eprintln!(
            "wrote {} rows of {} queries to {} ({} of {} relevant documents inside the windows, {} judged documents not in the index)",
            stats.rows,
            stats.queries,
            args.out.display(),
            stats.relevant_in_window,
            stats.relevant_judged,
            stats.unknown_documents
        );
    }
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct KnownItemsArgs {
    /// The documentation directory (default: rustup's, as for `rankd demo`).
    #[arg(long)]
    pub docs: Option<PathBuf>,
    /// The class of queries: known items (name and summary words), item names as users type
    /// them, or the guides' task phrases.
    #[arg(long, value_enum, default_value_t = QueryClass::KnownItem)]
    pub class: QueryClass,
    #[arg(long, default_value_t = known_items::DEFAULT_QUERIES)]
    pub max: usize,
    #[arg(long, default_value_t = known_items::DEFAULT_SEED)]
    pub seed: u64,
    /// Where to write the queries (`qid text` lines) and the TREC qrels.
    #[arg(long)]
    pub queries_out: PathBuf,
    #[arg(long)]
    pub qrels_out: PathBuf,
}

pub(crate) fn run_known_items(args: KnownItemsArgs) -> anyhow::Result<()> {
    let docs = match args.docs {
        Some(d) => d,
        None => super::demo::find_rust_docs()?,
    };
    let documented = known_items::items(&docs)?;
    let items = args.class.derive(&docs, &documented, args.max, args.seed)?;
    if items.is_empty() {
        return Err(Invalid(format!(
            "no documented API item pages under {}",
            docs.display()
        ))
        .into());
    }
    let judged = known_items::judged(&items);
    let (queries, qrels) = known_items::to_trec(&judged.iter().collect::<Vec<_>>());
    crate::text::index::write_atomic(&args.queries_out, queries.as_bytes())?;
    crate::text::index::write_atomic(&args.qrels_out, qrels.as_bytes())?;
    let mut err = std::io::stderr();
    writeln!(
        err,
        "wrote {} {} queries to {} and {}",
        items.len(),
        args.class.name(),
        args.queries_out.display(),
        args.qrels_out.display()
    )?;
    Ok(())
}
