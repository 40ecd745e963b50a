//! Where `GET /search` runs: off the async workers, a bounded number at a time, shared fairly
//! between client addresses, heavy searches behind light ones.
//!
//! - Searches run on threads of their own, never on the few async workers that answer every
//!   other request (`/livez`, `/readyz` and `/metrics` among them).
//! - At most [`SearchPool::slots`] run at once. A search waits for a slot until its deadline
//!   (`limits.request_timeout_secs` after its arrival), then is answered 503.
//! - An address gets a slot only while more slots are free than it already holds: one client
//!   alone can hold half of them, the next half of the rest, and so on, so a client sending
//!   heavy searches without end (each may keep its thread a step past its answer, see
//!   `crate::search::budget`) cannot leave another without one.
//! - A heavy search (over [`budget::HEAVY_TERM_LISTS`] posting lists) runs on a thread of
//!   its own at a lower CPU priority (Linux: nice +10), so that on a busy machine the
//!   scheduler gives the cores to light searches and to the async workers first; it still
//!   gets every cycle nobody else wants.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::search::budget;

/// The search slots and who holds them (see the module doc).
#[derive(Clone)]
pub(crate) struct SearchPool {
    shared: Arc<Shared>,
    /// `limits.request_timeout_secs`: a search's deadline, counted from its arrival.
    pub(crate) budget: Duration,
}

struct Shared {
    slots: usize,
    held: Mutex<Held>,
    freed: Notify,
}

#[derive(Default)]
struct Held {
    running: usize,
    /// Slots by client address (`None`: a request without one, such as in-process tests).
    by_address: HashMap<Option<IpAddr>, usize>,
}

/// A search slot; dropping it frees the slot.
pub(crate) struct SearchSlot {
    shared: Arc<Shared>,
    address: Option<IpAddr>,
}

impl SearchPool {
    pub(crate) fn new(limits: &crate::config::Limits) -> Self {
        Self::with_slots(
            Self::slots(),
            Duration::from_secs(limits.request_timeout_secs),
        )
    }

    fn with_slots(slots: usize, budget: Duration) -> Self {
        SearchPool {
            shared: Arc::new(Shared {
                slots,
                held: Mutex::default(),
                freed: Notify::new(),
            }),
            budget,
        }
    }

    /// Searches at once: more than the cores, so that a short search finds a slot while
    /// long ones run (the OS shares the cores between them), few enough that the threads'
    /// stacks stay small.
    fn slots() -> usize {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        (8 * cores).max(16)
    }

    /// A slot for a search from `address`, waiting for one until `deadline`; `None` then.
    pub(crate) async fn slot(
        &self,
        address: Option<IpAddr>,
        deadline: Instant,
    ) -> Option<SearchSlot> {
        loop {
            // Registered before trying, so a slot freed in between is not missed.
            let freed = self.shared.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            if let Some(slot) = self.try_slot(address) {
                return Some(slot);
            }
            tokio::time::timeout_at(deadline.into(), freed).await.ok()?;
        }
    }

    /// A slot if one is free and `address` holds fewer than are free.
    fn try_slot(&self, address: Option<IpAddr>) -> Option<SearchSlot> {
        let mut held = self.shared.held.lock().unwrap_or_else(|e| e.into_inner());
        let free = self.shared.slots - held.running;
        let mine = held.by_address.get(&address).copied().unwrap_or(0);
        if free <= mine {
            return None;
        }
        held.running += 1;
        *held.by_address.entry(address).or_default() += 1;
        Some(SearchSlot {
            shared: self.shared.clone(),
            address,
        })
    }

    /// Runs `search` holding `slot`: on the blocking pool, or, when `heavy`, on a thread of
    /// its own at a lower CPU priority. `None` when the thread failed (panicked).
    pub(crate) async fn run<T: Send + 'static>(
        slot: SearchSlot,
        heavy: bool,
        search: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let run = move || {
            let result = search();
            drop(slot);
            result
        };
        if !heavy {
            return tokio::task::spawn_blocking(run).await.ok();
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("rankd-heavy-search".into())
            .spawn(move || {
                lower_priority();
                let _ = tx.send(run());
            })
            .ok()?;
        rx.await.ok()
    }
}

impl Drop for SearchSlot {
    fn drop(&mut self) {
        let mut held = self.shared.held.lock().unwrap_or_else(|e| e.into_inner());
        held.running -= 1;
        if let Some(n) = held.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                held.by_address.remove(&self.address);
            }
        }
        drop(held);
        self.shared.freed.notify_waiters();
    }
}

/// Lowers the calling thread's CPU priority (nice +10). On Linux the nice value belongs to
/// the thread (setpriority(2), "BUGS"), and the thread ends with its search, so no other work
/// inherits it; elsewhere it would be the whole process's, so nothing is done.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority has no memory effects; `who` 0 is the calling thread on Linux.
    unsafe {
        if libc::setpriority(libc::PRIO_PROCESS, 0, 10) != 0 {
            tracing::debug!(
                "cannot lower a heavy search's priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// Whether a search walking `lists` posting lists runs as a heavy one.
pub(crate) fn is_heavy(lists: usize) -> bool {
    lists > budget::HEAVY_TERM_LISTS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn an_address_gets_a_slot_only_while_more_are_free_than_it_holds() {
        let pool = SearchPool::with_slots(16, Duration::from_secs(1));
        let hog: Vec<SearchSlot> = std::iter::from_fn(|| pool.try_slot(ip("10.0.0.1"))).collect();
        assert_eq!(hog.len(), 8, "one address alone holds half");
        let second: Vec<SearchSlot> =
            std::iter::from_fn(|| pool.try_slot(ip("10.0.0.2"))).collect();
        assert_eq!(second.len(), 4, "the next half of the rest");
        // Another client still finds one, and so does the one after it.
        let third = pool
            .try_slot(ip("10.0.0.3"))
            .expect("a third address finds a slot");
        let fourth = pool.try_slot(ip("10.0.0.4")).expect("and a fourth");
        drop((third, fourth));
        drop(hog);
        let held = pool.shared.held.lock().unwrap();
        assert_eq!(held.running, 4);
        assert_eq!(held.by_address.len(), 1, "freed addresses are forgotten");
    }

    #[test]
    fn a_waiting_search_takes_a_freed_slot_or_gives_up_at_its_deadline() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let pool = SearchPool::with_slots(2, Duration::from_secs(1));
            let a = pool.try_slot(ip("10.0.0.1")).unwrap();
            let b = pool.try_slot(ip("10.0.0.2")).unwrap();
            let soon = Instant::now() + Duration::from_millis(50);
            assert!(pool.slot(ip("10.0.0.3"), soon).await.is_none());
            let waiting = pool.slot(ip("10.0.0.3"), Instant::now() + Duration::from_secs(60));
            let freeing = async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(a);
            };
            let (slot, ()) = tokio::join!(waiting, freeing);
            assert!(slot.is_some(), "the freed slot was taken");
            drop(b);
        });
    }
}
