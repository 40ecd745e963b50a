//! Failures of a sharded collection on loopback (issue 13): `kill -9` of a leaf under load
//! while its shard has a replica (no error, no wrong answer); of every replica of a shard
//! (answers flagged `partial`, naming the shard, holding only the other shards' documents;
//! a 503 from a root that disallows partial answers); the leaf restarted and used again
//! without restarting the root.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::util::*;
use rankd::cluster::routing::shard_of;
use serde_json::Value;

fn leaf(data: &Path, addr: Option<&str>) -> Server {
    let mut args = vec!["--role", "leaf", "--data-dir", data.to_str().unwrap()];
    if let Some(a) = addr {
        args.extend(["--addr", a]);
    }
    start_serve(&args, None, &[])
}

#[test]
fn leaves_dying_and_returning_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("sharded");
    ingest_into("cranfield", &cranfield_dir(), &data, Some(3));
    // A replica of shard 1: a copy of its data directory, served by a fourth leaf.
    let replica = dir.path().join("replica1");
    copy_dir(&data.join("shards/1"), &replica);
    let l0 = leaf(&data.join("shards/0"), None);
    let mut l1 = leaf(&data.join("shards/1"), None);
    let mut l3 = leaf(&replica, None);
    let l2 = leaf(&data.join("shards/2"), None);
    let l1_addr = l1.base.trim_start_matches("http://").to_string();
    let shard1 = format!("{},{}", l1.base, l3.base);
    let root_args = |partial: &'static str| {
        vec![
            "--role".to_string(),
            "root".into(),
            "--shard".into(),
            l0.base.clone(),
            "--shard".into(),
            shard1.clone(),
            "--shard".into(),
            l2.base.clone(),
            "--allow-partial-results".into(),
            partial.into(),
        ]
    };
    let args: Vec<String> = root_args("true");
    let root = start_serve(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
        &[],
    );
    let args: Vec<String> = root_args("false");
    let strict = start_serve(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
        &[],
    );

    let queries = cranfield_queries(40);
    let baseline: Vec<Value> = queries
        .iter()
        .map(|q| {
            let a = get(&bm25_url(&root.base, q), None);
            assert_eq!(a.status, 200, "{}", a.body);
            assert_eq!(a.body["partial"], false);
            a.body["hits"].clone()
        })
        .collect();

    // Load from four clients; shard 1's first replica is killed in the middle.
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let problems = Arc::new(Mutex::new(Vec::<String>::new()));
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (stop, answered, problems) = (stop.clone(), answered.clone(), problems.clone());
            let (base, queries, baseline) = (root.base.clone(), queries.clone(), baseline.clone());
            std::thread::spawn(move || {
                let mut i = c;
                while !stop.load(Ordering::SeqCst) {
                    let k = i % queries.len();
                    let a = get(&bm25_url(&base, &queries[k]), None);
                    if a.status != 200
                        || a.body["partial"] != false
                        || a.body["hits"] != baseline[k]
                    {
                        problems
                            .lock()
                            .unwrap()
                            .push(format!("{}: {}", a.status, a.body));
                    }
                    answered.fetch_add(1, Ordering::SeqCst);
                    i += 4;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    let before = answered.load(Ordering::SeqCst);
    kill9(&mut l1.child);
    let killed = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    let after = answered.load(Ordering::SeqCst) - before;
    let problems = problems.lock().unwrap();
    assert!(
        problems.is_empty(),
        "{} bad answers: {:?}",
        problems.len(),
        &problems[..1]
    );
    assert!(after > 20, "only {after} answers after the kill");
    eprintln!(
        "kill -9 of a replica under load: {before} answers before, {after} in the {:.1} s after, none wrong",
        killed.elapsed().as_secs_f64()
    );

    // Shard 1 without any replica: partial answers from shards 0 and 2, or a 503.
    kill9(&mut l3.child);
    for q in &queries {
        let a = get(&bm25_url(&root.base, q), None);
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.body["partial"], true, "{}", a.body);
        assert_eq!(a.body["shards"]["failed"], 1);
        assert_eq!(a.body["shards"]["failures"][0]["shard"], 1);
        for h in a.body["hits"].as_array().unwrap() {
            let id = h["id"].as_str().unwrap();
            assert_ne!(shard_of(id, 3), 1, "{id} comes from the dead shard");
        }
        let b = get(&bm25_url(&strict.base, q), None);
        assert_eq!(b.status, 503, "{}", b.body);
        assert_eq!(b.body["error"]["code"], "unavailable");
        assert!(b.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shard 1"));
    }

    // Readiness says so: degraded where partial answers are allowed, 503 where not (checked
    // right after a failed search, while the root counts the replicas as down).
    let _ = get(&bm25_url(&root.base, &queries[0]), None);
    let ready = get(&format!("{}/readyz", root.base), None);
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert!(
        ready.body.as_str().unwrap().contains("degraded"),
        "{}",
        ready.body
    );
    let _ = get(&bm25_url(&strict.base, &queries[0]), None);
    let ready = get(&format!("{}/readyz", strict.base), None);
    assert_eq!(ready.status, 503, "{}", ready.body);
    // A JSON error as every error of a root and of a single node.
    assert!(
        ready.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[1]"),
        "{}",
        ready.body
    );
    // A root started while shard 1 is down starts, and answers without it.
    let args: Vec<String> = root_args("true");
    let late = start_serve(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
        &[],
    );
    let a = get(&bm25_url(&late.base, &queries[0]), None);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["partial"], true);
    // Documents by id through the root, from the shard the id routes to.
    let alive = (1..=1400)
        .map(|i| i.to_string())
        .find(|id| shard_of(id, 3) == 0)
        .unwrap();
    let a = get(&format!("{}/doc/{alive}", root.base), None);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["id"], alive.as_str());
    assert_eq!(
        get(&format!("{}/doc/no-such-doc", root.base), None).status,
        404
    );

    // Shard 1's leaf back on its address: used again without restarting the root, once its
    // health check passes (partial answers until then).
    let _l1 = leaf(&data.join("shards/1"), Some(&l1_addr));
    let back = Instant::now();
    let mut partial_meanwhile = 0.0;
    let complete = loop {
        let a = get(&bm25_url(&root.base, &queries[0]), None);
        if a.status == 200 && a.body["partial"] == false {
            break a;
        }
        if a.body["partial"] == true {
            partial_meanwhile += 1.0;
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "shard 1 never came back"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(complete.body["hits"], baseline[0]);
    // The root counted what happened.
    let metrics = get(&format!("{}/metrics", root.base), None).body;
    let metrics = metrics.as_str().unwrap();
    let value = |series: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(series))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("{series} missing from /metrics"))
    };
    assert!(value("rankd_cluster_replica_failures_total{shard=\"1\"}") >= 2.0);
    // One per query above, the search before the readiness check, and those while shard
    // 1 came back.
    assert_eq!(
        value("rankd_cluster_partial_responses_total"),
        queries.len() as f64 + 1.0 + partial_meanwhile
    );
    assert!(value("rankd_cluster_bytes_total{call=\"query\",direction=\"received\"}") > 0.0);
    eprintln!(
        "restarted leaf used again after {:.0} ms",
        back.elapsed().as_secs_f64() * 1e3
    );
}

/// `POST /admin/documents` on the root: each document lands on the shard its id routes to
/// (every replica of it) and is searchable through the root at once; a batch with a bad
/// record is refused whole, nothing written anywhere; a wrong token is a 401.
#[test]
fn admin_batches_through_the_root_land_on_their_shards() {
    const TOKEN: &str = "cluster-admin-token";
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("sharded");
    ingest_into("cranfield", &cranfield_dir(), &data, Some(3));
    let replica = dir.path().join("replica2");
    copy_dir(&data.join("shards/2"), &replica);
    let serve_leaf = |d: &Path| {
        start_serve(
            &["--role", "leaf", "--data-dir", d.to_str().unwrap()],
            Some(TOKEN),
            &[],
        )
    };
    let leaves: Vec<Server> = (0..3)
        .map(|s| serve_leaf(&data.join(format!("shards/{s}"))))
        .collect();
    let extra = serve_leaf(&replica);
    let shard2 = format!("{},{}", leaves[2].base, extra.base);
    let root = start_serve(
        &[
            "--role",
            "root",
            "--shard",
            &leaves[0].base,
            "--shard",
            &leaves[1].base,
            "--shard",
            &shard2,
        ],
        Some(TOKEN),
        &[],
    );
    let ids: Vec<String> = (0..12).map(|i| format!("new-{i}")).collect();
    let batch: Vec<String> = ids
        .iter()
        .map(|id| {
            serde_json::json!({"id": id, "title": "zyxwv marker", "body": format!("{id} text")})
                .to_string()
        })
        .collect();
    let url = format!("{}/admin/documents", root.base);
    let ndjson = |lines: &[String]| ("application/x-ndjson", lines.join("\n").into_bytes());
    let (ct, body) = ndjson(&batch);
    let wrong = call("POST", &url, Some("nope"), Some((ct, &body)));
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    // A bad third record: refused whole, nothing written.
    let mut bad = batch.clone();
    bad[2] = r#"{"id": 5, "title": "numeric id"}"#.into();
    let (ct, body) = ndjson(&bad);
    let a = call("POST", &url, Some(TOKEN), Some((ct, &body)));
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("body:3"),
        "{}",
        a.body
    );
    for leaf in leaves.iter().chain([&extra]) {
        assert_eq!(get(&format!("{}/doc/new-0", leaf.base), None).status, 404);
    }
    let (ct, body) = ndjson(&batch);
    let a = call("POST", &url, Some(TOKEN), Some((ct, &body)));
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["indexed"], 12);
    for id in &ids {
        let home = shard_of(id, 3) as usize;
        for (s, leaf) in leaves.iter().enumerate() {
            let status = get(&format!("{}/doc/{id}", leaf.base), None).status;
            assert_eq!(
                status,
                if s == home { 200 } else { 404 },
                "{id} on shard {s}"
            );
        }
        let on_replica = get(&format!("{}/doc/{id}", extra.base), None).status;
        assert_eq!(
            on_replica,
            if home == 2 { 200 } else { 404 },
            "{id} on the replica"
        );
    }
    let found = get(&format!("{}/search?q=zyxwv&k=20&fields=", root.base), None);
    assert_eq!(found.status, 200, "{}", found.body);
    let mut got: Vec<String> = found.body["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect();
    got.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(found.body["total_hits"], 12);

    // Deletes through the root: all or none, then on every replica of each id's shard.
    let del = format!("{}/admin/documents/delete", root.base);
    let a = post_json(
        &del,
        Some(TOKEN),
        r#"{"ids":["new-0","new-1","no-such-doc"]}"#,
    );
    assert_eq!(a.status, 404, "{}", a.body);
    assert_eq!(a.body["error"]["field"], "ids[2]");
    assert_eq!(
        get(&format!("{}/search?q=zyxwv&k=20", root.base), None).body["total_hits"],
        12
    );
    let a = post_json(
        &del,
        Some(TOKEN),
        r#"{"ids":["new-0","new-1","new-2","new-3"]}"#,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["deleted"], 4);
    for id in &ids[..4] {
        for leaf in leaves.iter().chain([&extra]) {
            assert_eq!(
                get(&format!("{}/doc/{id}", leaf.base), None).status,
                404,
                "{id}"
            );
        }
    }
    assert_eq!(
        get(&format!("{}/search?q=zyxwv&k=20", root.base), None).body["total_hits"],
        8
    );
}
