//! Where `GET /search` runs: off the async workers, a bounded number at a time, shared fairly
//! between client addresses, heavy searches behind light ones.
//!
//! - Searches run on threads of their own, never on the few async workers that answer every
//!   other request (`/livez`, `/readyz` and `/metrics` among them).
//! - Light searches run on a pool of as many threads as the machine has cores (rayon's, FIFO):
//!   a search is CPU work that never waits, so more threads than cores would only add context
//!   switches and cache misses (measured: handing each search to tokio's blocking pool, which
//!   runs one thread per search in flight, served 0.76× the searches per second of the async
//!   workers alone; `docs/BENCHMARKS.md`, "The request budget against the search
//!   throughput").
//! - At most [`SearchPool::slots`] are admitted at once, shared between client addresses as
//!   `shares.rs` says (a client sending heavy searches without end, each of which may keep its
//!   thread a step past its answer, see `crate::search::budget`, cannot leave another without
//!   one). A search waits for a slot until its deadline (`limits.request_timeout_secs` after
//!   its arrival), then is answered 503.
//! - A heavy search (over [`budget::HEAVY_TERM_LISTS`] posting lists) runs on a thread of
//!   its own at a lower CPU priority (Linux: nice +10), so that on a busy machine the
//!   scheduler gives the cores to light searches and to the async workers first; it still
//!   gets every cycle nobody else wants.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shares::{Share, Shares};
use crate::search::budget;

/// The search slots (see the module doc).
#[derive(Clone)]
pub(crate) struct SearchPool {
    slots: Arc<Shares>,
    /// The threads light searches run on, one per core.
    threads: Arc<rayon::ThreadPool>,
    /// `limits.request_timeout_secs`: a search's deadline, counted from its arrival.
    pub(crate) budget: Duration,
}

impl SearchPool {
    pub(crate) fn new(limits: &crate::config::Limits) -> std::io::Result<Self> {
        let threads = rayon::ThreadPoolBuilder::new()
            .num_threads(cores())
            .thread_name(|i| format!("rankd-search-{i}"))
            .build()
            .map_err(std::io::Error::other)?;
        Ok(SearchPool {
            slots: Shares::new(Self::slots()),
            threads: Arc::new(threads),
            budget: Duration::from_secs(limits.request_timeout_secs),
        })
    }

    /// Searches admitted at once: more than the cores, so that every client's share holds
    /// a few and a short search is queued while long ones run, few enough that a queued
    /// search still meets its deadline.
    fn slots() -> usize {
        (8 * cores()).max(16)
    }

    /// A slot for a search from `address`, waiting for one until `deadline`; `None` then.
    pub(crate) async fn slot(&self, address: Option<IpAddr>, deadline: Instant) -> Option<Share> {
        self.slots.take_until(address, deadline).await
    }

    /// Runs `search` holding `slot`: on the search threads, or, when `heavy`, on a thread of
    /// its own at a lower CPU priority. `None` when the search panicked.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        slot: Share,
        heavy: bool,
        search: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let run = move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(search));
            drop(slot);
            result.ok()
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        if !heavy {
            self.threads.spawn_fifo(move || {
                if let Some(result) = run() {
                    let _ = tx.send(result);
                }
            });
            return rx.await.ok();
        }
        std::thread::Builder::new()
            .name("rankd-heavy-search".into())
            .spawn(move || {
                lower_priority();
                if let Some(result) = run() {
                    let _ = tx.send(result);
                }
            })
            .ok()?;
        rx.await.ok()
    }
}

/// The machine's cores (2 when it cannot say).
fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
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
