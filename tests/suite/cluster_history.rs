//! Faults with writes and searches running, checked Jepsen's way (issue 31's acceptance): a
//! root over two shards, each a primary (`--primary`) and a replica following the store; a
//! writer sends batches and deletions through the root and records which were acknowledged,
//! a reader searches meanwhile, and one fault is injected and healed: `kill -9` or
//! `kill -STOP` of a replica or a primary, a truncated blob in the store, or a replica's disk
//! filled by another file (on a small tmpfs: skipped when one cannot be mounted). Then a history
//! checker reads every id from every leaf: each acknowledged write holds on the primary and
//! on the replica (its last version present, or absent after an acknowledged deletion), no id
//! is served twice, and the replicas equal their primaries within 5 s of the heal. Writes that
//! failed are indeterminate (they may or may not have happened), as Jepsen counts them.
//!
//! `cargo test --test tests -- cluster_history` runs one seed per fault; with
//! `RANKD_HISTORY_SEEDS=20` each fault runs 20 seeds (docs/RELIABILITY.md, "Faults under
//! writes"), and `RANKD_HISTORY_FAULT=NAME` runs one fault alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::util::*;
use rankd::cluster::routing::shard_of;

const TOKEN: &str = "history-admin-token";
const SHARDS: u32 = 2;
/// Every document's body carries it, so one search lists them all.
const COMMON: &str = "qqcommon";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    KillReplica,
    StopReplica,
    KillPrimary,
    StopPrimary,
    TruncateBlob,
    /// The replica's disk (a small tmpfs) filled by another file, then freed.
    FullDiskReplica,
}

const FAULTS: [Fault; 6] = [
    Fault::KillReplica,
    Fault::StopReplica,
    Fault::KillPrimary,
    Fault::StopPrimary,
    Fault::TruncateBlob,
    Fault::FullDiskReplica,
];

/// One leaf's process and how to start it again at the same address.
struct Leaf {
    server: Option<Server>,
    data: PathBuf,
    addr: String,
    primary: bool,
    shard: u32,
}

impl Leaf {
    fn start(data: &Path, store: &str, shard: u32, primary: bool, addr: &str) -> Leaf {
        let shard_arg = shard.to_string();
        let mut args = vec![
            "--addr",
            addr,
            "--role",
            "leaf",
            "--data-dir",
            data.to_str().unwrap(),
            "--store",
            store,
            "--shard-id",
            &shard_arg,
            "--poll-ms",
            "100",
        ];
        if primary {
            args.push("--primary");
        }
        let server = start_serve(&args, Some(TOKEN), &[]);
        let addr = server.base.trim_start_matches("http://").to_string();
        Leaf {
            server: Some(server),
            data: data.to_path_buf(),
            addr,
            primary,
            shard,
        }
    }

    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn pid(&self) -> String {
        self.server.as_ref().unwrap().child.id().to_string()
    }

    fn restart(&mut self, store: &str) {
        let again = Leaf::start(&self.data, store, self.shard, self.primary, &self.addr);
        *self = again;
    }
}

fn signal(pid: &str, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, pid])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// What the writer did to one id, in order: `Some(version)` written, `None` deleted; and
/// whether the call was acknowledged.
type History = BTreeMap<String, Vec<(Option<u64>, bool)>>;

fn ndjson(docs: &[(String, u64)]) -> Vec<u8> {
    docs.iter()
        .map(|(id, v)| {
            serde_json::json!({
                "id": id,
                "title": format!("{id} version {v}"),
                "body": format!("{COMMON} {id} v{v}x"),
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes()
}

/// Writes through `root` until `stop`: batches of 1–4 documents (new ids, or new versions of
/// earlier ones) and deletions of 1–2 earlier ids (`missing_ok`), recording each outcome.
fn writer(root: &str, seed: u64, stop: &AtomicBool, history: &Mutex<History>) {
    let mut rng = Lcg(seed);
    let mut next_id = 0u64;
    let mut version = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let known: Vec<String> = history.lock().unwrap().keys().cloned().collect();
        version += 1;
        let delete = !known.is_empty() && rng.below(4) == 0;
        let (ops, ok) = if delete {
            let ids: Vec<String> = (0..1 + rng.below(2))
                .map(|_| known[rng.below(known.len())].clone())
                .collect();
            let body = serde_json::json!({ "ids": ids }).to_string();
            let a = try_call(
                "POST",
                &format!("{root}/admin/documents/delete?missing_ok=true"),
                Some(TOKEN),
                Some(("application/json", body.as_bytes())),
            );
            let ok = matches!(&a, Ok(a) if a.status == 200);
            (ids.into_iter().map(|id| (id, None)).collect::<Vec<_>>(), ok)
        } else {
            let docs: Vec<(String, u64)> = (0..1 + rng.below(4))
                .map(|_| {
                    if known.is_empty() || rng.below(2) == 0 {
                        next_id += 1;
                        (format!("h{seed}-{next_id}"), version)
                    } else {
                        (known[rng.below(known.len())].clone(), version)
                    }
                })
                .collect();
            let a = try_call(
                "POST",
                &format!("{root}/admin/documents"),
                Some(TOKEN),
                Some(("application/x-ndjson", &ndjson(&docs))),
            );
            let ok = matches!(&a, Ok(a) if a.status == 200);
            let ops = docs.into_iter().map(|(id, v)| (id, Some(v))).collect();
            (ops, ok)
        };
        let mut h = history.lock().unwrap();
        for (id, op) in ops {
            h.entry(id).or_default().push((op, ok));
        }
        drop(h);
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What a leaf serves of `id`: its version, or `None`.
fn served(base: &str, id: &str) -> Option<u64> {
    let a = get(&format!("{base}/doc/{id}"), None);
    match a.status {
        404 => None,
        200 => {
            let title = a.body["title"].as_str().unwrap().to_string();
            Some(title.rsplit(' ').next().unwrap().parse().unwrap())
        }
        s => panic!("{base}/doc/{id}: {s} {}", a.body),
    }
}

/// The store generation a leaf serves.
fn generation(base: &str) -> Option<u64> {
    try_call(
        "GET",
        &format!("{base}/cluster/v1/info"),
        Some(CLUSTER_KEY),
        None,
    )
    .ok()
    .and_then(|a| a.body["store_generation"].as_u64())
}

/// The outcome of one seeded run.
#[derive(Debug)]
struct Run {
    acknowledged: usize,
    failed: usize,
    searches: usize,
    search_errors: usize,
    /// From the heal until every replica serves its primary's generation.
    converged: Duration,
}

fn run(fault: Fault, seed: u64, disk: Option<&Tmpfs>) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let seed_docs: Vec<String> = (0..16)
        .map(|i| {
            serde_json::json!({"id": format!("seed-{i}"), "title": format!("seed-{i} version 0"), "body": format!("{COMMON} seed {i}")})
                .to_string()
        })
        .collect();
    let input = dir.path().join("seed.jsonl");
    std::fs::write(&input, seed_docs.join("\n")).unwrap();
    let data = dir.path().join("collection");
    ingest_into("jsonl", &input, &data, Some(SHARDS));
    let store = dir.path().join("store").to_str().unwrap().to_string();
    let mut leaves: Vec<Leaf> = Vec::new();
    for s in 0..SHARDS {
        let p = data.join(format!("shards/{s}"));
        leaves.push(Leaf::start(&p, &store, s, true, "127.0.0.1:0"));
        let r = match disk {
            Some(fs) if s == 0 => fs.path().join(format!("replica-{seed}")),
            _ => dir.path().join(format!("replica{s}")),
        };
        leaves.push(Leaf::start(&r, &store, s, false, "127.0.0.1:0"));
    }
    let mut args = vec!["--role".to_string(), "root".to_string()];
    for s in 0..SHARDS as usize {
        args.push("--shard".into());
        args.push(format!(
            "{},{}",
            leaves[2 * s].base(),
            leaves[2 * s + 1].base()
        ));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let root = start_serve(&args, Some(TOKEN), &[]);

    let stop = Arc::new(AtomicBool::new(false));
    let history = Arc::new(Mutex::new(History::new()));
    let searches = Arc::new(AtomicUsize::new(0));
    let search_errors = Arc::new(AtomicUsize::new(0));
    let write_thread = {
        let (root, stop, history) = (root.base.clone(), stop.clone(), history.clone());
        std::thread::spawn(move || writer(&root, seed, &stop, &history))
    };
    let read_thread = {
        let (root, stop) = (root.base.clone(), stop.clone());
        let (n, errors) = (searches.clone(), search_errors.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let a = try_call("GET", &format!("{root}/search?q={COMMON}&k=10"), None, None);
                n.fetch_add(1, Ordering::Relaxed);
                if !matches!(a, Ok(a) if a.status == 200) {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    let mut rng = Lcg(seed ^ 0x5eed);
    std::thread::sleep(Duration::from_millis(500 + rng.below(500) as u64));
    let shard = match fault {
        Fault::FullDiskReplica => 0,
        _ => rng.below(SHARDS as usize),
    };
    let victim = match fault {
        Fault::KillReplica | Fault::StopReplica => 2 * shard + 1,
        _ => 2 * shard,
    };
    let down_for = Duration::from_millis(700 + rng.below(800) as u64);
    match fault {
        Fault::KillReplica | Fault::KillPrimary => {
            kill9(&mut leaves[victim].server.as_mut().unwrap().child);
            std::thread::sleep(down_for);
            leaves[victim].restart(&store);
        }
        Fault::StopReplica | Fault::StopPrimary => {
            let pid = leaves[victim].pid();
            signal(&pid, "-STOP");
            std::thread::sleep(down_for);
            signal(&pid, "-CONT");
        }
        Fault::TruncateBlob => {
            let blobs: Vec<PathBuf> = std::fs::read_dir(Path::new(&store).join("blobs"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            let blob = &blobs[rng.below(blobs.len())];
            let bytes = std::fs::read(blob).unwrap();
            std::fs::write(blob, &bytes[..bytes.len() / 2]).unwrap();
            std::thread::sleep(down_for);
        }
        Fault::FullDiskReplica => {
            let fs = disk.expect("a tmpfs for the full-disk fault");
            let filler = fs.path().join("filler");
            let mut f = std::fs::File::create(&filler).unwrap();
            let block = vec![7u8; 64 << 10];
            while std::io::Write::write_all(&mut f, &block).is_ok() {}
            drop(f);
            std::thread::sleep(down_for);
            std::fs::remove_file(&filler).unwrap();
        }
    }
    let healed = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    write_thread.join().unwrap();
    read_thread.join().unwrap();

    // Convergence: every replica serves its primary's generation.
    let converged = loop {
        let equal = (0..SHARDS as usize).all(|s| {
            let p = generation(&leaves[2 * s].base());
            p.is_some() && p == generation(&leaves[2 * s + 1].base())
        });
        if equal {
            break healed.elapsed();
        }
        assert!(
            healed.elapsed() < Duration::from_secs(30),
            "{fault:?} seed {seed}: replicas did not converge: {:?}",
            leaves
                .iter()
                .map(|l| generation(&l.base()))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    };

    // The history check, on every leaf.
    let history = history.lock().unwrap();
    let (mut acknowledged, mut failed) = (0, 0);
    let mut present = BTreeSet::new();
    let mut maybe = BTreeSet::new();
    for (id, ops) in history.iter() {
        acknowledged += ops.iter().filter(|(_, ok)| *ok).count();
        failed += ops.iter().filter(|(_, ok)| !*ok).count();
        let last_ok = ops.iter().rposition(|(_, ok)| *ok);
        let after_failed = ops
            .iter()
            .skip(last_ok.map_or(0, |i| i + 1))
            .any(|(_, ok)| !ok);
        let s = shard_of(id, SHARDS) as usize;
        let on_primary = served(&leaves[2 * s].base(), id);
        let on_replica = served(&leaves[2 * s + 1].base(), id);
        assert_eq!(
            on_primary, on_replica,
            "{fault:?} seed {seed}: {id} differs between shard {s}'s primary and replica"
        );
        if after_failed || last_ok.is_none() {
            // Indeterminate: an unacknowledged call may or may not have taken effect; but it
            // can only have written one of the versions sent.
            if let Some(v) = on_primary {
                assert!(
                    ops.iter().any(|(op, _)| *op == Some(v)),
                    "{fault:?} seed {seed}: {id} serves version {v}, never written: {ops:?}"
                );
            }
            maybe.insert(id.clone());
        } else {
            let want = ops[last_ok.unwrap()].0;
            assert_eq!(
                on_primary, want,
                "{fault:?} seed {seed}: acknowledged {id} lost or stale: {ops:?}"
            );
        }
        if on_primary.is_some() {
            present.insert(id.clone());
        }
    }
    // No id served twice, and the root lists exactly what the leaves hold.
    let a = get(
        &format!("{}/search?q={COMMON}&k=1000&fields=", root.base),
        None,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let listed: Vec<String> = a.body["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .filter(|id| !id.starts_with("seed-"))
        .collect();
    let unique: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        listed.len(),
        "{fault:?} seed {seed}: an id listed twice"
    );
    assert_eq!(unique, present, "{fault:?} seed {seed}: the root's list");
    drop(root);
    drop(leaves);
    if let Some(fs) = disk {
        let _ = std::fs::remove_dir_all(fs.path().join(format!("replica-{seed}")));
    }
    Run {
        acknowledged,
        failed,
        searches: searches.load(Ordering::Relaxed),
        search_errors: search_errors.load(Ordering::Relaxed),
        converged,
    }
}

fn seeds() -> u64 {
    std::env::var("RANKD_HISTORY_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

fn each_fault(faults: &[Fault]) {
    // `RANKD_HISTORY_FAULT=KillPrimary` runs that fault alone.
    let only = std::env::var("RANKD_HISTORY_FAULT").ok();
    for &fault in faults {
        if only.as_ref().is_some_and(|f| *f != format!("{fault:?}")) {
            continue;
        }
        let disk = match fault {
            Fault::FullDiskReplica => match Tmpfs::mount("24m") {
                Ok(fs) => Some(fs),
                Err(why) => {
                    eprintln!("history {fault:?}: skipped, it needs a 24 MB tmpfs ({why})");
                    continue;
                }
            },
            _ => None,
        };
        let mut worst = Duration::ZERO;
        let (mut acked, mut failed, mut searches, mut errors) = (0, 0, 0, 0);
        for seed in 1..=seeds() {
            let r = run(fault, seed, disk.as_ref());
            assert!(
                r.converged <= Duration::from_secs(5),
                "{fault:?} seed {seed}: replicas equal only {:?} after the heal",
                r.converged
            );
            worst = worst.max(r.converged);
            acked += r.acknowledged;
            failed += r.failed;
            searches += r.searches;
            errors += r.search_errors;
        }
        eprintln!(
            "history {fault:?}: {} seeds, {acked} acknowledged writes held, {failed} failed \
             (indeterminate), {searches} searches ({errors} errors), replicas equal within \
             {worst:?} of the heal",
            seeds()
        );
    }
}

#[test]
fn faults_lose_no_acknowledged_write_and_replicas_converge() {
    each_fault(&FAULTS);
}
