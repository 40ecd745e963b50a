//! `rankd demo --model gbdt` as a user runs it (issue 15), on a small documentation tree of
//! rustdoc's shape generated here (item pages `kind.Name.html` with a one-line summary in
//! `<meta name="description">`, linked to each other), so the test needs no installed Rust
//! docs: the demo indexes it, computes link scores, derives known-item queries, trains a
//! tree reranker on them, reports held-out MRR and asks for its activation; a second run
//! reuses the index and the model.

use std::fmt::Write as _;
use std::path::Path;

use rankd::rerank::Reranker;

use crate::util::{rankd, rankd_command, search_body, stderr, Lcg};

const WORDS: &[&str] = &[
    "buffer", "channel", "cursor", "digest", "encoder", "filter", "gauge", "handle", "iterator",
    "journal", "kernel", "ledger", "matrix", "needle", "offset", "packet", "queue", "ring",
    "socket", "token", "upgrade", "vector", "window", "yield", "anchor", "bridge", "cipher",
    "domain", "engine", "frame", "graph", "hinge", "index", "joint", "lattice", "mirror", "nozzle",
    "orbit", "pivot", "quota", "relay", "shard", "tensor", "union", "valve", "wedge", "zone",
    "atlas", "beacon", "canvas",
];
const KINDS: &[&str] = &["struct", "enum", "trait", "fn"];

fn camel(a: &str, b: &str) -> String {
    let up = |w: &str| w[..1].to_uppercase() + &w[1..];
    up(a) + &up(b)
}

/// 240 item pages in 4 modules: each named after two words, with a summary of five other
/// words, a body repeating some of them among filler, and links to five other items.
fn write_docs(dir: &Path) {
    let mut rng = Lcg(42);
    let mut next = |n: usize| rng.below(n);
    let mut items = Vec::new();
    for i in 0..240 {
        let (a, b) = (
            WORDS[i % WORDS.len()],
            WORDS[(i / WORDS.len() + 7 * i + 1) % WORDS.len()],
        );
        let kind = KINDS[i % KINDS.len()];
        let module = format!("mod{}", i % 4);
        let name = if kind == "fn" {
            format!("{a}_{b}")
        } else {
            camel(a, b)
        };
        items.push((module, kind, name, i));
    }
    for (module, kind, name, i) in &items {
        let summary: Vec<&str> = (0..5).map(|_| WORDS[next(WORDS.len())]).collect();
        let mut body = String::new();
        for _ in 0..40 {
            body.push_str(WORDS[next(WORDS.len())]);
            body.push(' ');
        }
        for w in &summary[..2] {
            let _ = write!(body, "{w} ");
        }
        let mut links = String::new();
        for _ in 0..5 {
            let (m, k, n, _) = &items[next(items.len())];
            let _ = write!(links, r#"<a href="../{m}/{k}.{n}.html">{n}</a> "#);
        }
        let page = format!(
            r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>{name} in mylib::{module} - Rust</title><meta name="description" content="{summary}."></head><body><main><h1>{kind} {name}</h1><p>{summary}.</p><p>{body}</p><p>Item {i}. See also {links}</p></main></body></html>"#,
            summary = summary.join(" ")
        );
        let path = dir.join("mylib").join(module);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join(format!("{kind}.{name}.html")), page).unwrap();
    }
}

#[test]
fn demo_trains_serves_and_reuses_a_tree_reranker() {
    let tmp = tempfile::tempdir().unwrap();
    let (docs, data) = (tmp.path().join("docs"), tmp.path().join("data"));
    write_docs(&docs);
    let args = [
        "demo",
        "--docs",
        docs.to_str().unwrap(),
        "--no-serve",
        // Tests never download a model; the vectors' path is tested on a tiny one
        // (`rankd::dense`'s tests).
        "--no-embed",
        "--model",
        "gbdt",
        "--data-dir",
        data.to_str().unwrap(),
    ];
    let out = rankd(&args);
    let log = stderr(&out);
    assert!(out.status.success(), "demo failed: {log}");
    assert!(log.contains("indexing 240 HTML pages"), "{log}");
    // "MRR on the held-out queries:" then "  known-item: N queries, BM25F x, reranked y"
    assert!(log.contains("MRR on the held-out queries:"), "{log}");
    let line = log
        .lines()
        .find(|l| l.trim_start().starts_with("known-item: "))
        .unwrap_or_else(|| panic!("no held-out known-item MRR line: {log}"));
    let number_after = |key: &str| -> f64 {
        let at = line.find(key).unwrap() + key.len();
        line[at..]
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (base, reranked) = (number_after("BM25F "), number_after("reranked "));
    assert!(
        (0.0..=1.0).contains(&base) && (0.0..=1.0).contains(&reranked),
        "{line}"
    );
    // The trees learn the known items (0.46 → 0.80 when written; BM25F alone reaches 0.99
    // since the item's name is a field): never below BM25F, and near perfect.
    assert!(reranked >= base && reranked >= 0.95, "{line}");
    // The reranker is a tree model, stored and named in the activation request.
    let models = rankd::search::model::model_files(&data).unwrap();
    assert_eq!(models.len(), 1, "{models:?}");
    let model = Reranker::load(&models[0]).unwrap();
    assert_eq!(model.kind(), "gbdt");
    assert_eq!(
        rankd::search::model::activation_request_id(&data).unwrap(),
        Some(model.id().to_string())
    );
    // Known items and link scores were written for `rankd eval` and serving.
    assert!(data.join("known-items/test.qrels").is_file());
    assert!(data.join("link_scores.json").is_file());

    // A second run reuses the index and the tree model: nothing is trained again.
    let again = rankd(&args);
    let log = stderr(&again);
    assert!(again.status.success(), "second demo failed: {log}");
    assert!(log.contains("reusing the index of 240 documents"), "{log}");
    assert!(!log.contains("MRR on the held-out"), "{log}");
    assert_eq!(rankd::search::model::model_files(&data).unwrap().len(), 1);
}

/// A demo served before its documents had vectors trains its reranker on text features; once
/// the vectors are there (here computed by a tiny static embedder, and served as stored with
/// `--no-embed`), it trains the reranker again with the dense similarity, serves it when the
/// guard lets it, and a search that names no model then runs hybrid's first phase.
#[test]
fn a_served_demo_trains_again_with_the_dense_similarity_once_vectors_are_ready() {
    use std::io::BufRead;
    let tmp = tempfile::tempdir().unwrap();
    let (docs, data) = (tmp.path().join("docs"), tmp.path().join("data"));
    write_docs(&docs);
    let (docs, data) = (docs.to_str().unwrap(), data.to_str().unwrap());
    let out = rankd(&[
        "demo",
        "--docs",
        docs,
        "--no-serve",
        "--no-embed",
        "--data-dir",
        data,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let first =
        Reranker::load(&rankd::search::model::model_files(data.as_ref()).unwrap()[0]).unwrap();
    let dense = rankd::features::DENSE_SIMILARITY.to_string();
    assert!(!first.feature_names().contains(&dense));
    let embedder =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/embed/model2vec/tiny-float32");
    let out = rankd(&[
        "embed",
        "--data-dir",
        data,
        "--embedder",
        embedder.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));

    let mut child = rankd_command()
        .args(["demo", "--docs", docs, "--no-embed", "--data-dir", data])
        .args(["--addr", "127.0.0.1:0"])
        .env("RANKD_LOG", "error")
        .env_remove("RANKD_ADMIN_TOKEN")
        .env_remove("DATABASE_URL")
        .env_remove("RANKD_DATABASE_URL")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let base = loop {
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the demo prints its address");
        if let Some(rest) = line.split(" on http://").nth(1) {
            break format!("http://{}", rest.split('/').next().unwrap());
        }
    };
    let server = crate::util::Server {
        child,
        base,
        scratch: None,
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let answer = search_body(&server.base, "k=5", "vector");
        if answer["reranker"] != first.id() {
            assert_eq!(answer["model"], "hybrid", "{answer}");
            assert_eq!(answer["hits"].as_array().unwrap().len(), 5, "{answer}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still reranking with {}: {answer}; the demo said: {:?}",
            first.id(),
            rx.try_iter().collect::<Vec<_>>()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let models = rankd::search::model::model_files(data.as_ref()).unwrap();
    assert_eq!(models.len(), 2, "{models:?}");
    let second = models
        .iter()
        .map(|p| Reranker::load(p).unwrap())
        .find(|m| m.id() != first.id())
        .unwrap();
    assert!(second.feature_names().contains(&dense));
    // It records the embedder of the vectors it was trained on.
    let fingerprint = rankd::dense::fingerprint(&embedder).unwrap();
    assert_eq!(
        second.training.embedder.as_deref(),
        Some(fingerprint.as_str())
    );
    assert_eq!(first.training.embedder, None);
    server.stop();
}
