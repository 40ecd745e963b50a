//! Members of the gossip authenticated with the cluster key: every node signs what it says
//! about itself — its node id and chitchat generation, role, HTTP URL, collection, shard and
//! shard count — with an HMAC-SHA256 tag under a key derived from the cluster key
//! (`crate::secret::ClusterKey::gossip_key`), gossiped as the key `rankd.auth`; a node reads a
//! member only when its tag is right (`super::membership::ClusterView`). So a host on the
//! gossip network without the key cannot announce a leaf, nor move a genuine leaf's URL to an
//! address of its own: a root never sends a search (and the cluster key) where a keyless host
//! told it to. Readiness and generation are not covered: they change while a node runs, and
//! forging them can only hide a leaf (as dropping its datagrams could), not redirect calls.
//!
//! Why tags on the members rather than on the datagrams: chitchat 0.13 keeps its envelope's
//! encoding private to the crate, so a transport of ours could not write or read its
//! messages; a tag on the members protects what a root acts on. The gossip is authenticated,
//! not encrypted: nothing it carries is secret.

use chitchat::ChitchatId;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::membership::NodeKeys;

/// The gossiped key holding a member's tag (hex).
pub const AUTH: &str = "rankd.auth";

fn mac(key: &[u8; 32], id: &ChitchatId, keys: &NodeKeys) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    let shard = keys.shard.map(|s| s.to_string()).unwrap_or_default();
    let shards = keys.shards.map(|s| s.to_string()).unwrap_or_default();
    let generation = id.generation_id.to_string();
    for part in [
        "rankd/gossip-member/v1",
        &*id.node_id,
        generation.as_str(),
        keys.role.as_str(),
        keys.api_url.as_str(),
        keys.collection.as_str(),
        shard.as_str(),
        shards.as_str(),
    ] {
        // Length-prefixed, so no two different members write the same bytes.
        m.update(&(part.len() as u64).to_le_bytes());
        m.update(part.as_bytes());
    }
    m
}

/// The tag of what node `id` says about itself (hex).
pub fn tag(key: &[u8; 32], id: &ChitchatId, keys: &NodeKeys) -> String {
    crate::text::config::hex(&mac(key, id, keys).finalize().into_bytes())
}

/// Whether `claimed` is the tag of what node `id` says about itself (compared in constant
/// time).
pub fn verify(key: &[u8; 32], id: &ChitchatId, keys: &NodeKeys, claimed: &str) -> bool {
    use subtle::ConstantTimeEq;
    tag(key, id, keys)
        .as_bytes()
        .ct_eq(claimed.as_bytes())
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(url: &str) -> NodeKeys {
        NodeKeys {
            role: "leaf".into(),
            api_url: url.into(),
            collection: "main".into(),
            shard: Some(1),
            shards: Some(3),
            generation: None,
            ready: true,
        }
    }

    #[test]
    fn a_member_verifies_with_its_key_and_its_own_claims_only() {
        let (key, other) = ([7u8; 32], [8u8; 32]);
        let id = ChitchatId::new("leaf-1".to_string(), 42, "127.0.0.1:7000".parse().unwrap());
        let keys = leaf("http://10.0.0.1:8080");
        let t = tag(&key, &id, &keys);
        assert!(verify(&key, &id, &keys, &t));
        assert!(!verify(&other, &id, &keys, &t), "another key");
        assert!(
            !verify(&key, &id, &leaf("http://10.6.6.6:8080"), &t),
            "a URL moved"
        );
        let restarted =
            ChitchatId::new("leaf-1".to_string(), 43, "127.0.0.1:7000".parse().unwrap());
        assert!(!verify(&key, &restarted, &keys, &t), "another generation");
        let mut shard = keys.clone();
        shard.shard = Some(2);
        assert!(!verify(&key, &id, &shard, &t), "another shard");
        assert!(!verify(&key, &id, &keys, "zz"), "not hex");
        assert!(!verify(&key, &id, &keys, ""), "empty");
        // Readiness and generation are outside the tag.
        let mut ready = keys.clone();
        ready.ready = false;
        ready.generation = Some(9);
        assert!(verify(&key, &id, &ready, &t));
    }
}
