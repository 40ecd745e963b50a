//! Which shard holds a document: `jump_hash(h64(id), shards)`.
//!
//! Every process of a cluster (the indexer that routes a batch, the root that forwards
//! `/doc/{id}`) must compute the same shard for an id, release after release, so the key is
//! a fixed standard hash (the first 8 bytes of SHA-256 over a framed, versioned input), never
//! std's `DefaultHasher`, whose algorithm may change between Rust releases. Jump consistent
//! hashing (Lamping & Veach 2014) then moves only 1/(n+1) of the documents when a collection
//! grows from n to n+1 shards. Both are a few lines over `sha2`, which rankd already uses; the
//! jump-hash crates on crates.io wrap the same loop around a hasher of their choosing.

use sha2::{Digest, Sha256};

/// The scheme's name, stored with a sharded collection so that a binary that routes
/// differently refuses it instead of misplacing documents.
pub const HASH_SCHEME: &str = "sha256-jump-v1";

/// A 64-bit key for `parts`: SHA-256 over each part prefixed by its length (so that no two
/// different part lists hash the same bytes), first 8 bytes, big-endian.
pub(crate) fn h64(parts: &[&[u8]]) -> u64 {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    let digest = hasher.finalize();
    u64::from_be_bytes(digest[..8].try_into().expect("SHA-256 has 32 bytes"))
}

/// Jump consistent hash: the bucket in `0..buckets` of `key` (`buckets ≥ 1`).
pub(crate) fn jump_hash(mut key: u64, buckets: u32) -> u32 {
    assert!(buckets > 0, "jump_hash needs at least one bucket");
    let (mut b, mut j) = (-1i64, 0i64);
    while j < i64::from(buckets) {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    b as u32
}

/// The shard of the document with id `id` in a collection of `shards` shards.
pub fn shard_of(id: &str, shards: u32) -> u32 {
    jump_hash(h64(&[b"rankd/doc/v1", id.as_bytes()]), shards)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values ClickHouse's `jumpConsistentHash` test expects (its reference file), and the
    /// paper's example from the Python `jump` package's documentation (256 → 520 of 1024).
    #[test]
    fn jump_hash_matches_published_values() {
        for (key, buckets, want) in [
            (1u64, 1u32, 0u32),
            (42, 57, 43),
            (256, 1024, 520),
            (3_735_883_980, 1, 0),
            (3_735_883_980, 666, 361),
            (16_045_690_984_833_335_023, 255, 237),
        ] {
            assert_eq!(jump_hash(key, buckets), want, "jump_hash({key}, {buckets})");
        }
    }

    /// Growing from n to n + 1 shards moves a document only to the new shard, and about
    /// 1/(n+1) of them move.
    #[test]
    fn growing_moves_documents_only_to_the_new_shard() {
        let ids: Vec<String> = (0..20_000).map(|i| format!("doc-{i}")).collect();
        for n in 1..8u32 {
            let moved = ids
                .iter()
                .filter(|id| {
                    let (before, after) = (shard_of(id, n), shard_of(id, n + 1));
                    assert!(before == after || after == n, "{id}: {before} → {after}");
                    before != after
                })
                .count();
            let expected = ids.len() as f64 / f64::from(n + 1);
            assert!(
                (moved as f64 - expected).abs() < 0.1 * expected,
                "{n} → {}: {moved} moved, expected about {expected}",
                n + 1
            );
        }
    }

    /// The routing of fixed ids never changes (a change would misplace every stored document
    /// of every existing cluster). The pinned values come from an independent implementation:
    /// Python's `hashlib.sha256` with the same framing and the paper's loop.
    #[test]
    fn routing_is_pinned() {
        let got: Vec<u32> = [
            "",
            "a",
            "std/vec/struct.Vec.html",
            "1400",
            "https://example.org/",
        ]
        .iter()
        .flat_map(|id| [shard_of(id, 3), shard_of(id, 7)])
        .collect();
        assert_eq!(got, PINNED);
    }

    const PINNED: [u32; 10] = [2, 5, 1, 3, 0, 4, 2, 4, 1, 1];

    #[test]
    fn h64_frames_its_parts() {
        assert_ne!(h64(&[b"ab", b"c"]), h64(&[b"a", b"bc"]));
        assert_eq!(h64(&[b"ab", b"c"]), h64(&[b"ab", b"c"]));
    }
}
