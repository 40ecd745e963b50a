//! Events per second per client address: a token bucket per address holding at most one
//! second's worth, so a client may send a burst of that size and then its rate.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::Recover;

/// Addresses tracked at once; beyond, full buckets are forgotten (a full bucket is what an
/// untracked address starts with), so a flood of addresses cannot exhaust memory.
const MAX_TRACKED: usize = 100_000;

pub struct ClientBudget {
    per_second: f64,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl ClientBudget {
    pub fn new(per_second: u32) -> ClientBudget {
        ClientBudget {
            per_second: f64::from(per_second),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes `n` events from `ip`'s budget, or `Err(wait)` (taking nothing) when it holds
    /// fewer: the client may retry after `wait`.
    pub fn take(&self, ip: IpAddr, n: usize, now: Instant) -> Result<(), Duration> {
        let n = n as f64;
        let mut buckets = self.buckets.locked();
        if buckets.len() >= MAX_TRACKED && !buckets.contains_key(&ip) {
            let (rate, cap) = (self.per_second, self.per_second);
            buckets.retain(|_, (tokens, at)| {
                *tokens + rate * now.saturating_duration_since(*at).as_secs_f64() < cap
            });
        }
        let (tokens, at) = buckets.entry(ip).or_insert((self.per_second, now));
        *tokens = (*tokens + self.per_second * now.saturating_duration_since(*at).as_secs_f64())
            .min(self.per_second);
        *at = now;
        if *tokens >= n {
            *tokens -= n;
            Ok(())
        } else {
            let missing = n.min(self.per_second) - *tokens;
            Err(Duration::from_secs_f64(
                (missing / self.per_second).max(0.001),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let budget = ClientBudget::new(100);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let t0 = Instant::now();
        assert_eq!(budget.take(a, 100, t0), Ok(()));
        let wait = budget.take(a, 10, t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        assert_eq!(
            budget.take(b, 50, t0),
            Ok(()),
            "other addresses are not affected"
        );
        // A tenth of a second refills ten events.
        assert_eq!(budget.take(a, 10, t0 + Duration::from_millis(100)), Ok(()));
        assert!(budget.take(a, 1, t0 + Duration::from_millis(100)).is_err());
        // A request larger than the burst never fits.
        assert!(budget.take(b, 101, t0 + Duration::from_secs(10)).is_err());
    }
}
