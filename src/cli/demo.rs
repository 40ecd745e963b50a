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
    let models = crate::search::model::model_files(data_dir)?;
    let has_kind = |kind: crate::training::ModelChoice| {
        models
            .iter()
            .any(|p| crate::rerank::Reranker::load(p).is_ok_and(|m| m.kind() == kind.to_string()))
    };
    let index = if models.is_empty() || args.model.is_some_and(|k| !has_kind(k)) {
        let links = crate::links::load(&index)?;
        let engine = crate::search::Engine::new(index).with_links(links);
        train_reranker(&engine, &docs_dir, args.model)?;
        engine.into_index()
    } else {
        index
    };
    if args.no_serve {
        return Ok(());
    }
    let config = crate::config::Config::load(crate::config::Flags {
        addr: Some(args.addr),
        data_dir: Some(args.data.data_dir.clone()),
        ..Default::default()
    })
    .map_err(|e| crate::error::Invalid(format!("{e:#}")))?;
    super::serve::serve_index(index, config, false)
}

/// The share of the known-item queries held out for measuring.
const HELD_OUT_FRACTION: f64 = 0.2;

/// Derives known-item judgments from the docs (docs/GUIDE.md, "How the demo learns"), trains
/// the default reranker on most of them, reports MRR on the held-out rest, and activates it.
/// The judgments are written to `DATA/known-items/` so `rankd eval` can reproduce the numbers.
fn train_reranker(
    engine: &crate::search::Engine,
    docs_dir: &Path,
    model: Option<crate::training::ModelChoice>,
) -> anyhow::Result<()> {
    let index = &engine.index;
    use crate::judgments::known_items;
    use crate::training::{judged_windows, train_on_windows};
    eprintln!("deriving known-item judgments from the API docs' summaries");
    let items = known_items::derive(
        docs_dir,
        known_items::DEFAULT_QUERIES,
        known_items::DEFAULT_SEED,
    )?;
    if items.len() < 20 {
        eprintln!(
            "only {} known-item queries; no reranker trained",
            items.len()
        );
        return Ok(());
    }
    let held_out = ((items.len() as f64 * HELD_OUT_FRACTION) as usize).max(1);
    let (test, train) = items.split_at(held_out);
    let dir = index.dir.join("known-items");
    std::fs::create_dir_all(&dir)?;
    for (name, part) in [("train", train), ("test", test)] {
        let (q, r) = known_items::to_trec(part);
        crate::text::index::write_atomic(&dir.join(format!("{name}.queries")), q.as_bytes())?;
        crate::text::index::write_atomic(&dir.join(format!("{name}.qrels")), r.as_bytes())?;
    }
    let window = crate::search::model::DEFAULT_WINDOW;
    let mut windows = Vec::new();
    for (part, what) in [(train, "train"), (test, "test")] {
        let bar = super::progress(part.len() as u64, what, false);
        let (w, _) = judged_windows(
            engine,
            &known_items::judged(part),
            crate::training::DEFAULT_FIRST_PHASE,
            window,
            crate::features::Prf::Skip, // the default training columns leave RM3 out
            &|| bar.inc(1),
        )?;
        bar.finish_and_clear();
        windows.push(w);
    }
    // The settings of training on the index (`TrainSettings::on_index`: a linear model,
    // stable AP without its rank weighting, chosen by cross-validation on these judgments;
    // EVALUATION.md, "Reranker on the Rust docs"), with `--model` over them.
    let mut settings = crate::training::TrainSettings::on_index();
    if let Some(kind) = model {
        settings.model = kind;
    }
    settings.validate()?;
    let config = settings.config(
        format!(
            "{} known-item queries from {}",
            train.len(),
            docs_dir.display()
        ),
        crate::rerank::MetricConvention::Trec,
    );
    let bar = super::progress(config.epochs() as u64, "epochs", false);
    let outcome = train_on_windows(
        &windows[0],
        &config,
        settings.valid_fraction,
        &mut |_| bar.inc(1),
        &std::sync::atomic::AtomicBool::new(false),
    )?;
    bar.finish_and_clear();
    let path = crate::search::model::install(&index.dir, &outcome.model)?;
    let active = crate::search::model::ActiveModel::new(outcome.model.clone(), path.clone())?;
    let (base, reranked) = held_out_mrr(&windows[1], &active)?;
    eprintln!(
        "reranker {} trained on {} queries ({}); known-item MRR on {} held-out queries: \
         BM25F {base:.3}, reranked {reranked:.3}",
        outcome.model.id(),
        train.len(),
        path.display(),
        test.len()
    );
    Ok(())
}

/// MRR of the first-phase order and of the model's order over held-out windows (a relevant
/// document outside the window counts as not found).
fn held_out_mrr(
    windows: &[crate::training::Window],
    model: &crate::search::model::ActiveModel,
) -> anyhow::Result<(f64, f64)> {
    use crate::eval::metrics::{reciprocal_rank, JudgedRanking};
    let rr = |labels: &[i32], order: &[usize]| -> f64 {
        let ranking = JudgedRanking {
            retrieved: order.iter().map(|&i| Some(labels[i])).collect(),
            judged: labels.to_vec(),
        };
        reciprocal_rank(&ranking, 1)
    };
    let (mut base, mut reranked) = (0.0, 0.0);
    for w in windows {
        let first: Vec<usize> = (0..w.labels.len()).collect();
        let scores = model.score(&w.features)?;
        let mut by_model = first.clone();
        by_model.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        base += rr(&w.labels, &first);
        reranked += rr(&w.labels, &by_model);
    }
    let n = windows.len().max(1) as f64;
    Ok((base / n, reranked / n))
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
