//! Index generations on object storage (issue 13 deliverable 4): `rankd publish` uploads only
//! what the store lacks; a leaf started with `--store` fetches the newest generation, serves
//! it, and switches to each new one under load without an error; a generation with a corrupt
//! or missing file, or a manifest that does not parse, is refused while the old one keeps
//! serving, and taken once it is repaired; a search pinned to a generation never sees another
//! generation's documents or link scores. On a local directory store here, and on S3 against
//! moto's server (`RANKD_TEST_MOTO=path/to/moto_server`, set by `.ci/run`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::util::*;
use serde_json::Value;

/// Runs `rankd ARGS` with `env`, asserting success; its standard output.
fn rankd_env(args: &[&str], env: &[(String, String)]) -> String {
    let out = rankd_command()
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rankd {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn publish(src: &Path, store: &str, env: &[(String, String)]) -> Vec<Value> {
    let out = rankd_env(
        &[
            "publish",
            "--data-dir",
            src.to_str().unwrap(),
            "--store",
            store,
            "--json",
        ],
        env,
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    v["shards"].as_array().unwrap().clone()
}

/// `n` documents whose bodies carry `word`, ids `prefix-0..n`.
fn batch(dir: &Path, prefix: &str, word: &str, n: usize) -> PathBuf {
    let lines: Vec<String> = (0..n)
        .map(|i| {
            serde_json::json!({
                "id": format!("{prefix}-{i}"),
                "url": format!("https://x.org/{prefix}/{i}"),
                "title": format!("{prefix} {i}"),
                "body": format!("{word} appears in document {i} of the {prefix} batch"),
            })
            .to_string()
        })
        .collect();
    let f = dir.join(format!("{prefix}.jsonl"));
    std::fs::write(&f, lines.join("\n")).unwrap();
    f
}

/// A leaf following shard 0 of `store` into `replica`, looking every 50 ms, with `more`
/// flags.
fn follow(replica: &Path, store: &str, more: &[&str], env: &[(&str, &str)]) -> Server {
    let mut args = vec![
        "--role",
        "leaf",
        "--data-dir",
        replica.to_str().unwrap(),
        "--store",
        store,
        "--shard-id",
        "0",
        "--poll-ms",
        "50",
    ];
    args.extend(more);
    start_serve(&args, None, env)
}

fn info(base: &str) -> Value {
    get(&format!("{base}/cluster/v1/info"), Some(CLUSTER_KEY)).body
}

fn wait_for_generation(base: &str, generation: u64, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if info(base)["store_generation"].as_u64() == Some(generation) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{base} did not reach generation {generation} within {within:?}: {}",
            info(base)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn ids(base: &str, q: &str) -> Vec<(String, f64)> {
    let a = get(
        &format!("{base}/search?model=bm25&k=20&fields=&q={q}"),
        None,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    hit_scores(&a.body)
}

/// A metric of shard 0's replica (`labels` besides the shard), 0 when absent.
fn shard0(base: &str, name: &str, labels: &[&str]) -> f64 {
    let mut all = vec!["shard=\"0\""];
    all.extend(labels);
    metric(base, name, &all).unwrap_or(0.0)
}

/// How a test reaches the store's objects behind rankd's back, to break and repair them.
trait Objects {
    fn read(&self, key: &str) -> Vec<u8>;
    fn write(&self, key: &str, bytes: &[u8]);
    fn delete(&self, key: &str);
}

struct LocalObjects(PathBuf);

impl Objects for LocalObjects {
    fn read(&self, key: &str) -> Vec<u8> {
        std::fs::read(self.0.join(key)).unwrap()
    }
    fn write(&self, key: &str, bytes: &[u8]) {
        std::fs::write(self.0.join(key), bytes).unwrap()
    }
    fn delete(&self, key: &str) {
        std::fs::remove_file(self.0.join(key)).unwrap()
    }
}

/// The bucket on moto's server, through object_store's own S3 client with the test's keys.
struct S3Objects {
    store: object_store::aws::AmazonS3,
    prefix: String,
    runtime: tokio::runtime::Runtime,
}

impl S3Objects {
    fn key(&self, key: &str) -> object_store::path::Path {
        object_store::path::Path::from(format!("{}/{key}", self.prefix))
    }
}

impl Objects for S3Objects {
    fn read(&self, key: &str) -> Vec<u8> {
        use object_store::ObjectStoreExt;
        self.runtime.block_on(async {
            let r = self.store.get(&self.key(key)).await.unwrap();
            r.bytes().await.unwrap().to_vec()
        })
    }
    fn write(&self, key: &str, bytes: &[u8]) {
        use object_store::ObjectStoreExt;
        let payload = object_store::PutPayload::from(bytes.to_vec());
        self.runtime
            .block_on(self.store.put(&self.key(key), payload))
            .unwrap();
    }
    fn delete(&self, key: &str) {
        use object_store::ObjectStoreExt;
        self.runtime
            .block_on(self.store.delete(&self.key(key)))
            .unwrap();
    }
}

/// The key of a file of shard 0's index that is not among `before` (checksums).
fn new_blob(before: &BTreeSet<String>, src: &Path) -> String {
    let mut fresh: Vec<String> = std::fs::read_dir(src.join("shards/0/index"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .map(|p| sha256(&p))
        .filter(|sha| !before.contains(sha))
        .collect();
    fresh.sort();
    format!("blobs/{}", fresh[0])
}

/// The distinct checksums a generation's manifest lists.
fn manifest_shas(objects: &dyn Objects, shard: u64, generation: u64) -> BTreeSet<String> {
    let m: Value = serde_json::from_slice(
        &objects.read(&format!("shards/{shard}/generations/{generation:012}.json")),
    )
    .unwrap();
    m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["sha256"].as_str().unwrap().to_string())
        .collect()
}

fn sha256(path: &Path) -> String {
    use sha2::Digest;
    let bytes = std::fs::read(path).unwrap();
    sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn blobs_of(src: &Path, shard: u64) -> BTreeSet<String> {
    std::fs::read_dir(src.join("shards").join(shard.to_string()).join("index"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| sha256(&p))
        .collect()
}

fn round_trip(store: &str, env: Vec<(String, String)>, objects: &dyn Objects, prefix: &str) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    ingest_into("cranfield", &cranfield_dir(), &src, Some(2));

    // Generation 1: everything is uploaded.
    let p1 = publish(&src, store, &env);
    assert_eq!(p1.len(), 2);
    for p in &p1 {
        assert_eq!(p["generation"], 1);
        assert!(p["bytes"].as_u64().unwrap() > 100_000);
    }
    // Each distinct file once: blobs are shared by shards and generations.
    let distinct: BTreeSet<String> = manifest_shas(objects, 0, 1)
        .union(&manifest_shas(objects, 1, 1))
        .cloned()
        .collect();
    let uploaded: u64 = p1
        .iter()
        .map(|p| p["files_uploaded"].as_u64().unwrap())
        .sum();
    assert_eq!(uploaded as usize, distinct.len(), "{p1:?}");
    // Nothing changed: nothing published.
    for p in publish(&src, store, &env) {
        assert_eq!(p["unchanged"], true, "{p}");
        assert_eq!(p["bytes_uploaded"], 0);
    }

    // A replica of shard 0 bootstraps from the store; the source's own leaf is the reference.
    let envs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let replica = dir.path().join("replica0");
    let follower = follow(&replica, store, &[], &envs);
    assert_eq!(info(&follower.base)["store_generation"], 1);
    let reference = start_serve(
        &["--data-dir", src.join("shards/0").to_str().unwrap()],
        None,
        &[],
    );
    for q in ["boundary+layer", "heat+transfer", "supersonic+flow"] {
        assert_eq!(ids(&follower.base, q), ids(&reference.base, q));
    }
    drop(reference);

    // Load on the replica while generations switch: every answer a 200.
    let stop = Arc::new(AtomicBool::new(false));
    let (answered, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let load = {
        let (stop, answered, failed) = (stop.clone(), answered.clone(), failed.clone());
        let base = follower.base.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let a = get(&format!("{base}/search?model=bm25&k=10&q=flow+wing"), None);
                if a.status == 200 {
                    answered.fetch_add(1, Ordering::Relaxed);
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };

    // Generation 2: a new segment; only it, meta.json and manifest.json move.
    let b = batch(dir.path(), "quasar", "zyzzyva", 40);
    ingest_into("jsonl", &b, &src, Some(2));
    let p2 = publish(&src, store, &env);
    let published = Instant::now();
    for p in &p2 {
        assert_eq!(p["generation"], 2);
        let (up, all) = (p["bytes_uploaded"].as_u64().unwrap(), p["bytes"].as_u64());
        assert!(up * 4 < all.unwrap(), "only the new segment moves: {p}");
    }
    let new_files = manifest_shas(objects, 0, 2)
        .difference(&manifest_shas(objects, 0, 1))
        .count();
    assert_eq!(
        p2[0]["files_uploaded"].as_u64().unwrap() as usize,
        new_files
    );
    wait_for_generation(&follower.base, 2, Duration::from_secs(20));
    let visible = published.elapsed();
    eprintln!(
        "[{prefix}] generation 2 of shard 0: published in {:.3} s ({} of {} bytes uploaded), \
         visible on the replica {:.0} ms after the publish ended (poll every 50 ms)",
        p2[0]["seconds"].as_f64().unwrap(),
        p2[0]["bytes_uploaded"],
        p2[0]["bytes"],
        visible.as_secs_f64() * 1e3
    );
    let hits = ids(&follower.base, "zyzzyva");
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|(id, _)| id.starts_with("quasar-")));
    assert_eq!(shard0(&follower.base, "rankd_cluster_generation", &[]), 2.0);
    let fetched = shard0(
        &follower.base,
        "rankd_cluster_generation_fetched_bytes_total",
        &[],
    );
    assert!(fetched > 0.0 && fetched as u64 == p2[0]["bytes_uploaded"].as_u64().unwrap());

    // Generation 3 with a corrupt blob: the store already holds a blob of that name and size
    // (a corruption at rest), so the publisher does not upload it again. The replica refuses
    // the generation, generation 2 keeps serving; once the blob is repaired it is taken.
    let before0 = blobs_of(&src, 0);
    let b = batch(dir.path(), "pulsar", "xylophage", 40);
    ingest_into("jsonl", &b, &src, Some(2));
    let key = new_blob(&before0, &src);
    let good = std::fs::read(
        std::fs::read_dir(src.join("shards/0/index"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| format!("blobs/{}", sha256(p)) == key)
            .unwrap(),
    )
    .unwrap();
    let mut bad = good.clone();
    bad[good.len() / 2] ^= 0x55;
    objects.write(&key, &bad);
    publish(&src, store, &env);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(info(&follower.base)["store_generation"], 2);
    assert!(
        shard0(
            &follower.base,
            "rankd_cluster_generation_events_total",
            &["event=\"refused\""]
        ) >= 1.0
    );
    assert!(ids(&follower.base, "xylophage").is_empty());
    assert!(!ids(&follower.base, "zyzzyva").is_empty());
    objects.write(&key, &good);
    let healed = wait_for_generation(&follower.base, 3, Duration::from_secs(20));
    eprintln!(
        "[{prefix}] corrupt blob refused; repaired, taken after {:.0} ms",
        healed.as_secs_f64() * 1e3
    );
    assert!(!ids(&follower.base, "xylophage").is_empty());

    // A manifest that does not parse: refused; the next good generation is taken.
    objects.write(
        &format!("shards/0/generations/{:012}.json", 4),
        b"{\"format\": 1, \"shard\": 0, trailing garbage",
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(info(&follower.base)["store_generation"], 3);
    assert!(
        shard0(
            &follower.base,
            "rankd_cluster_generation_events_total",
            &["event=\"store_error\""]
        ) >= 1.0
    );
    objects.delete(&format!("shards/0/generations/{:012}.json", 4));

    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let (answered, failed) = (
        answered.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
    );
    eprintln!("[{prefix}] searches during the switches: {answered} answered, {failed} failed");
    assert_eq!(failed, 0);
    assert!(answered > 50);

    // Generation 4 with a blob missing, met at start: the replica serves the generation it
    // holds (3) and takes 4 once the blob is back.
    drop(follower);
    let before0 = blobs_of(&src, 0);
    let b = batch(dir.path(), "nova", "quokkafish", 40);
    ingest_into("jsonl", &b, &src, Some(2));
    let p4 = publish(&src, store, &env);
    assert_eq!(p4[0]["generation"], 4);
    let key = new_blob(&before0, &src);
    let good = objects.read(&key);
    objects.delete(&key);
    let follower = follow(&replica, store, &[], &envs);
    assert_eq!(info(&follower.base)["store_generation"], 3);
    assert!(ids(&follower.base, "quokkafish").is_empty());
    assert!(!ids(&follower.base, "xylophage").is_empty());
    objects.write(&key, &good);
    wait_for_generation(&follower.base, 4, Duration::from_secs(20));
    assert!(!ids(&follower.base, "quokkafish").is_empty());

    // A shard the store does not have: the leaf refuses to start, naming it.
    let out = rankd_command()
        .args([
            "serve",
            "--role",
            "leaf",
            "--addr",
            "127.0.0.1:0",
            "--data-dir",
            dir.path().join("nowhere").to_str().unwrap(),
            "--store",
            store,
            "--shard-id",
            "7",
        ])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no generation of shard 7"), "{err}");
}

#[test]
fn generations_on_a_local_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    round_trip(
        store.to_str().unwrap(),
        Vec::new(),
        &LocalObjects(store.clone()),
        "local",
    );
}

#[test]
#[ignore = "needs moto's S3 server: RANKD_TEST_MOTO=bench/.venv/bin/moto_server (set by .ci/run)"]
fn generations_on_s3() {
    let moto = std::env::var("RANKD_TEST_MOTO").expect("RANKD_TEST_MOTO names moto_server");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = Command::new(&moto)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {moto}: {e}"));
    let endpoint = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    while ureq::get(&endpoint).call().is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "moto did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    ureq::put(&format!("{endpoint}/rankd-test"))
        .send_empty()
        .unwrap();
    let env: Vec<(String, String)> = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let objects = S3Objects {
        store: object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&endpoint)
            .with_allow_http(true)
            .with_bucket_name("rankd-test")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_region("us-east-1")
            .build()
            .unwrap(),
        prefix: "collection".into(),
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
    };
    round_trip("s3://rankd-test/collection", env, &objects, "s3");
    let _ = server.kill();
    let _ = server.wait();
}

fn runtime1() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A search pinned to a generation (the leaf's `Pins`) keeps that generation's documents and
/// link scores while the replica switches to the next; new pins see the new one.
#[test]
fn a_pinned_search_never_mixes_generations() {
    use rankd::cluster::generation;
    use rankd::cluster::leaf::Pins;
    let dir = tempfile::tempdir().unwrap();
    let src = ingest(dir.path(), DOCS);
    rankd_ok(["graph", "--json", "--data-dir", src.to_str().unwrap()]);
    let store = generation::Store::open(dir.path().join("store").to_str().unwrap()).unwrap();
    let rt = runtime1();
    rt.block_on(generation::publish(&store, &src, 0, 1))
        .unwrap();
    let replica = dir.path().join("replica");
    rt.block_on(generation::bootstrap(&store, &replica, 0))
        .unwrap()
        .unwrap();
    let engine = rankd::search::Engine::new(rankd::text::TextIndex::open(&replica, None).unwrap())
        .with_links(
            rankd::links::load(&rankd::text::TextIndex::open(&replica, None).unwrap()).unwrap(),
        );
    engine.set_store_generation(1);
    let pins = Pins::default();
    let old = pins.current(&engine);
    assert_eq!(old.searcher.num_docs(), 3);
    assert_eq!(old.links.as_ref().unwrap().scores.keys.len(), 3);

    // Generation 2: two more documents, and link scores over five.
    let more = dir.path().join("more.jsonl");
    std::fs::write(
        &more,
        [
            r#"{"id":"set","url":"https://x.org/set","title":"HashSet","body":"A hash set.","links":["https://x.org/map"]}"#,
            r#"{"id":"str","url":"https://x.org/str","title":"str","body":"String slices.","links":["https://x.org/vec"]}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    rankd_ok([
        "ingest",
        "--format",
        "jsonl",
        "--input",
        more.to_str().unwrap(),
        "--data-dir",
        src.to_str().unwrap(),
    ]);
    rankd_ok(["graph", "--json", "--data-dir", src.to_str().unwrap()]);
    let p = rt
        .block_on(generation::publish(&store, &src, 0, 1))
        .unwrap();
    assert_eq!(p.generation, 2);
    let m = rt
        .block_on(generation::newer(&store, Some(1), 0))
        .unwrap()
        .unwrap();
    let prepared = rt
        .block_on(generation::prepare(&store, &replica, m))
        .unwrap();
    // Preparing changes nothing served.
    assert_eq!(pins.current(&engine).searcher.num_docs(), 3);
    let applied = engine.switch_generation(2, || prepared.commit()).unwrap();
    assert_eq!((applied.generation, applied.num_docs), (2, 5));
    assert_eq!(engine.store_generation(), Some(2));

    let new = pins.current(&engine);
    assert_ne!(new.generation, old.generation);
    assert_eq!(new.searcher.num_docs(), 5);
    assert_eq!(new.links.as_ref().unwrap().scores.keys.len(), 5);
    // The old pin: its documents and its link scores, readable after the switch removed
    // nothing it holds open.
    let again = pins.get(&engine, old.generation).ok().unwrap();
    assert_eq!(again.searcher.num_docs(), 3);
    assert_eq!(again.links.as_ref().unwrap().scores.keys.len(), 3);
    let doc: tantivy::TantivyDocument = again.searcher.doc(tantivy::DocAddress::new(0, 0)).unwrap();
    assert!(doc.field_values().next().is_some());
}

/// Two publishers of one shard: the manifest's create-if-absent put lets one win; the other
/// is told so and publishes again. A reader finds the newest generation even when `CURRENT`
/// lags (a publisher died between its two puts).
#[test]
fn publishers_race_for_a_generation_and_one_wins() {
    use rankd::cluster::generation;
    let dir = tempfile::tempdir().unwrap();
    for d in ["a", "b", "c"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let a = ingest(&dir.path().join("a"), DOCS);
    let b = ingest(&dir.path().join("b"), &DOCS[..2]);
    let store_dir = dir.path().join("store");
    let store = generation::Store::open(store_dir.to_str().unwrap()).unwrap();
    let rt = runtime1();
    rt.block_on(generation::publish(&store, &a, 0, 1)).unwrap();
    // Publisher B read generation 1 as the newest and is about to create 2; A gets there first.
    let manifest2 = store_dir.join("shards/0/generations/000000000002.json");
    let g1 = std::fs::read(store_dir.join("shards/0/generations/000000000001.json")).unwrap();
    let mut m: Value = serde_json::from_slice(&g1).unwrap();
    m["generation"] = 2.into();
    std::fs::write(&manifest2, serde_json::to_vec(&m).unwrap()).unwrap();
    // CURRENT still says 1: B rolls forward to 2 and creates 3, or, had it read 1, loses.
    assert_eq!(rt.block_on(generation::latest(&store, 0)).unwrap(), Some(2));
    let p = rt.block_on(generation::publish(&store, &b, 0, 1)).unwrap();
    assert_eq!(p.generation, 3);
    // Two publishers that both read 3 as the newest: the first creates 4, the second is told.
    let c = ingest(&dir.path().join("c"), &DOCS[..1]);
    let newest = rt.block_on(generation::manifest(&store, 0, 3)).unwrap();
    let first = rt
        .block_on(generation::publish_after(
            &store,
            &a,
            0,
            1,
            Some(newest.clone()),
            generation::Check::Sizes,
        ))
        .unwrap();
    assert_eq!(first.generation, 4);
    let lost = rt
        .block_on(generation::publish_after(
            &store,
            &c,
            0,
            1,
            Some(newest),
            generation::Check::Sizes,
        ))
        .unwrap_err();
    assert!(
        format!("{lost:#}").contains("another publisher created generation 4"),
        "{lost:#}"
    );
    // The winner's generation is intact: A's three documents.
    let m = rt.block_on(generation::manifest(&store, 0, 4)).unwrap();
    assert_eq!(m.num_docs, 3);
}

/// `rankd publish --metastore` records every shard's new generation in the metastore (here
/// SQLite; the same SQL runs on PostgreSQL in `tests/suite/cluster_metastore.rs`), where roots and
/// operators read the current generation and its manifest.
#[test]
fn publish_records_generations_in_the_metastore() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    ingest_into("cranfield", &cranfield_dir(), &src, Some(2));
    let store = dir.path().join("store");
    let meta = format!("sqlite://{}?mode=rwc", dir.path().join("meta.db").display());
    let args = |_: ()| {
        vec![
            "publish".to_string(),
            "--data-dir".into(),
            src.to_str().unwrap().into(),
            "--store".into(),
            store.to_str().unwrap().into(),
            "--metastore".into(),
            meta.clone(),
            "--collection".into(),
            "cran".into(),
            "--json".into(),
        ]
    };
    rankd_ok(args(()));
    let b = batch(dir.path(), "late", "zyzzyva", 20);
    ingest_into("jsonl", &b, &src, Some(2));
    let out: Value = serde_json::from_slice(&rankd_ok(args(())).stdout).unwrap();
    let map = runtime1().block_on(async {
        let m = rankd::cluster::metastore::Metastore::connect(&meta, Duration::from_secs(5))
            .await
            .unwrap();
        m.read_map().await.unwrap()
    });
    let c = map.collection("cran").unwrap();
    assert_eq!(c.shards.len(), 2);
    for (s, p) in c.shards.iter().zip(out["shards"].as_array().unwrap()) {
        assert_eq!(s.current_generation, Some(2), "{p}");
        assert_eq!(s.manifest_key.as_deref(), p["manifest"].as_str());
        assert!(store.join(s.manifest_key.as_deref().unwrap()).exists());
    }
}

/// A following leaf that gossips announces the store generation it serves (`rankd.generation`)
/// and the new one after each switch.
#[test]
fn a_following_leaf_announces_its_generation_by_gossip() {
    use rankd::cluster::membership::{Membership, MembershipConfig, NodeKeys};
    let dir = tempfile::tempdir().unwrap();
    let src = ingest(dir.path(), DOCS);
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    publish(&src, store, &[]);
    let (leaf_gossip, watcher_gossip) = ("127.0.0.1:27301", "127.0.0.1:27302");
    let replica = dir.path().join("replica");
    let _leaf = follow(
        &replica,
        store,
        &["--gossip", leaf_gossip, "--seed", watcher_gossip],
        &[],
    );
    let rt = runtime1();
    rt.block_on(async {
        let watcher = Membership::start(
            MembershipConfig::new(
                "watcher".into(),
                watcher_gossip.parse().unwrap(),
                vec![leaf_gossip.to_string()],
            ),
            &NodeKeys {
                role: "root".into(),
                api_url: "http://127.0.0.1:1".into(),
                collection: "main".into(),
                shard: None,
                shards: None,
                generation: None,
                ready: true,
            },
        )
        .await
        .unwrap();
        let mut view = watcher.view();
        let announced = |want: u64| {
            move |v: &std::sync::Arc<rankd::cluster::membership::ClusterView>| {
                v.members
                    .iter()
                    .any(|m| m.keys.role == "leaf" && m.keys.generation == Some(want))
            }
        };
        tokio::time::timeout(Duration::from_secs(20), view.wait_for(announced(1)))
            .await
            .expect("generation 1 announced")
            .unwrap();
        let more = dir.path().join("more.jsonl");
        std::fs::write(
            &more,
            r#"{"id":"set","url":"https://x.org/set","title":"HashSet","body":"A hash set."}"#,
        )
        .unwrap();
        rankd_ok([
            "ingest",
            "--format",
            "jsonl",
            "--input",
            more.to_str().unwrap(),
            "--data-dir",
            src.to_str().unwrap(),
        ]);
        publish(&src, store, &[]);
        tokio::time::timeout(Duration::from_secs(20), view.wait_for(announced(2)))
            .await
            .expect("generation 2 announced")
            .unwrap();
        watcher.shutdown().await.unwrap();
    });
}

/// `rankd store verify` reads every blob back and exits 1 naming a damaged one (damaged in
/// place, same size, which a size check misses); `rankd publish --verify` uploads it again
/// from the index, after which `verify` finds the store whole.
#[test]
fn store_verify_names_a_damaged_blob_and_publish_verify_repairs_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let store = dir.path().join("store");
    let store_arg = store.to_str().unwrap();
    let data_arg = data.to_str().unwrap();
    rankd_ok(["publish", "--data-dir", data_arg, "--store", store_arg]);
    let verify = || rankd(&["store", "verify", "--store", store_arg, "--json"]);
    let out = verify();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["damaged"], 0, "{report}");
    // index.toml's blob, a byte changed in place.
    let toml = std::fs::read(data.join("index.toml")).unwrap();
    let sha = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&toml));
    let blob = walkdir::WalkDir::new(&store)
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy() == sha)
        .unwrap()
        .into_path();
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[0] ^= 0x20;
    std::fs::write(&blob, &bytes).unwrap();
    let out = verify();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["damaged"], 1, "{report}");
    assert!(
        report["shards"][0]["damaged"][0]
            .as_str()
            .unwrap()
            .starts_with("index.toml"),
        "{report}"
    );
    assert!(
        stderr(&out).contains("publish --verify"),
        "{}",
        stderr(&out)
    );
    let out = rankd_ok([
        "publish",
        "--data-dir",
        data_arg,
        "--store",
        store_arg,
        "--verify",
    ]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("repaired the store's blob of index.toml"),
        "{said}"
    );
    let out = verify();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `rankd store repair` uploads lost and damaged blobs again from copies in the `--from`
/// directories, found at the manifest's path or anywhere below by size and checksum; a file
/// at the right path with other content is not used, and what no directory holds is named
/// with exit 1, the store left as it was.
#[test]
fn store_repair_takes_copies_from_replicas_directories() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let store = dir.path().join("store");
    let store_arg = store.to_str().unwrap();
    rankd_ok([
        "publish",
        "--data-dir",
        data.to_str().unwrap(),
        "--store",
        store_arg,
    ]);
    let blob_of = |file: &std::path::Path| {
        let sha = format!(
            "{:x}",
            <sha2::Sha256 as sha2::Digest>::digest(std::fs::read(file).unwrap())
        );
        walkdir::WalkDir::new(&store)
            .into_iter()
            .filter_map(Result::ok)
            .find(|e| e.file_name().to_string_lossy() == sha)
            .unwrap()
            .into_path()
    };
    // index.toml's blob damaged in place; the largest other file's blob lost.
    let toml_blob = blob_of(&data.join("index.toml"));
    let mut bytes = std::fs::read(&toml_blob).unwrap();
    bytes[0] ^= 0x20;
    std::fs::write(&toml_blob, &bytes).unwrap();
    let largest = walkdir::WalkDir::new(&data)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.file_name() != "index.toml")
        .max_by_key(|e| e.metadata().unwrap().len())
        .unwrap()
        .into_path();
    let relative = largest.strip_prefix(&data).unwrap().to_path_buf();
    std::fs::remove_file(blob_of(&largest)).unwrap();
    let repair = |from: &[&std::path::Path]| {
        let mut args = vec!["store", "repair", "--store", store_arg, "--json"];
        for d in from {
            args.extend(["--from", d.to_str().unwrap()]);
        }
        rankd(&args)
    };
    // A directory with index.toml at its path but other content, and the lost file nowhere.
    let wrong = dir.path().join("wrong");
    std::fs::create_dir_all(&wrong).unwrap();
    std::fs::write(wrong.join("index.toml"), &bytes).unwrap();
    let out = repair(&[&wrong]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["repaired"], 0, "{report}");
    assert_eq!(report["unrepaired"], 2, "{report}");
    assert!(
        stderr(&out).contains("still lost or damaged"),
        "{}",
        stderr(&out)
    );
    let out = rankd(&["store", "verify", "--store", store_arg, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    // A replica's directory holds the lost file at its path; index.toml is found elsewhere
    // under another name, by its size and checksum.
    let replica = dir.path().join("replica");
    std::fs::create_dir_all(replica.join(relative.parent().unwrap())).unwrap();
    std::fs::copy(&largest, replica.join(&relative)).unwrap();
    let stash = dir.path().join("stash/deep");
    std::fs::create_dir_all(&stash).unwrap();
    std::fs::copy(data.join("index.toml"), stash.join("renamed.bin")).unwrap();
    let out = repair(&[&wrong, &replica, &dir.path().join("stash")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["repaired"], 2, "{report}");
    assert_eq!(report["unrepaired"], 0, "{report}");
    let out = rankd(&["store", "verify", "--store", store_arg, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Without --from, the copies come from --data-dir (here the writer's index).
    std::fs::remove_file(blob_of(&largest)).unwrap();
    let out = rankd(&[
        "store",
        "repair",
        "--store",
        store_arg,
        "--data-dir",
        data.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["repaired"], 1, "{report}");
}
