//! A root that learns its shards' replicas by gossip (issue 13, "Metastore and membership"),
//! on loopback with real processes: three leaves and a replica announce their shards over
//! chitchat; the root finds them and answers as the root given the static `--shard` map
//! does; a leaf killed while its shard has a replica leaves the answers complete (and the
//! failure detector's time to drop it is printed); a root whose metastore is down at start
//! serves from its last known map with a warning, and one without such a map says why not.
//!
//! The metastore is PostgreSQL when `RANKD_TEST_DATABASE_URL` is set, else SQLite.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::util::*;
use serde_json::Value;

/// A leaf of Cranfield's shard `shard` (see [`gossip_leaf`]).
fn leaf(data: &Path, shard: u32, port: u16, seeds: &str, metastore: Option<&str>) -> Server {
    gossip_leaf(data, "cranfield", shard, port, seeds, metastore)
}

/// `rankd serve ARGS` and every line it printed before its address (`Err`: it exited, with
/// its whole standard error).
fn serve_with_output(args: &[&str]) -> Result<(Server, Vec<String>), String> {
    let mut child = rankd_command()
        .arg("serve")
        .args(["--addr", "127.0.0.1:0"])
        .args(args)
        .env("RANKD_LOG", "error")
        .env_remove("RANKD_ADMIN_TOKEN")
        .env_remove("RANKD_CONFIG")
        .env_remove("DATABASE_URL")
        .env_remove("RANKD_DATABASE_URL")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut before = Vec::new();
    loop {
        let Some(Ok(line)) = lines.next() else {
            let _ = child.wait();
            return Err(before.join("\n"));
        };
        if let Some(rest) = line.split(" on http://").nth(1) {
            let base = format!("http://{}", rest.split('/').next().unwrap());
            std::thread::spawn(move || for _ in lines {});
            return Ok((
                Server {
                    child,
                    base,
                    scratch: None,
                },
                before,
            ));
        }
        before.push(line);
    }
}

fn root(port: u16, seeds: &str, data: &Path, metastore: Option<&str>) -> (Server, Vec<String>) {
    let gossip = gossip(port);
    let mut args = vec![
        "--role",
        "root",
        "--collection",
        "cranfield",
        "--gossip",
        &gossip,
        "--seed",
        seeds,
        "--data-dir",
        data.to_str().unwrap(),
    ];
    if let Some(m) = metastore {
        args.extend(["--metastore", m]);
    }
    serve_with_output(&args).unwrap_or_else(|e| panic!("the root did not start: {e}"))
}

fn answers(base: &str, queries: &[String]) -> Vec<Value> {
    queries
        .iter()
        .map(|q| {
            let a = get(&bm25_url(base, q), None);
            assert_eq!(a.status, 200, "{}", a.body);
            assert_eq!(a.body["partial"], false, "{}", a.body);
            a.body["hits"].clone()
        })
        .collect()
}

/// The one sample of the metric `name`.
fn sample(base: &str, name: &str) -> f64 {
    metric(base, name, &[]).unwrap_or_else(|| panic!("{name} missing from /metrics"))
}

#[test]
fn a_root_finds_its_leaves_by_gossip_and_survives_one_dying() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("sharded");
    ingest_into("cranfield", &cranfield_dir(), &data, Some(3));
    // A replica of shard 1 in a collection directory of its own (with the collection record,
    // so that it announces the shard count too).
    let replica = dir.path().join("replica");
    std::fs::create_dir_all(replica.join("shards")).unwrap();
    copy_dir(&data.join("shards/1"), &replica.join("shards/1"));
    std::fs::copy(
        data.join("shards/collection.json"),
        replica.join("shards/collection.json"),
    )
    .unwrap();
    let seeds = format!("{},{}", gossip(27_220), gossip(27_221));
    let l0 = leaf(&data.join("shards/0"), 0, 27_221, &seeds, None);
    let mut l1 = leaf(&data.join("shards/1"), 1, 27_222, &seeds, None);
    let l1b = leaf(&replica.join("shards/1"), 1, 27_223, &seeds, None);
    let l2 = leaf(&data.join("shards/2"), 2, 27_224, &seeds, None);
    let started = Instant::now();
    let (by_gossip, _) = root(27_220, &seeds, &dir.path().join("root"), None);
    println!(
        "root discovered every shard and serves after {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let shard1 = format!("{},{}", l1.base, l1b.base);
    let static_root = start_serve(
        &[
            "--role", "root", "--shard", &l0.base, "--shard", &shard1, "--shard", &l2.base,
        ],
        None,
        &[],
    );
    let queries = cranfield_queries(30);
    let want = answers(&static_root.base, &queries);
    assert_eq!(answers(&by_gossip.base, &queries), want);
    // Root and four leaves alive in the root's view.
    let live = Instant::now();
    while sample(&by_gossip.base, "rankd_cluster_live_members") < 5.0 {
        assert!(
            live.elapsed() < Duration::from_secs(10),
            "members never all live"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // A leaf of shard 1 killed: the answers stay complete and equal at once (the root's own
    // failover), and the failure detector drops it from the view.
    let _ = l1.child.kill();
    let _ = l1.child.wait();
    let killed = Instant::now();
    assert_eq!(answers(&by_gossip.base, &queries), want);
    while sample(&by_gossip.base, "rankd_cluster_live_members") > 4.0 {
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "the killed leaf was never declared dead"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let detected = killed.elapsed();
    println!(
        "kill -9 of a leaf: declared dead by the root's gossip after {:.0} ms",
        detected.as_secs_f64() * 1e3
    );
    assert_eq!(answers(&by_gossip.base, &queries), want);

    // A new replica of shard 1 joins; once the root sees it, the last original replica of
    // shard 1 dies: the answers stay complete only because the root took the newcomer from
    // the gossip (the static root, which never heard of it, answers without shard 1).
    let second = dir.path().join("replica2");
    std::fs::create_dir_all(second.join("shards")).unwrap();
    copy_dir(&data.join("shards/1"), &second.join("shards/1"));
    let _l1c = leaf(&second.join("shards/1"), 1, 27_225, &seeds, None);
    let joined = Instant::now();
    while sample(&by_gossip.base, "rankd_cluster_live_members") < 5.0 {
        assert!(
            joined.elapsed() < Duration::from_secs(10),
            "the new leaf never joined"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "a new leaf was in the root's view {:.0} ms after it announced its address",
        joined.elapsed().as_secs_f64() * 1e3
    );
    let mut l1b = l1b;
    let _ = l1b.child.kill();
    let _ = l1b.child.wait();
    assert_eq!(answers(&by_gossip.base, &queries), want);
    let a = get(&bm25_url(&static_root.base, &queries[0]), None);
    assert_eq!(a.body["partial"], true, "{}", a.body);

    let ready = get(&format!("{}/readyz", by_gossip.base), None);
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert_eq!(ready.body, "ready");
}

#[test]
fn a_root_starts_from_its_last_known_map_when_the_metastore_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let metastore = fresh_database(dir.path());
    let data = dir.path().join("sharded");
    ingest_into("cranfield", &cranfield_dir(), &data, Some(3));
    let seeds = format!("{},{}", gossip(27_240), gossip(27_241));
    let m = Some(metastore.as_str());
    let _l0 = leaf(&data.join("shards/0"), 0, 27_241, &seeds, m);
    let _l1 = leaf(&data.join("shards/1"), 1, 27_242, &seeds, m);
    let _l2 = leaf(&data.join("shards/2"), 2, 27_243, &seeds, m);
    // The leaves registered (in the background, after announcing their address).
    let registered = Instant::now();
    while column(&metastore, "SELECT node_id FROM cluster_replicas").len() < 3 {
        assert!(
            registered.elapsed() < Duration::from_secs(40),
            "the leaves never registered"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let root_dir = dir.path().join("root");
    let (first, _) = root(27_240, &seeds, &root_dir, m);
    let queries = cranfield_queries(30);
    let want = answers(&first.base, &queries);
    assert!(root_dir.join("cluster/last_map.json").exists());
    assert_eq!(sample(&first.base, "rankd_metastore_up"), 1.0);
    first.stop();

    // The metastore unreachable: the root starts from the map it cached, and says so.
    let down = "postgres://rankd:secret@127.0.0.1:1/rankd";
    let (second, said) = root(27_240, &seeds, &root_dir, Some(down));
    let warning = said
        .iter()
        .find(|l| l.starts_with("warning: the metastore is unreachable"))
        .unwrap_or_else(|| panic!("no warning in {said:?}"));
    assert!(
        warning.contains("last_map.json") && !warning.contains("secret"),
        "{warning}"
    );
    println!("{warning}");
    assert_eq!(answers(&second.base, &queries), want);
    assert_eq!(sample(&second.base, "rankd_metastore_up"), 0.0);
    assert!(
        metric(
            &second.base,
            "rankd_metastore_errors_total",
            &["operation=\"read_map\""]
        )
        .unwrap_or(0.0)
            >= 1.0
    );
    second.stop();

    // Without a cached map, the root refuses to start and says why.
    let gossip_addr = gossip(27_240);
    let empty = dir.path().join("empty");
    let err = serve_with_output(&[
        "--role",
        "root",
        "--collection",
        "cranfield",
        "--gossip",
        &gossip_addr,
        "--seed",
        &seeds,
        "--data-dir",
        empty.to_str().unwrap(),
        "--metastore",
        down,
    ])
    .err()
    .expect("a root without metastore and cache must not start");
    assert!(
        err.contains("no last known map") && err.contains("last_map.json"),
        "{err}"
    );
}

#[test]
fn a_leaf_registers_once_its_metastore_comes_up() {
    // The metastore's directory does not exist when the leaf starts: it cannot register,
    // serves anyway, and registers by itself once the directory (so the database) appears.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("sharded");
    ingest_into("cranfield", &cranfield_dir(), &data, Some(1));
    let later = dir.path().join("later");
    let metastore = format!("sqlite://{}?mode=rwc", later.join("ops.db").display());
    let seeds = gossip(27_244);
    let leaf = leaf(&data.join("shards/0"), 0, 27_244, &seeds, Some(&metastore));
    let down = Instant::now();
    while metric(
        &leaf.base,
        "rankd_metastore_errors_total",
        &["operation=\"register\""],
    )
    .unwrap_or(0.0)
        < 1.0
    {
        assert!(
            down.elapsed() < Duration::from_secs(30),
            "no failed registration was counted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let q = cranfield_queries(1);
    assert_eq!(get(&bm25_url(&leaf.base, &q[0]), None).status, 200);

    std::fs::create_dir_all(&later).unwrap();
    sqlx::any::install_default_drivers();
    let up = Instant::now();
    loop {
        let registered = runtime().block_on(async {
            use sqlx::Connection;
            let mut conn = sqlx::AnyConnection::connect(&metastore).await.ok()?;
            sqlx::query("SELECT node_id FROM cluster_replicas")
                .fetch_all(&mut conn)
                .await
                .ok()
                .map(|rows| rows.len())
        });
        if registered == Some(1) {
            break;
        }
        assert!(
            up.elapsed() < Duration::from_secs(60),
            "the leaf never registered after its metastore came up"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    println!(
        "the leaf registered {:.1} s after its metastore came up",
        up.elapsed().as_secs_f64()
    );
}

/// The primary chosen through the metastore (issue 31, deliverable 2): two leaves of a shard
/// started with `--elect-primary` follow the store; one takes the lease and the writes. When
/// it is killed, the other takes the lease once it expires, catches up with the store and
/// takes the writes; every acknowledged write is there; the dead one, restarted, follows.
#[test]
fn a_dead_primary_is_replaced_through_the_metastore() {
    let dir = tempfile::tempdir().unwrap();
    let metastore = fresh_database(dir.path());
    let data = ingest(dir.path(), DOCS);
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    rankd_ok([
        "publish",
        "--data-dir",
        data.to_str().unwrap(),
        "--store",
        store,
        "--metastore",
        &metastore,
        "--collection",
        "elect",
    ]);
    let seeds = gossip(27_260);
    let candidate = |name: &str, port: u16| {
        let (gossip, data) = (gossip(port), dir.path().join(name));
        start_serve(
            &[
                "--role",
                "leaf",
                "--data-dir",
                data.to_str().unwrap(),
                "--collection",
                "elect",
                "--shard-id",
                "0",
                "--gossip",
                &gossip,
                "--seed",
                &seeds,
                "--node-id",
                name,
                "--metastore",
                &metastore,
                "--store",
                store,
                "--elect-primary",
                "--poll-ms",
                "100",
            ],
            Some(TOKEN),
            &[],
        )
    };
    let mut leaves = vec![Some(candidate("a", 27_261)), Some(candidate("b", 27_262))];
    let root_gossip = gossip(27_260);
    let root = start_serve(
        &[
            "--role",
            "root",
            "--collection",
            "elect",
            "--gossip",
            &root_gossip,
            "--seed",
            &seeds,
            "--metastore",
            &metastore,
            "--data-dir",
            dir.path().join("root").to_str().unwrap(),
        ],
        Some(TOKEN),
        &[],
    );
    let info = |base: &str| get(&format!("{base}/cluster/v1/info"), Some(CLUSTER_KEY)).body;
    let primary_of = |leaves: &[Option<Server>]| {
        let primaries: Vec<usize> = (0..leaves.len())
            .filter(|&i| {
                leaves[i]
                    .as_ref()
                    .is_some_and(|l| info(&l.base)["primary"] == true)
            })
            .collect();
        assert!(primaries.len() <= 1, "two primaries: {primaries:?}");
        primaries.first().copied()
    };
    let start = Instant::now();
    let first = loop {
        if let Some(p) = primary_of(&leaves) {
            break p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "no primary elected"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let write = |ids: &[&str]| {
        let lines: Vec<String> = ids
            .iter()
            .map(|id| {
                serde_json::json!({"id": id, "title": "elected", "body": "qqelect"}).to_string()
            })
            .collect();
        try_call(
            "POST",
            &format!("{}/admin/documents", root.base),
            Some(TOKEN),
            Some(("application/x-ndjson", lines.join("\n").as_bytes())),
        )
        .map(|a| a.status)
        .unwrap_or(0)
    };
    // The root learns the leaves by gossip: retry until it writes.
    let start = Instant::now();
    while write(&["e1", "e2"]) != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "no write through the root"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let other = 1 - first;
    let follower = leaves[other].as_ref().unwrap().base.clone();
    assert_eq!(info(&follower)["writes"], false);
    // The primary dies: the other takes over.
    let dead = leaves[first].take().unwrap();
    drop(dead);
    let killed = Instant::now();
    while write(&["e3"]) != 200 {
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "no new primary took the writes"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "a new primary took the writes {:?} after the old one was killed",
        killed.elapsed()
    );
    assert_eq!(primary_of(&leaves), Some(other));
    for id in ["e1", "e2", "e3"] {
        let a = get(&format!("{follower}/doc/{id}"), None);
        assert_eq!(a.status, 200, "{id} on the new primary: {}", a.body);
    }
    // The old primary returns: it follows, and serves what the new one wrote.
    leaves[first] = Some(candidate(["a", "b"][first], 27_261 + first as u16));
    let back = leaves[first].as_ref().unwrap().base.clone();
    let start = Instant::now();
    while get(&format!("{back}/doc/e3"), None).status != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the returned leaf never followed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info(&back)["primary"], false);
    assert_eq!(primary_of(&leaves), Some(other));
    // The elected primaries recorded their generations in the metastore: its current one is
    // the store's newest, which the returned leaf serves.
    let served = info(&back)["store_generation"].as_u64().unwrap();
    let start = Instant::now();
    loop {
        let recorded = column(
            &metastore,
            "SELECT CAST(current_generation AS TEXT) FROM cluster_shards \
             WHERE collection = 'elect' AND shard = 0",
        );
        if recorded == [served.to_string()] {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the metastore records {recorded:?}, the store is at {served}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
