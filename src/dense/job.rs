//! The server's embedding job: serves the stored vectors as soon as they are loaded, embeds the
//! documents that have none, and keeps the vectors up to date as documents are added, changed
//! and deleted, while the text models serve every search ([`super::Status`] says how far it
//! is; `/readyz` and `GET /admin/embeddings` show it).
//!
//! It runs on a thread of its own (embedding is seconds to minutes of CPU, which must not sit
//! on the async workers) and watches the index: whenever the searcher's segments change it
//! runs [`super::build::update_from`] from the vectors it serves, which re-embeds only documents whose text changed, writes the
//! vector file atomically and hands the new vectors to the engine (`install`). A search holds
//! the vectors it started with; deleted documents never hit even before the job has run, as
//! the row tables follow the searcher (`super::Rows`).
//!
//! The embedder is the one given (`--embedder`), else the one that computed the stored
//! vectors: a server never fetches a model (`rankd embed` and `rankd demo` do), and starts
//! embedding a data directory without vectors only when told which model to use, since that
//! is minutes of CPU per ten thousand documents.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::build::DocText;
use super::{Dense, DenseError, DenseIndex, Progress, Status};
use crate::embed::AnyEmbedder as Embedder;
use crate::text::TextIndex;

/// How the job runs.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// The embedder's directory; `None`: the stored vectors' (and none without them).
    pub embedder: Option<PathBuf>,
    /// Embed documents without a current vector (else only the stored vectors are served).
    pub compute: bool,
    pub text: DocText,
    /// How often the index is checked for changes.
    pub poll: Duration,
}

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions {
            embedder: None,
            compute: true,
            text: DocText::DEFAULT,
            poll: Duration::from_secs(2),
        }
    }
}

/// Runs the job until `stop()` says so (checked between polls and runs); every outcome is
/// reported through `status`, and each new set of vectors through `install`.
pub fn run(
    index: &TextIndex,
    status: &Status,
    options: &JobOptions,
    install: &dyn Fn(Arc<Dense>),
    stop: &dyn Fn() -> bool,
) {
    status.set(Progress::Loading);
    // The vectors served, which each run starts from (never re-read from the file).
    let loaded = super::load_without_graph(index, options.embedder.as_deref());
    let mut served: Option<Arc<Dense>> = match loaded {
        Ok(Some(dense)) => {
            status.set(Progress::Ready {
                vectors: dense.index.vectors.len(),
            });
            let dense = Arc::new(dense);
            // Served by the exact scan while the graph is built, then through it.
            install(dense.clone());
            dense.index.build_graph();
            Some(dense)
        }
        Ok(None) => None,
        Err(e) => {
            // A damaged file or one from another embedder: recomputed below when allowed.
            tracing::warn!("document vectors: {e}");
            status.set(Progress::Failed {
                message: e.to_string(),
            });
            None
        }
    };
    if !options.compute {
        if served.is_none() && matches!(status.get(), Progress::Loading) {
            status.set(Progress::Off);
        }
        return;
    }
    // The embedder and its fingerprint, computed once: stored vectors carry the fingerprint
    // `super::load` checked.
    let (embedder, model) = match &served {
        Some(d) => (d.embedder.clone(), d.index.vectors.model.clone()),
        None => {
            let Some(dir) = options.embedder.clone() else {
                if matches!(status.get(), Progress::Loading) {
                    status.set(Progress::Off);
                }
                return;
            };
            match Embedder::load(&dir)
                .map_err(DenseError::from)
                .and_then(|e| {
                    let model = super::fingerprint(&dir)?;
                    Ok((Arc::new(e), model))
                }) {
                Ok(loaded) => loaded,
                Err(e) => {
                    tracing::error!("document vectors: {e}");
                    status.set(Progress::Failed {
                        message: e.to_string(),
                    });
                    return;
                }
            }
        }
    };
    let mut seen = None;
    while !stop() {
        let now = crate::text::columns::segments_key(&index.reader.searcher());
        if seen.as_ref() != Some(&now) {
            let held = served.as_ref().map(|d| &d.index);
            match keep_up(index, status, options, &embedder, &model, held) {
                Ok(dense) => {
                    let dense = Arc::new(dense);
                    install(dense.clone());
                    served = Some(dense);
                }
                Err(e) => {
                    tracing::error!("document vectors: {e}");
                    status.set(Progress::Failed {
                        message: e.to_string(),
                    });
                }
            }
            // After a failure, tried again at the next change of the index.
            seen = Some(now);
        }
        std::thread::sleep(options.poll);
    }
}

/// One run of [`super::build::update_from`] from the vectors `held`, its progress in
/// `status`. Vectors equal to those held keep their index, whose nearest-neighbour graph
/// took seconds to build (`super::ann`).
fn keep_up(
    index: &TextIndex,
    status: &Status,
    options: &JobOptions,
    embedder: &Arc<Embedder>,
    model: &str,
    held: Option<&Arc<DenseIndex>>,
) -> Result<Dense, DenseError> {
    let (vectors, report) = super::build::update_from(
        &index.dir,
        index,
        embedder,
        model,
        options.text,
        held.map(|h| &h.vectors),
        &mut |done, total| {
            if total > 0 {
                status.set(Progress::Embedding { done, total });
            }
        },
    )?;
    if report.embedded > 0 || report.dropped > 0 {
        tracing::info!(
            "document vectors: {} embedded, {} kept, {} dropped",
            report.embedded,
            report.reused,
            report.dropped
        );
    }
    status.set(Progress::Ready {
        vectors: vectors.len(),
    });
    let index = match held {
        Some(held) if held.vectors == vectors => held.clone(),
        _ => {
            let dense =
                DenseIndex::without_graph(vectors).with_graph_file(super::ann::path(&index.dir));
            dense.build_graph();
            Arc::new(dense)
        }
    };
    Ok(Dense {
        embedder: embedder.clone(),
        index,
    })
}
