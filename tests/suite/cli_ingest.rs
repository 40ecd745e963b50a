//! `rankd ingest` and `rankd eval` as a user runs them: bad input is exit code 2 with the file
//! and line named, and nothing is indexed; updates replace by id.

use std::path::Path;
use std::process::Output;

use crate::util::{cranfield_dir, rankd};

fn ingest_jsonl(data: &Path, file: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "ingest",
        "--format",
        "jsonl",
        "--input",
        file.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
        "--json",
    ];
    args.extend(extra);
    rankd(&args)
}

fn total_documents(out: &Output) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    v["total_documents"].as_u64().unwrap()
}

#[test]
fn a_bad_record_aborts_the_whole_ingest_and_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let good = dir.path().join("good.jsonl");
    std::fs::write(
        &good,
        "{\"id\":\"a\",\"title\":\"alpha\"}\n{\"id\":\"b\",\"title\":\"beta\"}\n",
    )
    .unwrap();
    assert_eq!(total_documents(&ingest_jsonl(&data, &good, &[])), 2);

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, b"{\"id\":\"c\",\"title\":\"gamma\"}\n{\"id\":\"d\",\n{\"id\":\"e\",\"body\":\"\xff\xfe\"}\n").unwrap();
    let out = ingest_jsonl(&data, &bad, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.jsonl:2:") && stderr.contains("invalid JSON"),
        "{stderr}"
    );
    assert!(
        stderr.contains("bad.jsonl:3:") && stderr.contains("UTF-8"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was indexed"), "{stderr}");

    // Nothing of the bad file went in: still the two good documents.
    let again = ingest_jsonl(&data, &good, &[]);
    assert_eq!(total_documents(&again), 2);

    // With --skip-invalid the valid record goes in and the others are counted.
    let out = ingest_jsonl(&data, &bad, &["--skip-invalid"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["documents"], 1);
    assert_eq!(v["skipped"], 2);
    assert_eq!(v["total_documents"], 3);
}

#[test]
fn same_id_replaces_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let f = dir.path().join("d.jsonl");
    std::fs::write(&f, "{\"id\":\"a\",\"title\":\"old title\"}\n").unwrap();
    ingest_jsonl(&data, &f, &[]);
    std::fs::write(
        &f,
        "{\"id\":\"a\",\"title\":\"new title\"}\n{\"id\":\"b\"}\n",
    )
    .unwrap();
    assert_eq!(total_documents(&ingest_jsonl(&data, &f, &[])), 2);
    let index = rankd::text::TextIndex::open(&data, None).unwrap();
    let engine = rankd::search::Engine::new(index);
    let mut query =
        rankd::search::SearchQuery::new("title", 10).model(rankd::text::ModelKind::Bm25);
    query.returns = rankd::search::Returns::ALL;
    let hits = engine.search(&query).unwrap().hits;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].title.as_deref(), Some("new title"));
}

#[test]
fn missing_inputs_and_unknown_models_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = ingest_jsonl(&data, &dir.path().join("nope.jsonl"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));

    let f = dir.path().join("d.jsonl");
    std::fs::write(&f, "{\"id\":\"a\",\"title\":\"x\"}\n").unwrap();
    ingest_jsonl(&data, &f, &[]);
    let out = rankd(&[
        "eval",
        "--queries",
        "q",
        "--qrels",
        "r",
        "--model",
        "bm99",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown model `bm99`"));

    // An index that does not exist: a clear message, not a panic.
    let out = rankd(&[
        "graph",
        "--data-dir",
        dir.path().join("empty").to_str().unwrap(),
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no rankd index"));
}

#[test]
fn cranfield_ingest_and_eval_reach_the_reference_map() {
    let cran = cranfield_dir();
    let cran = cran.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let out = rankd(&[
        "ingest",
        "--format",
        "cranfield",
        "--input",
        cran,
        "--data-dir",
        d,
        "--json",
    ]);
    assert_eq!(total_documents(&out), 1400);
    let out = rankd(&[
        "eval",
        "--format",
        "cranfield",
        "--queries",
        &format!("{cran}/cran.qry"),
        "--qrels",
        &format!("{cran}/cranqrel"),
        "--model",
        "bm25",
        "--field",
        "body",
        "--data-dir",
        d,
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["queries"], 225);
    // Data README: BM25 over .W, stemmed, variant A: MAP ≈ 0.296 (target ±0.02).
    let map = v["map"].as_f64().unwrap();
    assert!((map - 0.296).abs() < 0.02, "MAP {map}");
}
