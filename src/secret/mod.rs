//! A secret compared in constant time: the admin token, the cluster key. Only its SHA-256
//! digest is kept, and candidates are compared digest to digest with `subtle`, so neither the
//! secret's content nor its length leaks through the time a wrong guess takes.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub struct Secret {
    digest: [u8; 32],
}

impl Secret {
    pub fn new(secret: &str) -> Secret {
        Secret {
            digest: Sha256::digest(secret.as_bytes()).into(),
        }
    }

    /// Whether `candidate` is the secret.
    pub fn matches(&self, candidate: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(candidate.as_bytes()).into();
        digest.ct_eq(&self.digest).into()
    }
}

mod cluster_key;
pub use cluster_key::{ClusterKey, Trust, MIN_KEY_LEN};
