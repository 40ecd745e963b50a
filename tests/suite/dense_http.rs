//! Dense and hybrid search through the command line and the HTTP API with the real
//! all-MiniLM-L6-v2 (issue 33): a server told which embedder to use embeds the documents in
//! the background and reports it, a question that shares no word with its answer finds it,
//! added documents get vectors, vectors survive `kill -9`, and a damaged vector file is named
//! while the text models keep serving. Skipped without the model (`RANKD_EMBEDDER_DIR`, the
//! cache, or `RANKD_TEST_EMBEDDER=fetch` as in CI); never downloaded otherwise.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::util::*;
use serde_json::Value;

const TOKEN: &str = "dense-test-token";

fn model() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("RANKD_EMBEDDER_DIR") {
        return Some(PathBuf::from(dir));
    }
    if std::env::var("RANKD_TEST_EMBEDDER").as_deref() == Ok("fetch") {
        return Some(rankd::embed::default_model::obtain().expect("the default model"));
    }
    rankd::embed::default_model::cached()
}

const DOCS: &[(&str, &str, &str)] = &[
    ("sort", "slice::sort_by", "Sorts the slice with a comparator function, for example in descending order, largest first."),
    ("sleep", "thread::sleep", "Puts the current thread to sleep for at least the specified amount of time."),
    ("hashmap", "HashMap", "A hash map implemented with quadratic probing and SIMD lookup, storing keys and values."),
    ("spawn", "thread::spawn", "Spawns a new thread, returning a JoinHandle for it."),
    ("clone", "Clone", "A common trait for the ability to explicitly duplicate an object."),
    ("file", "File::open", "Attempts to open a file in read-only mode on the filesystem."),
    ("channel", "mpsc::channel", "Creates a new asynchronous channel, returning the sender and receiver halves."),
    ("parse", "str::parse", "Parses this string slice into another type, such as an integer."),
];

fn jsonl(docs: &[(&str, &str, &str)]) -> Vec<String> {
    docs.iter()
        .map(|(id, title, body)| {
            serde_json::json!({"id": id, "title": title, "body": body}).to_string()
        })
        .collect()
}

fn embeddings(base: &str) -> Value {
    get(&format!("{base}/admin/embeddings"), Some(TOKEN)).body
}

/// Waits until the served vectors cover `n` documents.
fn wait_for_vectors(base: &str, n: u64) -> Value {
    let start = Instant::now();
    loop {
        let e = embeddings(base);
        if e["state"] == "ready" && e["served"]["documents_with_vector"] == n {
            return e;
        }
        assert!(e["state"] != "failed", "{e}");
        assert!(start.elapsed() < Duration::from_secs(120), "{e}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn top(base: &str, params: &str, q: &str) -> Vec<String> {
    search_body(base, params, q)["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

fn serve(data: &Path, db: &str, more: &[&str]) -> Server {
    let mut args = vec!["--data-dir", data.to_str().unwrap(), "--database-url", db];
    args.extend_from_slice(more);
    start_serve(&args, Some(TOKEN), &[])
}

#[test]
fn a_server_embeds_follows_and_survives_kill_9_and_names_a_damaged_file() {
    let Some(model) = model() else {
        eprintln!("skipped: all-MiniLM-L6-v2 is neither in the cache nor in RANKD_EMBEDDER_DIR");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = ingest(
        tmp.path(),
        &jsonl(DOCS).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let db = fresh_database(tmp.path());
    let mut server = serve(&data, &db, &["--embedder", model.to_str().unwrap()]);
    let base = server.base.clone();
    let e = wait_for_vectors(&base, 8);
    assert_eq!(e["served"]["dim"], 384, "{e}");
    assert!(data.join("vectors.bin").exists());
    // No word in common with the answer: BM25F has nothing, dense finds it.
    let q = "arrange numbers biggest downward";
    assert!(top(&base, "model=bm25f&rerank=false", q).is_empty());
    assert_eq!(top(&base, "model=dense&k=3", q)[0], "sort");
    let hybrid = search_body(&base, "model=hybrid&k=3&explain=true", "pause for a while");
    assert_eq!(hybrid["model"], "hybrid");
    assert_eq!(hybrid["hits"][0]["id"], "sleep", "{hybrid}");
    let inputs: Vec<&str> = hybrid["fusion"]["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["model"].as_str().unwrap())
        .collect();
    assert_eq!(inputs, ["bm25f", "dense"]);
    // A document added through the admin API gets its vector in the background.
    let added = jsonl(&[(
        "duration",
        "Duration",
        "A span of time, such as a few milliseconds or seconds.",
    )]);
    let a = call(
        "POST",
        &format!("{base}/admin/documents"),
        Some(TOKEN),
        Some(("application/x-ndjson", added.join("\n").as_bytes())),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    wait_for_vectors(&base, 9);
    assert!(top(&base, "model=dense&k=3", "how long something takes").contains(&"duration".into()));
    // kill -9, then a restart with no --embedder: the stored vectors serve at once.
    kill9(&mut server.child);
    drop(server);
    let server = serve(&data, &db, &[]);
    wait_for_vectors(&server.base, 9);
    assert_eq!(top(&server.base, "model=dense&k=3", q)[0], "sort");
    server.stop();
    // A damaged file: refused and named; the text models serve, dense answers 503.
    let path = data.join("vectors.bin");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 100;
    bytes[at] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let server = serve(&data, &db, &["--no-embed"]);
    let start = Instant::now();
    let e = loop {
        let e = embeddings(&server.base);
        if e["state"] == "failed" {
            break e;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{e}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        e["message"].as_str().unwrap().contains("vectors.bin"),
        "{e}"
    );
    assert!(!top(&server.base, "model=bm25f", "thread").is_empty());
    let dense = get(
        &format!("{}/search?q=thread&model=dense", server.base),
        None,
    );
    assert_eq!(dense.status, 503, "{}", dense.body);
    server.stop();
}
