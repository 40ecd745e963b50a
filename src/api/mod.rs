//! The HTTP API (INTERFACE.md): routes, shared state, limits and graceful shutdown. Handlers
//! stay thin; the ranking lives in the library modules.

mod error;
mod params;
mod search;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use tower::limit::ConcurrencyLimitLayer;
use tower::ServiceBuilder;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

pub use error::ApiError;

use crate::text::TextIndex;

/// Requests served at once; more wait in line.
const MAX_CONCURRENT_REQUESTS: usize = 256;
/// Largest request body accepted.
const MAX_BODY_BYTES: usize = 16 << 20;
/// A request running longer than this is answered with 408.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What every handler can reach.
pub struct AppState {
    pub index: TextIndex,
    /// Link scores, when `rankd graph` has computed them for this index.
    pub links: Option<crate::links::LinkData>,
    /// False until everything is loaded, and again while draining on shutdown.
    pub ready: AtomicBool,
}

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(index_page))
        .route("/search", get(search::search))
        .route("/doc/{id}", get(search::doc))
        .route("/similar", get(search::similar))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(
            ServiceBuilder::new()
                .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::REQUEST_TIMEOUT,
                    REQUEST_TIMEOUT,
                ))
                .layer(ConcurrencyLimitLayer::new(MAX_CONCURRENT_REQUESTS)),
        )
        .with_state(state)
}

/// The search page, compiled into the binary so rankd serves it from anywhere.
async fn index_page() -> axum::response::Html<&'static str> {
    axum::response::Html(include_str!("../../static/index.html"))
}

async fn readyz(
    axum::extract::State(state): axum::extract::State<Arc<AppState>>,
) -> (StatusCode, &'static str) {
    if state.ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

/// Serves until SIGTERM or Ctrl-C, then stops accepting, reports not-ready and lets running
/// requests finish. `on_bound` receives the bound address (port 0 picks a free one).
pub async fn serve(
    state: Arc<AppState>,
    addr: SocketAddr,
    on_bound: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    on_bound(listener.local_addr()?);
    // Small JSON answers must not wait for Nagle's algorithm.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
    });
    state.ready.store(true, Ordering::SeqCst);
    let draining = state.clone();
    axum::serve(listener, router(state))
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            draining.ready.store(false, Ordering::SeqCst);
            tracing::info!("shutting down: draining requests");
        })
        .await?;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
