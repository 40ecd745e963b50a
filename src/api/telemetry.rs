//! HTTP metrics middleware, `GET /metrics` and `GET /openapi.json`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;

/// Counts and times every request under its route template; requests that match no route
/// share the label `unmatched`, so scanners cannot create unbounded series.
pub(crate) async fn track(request: Request, next: Next) -> Response {
    let start = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let method = request.method().as_str().to_string();
    let response = next.run(request).await;
    crate::metrics::observe_http(
        &route,
        &method,
        response.status().as_u16(),
        start.elapsed().as_secs_f64(),
    );
    response
}

/// Metrics in the Prometheus text format.
#[utoipa::path(
    get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain"))
)]
pub async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let index = state.clone();
    // Sizing the index walks its directory: keep it off the async workers.
    let stats = tokio::task::spawn_blocking(move || {
        let bytes: u64 = walkdir::WalkDir::new(index.engine.index.dir.join("index"))
            .into_iter()
            .filter_map(Result::ok)
            .filter_map(|e| e.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum();
        (bytes, index.engine.index.num_docs())
    })
    .await;
    if let Ok((bytes, docs)) = stats {
        crate::metrics::set_index_stats(bytes, docs);
    }
    // Sets the link-score gauges as a side effect.
    let _ = super::admin::link_status(&state).await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::metrics::render(),
    )
        .into_response()
}
