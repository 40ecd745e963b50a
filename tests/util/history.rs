//! Jepsen-style histories of writes through a root, and their checker (issue 31): a writer
//! sends batches and deletions through a root and records which were acknowledged; after the
//! fault, [`check`] reads every id from the primary and the replica of its shard. Used by
//! `tests/suite/cluster_history.rs` (process faults) and `tests/cluster_netns.rs` (link
//! faults).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rankd::cluster::routing::shard_of;

use super::*;

/// Every document's body carries it, so one search lists them all.
pub const COMMON: &str = "qqcommon";

/// What the writer did to one id, in order: `Some(version)` written, `None` deleted; and
/// whether the call was acknowledged.
pub type History = BTreeMap<String, Vec<(Option<u64>, bool)>>;

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

/// `n` seed documents (ids `seed-0..n`) as JSON lines, to ingest before the history.
pub fn seed_docs(n: usize) -> String {
    (0..n)
        .map(|i| {
            serde_json::json!({"id": format!("seed-{i}"), "title": format!("seed-{i} version 0"), "body": format!("{COMMON} seed {i}")})
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Writes through `root` until `stop`: batches of 1–4 documents (new ids, or new versions of
/// earlier ones) and deletions of 1–2 earlier ids (`missing_ok`), recording each outcome.
pub fn writer(root: &str, seed: u64, stop: &AtomicBool, history: &Mutex<History>) {
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
pub fn generation(base: &str) -> Option<u64> {
    try_call(
        "GET",
        &format!("{base}/cluster/v1/info"),
        Some(CLUSTER_KEY),
        None,
    )
    .ok()
    .and_then(|a| a.body["store_generation"].as_u64())
}

/// Waits until each shard's replica serves its primary's generation (`pairs[s]`: the base
/// URLs of shard `s`'s primary and replica); the time since `healed`. Fails after 30 s.
pub fn converged(pairs: &[(String, String)], healed: Instant, what: &str) -> Duration {
    loop {
        let equal = pairs.iter().all(|(p, r)| {
            let g = generation(p);
            g.is_some() && g == generation(r)
        });
        if equal {
            return healed.elapsed();
        }
        assert!(
            healed.elapsed() < Duration::from_secs(30),
            "{what}: replicas did not converge: {:?}",
            pairs
                .iter()
                .map(|(p, r)| (generation(p), generation(r)))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Checks `history` against the leaves (`pairs[s]`: shard `s`'s primary and replica) and
/// the root: each id's last acknowledged write holds on both copies (an id whose last call
/// failed may hold either outcome, of a version that was sent), both copies agree, and the
/// root lists each of the history's documents once, and exactly those the leaves hold.
/// Returns the acknowledged and the failed calls.
pub fn check(
    history: &History,
    pairs: &[(String, String)],
    root: &str,
    what: &str,
) -> (usize, usize) {
    let shards = pairs.len() as u32;
    let (mut acknowledged, mut failed) = (0, 0);
    let mut present = BTreeSet::new();
    for (id, ops) in history {
        acknowledged += ops.iter().filter(|(_, ok)| *ok).count();
        failed += ops.iter().filter(|(_, ok)| !*ok).count();
        let last_ok = ops.iter().rposition(|(_, ok)| *ok);
        let after_failed = ops
            .iter()
            .skip(last_ok.map_or(0, |i| i + 1))
            .any(|(_, ok)| !ok);
        let (primary, replica) = &pairs[shard_of(id, shards) as usize];
        let on_primary = served(primary, id);
        let on_replica = served(replica, id);
        assert_eq!(
            on_primary, on_replica,
            "{what}: {id} differs between its shard's primary and replica"
        );
        match last_ok {
            Some(i) if !after_failed => assert_eq!(
                on_primary, ops[i].0,
                "{what}: acknowledged {id} lost or stale: {ops:?}"
            ),
            // Indeterminate: an unacknowledged call may or may not have taken effect, but it
            // can only have written one of the versions sent.
            _ => {
                if let Some(v) = on_primary {
                    assert!(
                        ops.iter().any(|(op, _)| *op == Some(v)),
                        "{what}: {id} serves version {v}, never written: {ops:?}"
                    );
                }
            }
        }
        if on_primary.is_some() {
            present.insert(id.clone());
        }
    }
    let a = get(&format!("{root}/search?q={COMMON}&k=1000&fields="), None);
    assert_eq!(a.status, 200, "{}", a.body);
    let listed: Vec<String> = a.body["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .filter(|id| history.contains_key(id))
        .collect();
    let unique: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(unique.len(), listed.len(), "{what}: an id listed twice");
    assert_eq!(unique, present, "{what}: the root's list");
    (acknowledged, failed)
}
