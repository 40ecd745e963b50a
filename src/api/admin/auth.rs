//! Every `/admin/` request passes here first: without a configured token the admin API is
//! disabled (503, so a client can tell "not set up" from "wrong token"); otherwise a request
//! without `Authorization: Bearer TOKEN`, or with another token, gets 401. An address that has
//! sent `limits.admin_auth_failures_per_minute` wrong tokens within a minute gets 429 (with
//! `Retry-After`) for every admin request until that minute is over (`crate::admin::auth`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::{ApiError, AppState};

pub(crate) async fn require_token(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    require_admin(
        &state.auth_failures,
        state.ops.token.as_ref(),
        request,
        next,
    )
    .await
}

/// Runs `next` if the request carries the admin `token`, as [`require_token`] checks it on a
/// single node and `crate::api::cluster` on a root: 503 without a configured token.
pub(crate) async fn require_admin(
    throttle: &crate::admin::auth::FailureThrottle,
    token: Option<&crate::admin::auth::AdminToken>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = token else {
        return ApiError::unavailable(
            "admin_disabled",
            "the admin API is disabled: set RANKD_ADMIN_TOKEN (or admin_token in the \
             configuration file) and restart",
        )
        .into_response();
    };
    let secret = Bearer {
        what: "admin token",
        shown_as: "TOKEN",
        realm: "Bearer realm=\"rankd admin\"",
    };
    require_bearer(throttle, request, next, secret, |t| token.matches(t)).await
}

/// What a bearer check guards, for its answers.
pub(crate) struct Bearer {
    /// `admin token`, `cluster key`.
    pub what: &'static str,
    /// How the answer to a missing header writes the secret (`Authorization: Bearer TOKEN`).
    pub shown_as: &'static str,
    /// The `WWW-Authenticate` header of a 401.
    pub realm: &'static str,
}

/// Runs `next` if the request carries `Authorization: Bearer S` with `matches(S)`; else 401,
/// and a wrong secret counts against the client's address, which gets 429 once it has sent
/// too many within the minute (`crate::admin::auth::FailureThrottle`).
pub(crate) async fn require_bearer(
    throttle: &crate::admin::auth::FailureThrottle,
    request: Request,
    next: Next,
    secret: Bearer,
    matches: impl Fn(&str) -> bool,
) -> Response {
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let now = Instant::now();
    if let Some(wait) = client.and_then(|ip| throttle.blocked(ip, now)) {
        let secs = wait.as_secs().max(1);
        let mut response = ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            code: "too_many_requests",
            message: format!(
                "too many wrong {}s from this address; try again in {secs} s",
                secret.what
            ),
            field: None,
        }
        .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return response;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::admin::auth::bearer_credentials);
    let error = match given {
        None => format!("missing `Authorization: Bearer {}` header", secret.shown_as),
        // Not a guess: not counted against the address.
        Some("") => format!("empty {}", secret.what),
        Some(t) if matches(t) => return next.run(request).await,
        Some(_) => {
            if let Some(ip) = client {
                throttle.failed(ip, now);
            }
            format!("wrong {}", secret.what)
        }
    };
    let mut response = ApiError::unauthorized(error).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(secret.realm),
    );
    response
}
