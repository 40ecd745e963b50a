//! Which replica serves what: rendezvous hashing (highest random weight, Thaler & Ravishankar
//! 1998) over the replicas of a shard (`docs/design/scale-out.md` §7.2).
//!
//! Every node `n` gets the weight `h64("rankd/hrw/v1", n, key)` for a key (a shard, or a shard
//! and a request), and the nodes in descending weight are the order to try them in. Two
//! properties make it the placement rule:
//!
//! - **Minimal movement.** A node's weight depends only on the node and the key, so removing a
//!   node changes the order only by dropping it: every key whose first node was another node
//!   keeps it. Adding a node moves only the keys it now wins (about 1/(n+1) of them).
//! - **Agreement without coordination.** Every root computes the same order from the same set
//!   of nodes, with no shared state: [`super::routing::h64`] is SHA-256 (a fixed standard), not
//!   a std hasher whose algorithm may change between Rust releases, and ties (which need a
//!   64-bit collision) fall back to the node's name.
//!
//! The crates on crates.io (`rendezvous_hash`, `hrw-hash`, `hrw`) compute the same idea over
//! hashers whose output they do not promise to keep; the rule is a sort over `h64`.

use super::routing::h64;

/// The weight of `node` for `key`.
pub fn weight(node: &str, key: &[u8]) -> u64 {
    h64(&[b"rankd/hrw/v1", node.as_bytes(), key])
}

/// The positions of `nodes` in rendezvous order for `key`: highest weight first, ties by name.
pub(crate) fn hrw_order<S: AsRef<str>>(key: &[u8], nodes: &[S]) -> Vec<usize> {
    let mut weighted: Vec<(u64, &str, usize)> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (weight(n.as_ref(), key), n.as_ref(), i))
        .collect();
    weighted.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    weighted.into_iter().map(|(_, _, i)| i).collect()
}

/// The key of shard `shard` of `collection`: where it is placed.
pub(crate) fn shard_key(collection: &str, shard: u32) -> Vec<u8> {
    format!("{collection}/{shard}").into_bytes()
}

/// The key of one request's calls to shard `shard`: the replica a request tries first spreads
/// over a shard's replicas, deterministically (a request number reproduces its order).
pub(crate) fn request_key(shard: usize, request: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(16);
    key.extend_from_slice(&(shard as u64).to_le_bytes());
    key.extend_from_slice(&request.to_le_bytes());
    key
}

/// `nodes` sorted in rendezvous order for `key`.
pub fn ordered<S: AsRef<str> + Clone>(key: &[u8], nodes: &[S]) -> Vec<S> {
    hrw_order(key, nodes)
        .into_iter()
        .map(|i| nodes[i].clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: [&str; 4] = ["leaf-a", "leaf-b", "leaf-c", "leaf-d"];

    /// Pinned against an independent implementation: Python's `hashlib.sha256` with the same
    /// framing (each part prefixed by its length as 8 little-endian bytes, first 8 bytes of the
    /// digest big-endian), sorted by weight descending, then name:
    ///
    /// ```python
    /// def h64(parts):
    ///     s = hashlib.sha256()
    ///     for p in parts: s.update(struct.pack('<Q', len(p))); s.update(p)
    ///     return int.from_bytes(s.digest()[:8], 'big')
    /// w = [(h64([b"rankd/hrw/v1", n.encode(), key]), n) for n in nodes]
    /// w.sort(key=lambda t: (-t[0], t[1]))
    /// ```
    #[test]
    fn order_is_pinned() {
        assert_eq!(weight("leaf-a", b""), 0xc8c9_00f2_e756_5d9a);
        assert_eq!(weight("leaf-a", b"main/0"), 0x7f24_4730_9210_f4e3);
        for (key, want) in [
            (&b""[..], ["leaf-b", "leaf-a", "leaf-d", "leaf-c"]),
            (&b"main/0"[..], ["leaf-b", "leaf-a", "leaf-c", "leaf-d"]),
            (&b"main/1"[..], ["leaf-d", "leaf-b", "leaf-a", "leaf-c"]),
            (&b"main/2"[..], ["leaf-b", "leaf-d", "leaf-c", "leaf-a"]),
            (
                &b"cranfield/7"[..],
                ["leaf-d", "leaf-a", "leaf-b", "leaf-c"],
            ),
        ] {
            assert_eq!(
                ordered(key, &NODES),
                want,
                "{:?}",
                String::from_utf8_lossy(key)
            );
        }
        assert_eq!(shard_key("main", 2), b"main/2");
    }

    /// Removing a node moves only the keys whose first node it was, and the others keep their
    /// whole order (less the removed node).
    #[test]
    fn removing_a_node_moves_only_its_keys() {
        let nodes: Vec<String> = (0..7).map(|i| format!("leaf-{i}")).collect();
        for gone in 0..nodes.len() {
            let rest: Vec<String> = nodes
                .iter()
                .filter(|n| **n != nodes[gone])
                .cloned()
                .collect();
            for k in 0..2_000u32 {
                let key = shard_key("c", k);
                let before: Vec<String> = ordered(&key, &nodes)
                    .into_iter()
                    .filter(|n| *n != nodes[gone])
                    .collect();
                assert_eq!(ordered(&key, &rest), before, "key {k} without {gone}");
            }
        }
    }

    /// The first node of 60 000 keys over 6 nodes: each within 5% of the mean (the binomial's
    /// standard deviation is 0.9% of it, so 5% is over five of them).
    #[test]
    fn spread_is_near_uniform() {
        let nodes: Vec<String> = (0..6).map(|i| format!("http://10.0.0.{i}:8101")).collect();
        let mut first = [0usize; 6];
        let keys = 60_000u64;
        for k in 0..keys {
            first[hrw_order(&request_key(3, k), &nodes)[0]] += 1;
        }
        let mean = keys as f64 / 6.0;
        for (n, &c) in first.iter().enumerate() {
            assert!(
                (c as f64 - mean).abs() < 0.05 * mean,
                "node {n} first for {c} keys; mean {mean}: {first:?}"
            );
        }
    }

    #[test]
    fn ties_and_empty() {
        assert!(hrw_order::<&str>(b"k", &[]).is_empty());
        // The same name twice: equal weights, kept in a defined order.
        assert_eq!(hrw_order(b"k", &["x", "x"]).len(), 2);
    }
}
