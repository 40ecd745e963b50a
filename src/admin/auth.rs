//! The admin bearer token, compared in constant time: the comparison is between SHA-256
//! digests, so neither the content nor the length of the configured token leaks through
//! response timing. And the throttle on failed attempts: an address that sends more wrong
//! tokens than the limit within a minute is refused (429) until that minute is over, whatever
//! token it sends, so the token cannot be guessed at network speed.
//!
//! The throttle is a fixed window per address, written here rather than taken from
//! `governor`: governor's keyed limiter counts every check it is asked, while this one must
//! count only failures and still refuse a blocked address's next attempt, right or wrong,
//! which needs a look at the count without adding to it.

use crate::sync::Recover;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The admin token, compared in constant time ([`crate::secret::Secret`]).
pub use crate::secret::Secret as AdminToken;

/// The credentials of an `Authorization` header value of the `Bearer` scheme, `None` for
/// another scheme. The scheme is case-insensitive and separated from the credentials by one
/// or more spaces (RFC 7235 §2.1: `bearer`, `BEARER` are `Bearer`); whitespace at the ends
/// of the value is no part of it (RFC 9110 §5.5), so it is dropped here, while
/// [`AdminToken::matches`] compares exactly what remains.
pub fn bearer_credentials(value: &str) -> Option<&str> {
    let value = value.trim_matches([' ', '\t']);
    let (scheme, credentials) = value.split_once(' ').unwrap_or((value, ""));
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credentials.trim_start_matches(' '))
}

/// Failed admin authentications per client address, in fixed windows of [`WINDOW`].
pub struct FailureThrottle {
    /// Failures allowed per address and window; the next attempt is refused.
    limit: u32,
    windows: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

/// The throttle's window.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// Addresses tracked at once. Beyond, expired windows are dropped; if every tracked address is
/// still within its window, a new address is not tracked (logged), so a flood of addresses
/// cannot exhaust memory or lock the operator out.
const MAX_TRACKED: usize = 100_000;

impl FailureThrottle {
    pub fn new(limit: u32) -> FailureThrottle {
        FailureThrottle {
            limit,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// `Some(wait)` when `ip` has used up its failures in the current window: refuse it for
    /// `wait`.
    pub fn blocked(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let windows = self.windows.locked();
        let &(start, failures) = windows.get(&ip)?;
        let ends = start + WINDOW;
        (failures >= self.limit && now < ends).then(|| ends - now)
    }

    /// Counts one failed attempt of `ip`.
    pub fn failed(&self, ip: IpAddr, now: Instant) {
        let mut windows = self.windows.locked();
        if windows.len() >= MAX_TRACKED && !windows.contains_key(&ip) {
            windows.retain(|_, (start, _)| now < *start + WINDOW);
            if windows.len() >= MAX_TRACKED {
                tracing::warn!("admin authentication failures from too many addresses to track");
                return;
            }
        }
        let entry = windows.entry(ip).or_insert((now, 0));
        if now >= entry.0 + WINDOW {
            *entry = (now, 0);
        }
        entry.1 += 1;
        if entry.1 == self.limit {
            tracing::warn!(
                "{ip} sent {} wrong admin tokens within {} s: refusing its admin requests until \
                 the window ends",
                self.limit,
                WINDOW.as_secs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_after_the_limit_until_its_window_ends() {
        let t = FailureThrottle::new(3);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..2 {
            t.failed(a, t0);
            assert_eq!(t.blocked(a, t0), None);
        }
        t.failed(a, t0);
        let later = t0 + Duration::from_secs(20);
        assert_eq!(t.blocked(a, later), Some(Duration::from_secs(40)));
        assert_eq!(
            t.blocked(b, later),
            None,
            "other addresses are not affected"
        );
        assert_eq!(
            t.blocked(a, t0 + WINDOW),
            None,
            "a new window starts afresh"
        );
        t.failed(a, t0 + WINDOW);
        assert_eq!(t.blocked(a, t0 + WINDOW), None);
    }

    /// Issue 30, N18: the scheme is case-insensitive (RFC 7235), the credentials exact.
    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER s3cret",
            "Bearer   s3cret",
            " Bearer s3cret\t",
        ] {
            assert_eq!(bearer_credentials(value), Some("s3cret"), "{value:?}");
        }
        assert_eq!(bearer_credentials("Bearer"), Some(""));
        assert_eq!(bearer_credentials("Bearer s3 cret"), Some("s3 cret"));
        assert_eq!(bearer_credentials("Basic czNjcmV0"), None);
        assert_eq!(bearer_credentials("Bearers3cret"), None);
    }

    #[test]
    fn only_the_exact_token_matches() {
        let t = AdminToken::new("correct horse battery staple");
        assert!(t.matches("correct horse battery staple"));
        assert!(!t.matches("correct horse battery stapl"));
        assert!(!t.matches("correct horse battery staple "));
        assert!(!t.matches(""));
    }
}
