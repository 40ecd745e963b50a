//! `rankd demo`: the main job on a fresh machine. Finds the Rust documentation that rustup
//! installs (the Book, the Reference, std's API docs: ~48k HTML pages with real hyperlinks),
//! ingests it with progress bars, and serves it. A second run reuses the index.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use url::Url;

use super::ingest::{ingest, Format};
use super::{BadInput, DataArgs};
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
        return Err(BadInput(format!(
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
            return Err(BadInput(format!(
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
        let s = ingest(&index, Format::Html, &docs_dir, Some(&base), true, false)?;
        eprintln!(
            "indexed {} pages ({} redirect stubs followed, {} unreadable) in {:.0}s ({:.0} docs/s, {:.1} MB/s, peak RSS {:.0} MB)",
            s.documents,
            s.redirects,
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
        eprintln!("computing link scores (PageRank, HITS, SALSA, TrustRank)");
        let (scores, edges, seconds) = super::graph::compute(&index, None, false)?;
        eprintln!(
            "link scores for {} pages and {edges} links in {seconds:.1}s",
            scores.n()
        );
    }
    if args.no_serve {
        return Ok(());
    }
    super::serve::serve_index(index, args.addr)
}

/// `$(rustc --print sysroot)/share/doc/rust/html`, or a clear error saying how to get it.
fn find_rust_docs() -> anyhow::Result<PathBuf> {
    let no_docs = |why: String| {
        BadInput(format!(
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
