//! Link scores under operation, over HTTP against a real server (SQLite or PostgreSQL with
//! `RANKD_TEST_DATABASE_URL`): a running graph job cancelled over HTTP ends "cancelled" with the
//! stored and served scores untouched; document batches mark the served scores stale (status
//! route and Prometheus gauges) until the graph job, started on request after a batch, has
//! recomputed them; a restart keeps serving stale scores and says so.

use crate::util::*;
use serde_json::Value;

/// `n` documents, each linking to `fanout` pseudo-random others by id.
fn linked_corpus(n: usize, fanout: usize) -> Vec<String> {
    let mut rng = Lcg(12345);
    let mut next = || rng.below(n);
    (0..n)
        .map(|i| {
            let links: Vec<String> = (0..fanout).map(|_| format!("d{}", next())).collect();
            serde_json::json!({
                "id": format!("d{i}"),
                "url": format!("https://x.org/p/{i}"),
                "title": format!("page {i}"),
                "body": format!("page number {i} about links"),
                "links": links,
            })
            .to_string()
        })
        .collect()
}

/// A server over 2000 documents of 100 links each (a graph job long enough to act while it
/// runs), its data directory, and the temporary directory holding both (keep it alive).
fn linked_server() -> (tempfile::TempDir, std::path::PathBuf, Server) {
    let dir = tempfile::tempdir().unwrap();
    let docs = linked_corpus(2000, 100);
    let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
    let data = ingest(dir.path(), &docs);
    let db = fresh_database(dir.path());
    let server = start(&data, &db, Some(TOKEN));
    (dir, data, server)
}

fn job_status(b: &str, id: i64) -> String {
    get(&format!("{b}/admin/jobs/{id}"), Some(TOKEN)).body["status"]
        .as_str()
        .unwrap()
        .to_string()
}

fn trust(b: &str, doc: &str) -> f64 {
    get(&format!("{b}/doc/{doc}"), None).body["link_scores"]["trustrank"]
        .as_f64()
        .unwrap()
}

#[test]
fn cancelling_a_running_graph_job_keeps_the_old_scores() {
    let (_dir, data, server) = linked_server();
    let b = &server.base;

    let job = wait_for_job(b, start_graph_job(b));
    assert_eq!(job["status"], "succeeded", "{job}");
    let sidecar = data.join("link_scores.json");
    let stored = std::fs::read(&sidecar).unwrap();
    let served = trust(b, "d1");

    // New seeds would change TrustRank; the job computing it is cancelled while it runs.
    let a = post_json(
        &format!("{b}/admin/seeds"),
        Some(TOKEN),
        r#"{"ids":["d1"]}"#,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let id = start_graph_job(b);
    while job_status(b, id) == "queued" {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let a = call(
        "POST",
        &format!("{b}/admin/jobs/{id}/cancel"),
        Some(TOKEN),
        None,
    );
    assert_eq!(
        a.status, 202,
        "the job finished before it could be cancelled: {}",
        a.body
    );
    let job = wait_for_job(b, id);
    assert_eq!(job["status"], "cancelled", "{job}");
    assert!(job["error"].is_null(), "{job}");
    assert_eq!(
        std::fs::read(&sidecar).unwrap(),
        stored,
        "stored scores rewritten"
    );
    assert_eq!(trust(b, "d1"), served, "served scores swapped");
    let status = get(&format!("{b}/admin/graph"), Some(TOKEN)).body;
    assert_eq!(status["last_job"]["status"], "cancelled", "{status}");
    assert_eq!(status["stale"], false, "{status}");

    // Not cancelled, the same job changes both: the cancel is what kept them.
    let job = wait_for_job(b, start_graph_job(b));
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_ne!(std::fs::read(&sidecar).unwrap(), stored);
    assert!(trust(b, "d1") > served, "d1 is now the only trusted seed");
}

/// Issue 16, defect 8: a graph job used to hold the index write lock while it computed, so a
/// document batch waited for the whole job (27.6 s behind a Rust-docs job). Now the batch is
/// answered while the job still runs, and the job's scores, computed from the index as it was
/// when the job started, are served as stale by exactly that batch.
#[test]
fn document_batches_go_on_while_a_graph_job_runs() {
    let (_dir, _data, server) = linked_server();
    let b = &server.base;

    let id = start_graph_job(b);
    while job_status(b, id) == "queued" {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let late = r#"{"id":"late","url":"https://x.org/late","title":"late page","body":"written during the graph job","links":["d1"]}"#;
    let started = std::time::Instant::now();
    let a = call(
        "POST",
        &format!("{b}/admin/documents"),
        Some(TOKEN),
        Some(("application/x-ndjson", late.as_bytes())),
    );
    let took = started.elapsed();
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        job_status(b, id),
        "running",
        "the batch waited for the graph job ({took:?})"
    );
    let job = wait_for_job(b, id);
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["result"]["batches_meanwhile"], 1, "{job}");
    assert_eq!(job["result"]["nodes"], 2000, "{job}");
    let s = status(b);
    assert_eq!(s["stale"], true, "{s}");
    assert_eq!(s["batches_since"], 1, "{s}");
    assert_eq!(s["documents_changed"], 1, "{s}");
    assert_eq!(s["uncovered_documents"], 1, "{s}");

    // The next job sees the late document and leaves nothing stale.
    let job = wait_for_job(b, start_graph_job(b));
    assert_eq!(job["result"]["batches_meanwhile"], 0, "{job}");
    assert_eq!(job["result"]["nodes"], 2001, "{job}");
    let s = status(b);
    assert_eq!(s["stale"], false, "{s}");
    assert_eq!(s["uncovered_documents"], 0, "{s}");
}

fn gauge(b: &str, name: &str) -> f64 {
    let text = get(&format!("{b}/metrics"), None).body;
    let text = text.as_str().unwrap();
    text.lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{name} missing"))
}

fn status(b: &str) -> Value {
    let a = get(&format!("{b}/admin/graph"), Some(TOKEN));
    assert_eq!(a.status, 200, "{}", a.body);
    a.body
}

#[test]
fn document_batches_mark_link_scores_stale_until_recomputed() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let server = start(&data, &db, Some(TOKEN));
    let b = server.base.clone();
    let t = Some(TOKEN);

    // No scores yet: not stale (nothing to be stale), every document uncovered.
    let s = status(&b);
    assert_eq!(
        (s["loaded"].clone(), s["stale"].clone()),
        (false.into(), false.into())
    );
    assert_eq!(s["uncovered_documents"], 3);
    assert_eq!(gauge(&b, "rankd_link_scores_uncovered_documents"), 3.0);

    assert_eq!(wait_for_job(&b, start_graph_job(&b))["status"], "succeeded");
    let s = status(&b);
    assert_eq!(s["loaded"], true);
    assert_eq!(s["stale"], false, "{s}");
    assert_eq!(s["nodes"], 3);
    assert_eq!(s["uncovered_documents"], 0);
    assert_eq!(gauge(&b, "rankd_link_scores_stale"), 0.0);

    // A bad flag rejects the batch before anything is indexed.
    let new_doc = r#"{"id":"set","url":"https://x.org/set","title":"HashSet","body":"A hash set","links":["https://x.org/map"]}"#;
    let a = call(
        "POST",
        &format!("{b}/admin/documents?recompute_links=maybe"),
        t,
        Some(("application/x-ndjson", new_doc.as_bytes())),
    );
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(a.body["error"]["field"], "recompute_links");
    assert_eq!(get(&format!("{b}/doc/set"), None).status, 404);

    // A batch: the answer, the status route and the gauges say the scores are stale.
    let a = call(
        "POST",
        &format!("{b}/admin/documents"),
        t,
        Some(("application/x-ndjson", new_doc.as_bytes())),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["links"]["stale"], true, "{}", a.body);
    assert!(a.body["links"]["recompute_job"].is_null());
    let s = status(&b);
    assert_eq!(s["stale"], true, "{s}");
    assert_eq!(s["batches_since"], 1);
    assert_eq!(s["documents_changed"], 1);
    assert_eq!(s["uncovered_documents"], 1);
    assert_eq!(s["removed_documents"], 0);
    assert!(s["stale_since"].is_string(), "{s}");
    assert_eq!(gauge(&b, "rankd_link_scores_stale"), 1.0);
    assert_eq!(gauge(&b, "rankd_link_scores_uncovered_documents"), 1.0);
    // The old scores are still served for the documents they cover.
    assert!(get(&format!("{b}/doc/vec"), None).body["link_scores"]["pagerank"].is_f64());
    assert!(get(&format!("{b}/doc/set"), None).body["link_scores"].is_null());

    // A deletion with recompute_links=true: the graph job follows and the scores are fresh.
    let a = post_json(
        &format!("{b}/admin/documents/delete?recompute_links=true"),
        t,
        r#"{"ids":["iter"]}"#,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let job = a.body["links"]["recompute_job"].as_i64().unwrap();
    assert_eq!(wait_for_job(&b, job)["status"], "succeeded");
    let s = status(&b);
    assert_eq!(s["stale"], false, "{s}");
    assert_eq!(s["nodes"], 3, "vec, map, set");
    assert_eq!(
        (
            s["uncovered_documents"].clone(),
            s["removed_documents"].clone()
        ),
        (0.into(), 0.into())
    );
    assert_eq!(s["batches_since"], 0);
    assert_eq!(gauge(&b, "rankd_link_scores_stale"), 0.0);
    assert!(get(&format!("{b}/doc/set"), None).body["link_scores"]["pagerank"].is_f64());

    // A batch, then a restart: the stale scores are still served, and reported stale.
    let a = post_json(
        &format!("{b}/admin/documents/delete"),
        t,
        r#"{"ids":["set"]}"#,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(status(&b)["removed_documents"], 1);
    server.stop();
    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    let s = status(b);
    assert_eq!(s["loaded"], true, "{s}");
    assert_eq!(s["stale"], true, "{s}");
    assert_eq!(s["stale_at_start"], true, "{s}");
    assert_eq!(s["removed_documents"], 1);
    assert!(get(&format!("{b}/doc/vec"), None).body["link_scores"]["pagerank"].is_f64());
}
