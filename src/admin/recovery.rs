//! Start-up recovery of the data directory after a crash (see `crate::durable` for what a
//! killed writer leaves): the server runs [`recover`] before it loads anything else. It
//! removes the temporary files of dead writers and, when no other process is writing the
//! index (it takes tantivy's writer lock, without waiting), the segment files no commit names
//! and tantivy's own temporary files, and rewrites a manifest that lags behind the index
//! (a kill between tantivy's commit and the manifest write; the manifest keys the link
//! scores' freshness).

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::durable::{read_dir, remove, remove_dead_temp_files};
use crate::text::TextIndex;

/// What [`recover`] cleaned up.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Recovery {
    /// Temporary files of writers that died, removed.
    pub temp_files: Vec<PathBuf>,
    /// Files of `index/` that no commit names, removed.
    pub segment_files: usize,
    /// The manifest described an earlier commit and was rewritten.
    pub manifest_rewritten: bool,
    /// Another process held the index's writer lock, so `index/` was left alone.
    pub index_busy: bool,
}

impl Recovery {
    pub fn is_empty(&self) -> bool {
        self.temp_files.is_empty() && self.segment_files == 0 && !self.manifest_rewritten
    }
}

/// Removes what a crashed writer left in `index`'s data directory (see the module docs).
pub(crate) fn recover(index: &TextIndex) -> anyhow::Result<Recovery> {
    let data_dir = &index.dir;
    let mut recovery = Recovery::default();
    for dir in [data_dir.clone(), crate::search::model::models_dir(data_dir)] {
        remove_dead_temp_files(&dir, &mut recovery.temp_files)?;
    }
    // One thread with tantivy's smallest budget: this writer indexes nothing.
    let options = tantivy::indexer::IndexWriterOptions::builder()
        .num_worker_threads(1)
        .build();
    let writer = match index
        .index
        .writer_with_options::<tantivy::TantivyDocument>(options)
    {
        Ok(writer) => writer,
        Err(tantivy::TantivyError::LockFailure(..)) => {
            recovery.index_busy = true;
            return Ok(recovery);
        }
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "cannot open the index in {} for recovery",
                    data_dir.display()
                )
            })
        }
    };
    let index_dir = data_dir.join("index");
    let collected = writer
        .garbage_collect_files()
        .wait()
        .with_context(|| format!("cannot remove uncommitted files in {}", index_dir.display()))?;
    recovery.segment_files = collected.deleted_files.len();
    // tantivy's own atomic writes (meta.json, .managed.json) use `.tmp…` names; only a
    // writer makes them, and the writer lock is ours.
    for entry in read_dir(&index_dir)? {
        if entry.file_name().to_string_lossy().starts_with(".tmp") {
            remove(&entry.path(), &mut recovery.temp_files)?;
        }
    }
    let manifest = index.manifest()?;
    if manifest.num_docs != index.num_docs() || meta_newer_than_manifest(data_dir) {
        index.write_manifest()?;
        recovery.manifest_rewritten = true;
    }
    drop(writer);
    Ok(recovery)
}

/// Whether tantivy committed after the manifest was last written: a crash between the two.
fn meta_newer_than_manifest(data_dir: &Path) -> bool {
    let modified = |p: PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (
        modified(data_dir.join("index").join("meta.json")),
        modified(data_dir.join("manifest.json")),
    ) {
        (Some(meta), Some(manifest)) => meta > manifest,
        _ => false,
    }
}
