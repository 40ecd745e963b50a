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

/// The gossiped key holding a member's tag (hex).
pub const AUTH: &str = "rankd.auth";

/// `claims`: what the node says about itself that the tag covers, in a fixed order
/// (`super::membership::NodeKeys::claims`: role, URL, collection, shard, shard count).
fn mac(key: &[u8; 32], id: &ChitchatId, claims: &[String]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    let generation = id.generation_id.to_string();
    let head = ["rankd/gossip-member/v1", &*id.node_id, generation.as_str()];
    for part in head.into_iter().chain(claims.iter().map(String::as_str)) {
        // Length-prefixed, so no two different members write the same bytes.
        m.update(&(part.len() as u64).to_le_bytes());
        m.update(part.as_bytes());
    }
    m
}

/// The tag of what node `id` says about itself (hex).
pub fn tag(key: &[u8; 32], id: &ChitchatId, claims: &[String]) -> String {
    crate::text::config::hex(&mac(key, id, claims).finalize().into_bytes())
}

/// Whether `claimed` is the tag of what node `id` says about itself (compared in constant
/// time).
pub fn verify(key: &[u8; 32], id: &ChitchatId, claims: &[String], claimed: &str) -> bool {
    use subtle::ConstantTimeEq;
    tag(key, id, claims)
        .as_bytes()
        .ct_eq(claimed.as_bytes())
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(url: &str, shard: u32) -> Vec<String> {
        ["leaf", url, "main", &shard.to_string(), "3"]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn a_member_verifies_with_its_key_and_its_own_claims_only() {
        let (key, other) = ([7u8; 32], [8u8; 32]);
        let addr = "127.0.0.1:7000".parse().unwrap();
        let id = ChitchatId::new("leaf-1".to_string(), 42, addr);
        let mine = claims("http://10.0.0.1:8080", 1);
        let t = tag(&key, &id, &mine);
        assert!(verify(&key, &id, &mine, &t));
        assert!(!verify(&other, &id, &mine, &t), "another key");
        let moved = claims("http://10.6.6.6:8080", 1);
        assert!(!verify(&key, &id, &moved, &t), "a URL moved");
        let restarted = ChitchatId::new("leaf-1".to_string(), 43, addr);
        assert!(!verify(&key, &restarted, &mine, &t), "another generation");
        let shard = claims("http://10.0.0.1:8080", 2);
        assert!(!verify(&key, &id, &shard, &t), "another shard");
        assert!(!verify(&key, &id, &mine, "zz"), "not hex");
        assert!(!verify(&key, &id, &mine, ""), "empty");
        // Two claims joined differently are different claims.
        let split = ["leafh", "ttp://10.0.0.1:8080", "main", "1", "3"].map(String::from);
        assert!(!verify(&key, &id, &split, &t), "a boundary moved");
    }
}
