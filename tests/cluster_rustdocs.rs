//! The Rust documentation installed by rustup (≈33,000 pages), split over three leaf
//! processes, answers through a root exactly as the single index does (issue 13 acceptance):
//! every first-phase model, 200 known-item queries (`rankd known-items`), top 100 ids, scores
//! and hit counts; the default reranked search with titles, URLs and snippets, by a model
//! trained on the single index; the root with statistics gathered per search and summed from
//! the shards' tables alike.
//!
//! A test binary of its own, not a module of `tests/tests.rs`, because it must run alone: it
//! indexes the documentation three times over on every core for minutes, and the suites with
//! time bounds (a cluster root gives a leaf 1 s before it answers without its shard) would
//! fail beside it, as `cluster_loopback` did in the one binary.

mod util;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use util::*;

fn rust_docs() -> PathBuf {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .expect("rustc runs");
    let docs = Path::new(String::from_utf8_lossy(&out.stdout).trim()).join("share/doc/rust/html");
    assert!(
        docs.join("std/index.html").exists(),
        "the Rust documentation is not installed at {} (rustup component add rust-docs)",
        docs.display()
    );
    docs
}

fn ingest_html(docs: &Path, data: &Path, shards: Option<u32>) -> Command {
    let mut cmd = rankd_command();
    cmd.args([
        "ingest",
        "--format",
        "html",
        "--input",
        docs.to_str().unwrap(),
        "--base-url",
        "https://doc.rust-lang.org/stable/",
        "--json",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    if let Some(n) = shards {
        cmd.args(["--shards", &n.to_string()]);
    }
    cmd
}

#[test]
fn the_rust_docs_over_three_leaves_rank_as_the_single_index() {
    let docs = rust_docs();
    let dir = tempfile::tempdir().unwrap();
    let single = dir.path().join("single");
    let sharded = dir.path().join("sharded");
    // Both ingests at once (two cores).
    let mut a = ingest_html(&docs, &single, None)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let b = ingest_html(&docs, &sharded, Some(3)).output().unwrap();
    assert!(a.wait().unwrap().success());
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));

    let (qpath, rpath) = (dir.path().join("q.txt"), dir.path().join("r.txt"));
    rankd_ok([
        "known-items",
        "--docs",
        docs.to_str().unwrap(),
        "--max",
        "200",
        "--queries-out",
        qpath.to_str().unwrap(),
        "--qrels-out",
        rpath.to_str().unwrap(),
    ]);
    let queries: Vec<String> = std::fs::read_to_string(&qpath)
        .unwrap()
        .lines()
        .map(|l| l.split_once(' ').unwrap().1.to_string())
        .collect();
    assert_eq!(queries.len(), 200);
    let model = dir.path().join("m.json");
    let id = train_model(&single, &qpath, &rpath, 2, &[], &model)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let token = "rust-docs-test-token";
    let db = fresh_database(dir.path());
    let one = start(&single, &db, Some(token));
    activate_model(&one.base, token, &model, &id);

    let leaves = start_leaves(&sharded);
    let root_with = |stats: &str| {
        let mut args = vec![
            "--role",
            "root",
            "--model",
            model.to_str().unwrap(),
            "--stats",
            stats,
        ];
        for leaf in &leaves {
            args.extend(["--shard", leaf.base.as_str()]);
        }
        start_serve(&args, None, &[])
    };
    let roots = [root_with("gather"), root_with("table")];

    let mut compared = 0;
    for model in ["bm25f", "bm25", "tfidf", "f2exp", "lm", "bm25prox"] {
        let params = format!("model={model}&k=100&rerank=false&fields=");
        for q in &queries {
            let a = search_body(&one.base, &params, q);
            for root in &roots {
                let b = search_body(&root.base, &params, q);
                assert_eq!(a["hits"], b["hits"], "{model} {q:?}");
                assert_eq!(a["total_hits"], b["total_hits"], "{model} {q:?}");
            }
            compared += a["hits"].as_array().unwrap().len();
        }
    }
    eprintln!("first phase: {compared} hits compared");
    assert!(compared > 100_000, "only {compared} hits compared");
    let mut shown = 0;
    for q in &queries {
        let a = search_body(&one.base, "k=10", q);
        assert_eq!(a["reranker"], Value::String(id.clone()));
        for root in &roots {
            let b = search_body(&root.base, "k=10", q);
            assert_eq!(a["reranker"], b["reranker"], "{q:?}");
            assert_eq!(a["hits"], b["hits"], "{q:?}");
        }
        shown += a["hits"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["snippet"].as_str().is_some_and(|s| s.contains("<b>")))
            .count();
    }
    assert!(shown > 500, "{shown} snippets show a query term");
}
