//! Slots shared between client addresses: an address takes a slot only while more slots are
//! free than it already holds. One client alone can hold half of them, the next half of the
//! rest, and so on, so a client that keeps every request it may open in flight cannot leave
//! another without one, with no fixed share to configure: behind a proxy, where every request
//! comes from one address, the proxy gets half. The request limit (`guard::shed_load`) and the
//! search threads (`search_pool.rs`) are shared this way.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::ConnectInfo;
use axum::http::Extensions;
use tokio::sync::Notify;

/// `slots` slots and who holds them.
pub(crate) struct Shares {
    slots: usize,
    held: Mutex<Held>,
    freed: Notify,
}

#[derive(Default)]
struct Held {
    taken: usize,
    /// Slots by client address (`None`: a request without one, such as in-process tests).
    by_address: HashMap<Option<IpAddr>, usize>,
}

/// A slot; dropping it frees the slot.
pub(crate) struct Share {
    shares: Arc<Shares>,
    /// The address it counts against (`None`: none, see [`Shares::try_take_any`]).
    address: Option<Option<IpAddr>>,
}

/// The client address of a request (`listen.rs` adds it), if any.
pub(crate) fn client_address(extensions: &Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip())
}

impl Shares {
    pub(crate) fn new(slots: usize) -> Arc<Self> {
        Arc::new(Shares {
            slots,
            held: Mutex::default(),
            freed: Notify::new(),
        })
    }

    /// A slot if one is free and `address` holds fewer than are free.
    pub(crate) fn try_take(self: &Arc<Self>, address: Option<IpAddr>) -> Option<Share> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let free = self.slots - held.taken;
        let mine = held.by_address.get(&address).copied().unwrap_or(0);
        if free <= mine {
            return None;
        }
        held.taken += 1;
        *held.by_address.entry(address).or_default() += 1;
        Some(Share {
            shares: self.clone(),
            address: Some(address),
        })
    }

    /// A slot if one is free, whoever holds the others: for a trusted peer that makes every
    /// call from one address (a cluster's root calling its leaves).
    pub(crate) fn try_take_any(self: &Arc<Self>) -> Option<Share> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.taken == self.slots {
            return None;
        }
        held.taken += 1;
        Some(Share {
            shares: self.clone(),
            address: None,
        })
    }

    /// A slot for `address`, waiting for one until `deadline`; `None` then.
    pub(crate) async fn take_until(
        self: &Arc<Self>,
        address: Option<IpAddr>,
        deadline: Instant,
    ) -> Option<Share> {
        loop {
            // Registered before trying, so a slot freed in between is not missed.
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            if let Some(share) = self.try_take(address) {
                return Some(share);
            }
            tokio::time::timeout_at(deadline.into(), freed).await.ok()?;
        }
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.shares.held.lock().unwrap_or_else(|e| e.into_inner());
        held.taken -= 1;
        if let Some(address) = self.address {
            if let Some(n) = held.by_address.get_mut(&address) {
                *n -= 1;
                if *n == 0 {
                    held.by_address.remove(&address);
                }
            }
        }
        drop(held);
        self.shares.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn an_address_gets_a_slot_only_while_more_are_free_than_it_holds() {
        let shares = Shares::new(16);
        let hog: Vec<Share> = std::iter::from_fn(|| shares.try_take(ip("10.0.0.1"))).collect();
        assert_eq!(hog.len(), 8, "one address alone holds half");
        let second: Vec<Share> = std::iter::from_fn(|| shares.try_take(ip("10.0.0.2"))).collect();
        assert_eq!(second.len(), 4, "the next half of the rest");
        // Another client still finds one, and so does the one after it.
        let third = shares
            .try_take(ip("10.0.0.3"))
            .expect("a third address finds a slot");
        let fourth = shares.try_take(ip("10.0.0.4")).expect("and a fourth");
        // A trusted peer takes what is free, whatever it holds.
        let peer: Vec<Share> = std::iter::from_fn(|| shares.try_take_any()).collect();
        assert_eq!(peer.len(), 2);
        assert!(
            shares.try_take(ip("10.0.0.5")).is_none(),
            "every slot is taken"
        );
        drop((third, fourth, peer));
        drop(hog);
        let held = shares.held.lock().unwrap();
        assert_eq!(held.taken, 4);
        assert_eq!(held.by_address.len(), 1, "freed addresses are forgotten");
    }

    #[test]
    fn a_waiting_request_takes_a_freed_slot_or_gives_up_at_its_deadline() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let shares = Shares::new(2);
            let a = shares.try_take(ip("10.0.0.1")).unwrap();
            let b = shares.try_take(ip("10.0.0.2")).unwrap();
            let soon = Instant::now() + Duration::from_millis(50);
            assert!(shares.take_until(ip("10.0.0.3"), soon).await.is_none());
            let waiting =
                shares.take_until(ip("10.0.0.3"), Instant::now() + Duration::from_secs(60));
            let freeing = async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(a);
            };
            let (share, ()) = tokio::join!(waiting, freeing);
            assert!(share.is_some(), "the freed slot was taken");
            drop(b);
        });
    }
}
