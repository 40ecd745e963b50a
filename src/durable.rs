//! Crash safety of the data directory: whole-file replacement that a crash cannot tear, and
//! the start-up recovery that removes what a crashed writer left behind.
//!
//! rankd writes files in two ways, and a process killed mid-write (`kill -9`, the OOM killer,
//! a power cut) leaves different debris for each:
//!
//! - Files replaced whole (the manifest, `index.toml`, the link scores, model files, the
//!   command line's activation request) go through [`write_atomic`]: a temporary file in the
//!   same directory, fsync, rename over the target, fsync of the directory. Readers see the
//!   old file or the new one, never a torn one; a kill can leave the temporary file, whose name
//!   (`.rankd-tmp-<pid>-…`) says which process wrote it, so recovery removes it only once that
//!   process is gone.
//! - tantivy's segment files: a kill while indexing leaves the files of segments that no
//!   commit names (tantivy deletes them at the next commit), and a kill between tantivy's
//!   commit and rankd's manifest leaves a manifest that describes the previous commit.
//!
//! [`recover`] runs when the server starts, before it loads anything else: it removes the
//! temporary files of dead writers, and, when no other process is writing the index (it takes
//! tantivy's writer lock, without waiting), the uncommitted segment files and tantivy's own
//! temporary files, and rewrites a manifest that lags behind the index.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::text::TextIndex;

/// Start of every temporary file rankd writes; the writer's pid follows.
const TEMP_PREFIX: &str = ".rankd-tmp-";

/// Writes `bytes` to `path` atomically: readers see the old content or the new, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// As [`write_atomic`], with the content written by `fill` (for large files built in parts).
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    fill(tmp.as_file_mut())
        .and_then(|_| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", tmp.path().display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    // The rename itself survives a power cut only once the directory is on disk.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync the directory {}", dir.display()))?;
    Ok(())
}

/// What [`recover`] cleaned up.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovery {
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
pub fn recover(index: &TextIndex) -> anyhow::Result<Recovery> {
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

/// Removes the `.rankd-tmp-<pid>-…` files of `dir` whose writer is no longer running.
fn remove_dead_temp_files(dir: &Path, removed: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in read_dir(dir)? {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(TEMP_PREFIX) else {
            continue;
        };
        let writer = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if writer.is_none_or(|pid| !is_running(pid)) {
            remove(&entry.path(), removed)?;
        }
    }
    Ok(())
}

/// Whether a process with this id exists (signal 0 checks without sending anything).
fn is_running(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks that the process exists and may be signalled.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn read_dir(dir: &Path) -> anyhow::Result<Vec<std::fs::DirEntry>> {
    std::fs::read_dir(dir)
        .and_then(|entries| entries.collect())
        .with_context(|| format!("cannot list {}", dir.display()))
}

fn remove(path: &Path, removed: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {
            removed.push(path.to_path_buf());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_files_of_dead_writers_go_and_live_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir
            .path()
            .join(format!("{TEMP_PREFIX}{}-abc", std::process::id()));
        // pid_max on Linux is at most 2^22: this process cannot exist.
        let dead = dir.path().join(format!("{TEMP_PREFIX}99999999-abc"));
        let garbled = dir.path().join(format!("{TEMP_PREFIX}x"));
        let other = dir.path().join("model.json");
        for p in [&own, &dead, &garbled, &other] {
            std::fs::write(p, "x").unwrap();
        }
        let mut removed = Vec::new();
        remove_dead_temp_files(dir.path(), &mut removed).unwrap();
        removed.sort();
        let mut expected = vec![dead, garbled];
        expected.sort();
        assert_eq!(removed, expected);
        assert!(own.exists() && other.exists());
    }

    #[test]
    fn write_atomic_replaces_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        write_atomic(&path, b"old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
