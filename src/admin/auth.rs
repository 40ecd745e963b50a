//! The admin bearer token, compared in constant time: the comparison is between SHA-256
//! digests, so neither the content nor the length of the configured token leaks through
//! response timing.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub struct AdminToken {
    digest: [u8; 32],
}

impl AdminToken {
    pub fn new(token: &str) -> AdminToken {
        AdminToken {
            digest: Sha256::digest(token.as_bytes()).into(),
        }
    }

    /// Whether `candidate` is the token.
    pub fn matches(&self, candidate: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(candidate.as_bytes()).into();
        digest.ct_eq(&self.digest).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_matches() {
        let t = AdminToken::new("correct horse battery staple");
        assert!(t.matches("correct horse battery staple"));
        assert!(!t.matches("correct horse battery stapl"));
        assert!(!t.matches("correct horse battery staple "));
        assert!(!t.matches(""));
    }
}
