//! The accept loop: rankd's own instead of `axum::serve`, because `axum::serve` offers neither
//! a header-read timeout (it builds hyper's connection without a timer, and hyper's
//! `header_read_timeout` needs one) nor a cap on open connections. Without them, clients that
//! open connections and send half a request line hold them forever (slowloris).
//!
//! Each connection is served by hyper's HTTP/1 connection with a timer, so a request's line
//! and headers must arrive within `limits.header_read_timeout_secs` (counted from the
//! connection's start or its previous answer; idle keep-alive connections end the same way).
//! Open connections are counted by a semaphore of `limits.max_connections` permits; one over
//! the cap gets a JSON 503 and is closed at once. The client's address is added to every
//! request as `ConnectInfo<SocketAddr>` (the admin authentication throttle reads it).
//! Shutdown follows `axum::serve`: stop accepting, let open connections finish their
//! requests (hyper's graceful shutdown), bounded by the request timeout.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::config::Limits;

/// hyper's limit on the request head, above `guard::MAX_HEADER_BYTES` so that rankd's own
/// JSON 431 answers first.
const MAX_BUF_BYTES: usize = 1 << 20;
/// hyper's limit on the number of headers, above `guard::MAX_HEADERS` for the same reason.
const HYPER_MAX_HEADERS: usize = 200;

/// Serves `app` on `listener` until `shutdown` completes.
pub async fn run(
    listener: TcpListener,
    app: Router,
    limits: &Limits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(limits.header_read_timeout_secs))
        .max_buf_size(MAX_BUF_BYTES)
        .max_headers(HYPER_MAX_HEADERS);
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
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
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            tokio::spawn(refuse(tcp, limits.max_connections));
            continue;
        };
        let service = app
            .clone()
            .map_request(move |mut request: hyper::Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(remote));
                request.map(axum::body::Body::new)
            });
        let connection = graceful
            .watch(http.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(service)));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection from {remote}: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    let drain = Duration::from_secs(limits.request_timeout_secs + 5);
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {drain:?} of draining; closing them");
    }
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
