//! One writer per shard (issue 31, deliverable 2): a leaf started with `--primary` takes its
//! shard's writes and publishes each to the store before acknowledging it; replicas follow
//! the store and take no writes. Through a root: writes reach the primary alone, `wait_for`
//! waits for copies, a replica that was down converges by itself, resending a batch or a
//! deletion (`missing_ok`) is idempotent, a shard whose primary is down is reported exactly
//! (the other shards written), a leaf refuses documents of another shard, and a second
//! primary of the same shard is fenced by the store's create-if-absent put.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::util::*;
use rankd::cluster::routing::shard_of;
use serde_json::Value;

/// The shard's primary over `data`, publishing to `store`.
fn primary(data: &Path, store: &str, shard: u32) -> Server {
    store_leaf(data, store, shard, &["--primary"], "127.0.0.1:0")
}

/// A replica of `shard` following `store` into `data`, at `addr` (or a free port).
fn replica_at(data: &Path, store: &str, shard: u32, addr: &str) -> Server {
    store_leaf(data, store, shard, &[], addr)
}

fn replica(data: &Path, store: &str, shard: u32) -> Server {
    replica_at(data, store, shard, "127.0.0.1:0")
}

fn root(shards: &[String]) -> Server {
    let mut args = vec!["--role", "root"];
    for s in shards {
        args.extend(["--shard", s.as_str()]);
    }
    start_serve(&args, Some(TOKEN), &[])
}

fn ndjson(ids: &[String], word: &str) -> Vec<u8> {
    ids.iter()
        .map(|id| {
            serde_json::json!({"id": id, "title": format!("{word} {id}"), "body": format!("{word} text of {id}")})
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes()
}

fn write(base: &str, params: &str, ids: &[String], word: &str) -> Answer {
    call(
        "POST",
        &format!("{base}/admin/documents{params}"),
        Some(TOKEN),
        Some(("application/x-ndjson", &ndjson(ids, word))),
    )
}

fn info(base: &str) -> Value {
    get(&format!("{base}/cluster/v1/info"), Some(CLUSTER_KEY)).body
}

fn has(base: &str, id: &str) -> bool {
    get(&format!("{base}/doc/{id}"), None).status == 200
}

/// Waits until `check` holds, failing with `what` after `within`; how long it took.
fn within(within: Duration, what: &str, check: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < within, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

fn total(base: &str, word: &str) -> u64 {
    let a = get(&format!("{base}/search?q={word}&k=50&fields="), None);
    assert_eq!(a.status, 200, "{}", a.body);
    a.body["total_hits"].as_u64().unwrap()
}

#[test]
fn writes_go_to_the_primary_and_replicas_follow_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("collection");
    ingest_into("cranfield", &cranfield_dir(), &data, Some(2));
    let store = dir.path().join("store");
    let store = store.to_str().unwrap().to_string();
    let primaries: Vec<Server> = (0..2)
        .map(|s| primary(&data.join(format!("shards/{s}")), &store, s))
        .collect();
    let mut replicas: Vec<Option<Server>> = (0..2)
        .map(|s| Some(replica(&dir.path().join(format!("r{s}")), &store, s)))
        .collect();
    for (p, r) in primaries.iter().zip(&replicas) {
        let (p, r) = (info(&p.base), info(&r.as_ref().unwrap().base));
        assert_eq!(
            (p["primary"].as_bool(), p["writes"].as_bool()),
            (Some(true), Some(true))
        );
        assert_eq!(
            (r["primary"].as_bool(), r["writes"].as_bool()),
            (Some(false), Some(false))
        );
        assert_eq!(p["store_generation"], r["store_generation"], "{p} {r}");
    }
    let urls: Vec<String> = (0..2)
        .map(|s| {
            format!(
                "{},{}",
                primaries[s].base,
                replicas[s].as_ref().unwrap().base
            )
        })
        .collect();
    let root = root(&urls);
    // The root describes its own routes.
    let doc = get(&format!("{}/openapi.json", root.base), None);
    assert_eq!(doc.status, 200, "{}", doc.body);
    let paths = doc.body["paths"].as_object().unwrap();
    for p in [
        "/search",
        "/doc/{id}",
        "/admin/documents",
        "/admin/documents/delete",
        "/admin/graph",
        "/admin/jobs/{id}",
        "/admin/models",
        "/admin/models/{id}/activate",
        "/readyz",
    ] {
        assert!(paths.contains_key(p), "{p} missing: {:?}", paths.keys());
    }
    assert!(!paths.contains_key("/admin/train"), "{:?}", paths.keys());
    let params = doc.body["paths"]["/admin/documents"]["post"]["parameters"].to_string();
    assert!(params.contains("wait_for"), "{params}");

    // A write through the root reaches each primary alone; wait_for=2 answers once both
    // copies serve it.
    let ids: Vec<String> = (0..12).map(|i| format!("w-{i}")).collect();
    let a = write(&root.base, "?wait_for=2", &ids, "qqzebra");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["indexed"], 12);
    for (s, part) in a.body["shards"].as_array().unwrap().iter().enumerate() {
        assert_eq!(part["shard"], s);
        assert_eq!(part["written_on"].as_array().unwrap().len(), 1, "{part}");
        assert!(part["generation"].as_u64().unwrap() >= 2, "{part}");
        assert_eq!(part["copies"], 2, "{part}");
    }
    for id in &ids {
        let s = shard_of(id, 2) as usize;
        assert!(has(&replicas[s].as_ref().unwrap().base, id), "{id}");
    }
    assert_eq!(total(&root.base, "qqzebra"), 12);

    // A replica takes no writes; a primary no document of another shard.
    let r0 = replicas[0].as_ref().unwrap().base.clone();
    let direct = call(
        "POST",
        &format!("{r0}/cluster/v1/documents"),
        Some(CLUSTER_KEY),
        Some(("application/x-ndjson", &ndjson(&ids[..1], "x"))),
    );
    assert_error(&direct, 503, None, "takes no writes");
    let other = ids.iter().find(|id| shard_of(id, 2) == 1).unwrap();
    let misrouted = write(&primaries[0].base, "", std::slice::from_ref(other), "x");
    assert_error(&misrouted, 400, Some("body"), "routes to shard 1 of 2");

    // Shard 0's replica dies; writes go on; it converges by itself when it returns.
    let dead = replicas[0].take().unwrap();
    let addr = dead.base.trim_start_matches("http://").to_string();
    drop(dead);
    let more: Vec<String> = (0..12).map(|i| format!("m-{i}")).collect();
    let a = write(&root.base, "", &more, "qqyak");
    assert_eq!(a.status, 200, "{}", a.body);
    replicas[0] = Some(replica_at(&dir.path().join("r0"), &store, 0, &addr));
    let back = replicas[0].as_ref().unwrap().base.clone();
    let took = within(
        Duration::from_secs(5),
        "the returned replica converges",
        || {
            more.iter()
                .filter(|id| shard_of(id, 2) == 0)
                .all(|id| has(&back, id))
        },
    );
    eprintln!("returned replica converged {took:?} after its start");

    // Resending a batch is idempotent.
    let a = write(&root.base, "?wait_for=2", &more, "qqyak");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(total(&root.base, "qqyak"), 12);

    // Deleting, then resending the deletion: 404 without missing_ok, 200 with it.
    let del = format!("{}/admin/documents/delete", root.base);
    let body = serde_json::json!({"ids": &more[..4]}).to_string();
    let a = post_json(&format!("{del}?wait_for=2"), Some(TOKEN), &body);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["deleted"], 4);
    let again = post_json(&del, Some(TOKEN), &body);
    assert_eq!(again.status, 404, "{}", again.body);
    let again = post_json(
        &format!("{del}?missing_ok=true&wait_for=2"),
        Some(TOKEN),
        &body,
    );
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(total(&root.base, "qqyak"), 8);
    for id in &more[..4] {
        let s = shard_of(id, 2) as usize;
        assert!(!has(&replicas[s].as_ref().unwrap().base, id), "{id}");
    }

    // wait_for above the replicas a shard has: refused before anything is written.
    let a = write(&root.base, "?wait_for=3", &ids, "qqzebra");
    assert_error(&a, 400, Some("wait_for"), "has 2 replicas");

    // The graph job through the root: each primary stores and publishes its shard's part,
    // and the replicas serve it once they follow that generation.
    let scores =
        |base: &str, id: &str| get(&format!("{base}/doc/{id}"), None).body["link_scores"].clone();
    assert_eq!(scores(&r0, "w-0"), Value::Null);
    let g = post_json(&format!("{}/admin/graph", root.base), Some(TOKEN), "");
    assert_eq!(g.status, 202, "{}", g.body);
    let job = wait_for_job(&root.base, g.body["job"].as_i64().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    for (s, part) in job["result"]["shards"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        assert_eq!(
            part["written_on"],
            serde_json::json!([primaries[s].base]),
            "{job}"
        );
        assert!(part["generation"].as_u64().is_some(), "{job}");
    }
    for id in &ids[..4] {
        let s = shard_of(id, 2) as usize;
        let on_primary = scores(&primaries[s].base, id);
        assert_ne!(on_primary, Value::Null, "{id}");
        let r = replicas[s].as_ref().unwrap().base.clone();
        within(
            Duration::from_secs(5),
            "a replica serves the link scores",
            || scores(&r, id) == on_primary,
        );
    }

    // Shard 1's primary dies: shard 0 is written, and the error says exactly that.
    let mut primaries = primaries;
    let p1 = primaries.pop().unwrap();
    drop(p1);
    let last: Vec<String> = (0..12).map(|i| format!("l-{i}")).collect();
    let a = write(&root.base, "", &last, "qqgnu");
    assert_eq!(a.status, 503, "{}", a.body);
    let says = a.body["error"]["message"].as_str().unwrap();
    assert!(
        says.contains("shard 1 did not take its") && says.contains("no primary of the shard is up"),
        "{says}"
    );
    assert!(says.contains("written: shard 0 ("), "{says}");
    for id in last.iter().filter(|id| shard_of(id, 2) == 0) {
        assert!(has(&primaries[0].base, id), "{id}");
    }
}

/// Two primaries of one shard: the one that publishes second is told it lost, does not
/// acknowledge its write, takes no more writes, and follows the winner's generations, which
/// replace its own unpublished commit.
#[test]
fn a_second_primary_of_a_shard_is_fenced_by_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let store = dir.path().join("store");
    let store = store.to_str().unwrap().to_string();
    let first = primary(&data, &store, 0);
    let copy = dir.path().join("second");
    copy_dir(&data, &copy);
    let second = primary(&copy, &store, 0);
    let g = info(&first.base)["store_generation"].as_u64().unwrap();
    assert_eq!(info(&second.base)["store_generation"].as_u64(), Some(g));

    let a = write(&second.base, "", &["won".to_string()], "qqwin");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["generation"].as_u64(), Some(g + 1));
    let lost = write(&first.base, "", &["lost".to_string()], "qqlose");
    assert_error(&lost, 503, None, "no longer the primary of shard 0");
    assert_eq!(info(&first.base)["writes"], false);
    // Refused before anything is committed.
    let again = write(&first.base, "", &["lost2".to_string()], "qqlose");
    assert_error(&again, 503, None, "no longer the primary");
    assert!(!has(&first.base, "lost2"));
    within(
        Duration::from_secs(10),
        "the fenced primary serves the winner's generation",
        || has(&first.base, "won") && !has(&first.base, "lost") && !has(&first.base, "lost2"),
    );
    assert_eq!(info(&first.base)["store_generation"].as_u64(), Some(g + 1));
}
