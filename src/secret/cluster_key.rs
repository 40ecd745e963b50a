//! The cluster key: the shared secret that every call between a collection's nodes carries
//! (`Authorization: Bearer KEY` on `/cluster/v1/*`), distinct from the admin token so that
//! a root never hands its clients' admin credential to its leaves, and a leaked cluster key
//! gives no admin rights. A leaf's cluster calls read every document of its shard, so they
//! answer only a caller that holds the key; a node started in a cluster role without one
//! refuses to start unless told `--insecure-cluster`, and then only on a loopback address.
//!
//! Compared in constant time ([`super::Secret`]: SHA-256 digests, so neither the
//! key's content nor its length leaks through timing).

use std::sync::Arc;

use super::Secret;

/// The shortest key accepted, as for the admin token.
pub const MIN_KEY_LEN: usize = 16;

/// A cluster key: what a root sends, what a leaf checks.
#[derive(Clone)]
pub struct ClusterKey {
    /// `Bearer KEY`, the header value sent.
    bearer: Arc<str>,
    check: Arc<Secret>,
    /// The key the gossip's datagrams are authenticated with (`crate::cluster::gossip_auth`),
    /// derived from the secret for that use alone.
    gossip: [u8; 32],
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(..)")
    }
}

impl PartialEq for ClusterKey {
    fn eq(&self, other: &Self) -> bool {
        self.bearer == other.bearer
    }
}

impl ClusterKey {
    /// The key `secret` (surrounding whitespace trimmed: a key file's newline is no part of
    /// it), refused when shorter than [`MIN_KEY_LEN`].
    pub fn new(secret: &str) -> Result<ClusterKey, String> {
        let secret = secret.trim();
        if secret.len() < MIN_KEY_LEN {
            return Err(format!(
                "the cluster key must be at least {MIN_KEY_LEN} characters long"
            ));
        }
        use sha2::Digest;
        let mut gossip = sha2::Sha256::new();
        gossip.update(b"rankd/gossip-mac/v1\0");
        gossip.update(secret.as_bytes());
        Ok(ClusterKey {
            bearer: format!("Bearer {secret}").into(),
            check: Arc::new(Secret::new(secret)),
            gossip: gossip.finalize().into(),
        })
    }

    /// The key that authenticates the gossip's datagrams.
    pub fn gossip_key(&self) -> &[u8; 32] {
        &self.gossip
    }

    /// The `Authorization` header value a root sends.
    pub fn bearer(&self) -> &str {
        &self.bearer
    }

    /// Whether `secret` (an `Authorization: Bearer` header's) is this key.
    pub fn matches(&self, secret: &str) -> bool {
        self.check.matches(secret)
    }
}

/// How a node in a cluster role trusts its peers.
#[derive(Debug, Clone)]
pub enum Trust {
    /// Calls carry the key (a root) or must carry it (a leaf).
    Key(ClusterKey),
    /// `--insecure-cluster`: no key sent or checked (loopback tests only).
    Insecure,
}

impl Trust {
    /// The key, if any.
    pub fn key(&self) -> Option<&ClusterKey> {
        match self {
            Trust::Key(k) => Some(k),
            Trust::Insecure => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_key() {
        let key = ClusterKey::new("  cluster-key-0123456789\n").unwrap();
        assert_eq!(key.bearer(), "Bearer cluster-key-0123456789");
        assert!(key.matches("cluster-key-0123456789"));
        assert!(!key.matches("cluster-key-012345678"));
        assert!(!key.matches("Bearer cluster-key-0123456789"));
        assert!(ClusterKey::new("short").is_err());
    }
}
