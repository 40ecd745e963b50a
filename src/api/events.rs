//! `POST /events`: user events about answered searches (`crate::events`), translated from
//! HTTP: the client's address for its budget, the body within `events.max_body_bytes`, and
//! the library's refusals as 4xx answers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::{ApiError, AppState};
use crate::events::{parse_events, EventStore, StoreError};
use crate::metrics::count_refused_events;

/// What `POST /events` acknowledges.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct EventsAccepted {
    /// Events stored (all of the request's).
    pub accepted: usize,
}

/// Stores events (OpenSearch UBI's fields, flattened; docs/GUIDE.md): a JSON array, or one
/// JSON object per line. All or nothing, committed before the answer; an event naming a
/// `query_id` that no `/search` answered refuses the request. An event without a `client_id`
/// takes the request's `X-Client-Id` header.
#[utoipa::path(
    post, path = "/events", tag = "search",
    request_body(content = String, description = "a JSON array of events or NDJSON: \
        `action_name`, `query_id`, `object_id`, `position`, `timestamp`, `dwell_ms`, \
        `client_id`, `attributes`", content_type = "application/json"),
    responses(
        (status = 200, description = "every event stored", body = EventsAccepted),
        (status = 400, description = "a bad event: `error.field` names the field, the message its line"),
        (status = 413, description = "body over events.max_body_bytes"),
        (status = 422, description = "unknown query_id: nothing stored"),
        (status = 429, description = "over the client's events.max_per_second; Retry-After says when"),
    )
)]
pub async fn post_events(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<Json<EventsAccepted>, Response> {
    accept(&state.events, request).await
}

/// `POST /events` on `store`: a single node's, or a root's (`super::cluster`).
pub(super) async fn accept(
    store: &EventStore,
    request: Request,
) -> Result<Json<EventsAccepted>, Response> {
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let header_client = super::search::client_id(request.headers());
    let limit = store.settings.max_body_bytes;
    let body = axum::body::to_bytes(request.into_body(), limit)
        .await
        .map_err(|_| {
            count_refused_events("too_large", 1);
            ApiError {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                code: "payload_too_large",
                message: format!(
                    "the body is over {limit} bytes (events.max_body_bytes): send fewer events \
                     per request"
                ),
                field: Some("body".into()),
            }
            .into_response()
        })?;
    let mut events = parse_events(&body, store.settings.max_per_request).map_err(|e| {
        count_refused_events("invalid", 1);
        let message = e.to_string();
        ApiError::bad_request(e.field, message).into_response()
    })?;
    // An event without its own `client_id` takes the request's `X-Client-Id`, as `/search`'s
    // impressions do.
    if let Some(id) = header_client {
        for e in events.iter_mut().filter(|e| e.client_id.is_none()) {
            e.client_id = Some(id.clone());
        }
    }
    if let Some(ip) = client {
        if let Err(wait) = store.budget.take(ip, events.len(), Instant::now()) {
            count_refused_events("rate_limited", events.len());
            let mut response = ApiError {
                status: StatusCode::TOO_MANY_REQUESTS,
                code: "too_many_requests",
                message: format!(
                    "{} events are over this client's budget of {} per second \
                     (events.max_per_second); retry later",
                    events.len(),
                    store.settings.max_per_second
                ),
                field: None,
            }
            .into_response();
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, v);
            }
            return Err(response);
        }
    }
    match store.store(&events).await {
        Ok(()) => Ok(Json(EventsAccepted {
            accepted: events.len(),
        })),
        Err(e @ StoreError::UnknownQueryIds(_)) => Err(ApiError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "unknown_query_id",
            message: format!(
                "{e}: no search answered with it (or it is past retention); nothing stored"
            ),
            field: Some("query_id".into()),
        }
        .into_response()),
        Err(e @ StoreError::NotShown { field, .. }) => {
            let message = format!("{e}; nothing stored");
            Err(ApiError::bad_request(field, message).into_response())
        }
        Err(StoreError::Database(e)) => Err(ApiError::internal(e).into_response()),
    }
}
