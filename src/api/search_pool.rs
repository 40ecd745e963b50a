//! Where `GET /search` runs: off the async workers, a bounded number at a time, shared fairly
//! between client addresses, heavy searches behind light ones.
//!
//! - Searches run on threads of their own, never on the few async workers that answer every
//!   other request (`/livez`, `/readyz` and `/metrics` among them).
//! - At most [`SearchPool::slots`] run at once, shared between client addresses as
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
    /// `limits.request_timeout_secs`: a search's deadline, counted from its arrival.
    pub(crate) budget: Duration,
}

impl SearchPool {
    pub(crate) fn new(limits: &crate::config::Limits) -> Self {
        SearchPool {
            slots: Shares::new(Self::slots()),
            budget: Duration::from_secs(limits.request_timeout_secs),
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
    pub(crate) async fn slot(&self, address: Option<IpAddr>, deadline: Instant) -> Option<Share> {
        self.slots.take_until(address, deadline).await
    }

    /// Runs `search` holding `slot`: on the blocking pool, or, when `heavy`, on a thread of
    /// its own at a lower CPU priority. `None` when the thread failed (panicked).
    pub(crate) async fn run<T: Send + 'static>(
        slot: Share,
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
