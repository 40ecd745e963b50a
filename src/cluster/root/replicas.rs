//! A shard's replicas as the root sees them, and which one a search calls.
//!
//! Health comes from two sources. A replica that failed a call is skipped for
//! [`RETRY_AFTER`], then tried again, so a recovered leaf is used again without a restart.
//! And the root's health checks (`super::Root`'s task, every [`HEALTH_INTERVAL`]) call every
//! replica's `info` within the leaf timeout, with or without traffic: a replica that fails
//! its check counts as down until a check passes, so searches call its shard's other
//! replicas first (a dead or hung replica beside a healthy one costs them nothing) and
//! `/readyz` follows deaths and returns within one interval plus the timeout. A search still
//! tries such a replica when its shard has no other left: a check that fails under load
//! (a slow `info`, not a dead leaf) must not drop a shard from answers that its leaf could
//! still give. Unless a call to it failed too: then its circuit is open
//! ([`Replica::may_call`]) and only one search per [`RETRY_AFTER`] probes it, so a shard
//! whose only replica hangs costs the probing search the leaf timeout and the others
//! nothing (they answer without the shard, `partial`). Active checks of a fixed endpoint, as load balancers run them (Envoy's,
//! HAProxy's); no failure detector of our own: the gossip's decides membership.
//! Membership by gossip (`crate::cluster::membership`) decides which replicas a shard has;
//! failover within a search does not wait for its failure detector. A search tries a shard's
//! replicas in rendezvous order for its number (`crate::cluster::placement::request_key`),
//! which spreads searches evenly and moves only a leaving replica's share when the replicas
//! change.

use crate::sync::Recover;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::transport::ShardClient;
use crate::search::ShardFailure;

/// How long a failed replica is skipped.
pub const RETRY_AFTER: Duration = Duration::from_millis(500);

/// How often the root checks every replica (`RootOptions::health_interval`'s default).
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(1);

/// Adaptive replica selection: a replica whose recent first-phase calls took more than
/// `SLOWER` times the fastest replica's of its shard, and at least [`SLOWER_BY`] more, is
/// called after the others.
const SLOWER: f64 = 2.0;
const SLOWER_BY: Duration = Duration::from_millis(1);
/// A replica's recent call time is forgotten after this long without a call, so a replica
/// that was slow and got no traffic since is tried again (its next calls measure it anew).
const LATENCY_MEMORY: Duration = Duration::from_secs(5);
/// The weight of a new call in the moving mean of call times.
const LATENCY_WEIGHT: f64 = 0.2;

/// One replica of a shard and the root's view of its health.
pub struct Replica {
    pub client: Arc<dyn ShardClient>,
    down_until: Mutex<Option<Instant>>,
    /// Why its last health check failed; `None` while it passes (or before the first).
    check_failed: Mutex<Option<String>>,
    checked_down: AtomicBool,
    /// The moving mean of its recent first-phase call times (seconds), and when it was last
    /// updated.
    latency: Mutex<Option<(f64, Instant)>>,
}

impl Replica {
    pub fn new(client: Arc<dyn ShardClient>) -> Self {
        Replica {
            client,
            down_until: Mutex::new(None),
            check_failed: Mutex::new(None),
            checked_down: AtomicBool::new(false),
            latency: Mutex::new(None),
        }
    }

    /// Records the time of one of its first-phase calls that succeeded.
    pub fn observe_latency(&self, took: Duration) {
        let now = Instant::now();
        let x = took.as_secs_f64();
        let mut latency = self.latency.locked();
        *latency = Some(match *latency {
            Some((mean, at)) if at.elapsed() < LATENCY_MEMORY => {
                (mean + LATENCY_WEIGHT * (x - mean), now)
            }
            _ => (x, now),
        });
    }

    /// The moving mean of its recent first-phase call times, if it was called within
    /// [`LATENCY_MEMORY`].
    pub fn latency(&self) -> Option<Duration> {
        self.latency
            .locked()
            .filter(|(_, at)| at.elapsed() < LATENCY_MEMORY)
            .map(|(mean, _)| Duration::from_secs_f64(mean))
    }

    pub fn name(&self) -> &str {
        self.client.name()
    }

    /// Its last health check passed (or none has run), and no call failed within the last
    /// [`RETRY_AFTER`].
    pub fn up(&self) -> bool {
        if self.checked_down.load(Ordering::Acquire) {
            return false;
        }
        let down = self.down_until.locked();
        down.is_none_or(|t| Instant::now() >= t)
    }

    /// Whether a search may call it although it is not believed up ([`Replica::up`]), as a
    /// last resort for its shard. A circuit breaker: its circuit is open while its health
    /// check fails *and* a call to it failed within [`RETRY_AFTER`] — both the checks and
    /// the traffic say it does not answer — and then one search per [`RETRY_AFTER`] calls it
    /// (the probe; a success closes the circuit), while the others leave its shard to its
    /// other replicas or out of the answer at once instead of waiting for the leaf timeout.
    /// A replica whose check fails but whose calls succeed (a slow `info` under load) is
    /// still called: the traffic says it answers.
    pub fn may_call(&self) -> bool {
        if !self.checked_down.load(Ordering::Acquire) {
            return true;
        }
        let mut down = self.down_until.locked();
        match *down {
            None => true,
            Some(t) if Instant::now() < t => false,
            Some(_) => {
                *down = Some(Instant::now() + RETRY_AFTER);
                true
            }
        }
    }

    /// Its last health check failed: searches do not call it.
    pub fn failed_check(&self) -> Option<String> {
        self.checked_down
            .load(Ordering::Acquire)
            .then(|| self.check_failed.locked().clone().unwrap_or_default())
    }

    pub fn mark_down(&self) {
        *self.down_until.locked() = Some(Instant::now() + RETRY_AFTER);
    }

    pub fn mark_up(&self) {
        *self.down_until.locked() = None;
    }

    /// Records a health check: passed (`Ok`: the replica is used again at once) or failed.
    pub fn checked(&self, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => {
                if self.checked_down.swap(false, Ordering::AcqRel) {
                    tracing::info!("replica {} passes its health check again", self.name());
                }
                *self.check_failed.locked() = None;
                self.mark_up();
            }
            Err(reason) => {
                if !self.checked_down.swap(true, Ordering::AcqRel) {
                    tracing::warn!("replica {} failed its health check: {reason}", self.name());
                }
                *self.check_failed.locked() = Some(reason);
            }
        }
    }
}

/// Each shard's replicas.
pub type Shards = Vec<Vec<Arc<Replica>>>;

/// A shard and the replica a search calls for it.
pub type Target = (usize, Arc<Replica>);

/// `clients` as replicas, reusing those of `before` with the same name (and their health).
pub(crate) fn replicas_of(
    clients: Vec<Arc<dyn ShardClient>>,
    before: &[Arc<Replica>],
) -> Vec<Arc<Replica>> {
    clients
        .into_iter()
        .map(|client| {
            before
                .iter()
                .find(|r| r.name() == client.name())
                .cloned()
                .unwrap_or_else(|| Arc::new(Replica::new(client)))
        })
        .collect()
}

/// The shards none of whose replicas is believed up.
pub fn down(shards: &Shards) -> Vec<usize> {
    (0..shards.len())
        .filter(|&s| !shards[s].iter().any(|r| r.up()))
        .collect()
}

/// Which replicas one search has tried, and why they failed.
pub(crate) struct Failover {
    /// Each shard's replicas in the order this search tries them.
    orders: Vec<Vec<usize>>,
    tried: Vec<Vec<bool>>,
    reasons: Vec<Option<String>>,
}

impl Failover {
    /// The replica orders of search number `turn`: rendezvous order for the search, which
    /// spreads searches evenly over a shard's replicas; with `adaptive`, a replica clearly
    /// slower than its shard's fastest lately ([`SLOWER`]) moves after the others, as
    /// Elasticsearch's adaptive replica selection steers searches away from a slow copy (a
    /// busy host, a slow disk, a degraded link). It gets calls again once its slow time is
    /// [`LATENCY_MEMORY`] old, or when the others fail.
    pub fn new(shards: &Shards, turn: u64, adaptive: bool) -> Self {
        let orders = shards
            .iter()
            .enumerate()
            .map(|(shard, replicas)| {
                let names: Vec<&str> = replicas.iter().map(|r| r.name()).collect();
                let mut order = crate::cluster::placement::hrw_order(
                    &crate::cluster::placement::request_key(shard, turn),
                    &names,
                );
                if adaptive && replicas.len() > 1 {
                    let latency: Vec<Option<Duration>> =
                        replicas.iter().map(|r| r.latency()).collect();
                    if let Some(best) = latency.iter().flatten().min().copied() {
                        let slow = |r: &usize| {
                            latency[*r].is_some_and(|l| {
                                l.as_secs_f64() > best.as_secs_f64() * SLOWER
                                    && l > best + SLOWER_BY
                            })
                        };
                        // Stable: the fast keep their rendezvous order, as do the slow.
                        order.sort_by_key(slow);
                    }
                }
                order
            })
            .collect();
        Failover {
            orders,
            tried: shards.iter().map(|r| vec![false; r.len()]).collect(),
            reasons: vec![None; shards.len()],
        }
    }

    /// The next try's targets, one replica per shard that has one left (replicas believed up
    /// first, then those a call or a health check failed on lately, as a probe; never one
    /// this search saw fail), and the shards left without one.
    pub fn pick(&self, shards: &Shards) -> (Vec<Target>, Vec<ShardFailure>) {
        let mut targets = Vec::new();
        let mut failures = Vec::new();
        for (shard, replicas) in shards.iter().enumerate() {
            let order = self.orders[shard].iter().copied();
            let fresh = |r: &usize| !self.tried[shard][*r];
            let pick = order
                .clone()
                .filter(fresh)
                .find(|&r| replicas[r].up())
                .or_else(|| {
                    order
                        .clone()
                        .filter(fresh)
                        .find(|&r| replicas[r].may_call())
                });
            match pick {
                Some(r) => targets.push((shard, replicas[r].clone())),
                None => failures.push(ShardFailure {
                    shard,
                    reason: self.reasons[shard].clone().unwrap_or_else(|| {
                        let failed = replicas.iter().find_map(|r| r.failed_check());
                        match failed {
                            _ if replicas.is_empty() => "no live replica".into(),
                            Some(why) => format!("no replica passes its health check ({why})"),
                            None => "no replica answered".into(),
                        }
                    }),
                }),
            }
        }
        (targets, failures)
    }

    /// `target` failed for `reason`: marked down, and not tried again by this search.
    pub fn failed(&mut self, shards: &Shards, target: &Target, reason: String) {
        let (shard, replica) = target;
        replica.mark_down();
        crate::metrics::count_replica_failure(*shard);
        if let Some(r) = shards[*shard].iter().position(|x| Arc::ptr_eq(x, replica)) {
            self.tried[*shard][r] = true;
        }
        tracing::warn!("shard {shard} replica {} failed: {reason}", replica.name());
        self.reasons[*shard] = Some(reason);
    }
}
