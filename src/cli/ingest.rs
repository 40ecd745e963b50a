//! `rankd ingest`: read documents from JSONL, an HTML directory or Cranfield, then add or
//! update them in one atomic commit. Bad records abort the whole ingest (nothing is indexed)
//! unless `--skip-invalid`, which indexes the good ones and reports the rest by file and line.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use url::Url;

use super::{progress, DataArgs};
use crate::corpus::{cranfield, html, jsonl, Document, RecordError};
use crate::error::Invalid;
use crate::text::TextIndex;

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Html,
    Cranfield,
}

#[derive(clap::Args, Debug)]
pub struct IngestArgs {
    #[arg(long, value_enum)]
    pub format: Format,
    /// A JSONL file, a directory of HTML pages, or the directory holding `cran.all.1400`.
    #[arg(long)]
    pub input: PathBuf,
    /// For `--format html`: the URL the directory is published at (pages get `base + path`).
    /// Default: the directory's `file://` URL.
    #[arg(long)]
    pub base_url: Option<Url>,
    /// For `--format html`: index pages whose `<meta name="robots">` says `noindex` (by
    /// default they are skipped, as a crawler skips them, and counted).
    #[arg(long)]
    pub index_noindex: bool,
    /// Index the valid records and report the invalid ones instead of aborting.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Print the summary as JSON on stdout (no progress bars).
    #[arg(long)]
    pub json: bool,
    /// Split the collection over N shards by a stable hash of each id: shard `s` is the data
    /// directory `DATA_DIR/shards/<s>`, each served by a `rankd serve --role leaf`. Each
    /// shard commits on its own.
    #[arg(long, value_name = "N")]
    pub shards: Option<u32>,
    #[command(flatten)]
    pub data: DataArgs,
}

/// What one ingest did; printed at the end and used by the benchmarks.
#[derive(Debug, Serialize)]
pub struct IngestSummary {
    pub documents: u64,
    pub skipped: usize,
    pub redirects: usize,
    /// HTML pages skipped because their robots meta says `noindex`.
    pub noindex: usize,
    /// HTML pages folded onto the canonical page they name.
    pub canonical: usize,
    pub input_bytes: u64,
    pub read_seconds: f64,
    pub index_seconds: f64,
    pub docs_per_second: f64,
    pub mb_per_second: f64,
    pub peak_rss_mb: f64,
    pub total_documents: u64,
}

pub fn run(args: IngestArgs) -> anyhow::Result<()> {
    let summary = match args.shards {
        None => {
            let index = TextIndex::open_or_create(&args.data.data_dir, args.data.config()?)?;
            ingest(
                &index,
                args.format,
                &args.input,
                args.base_url.as_ref(),
                html_options(&args),
                args.skip_invalid,
                args.json,
            )?
        }
        Some(n) => {
            let dirs = crate::cluster::shard_dirs(&args.data.data_dir, n)?;
            let config = args.data.config()?;
            let indexes = dirs
                .iter()
                .map(|d| TextIndex::open_or_create(d, config.clone()))
                .collect::<anyhow::Result<Vec<_>>>()?;
            ingest_sharded(
                &indexes,
                args.format,
                &args.input,
                args.base_url.as_ref(),
                html_options(&args),
                args.skip_invalid,
                args.json,
            )?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        eprintln!(
            "indexed {} documents ({} skipped, {} redirect pages, {} noindex pages, {} canonical duplicates folded) in {:.1}s: {:.0} docs/s, {:.1} MB/s, peak RSS {:.0} MB; the index holds {} documents",
            summary.documents,
            summary.skipped,
            summary.redirects,
            summary.noindex,
            summary.canonical,
            summary.read_seconds + summary.index_seconds,
            summary.docs_per_second,
            summary.mb_per_second,
            summary.peak_rss_mb,
            summary.total_documents
        );
    }
    Ok(())
}

fn html_options(args: &IngestArgs) -> html::HtmlOptions {
    html::HtmlOptions {
        index_noindex: args.index_noindex,
    }
}

/// Reads `input` in `format` and commits it to `index`.
pub fn ingest(
    index: &TextIndex,
    format: Format,
    input: &Path,
    base_url: Option<&Url>,
    options: html::HtmlOptions,
    skip_invalid: bool,
    quiet: bool,
) -> anyhow::Result<IngestSummary> {
    ingest_sharded(
        std::slice::from_ref(index),
        format,
        input,
        base_url,
        options,
        skip_invalid,
        quiet,
    )
}

/// Reads `input` in `format` and commits each document to its shard of `indexes` (one
/// index: all of them). Reading is done for the whole collection first, so anchor text
/// gathered from every page reaches the page it describes whatever shard holds it.
pub(crate) fn ingest_sharded(
    indexes: &[TextIndex],
    format: Format,
    input: &Path,
    base_url: Option<&Url>,
    options: html::HtmlOptions,
    skip_invalid: bool,
    quiet: bool,
) -> anyhow::Result<IngestSummary> {
    let start = Instant::now();
    let Read {
        docs,
        errors,
        skipped,
        input_bytes,
    } = read(format, input, base_url, options, quiet)?;
    if !errors.is_empty() {
        for e in errors.iter().take(20) {
            eprintln!("invalid record: {e}");
        }
        if errors.len() > 20 {
            eprintln!("... and {} more invalid records", errors.len() - 20);
        }
        if !skip_invalid {
            return Err(Invalid(format!(
                "{} invalid record(s) in {}; nothing was indexed (use --skip-invalid to index the valid ones)",
                errors.len(),
                input.display()
            ))
            .into());
        }
    }
    let read_seconds = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let bar = progress(docs.len() as u64, "indexing", quiet);
    let mut documents = 0;
    let parts = match indexes.len() {
        1 => vec![docs],
        n => crate::cluster::route(docs, n as u32),
    };
    for (index, part) in indexes.iter().zip(parts) {
        documents += index.upsert(part.into_iter().inspect(|_| bar.inc(1)))?;
    }
    bar.finish_and_clear();
    let index_seconds = start.elapsed().as_secs_f64();
    let total = read_seconds + index_seconds;
    Ok(IngestSummary {
        documents,
        skipped: errors.len(),
        redirects: skipped.redirects,
        noindex: skipped.noindex,
        canonical: skipped.canonical,
        input_bytes,
        read_seconds,
        index_seconds,
        docs_per_second: documents as f64 / total,
        mb_per_second: input_bytes as f64 / 1e6 / total,
        peak_rss_mb: peak_rss_mb(),
        total_documents: indexes.iter().map(TextIndex::num_docs).sum(),
    })
}

/// What reading an input gave.
struct Read {
    docs: Vec<Document>,
    errors: Vec<RecordError>,
    skipped: Skipped,
    input_bytes: u64,
}

/// HTML pages that are no documents of their own, by why.
#[derive(Debug, Clone, Copy, Default)]
struct Skipped {
    redirects: usize,
    noindex: usize,
    canonical: usize,
}

fn read(
    format: Format,
    input: &Path,
    base_url: Option<&Url>,
    options: html::HtmlOptions,
    quiet: bool,
) -> anyhow::Result<Read> {
    let missing = || Invalid(format!("input {} does not exist", input.display()));
    if !input.exists() {
        return Err(missing().into());
    }
    match format {
        Format::Jsonl => {
            if input.is_dir() {
                return Err(Invalid(format!(
                    "{} is a directory; --format jsonl takes a file",
                    input.display()
                ))
                .into());
            }
            let bytes =
                std::fs::read(input).with_context(|| format!("cannot read {}", input.display()))?;
            let (docs, errors) = split(jsonl::parse(input, &bytes));
            Ok(Read {
                docs,
                errors,
                skipped: Skipped::default(),
                input_bytes: bytes.len() as u64,
            })
        }
        Format::Html => {
            if !input.is_dir() {
                return Err(Invalid(format!(
                    "{} is not a directory; --format html takes a directory of pages",
                    input.display()
                ))
                .into());
            }
            let files = html::html_files(input)?;
            if files.is_empty() {
                return Err(Invalid(format!("no .html files under {}", input.display())).into());
            }
            let bytes: u64 = files
                .iter()
                .filter_map(|f| f.metadata().ok())
                .map(|m| m.len())
                .sum();
            let base = match base_url {
                Some(u) => u.clone(),
                None => Url::from_directory_path(input.canonicalize()?).map_err(|_| {
                    Invalid(format!("cannot make a file URL of {}", input.display()))
                })?,
            };
            let bar = progress(files.len() as u64, "parsing", quiet);
            let corpus = html::read_pages(input, &files, &base, options, &|| bar.inc(1));
            bar.finish_and_clear();
            Ok(Read {
                docs: corpus.documents,
                errors: corpus.errors,
                skipped: Skipped {
                    redirects: corpus.redirects,
                    noindex: corpus.noindex,
                    canonical: corpus.canonical,
                },
                input_bytes: bytes,
            })
        }
        Format::Cranfield => {
            let path = input.join(cranfield::DOCUMENTS_FILE);
            let bytes = path.metadata().map(|m| m.len()).unwrap_or(0);
            let docs = cranfield::read_documents(&path)?;
            Ok(Read {
                docs,
                errors: Vec::new(),
                skipped: Skipped::default(),
                input_bytes: bytes,
            })
        }
    }
}

fn split(results: Vec<Result<Document, RecordError>>) -> (Vec<Document>, Vec<RecordError>) {
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok(d) => docs.push(d),
            Err(e) => errors.push(e),
        }
    }
    (docs, errors)
}

/// Peak resident set size of this process (Linux `VmHWM`), 0 where unknown.
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}
