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

/// The word every document of one run (`seed`) carries, so that one search lists them all
/// however many runs wrote to the same cluster.
pub fn run_word(seed: u64) -> String {
    format!("qqrun{seed}x")
}

fn ndjson(docs: &[(String, u64)], seed: u64) -> Vec<u8> {
    docs.iter()
        .map(|(id, v)| {
            serde_json::json!({
                "id": id,
                "title": format!("{id} version {v}"),
                "body": format!("{COMMON} {} {id} v{v}x", run_word(seed)),
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
                Some(("application/x-ndjson", &ndjson(&docs, seed))),
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
/// the root: each id holds its last acknowledged outcome on both copies, or the outcome of a
/// failed call; both copies agree; and the root lists each of the history's documents once,
/// and exactly those the leaves hold.
/// Returns the acknowledged and the failed calls.
pub fn check(
    history: &History,
    pairs: &[(String, String)],
    root: &str,
    seed: u64,
    what: &str,
) -> (usize, usize) {
    let shards = pairs.len() as u32;
    let (mut acknowledged, mut failed) = (0, 0);
    let mut present = BTreeSet::new();
    for (id, ops) in history {
        acknowledged += ops.iter().filter(|(_, ok)| *ok).count();
        failed += ops.iter().filter(|(_, ok)| !*ok).count();
        // What the copies may serve: the last acknowledged outcome (none acknowledged: the
        // id never written), or the outcome of a failed call. A failed call is Jepsen's
        // indeterminate one: it may have taken effect, and at any time after it was made,
        // even after a later acknowledged call (a request the root gave up on can still
        // reach the leaf). Nothing else: not an older acknowledged version, not a deletion
        // nobody asked for.
        let last_ok = ops.iter().rposition(|(_, ok)| *ok);
        let mut allowed = vec![last_ok.and_then(|i| ops[i].0)];
        allowed.extend(ops.iter().filter(|(_, ok)| !ok).map(|(op, _)| *op));
        let (primary, replica) = &pairs[shard_of(id, shards) as usize];
        let on_primary = served(primary, id);
        let on_replica = served(replica, id);
        assert_eq!(
            on_primary, on_replica,
            "{what}: {id} differs between its shard's primary and replica"
        );
        assert!(
            allowed.contains(&on_primary),
            "{what}: {id} serves {on_primary:?}, which no acknowledged write left and no \
             failed call after it could have: {ops:?}"
        );
        if on_primary.is_some() {
            present.insert(id.clone());
        }
    }
    let a = get(
        &format!("{root}/search?q={}&k=1000&fields=", run_word(seed)),
        None,
    );
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
