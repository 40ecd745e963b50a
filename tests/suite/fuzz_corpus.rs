//! Every committed seed corpus of `fuzz/` replayed through its target's body: the inputs that
//! once crashed rankd (kept in `fuzz/corpus/<target>/` when fixed) and the seeds each target
//! starts from. The bodies and their harness are the fuzz crate's own files, compiled here as
//! modules, so a replay runs exactly what libFuzzer runs, in the ordinary test build.
//!
//! CI replays the corpora here; the coverage-guided runs that look for new inputs need the
//! instrumented build and are made by `.ci/fuzz` (docs/RELIABILITY.md, "Coverage-guided
//! fuzzing").

#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod harness;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

/// Runs `body` on every file of `fuzz/corpus/<target>/` and fails naming each input that
/// panicked.
fn replay(target: &str, body: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "{} holds no seeds", dir.display());
    let failed: Vec<String> = inputs
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).expect("read a seed");
            catch_unwind(AssertUnwindSafe(|| body(&data))).is_err()
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(failed.is_empty(), "{target}: these inputs fail: {failed:?}");
}

macro_rules! corpus_tests {
    ($($target:ident),* $(,)?) => {
        /// The targets replayed here, in order.
        const TARGETS: &[&str] = &[$(stringify!($target)),*];
        $(
            #[test]
            fn $target() {
                replay(stringify!($target), harness::targets::$target);
            }
        )*
    };
}

corpus_tests!(
    admin_bodies,
    cluster_wire,
    cranfield,
    html,
    html_nesting,
    jsonl,
    letor,
    model,
    query,
    search_params,
    trec,
);

/// A target added to `fuzz/` is replayed here too: the list above names every target file and
/// every corpus.
#[test]
fn every_target_and_corpus_is_replayed() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    for (dir, suffix) in [("fuzz_targets", ".rs"), ("corpus", "")] {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
            .expect("read the fuzz directory")
            .map(|entry| entry.expect("a directory entry").file_name())
            .map(|name| name.to_string_lossy().trim_end_matches(suffix).to_string())
            .collect();
        names.sort();
        assert_eq!(names, TARGETS, "fuzz/{dir}/");
    }
}
