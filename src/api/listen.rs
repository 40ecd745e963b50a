//! The accept loop: rankd's own instead of `axum::serve`, because `axum::serve` offers neither
//! a header-read timeout (it builds hyper's connection without a timer, and hyper's
//! `header_read_timeout` needs one) nor a cap on open connections. Without them, clients that
//! open connections and send half a request line hold them forever (slowloris).
//!
//! Each connection is served by hyper's HTTP/1 connection with a timer, so a request's line
//! and headers must arrive within `limits.header_read_timeout_secs` (counted from the
//! connection's start or its previous answer; idle keep-alive connections end the same way).
//! Open connections are counted by client address ([`Connections`]), at most
//! `limits.max_connections` in all. At the cap a new connection takes the place of an idle
//! or incomplete one (no request being answered: a keep-alive connection between requests,
//! or one still sending its head), which is closed: one of the address holding the most
//! connections among those that have one idle. When none is idle, the new connection gets a
//! JSON 503 and is closed at once. Eviction and the start of a request exclude each other
//! (`begin_request`, `try_evict`): a request that arrives as its connection is evicted does
//! not run, and none is ever cut off halfway through. So one client holding every connection cannot lock
//! another out, and no address has a fixed share below the cap: behind a proxy, every
//! connection comes from one address.
//! The client's address is added to every request as `ConnectInfo<SocketAddr>` (the admin
//! authentication throttle reads it). With TLS (`crate::tls`), each connection's handshake
//! runs in its own task, within the header-read timeout, before hyper serves it.
//! Shutdown follows `axum::serve`: stop accepting, let open connections finish their
//! requests (hyper's graceful shutdown, told through a `watch` channel whose receivers the
//! connections hold, as hyper-util's `GracefulShutdown` does; its wrapper would hide the
//! connection that eviction also shuts down), bounded by the request timeout.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::response::IntoResponse;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tower::ServiceExt;

use crate::config::Limits;

/// hyper's limit on the request head, above `guard::MAX_HEADER_BYTES` so that rankd's own
/// JSON 431 answers first.
const MAX_BUF_BYTES: usize = 1 << 20;
/// hyper's limit on the number of headers, above `guard::MAX_HEADERS` for the same reason.
const HYPER_MAX_HEADERS: usize = 200;

/// Serves `app` on `listener` until `shutdown` completes, over TLS when `tls` is given.
pub async fn run(
    listener: TcpListener,
    app: Router,
    limits: &Limits,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let handshake_timeout = Duration::from_secs(limits.header_read_timeout_secs);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(limits.header_read_timeout_secs))
        .max_buf_size(MAX_BUF_BYTES)
        .max_headers(HYPER_MAX_HEADERS);
    let connections = Arc::new(Connections::new(limits.max_connections));
    let (stop, stopping) = tokio::sync::watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!("cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // Small JSON answers must not wait for Nagle's algorithm.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        let Some(open) = connections.admit(remote.ip()) else {
            tokio::spawn(refuse(tcp, limits.max_connections));
            continue;
        };
        let (app, busy) = (app.clone(), open.busy.clone());
        let service = tower::service_fn(move |request: hyper::Request<Incoming>| {
            let (app, busy) = (app.clone(), busy.clone());
            async move {
                if !begin_request(&busy) {
                    return Ok::<_, std::convert::Infallible>(closing(&request));
                }
                let mut request = request.map(axum::body::Body::new);
                request.extensions_mut().insert(ConnectInfo(remote));
                let response = app.oneshot(request).await;
                busy.fetch_sub(1, Ordering::SeqCst);
                response
            }
        });
        let service = TowerToHyperService::new(service);
        let told_to_stop = stopping.clone();
        let (http, tls) = (http.clone(), tls.clone());
        tokio::spawn(async move {
            let Some(acceptor) = tls else {
                return serve(
                    &http,
                    TokioIo::new(tcp),
                    service,
                    open,
                    told_to_stop,
                    remote,
                )
                .await;
            };
            // Evicted or told to stop mid-handshake: the connection is dropped, as one that
            // has not sent its request head.
            let handshake = tokio::select! {
                h = tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)) => h,
                _ = open.evict.notified() => return,
            };
            match handshake {
                Ok(Ok(stream)) => {
                    serve(
                        &http,
                        TokioIo::new(stream),
                        service,
                        open,
                        told_to_stop,
                        remote,
                    )
                    .await
                }
                Ok(Err(e)) => tracing::debug!("TLS handshake with {remote} failed: {e}"),
                Err(_) => tracing::debug!("TLS handshake with {remote} timed out"),
            }
        });
    }
    drop(listener);
    // Every connection task holds a receiver: told to stop, each finishes its request in
    // progress and closes; `closed` resolves when the last one has.
    drop(stopping);
    let _ = stop.send(());
    let drain = Duration::from_secs(limits.request_timeout_secs + 5);
    if tokio::time::timeout(drain, stop.closed()).await.is_err() {
        tracing::warn!("connections still open after {drain:?} of draining; closing them");
    }
}

/// Serves one connection until it ends, is evicted at the cap, or the server stops.
async fn serve<I, S>(
    http: &hyper::server::conn::http1::Builder,
    io: I,
    service: S,
    open: Admitted,
    mut told_to_stop: tokio::sync::watch::Receiver<()>,
    remote: std::net::SocketAddr,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming> + Send,
    S::Future: Send + 'static,
    S::ResBody: Send + 'static,
    <S::ResBody as hyper::body::Body>::Data: Send,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connection = http.serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => Some(result),
        // Dropping the connection closes it: no request of it has begun or will
        // (`try_evict`), and hyper's graceful shutdown would not close one that has
        // not finished its first request head (a half-sent one) until its timeout.
        _ = open.evict.notified() => {
            tracing::debug!("connection from {remote} evicted at the cap");
            None
        }
        _ = told_to_stop.changed() => {
            connection.as_mut().graceful_shutdown();
            Some(connection.as_mut().await)
        }
    };
    if let Some(Err(e)) = result {
        tracing::debug!("connection from {remote}: {e}");
    }
    drop(open);
    drop(told_to_stop);
}

/// The value of a connection's `busy` count once it is evicted: far above any count of
/// requests in progress, so a request that begins afterwards sees it.
const EVICTED: usize = 1 << 40;

/// Counts a request as begun on its connection, unless the connection was evicted first:
/// then the request must not run (false). Together with [`try_evict`] this makes eviction
/// and a request's start exclusive: a request either began before the eviction (and the
/// connection is not idle, so it is not evicted) or is refused unseen by the handlers, so an
/// evicted connection never drops a request halfway (a write done, its answer lost).
fn begin_request(busy: &AtomicUsize) -> bool {
    busy.fetch_add(1, Ordering::SeqCst) < EVICTED
}

/// Marks an idle connection (no request begun and unanswered) as evicted; false when it is
/// busy or evicted already.
fn try_evict(busy: &AtomicUsize) -> bool {
    busy.compare_exchange(0, EVICTED, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
}

/// The answer to a request that arrived on a connection evicted at the cap: nothing of it
/// ran. A JSON 503 that closes the connection, though the connection is usually closed first
/// and the client sees what it sees when an idle keep-alive connection is closed under it:
/// no answer, nothing done, retry on a new one (RFC 9112 §9.3.1).
fn closing<B>(request: &hyper::Request<B>) -> axum::response::Response {
    tracing::debug!(
        "{} {} refused: its connection was evicted",
        request.method(),
        request.uri()
    );
    let body = serde_json::json!({"error": {
        "code": "overloaded",
        "message": "this connection was closed to make room at the connection cap \
                    (limits.max_connections) as the request arrived; nothing of it ran; retry",
        "field": null,
    }});
    (
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        [
            (axum::http::header::RETRY_AFTER, "0"),
            (axum::http::header::CONNECTION, "close"),
        ],
        axum::Json(body),
    )
        .into_response()
}

/// Answers a connection over the cap with a JSON 503 and closes it.
async fn refuse(mut tcp: TcpStream, cap: usize) {
    let body = serde_json::json!({"error": {
        "code": "overloaded",
        "message": format!(
            "the server has {cap} open connections (limits.max_connections); retry shortly"
        ),
        "field": null,
    }})
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        tcp.write_all(answer.as_bytes()).await?;
        tcp.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

/// The open connections by client address, and the cap on them all (see the module doc).
struct Connections {
    cap: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    /// Connections counted against the cap (those told to close are not).
    live: usize,
    next_id: u64,
    by_address: HashMap<IpAddr, Vec<Slot>>,
}

/// One open connection as [`Connections`] sees it.
struct Slot {
    id: u64,
    /// Requests of the connection being answered.
    busy: Arc<AtomicUsize>,
    evict: Arc<Notify>,
    evicted: bool,
}

/// An admitted connection; dropping it gives its place back.
struct Admitted {
    connections: Arc<Connections>,
    address: IpAddr,
    id: u64,
    busy: Arc<AtomicUsize>,
    evict: Arc<Notify>,
}

impl Connections {
    fn new(cap: usize) -> Self {
        Connections {
            cap,
            open: Mutex::default(),
        }
    }

    /// A place for a connection from `address`, or `None` when the cap is reached and no
    /// connection is idle.
    fn admit(self: &Arc<Self>, address: IpAddr) -> Option<Admitted> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.live >= self.cap && !open.evict_one() {
            return None;
        }
        open.live += 1;
        open.next_id += 1;
        let slot = Slot {
            id: open.next_id,
            busy: Arc::default(),
            evict: Arc::default(),
            evicted: false,
        };
        let admitted = Admitted {
            connections: self.clone(),
            address,
            id: slot.id,
            busy: slot.busy.clone(),
            evict: slot.evict.clone(),
        };
        open.by_address.entry(address).or_default().push(slot);
        Some(admitted)
    }
}

impl Open {
    /// Tells an idle connection to close, of the address with the most live connections
    /// among those that have one; false when no connection is idle.
    fn evict_one(&mut self) -> bool {
        let idle = |s: &Slot| !s.evicted && s.busy.load(Ordering::SeqCst) == 0;
        let mut addresses: Vec<&mut Vec<Slot>> = self
            .by_address
            .values_mut()
            .filter(|slots| slots.iter().any(idle))
            .collect();
        addresses
            .sort_by_key(|slots| std::cmp::Reverse(slots.iter().filter(|s| !s.evicted).count()));
        // A connection seen idle may begin a request before it is marked: then the next.
        for slot in addresses.into_iter().flat_map(|slots| slots.iter_mut()) {
            if !slot.evicted && try_evict(&slot.busy) {
                slot.evicted = true;
                slot.evict.notify_one();
                self.live -= 1;
                return true;
            }
        }
        false
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self
            .connections
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let Some(slots) = open.by_address.get_mut(&self.address) else {
            return;
        };
        let Some(i) = slots.iter().position(|s| s.id == self.id) else {
            return;
        };
        let slot = slots.swap_remove(i);
        if slots.is_empty() {
            open.by_address.remove(&self.address);
        }
        if !slot.evicted {
            open.live -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_biggest_address_gives_up_an_idle_connection() {
        let connections = Arc::new(Connections::new(3));
        let hog: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let held: Vec<Admitted> = (0..3).map(|_| connections.admit(hog).unwrap()).collect();
        // Busy connections are not evicted.
        held[0].busy.fetch_add(1, Ordering::SeqCst);
        let a = connections
            .admit(other)
            .expect("an idle connection of the hog gives way");
        let b = connections.admit(other).expect("and another");
        // The hog's last is busy, and `other` now holds the most: its own idle ones go.
        let c = connections
            .admit(other)
            .expect("other's own idle connection gives way");
        held[0].busy.fetch_sub(1, Ordering::SeqCst);
        for x in [&a, &b, &c] {
            x.busy.fetch_add(1, Ordering::SeqCst);
        }
        // Three live: other's busy b and c, and the hog's held[0], idle now: it gives way.
        let d = connections
            .admit(hog)
            .expect("the only idle connection gives way");
        d.busy.fetch_add(1, Ordering::SeqCst);
        assert!(connections.admit(other).is_none(), "nothing idle is left");
        drop(held);
        assert_eq!(connections.open.lock().unwrap().live, 3);
        drop((a, b, c, d));
        let open = connections.open.lock().unwrap();
        assert_eq!(open.live, 0, "every place is given back");
        assert!(open.by_address.is_empty());
    }

    #[test]
    fn a_request_and_the_eviction_of_its_connection_exclude_each_other() {
        // Evicted first: the request that then arrives does not run.
        let busy = AtomicUsize::new(0);
        assert!(try_evict(&busy));
        assert!(
            !begin_request(&busy),
            "a request on an evicted connection is refused"
        );
        assert!(!try_evict(&busy), "evicted once");
        // Begun first: the connection is not idle and is not evicted.
        let busy = AtomicUsize::new(0);
        assert!(begin_request(&busy));
        assert!(!try_evict(&busy));
        busy.fetch_sub(1, Ordering::SeqCst);
        assert!(try_evict(&busy), "idle again once answered");

        // Raced on threads: each round, exactly one of the two wins.
        for _ in 0..2_000 {
            let busy = Arc::new(AtomicUsize::new(0));
            let other = busy.clone();
            let request = std::thread::spawn(move || begin_request(&other));
            let evicted = try_evict(&busy);
            let began = request.join().unwrap();
            assert!(evicted != began, "evicted {evicted}, began {began}");
        }
    }
}
