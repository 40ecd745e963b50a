//! Crash safety of the data directory: whole-file replacement that a crash cannot tear, and
//! the removal of the temporary files a crashed writer left behind.
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
//! [`remove_dead_temp_files`] clears the first kind; `crate::admin::recovery` runs it and
//! clears the second when the server starts. This module imports nothing of rankd: every
//! layer writes files through it.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Start of every temporary file rankd writes; the writer's pid follows.
const TEMP_PREFIX: &str = ".rankd-tmp-";

/// Writes `bytes` to `path` atomically: readers see the old content or the new, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// As [`write_atomic`], with the content written by `fill` (for large files built in parts).
pub(crate) fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    // A device or a pipe (`--out /dev/null`, `/dev/stdout`, a FIFO) is written in place:
    // renaming over it would replace the device with a regular file.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        return fill(&mut f).with_context(|| format!("cannot write {}", path.display()));
    }
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

/// Removes the `.rankd-tmp-<pid>-…` files of `dir` whose writer is no longer running, and
/// adds their paths to `removed`.
pub(crate) fn remove_dead_temp_files(dir: &Path, removed: &mut Vec<PathBuf>) -> anyhow::Result<()> {
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

/// The entries of `dir`; the error names it.
pub fn read_dir(dir: &Path) -> anyhow::Result<Vec<std::fs::DirEntry>> {
    std::fs::read_dir(dir)
        .and_then(|entries| entries.collect())
        .with_context(|| format!("cannot list {}", dir.display()))
}

/// Removes `path` (gone already is fine) and adds it to `removed`.
pub fn remove(path: &Path, removed: &mut Vec<PathBuf>) -> anyhow::Result<()> {
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

    /// A pipe (as `/dev/null` or `/dev/stdout` would be) is written into, not replaced by a
    /// regular file; a regular file is replaced.
    #[cfg(unix)]
    #[test]
    fn a_pipe_is_written_in_place_and_a_file_replaced() {
        use std::io::Read;
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("out.fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path and mode.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut got = String::new();
                std::fs::File::open(fifo)
                    .unwrap()
                    .read_to_string(&mut got)
                    .unwrap();
                got
            })
        };
        write_atomic(&fifo, b"model").unwrap();
        // Checked before joining: a replaced pipe would leave the reader waiting for ever.
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(reader.join().unwrap(), "model");

        let file = dir.path().join("model.json");
        std::fs::write(&file, "old").unwrap();
        write_atomic(&file, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
    }

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
