//! Middleware that protects the server and its pages, applied to every route in `router()`:
//!
//! - [`shed_load`]: one concurrency limit for the whole server. tower's
//!   `ConcurrencyLimitLayer` added with `Router::layer` gave every route its own limit (and
//!   queued the excess until the request timeout answered an empty 408); here one set of
//!   slots is shared by all routes, and between client addresses (`shares.rs`: one client
//!   alone can hold half), and a request over the limit gets a JSON 503 at once, which a
//!   client or balancer can retry elsewhere.
//! - [`request_head_limits`]: a URI over [`MAX_URI_BYTES`] or headers over
//!   [`MAX_HEADER_BYTES`] / [`MAX_HEADERS`] get a JSON 414 / 431. hyper's own limits (a URI over
//!   64 KiB, headers over the connection's 1 MiB buffer or 200 headers, see `listen.rs`) sit
//!   above these and still answer with hyper's empty body: it writes those before any
//!   service runs.
//! - [`identity_bodies`]: a request whose `Content-Encoding` is not `identity` gets a JSON 415
//!   (RFC 9110 §15.5.16): rankd does not decode bodies, and reading gzip bytes as JSON or a
//!   model file would fail with a misleading message, or not at all.
//! - [`json_errors`]: every error answer has the API's JSON shape. Errors rankd raises already
//!   do; this rewrites the ones produced by axum and tower (405 for a wrong method, 408 from
//!   the timeout, plain-text extractor rejections such as `/doc/%ff`) from their status and text.
//! - [`time_limit`]: a request still running after `limits.request_timeout_secs` is dropped
//!   and answered 408, unless it has begun a write it cannot take back ([`Commitment`]): then
//!   the answer waits for the write, so a 408 always means nothing was written.
//! - [`security_headers`]: a Content-Security-Policy that allows scripts only from rankd's own
//!   files (no inline script, no `javascript:` URLs, no framing), `X-Content-Type-Options:
//!   nosniff` and `X-Frame-Options: DENY`, on every answer: the search page shows documents'
//!   text and URLs, which are whatever was ingested, on the origin that also serves `/admin`.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Extension;

use super::shares::{client_address, Shares};
use super::ApiError;

/// Longest request target (path and query) answered normally. Well above `q`'s 2048 bytes,
/// so an over-long query is still the search's own 400 naming `q`.
pub(crate) const MAX_URI_BYTES: usize = 32 << 10;
/// Largest total size of the request headers (names and values).
pub(crate) const MAX_HEADER_BYTES: usize = 64 << 10;
/// Most request headers.
pub(crate) const MAX_HEADERS: usize = 100;

/// The policy of every answer. Styles may be inline (the pages set bar widths with `style`
/// attributes); scripts only from `/static/`.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The request slots shared by every route (`limits.max_concurrent_requests`), shared
/// between client addresses (`shares.rs`).
#[derive(Clone)]
pub(crate) struct Slots(pub Arc<Shares>);

/// Takes a slot for the request or answers 503 at once (`Retry-After`, as every 503). `/livez`
/// is exempt: a liveness probe must not fail because the server is busy. A leaf's
/// `/cluster/` calls count against the limit but not against their address's share: the
/// root makes all of them from one address (and a call without the cluster key is refused
/// at once, so it holds no slot for long).
pub(crate) async fn shed_load(
    State(slots): State<Slots>,
    request: Request,
    next: Next,
) -> Response {
    if request.uri().path() == "/livez" {
        return next.run(request).await;
    }
    // A cluster's root makes every shard call from one address; they need the cluster key.
    let share = if request.uri().path().starts_with("/cluster/") {
        slots.0.try_take_any()
    } else {
        slots.0.try_take(client_address(request.extensions()))
    };
    match share {
        Some(share) => {
            let response = next.run(request).await;
            drop(share);
            response
        }
        None => ApiError::unavailable(
            "overloaded",
            "the server is handling as many requests as it is configured to \
             (limits.max_concurrent_requests), or as many of this client's as it shares \
             with it; retry shortly",
        )
        .into_response(),
    }
}

/// A request's promise to finish: a handler about to commit a write calls
/// [`Commitment::begin`], and from then on [`time_limit`] waits for its answer.
#[derive(Clone, Default)]
pub(crate) struct Commitment(Arc<AtomicU8>);

const PENDING: u8 = 0;
const COMMITTED: u8 = 1;
const TIMED_OUT: u8 = 2;

impl Commitment {
    /// True when the write may go ahead (the request has not timed out); the time limit no
    /// longer applies to the request.
    pub(crate) fn begin(&self) -> bool {
        self.0
            .compare_exchange(PENDING, COMMITTED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    fn time_out(&self) -> bool {
        self.0
            .compare_exchange(PENDING, TIMED_OUT, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
}

/// Begins the request's write: from here on the time limit waits for the answer. An error
/// when the limit has already answered 408 (nothing may be written then); `None`: a request
/// outside the time limit (tests calling a handler directly).
pub(crate) fn begin_write(commitment: Option<Extension<Commitment>>) -> Result<(), ApiError> {
    match commitment {
        Some(Extension(c)) if !c.begin() => Err(ApiError::unavailable(
            "request_timeout",
            "the request timed out before its write began",
        )),
        _ => Ok(()),
    }
}

/// Answers 408 (made JSON by [`json_errors`]) to a request running longer than `limit`,
/// unless it has begun a write (see [`Commitment`]).
pub(crate) async fn time_limit(
    State(limit): State<Duration>,
    mut request: Request,
    next: Next,
) -> Response {
    let commitment = Commitment::default();
    request.extensions_mut().insert(commitment.clone());
    let mut running = std::pin::pin!(next.run(request));
    tokio::select! {
        response = &mut running => response,
        _ = tokio::time::sleep(limit) => match commitment.time_out() {
            true => StatusCode::REQUEST_TIMEOUT.into_response(),
            false => running.await,
        },
    }
}

/// JSON 414 / 431 for request heads over the limits above.
pub(crate) async fn request_head_limits(request: Request, next: Next) -> Response {
    let uri_len = request
        .uri()
        .path_and_query()
        .map_or(0, |p| p.as_str().len());
    if uri_len > MAX_URI_BYTES {
        return error(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!("the request target is {uri_len} bytes; at most {MAX_URI_BYTES} are accepted"),
        );
    }
    let headers = request.headers();
    let header_bytes: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len())
        .sum();
    if headers.len() > MAX_HEADERS || header_bytes > MAX_HEADER_BYTES {
        return error(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            format!(
                "the request has {} headers of {header_bytes} bytes; at most {MAX_HEADERS} \
                 headers of {MAX_HEADER_BYTES} bytes are accepted",
                headers.len()
            ),
        );
    }
    next.run(request).await
}

/// JSON 415 for a body in a content coding (anything but `identity`).
pub(crate) async fn identity_bodies(request: Request, next: Next) -> Response {
    let coded = request
        .headers()
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(str::trim)
        .find(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"));
    if let Some(coding) = coded {
        let mut response = error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "the body is sent with Content-Encoding `{coding}`; rankd reads bodies as \
                 they are: send it uncompressed"
            ),
        );
        response.headers_mut().insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        return response;
    }
    next.run(request).await
}

/// Rewrites error answers that are not JSON into the API's error shape.
pub(crate) async fn json_errors(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(&response) {
        return response;
    }
    let (parts, body) = response.into_parts();
    // Rejection texts are short; a long body is not shown.
    let text = axum::body::to_bytes(body, 4096)
        .await
        .ok()
        .and_then(|b| String::from_utf8(b.to_vec()).ok())
        .map(|t| t.trim().to_string())
        .unwrap_or_default();
    let message = match status {
        // axum adds the `Allow` header after this middleware has run.
        StatusCode::METHOD_NOT_ALLOWED => {
            format!(
                "method {method} is not allowed on {path} (the Allow header lists those that are)"
            )
        }
        StatusCode::REQUEST_TIMEOUT => {
            "the request took longer than limits.request_timeout_secs and was stopped".into()
        }
        _ if !text.is_empty() => text,
        _ => status.canonical_reason().unwrap_or("error").to_lowercase(),
    };
    let mut out = error(status, code(status), message);
    // Keep what the client needs from the original answer.
    for name in [header::ALLOW, header::RETRY_AFTER, header::WWW_AUTHENTICATE] {
        if let Some(v) = parts.headers.get(&name) {
            out.headers_mut().insert(name, v.clone());
        }
    }
    if method == Method::HEAD {
        *out.body_mut() = Body::empty();
    }
    out
}

/// Security headers on every answer (see the module doc).
pub(crate) async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

fn error(status: StatusCode, code: &'static str, message: String) -> Response {
    ApiError {
        status,
        code,
        message,
        field: None,
    }
    .into_response()
}

/// The `code` of an error raised by the framework rather than by rankd.
fn code(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::URI_TOO_LONG => "uri_too_long",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "bad_request",
        StatusCode::TOO_MANY_REQUESTS => "too_many_requests",
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "headers_too_large",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        s if s.is_server_error() => "internal",
        _ => "error",
    }
}
