//! Every `/admin/` request passes here first: without a configured token the admin API is
//! disabled (503, so a client can tell "not set up" from "wrong token"); otherwise a request
//! without `Authorization: Bearer TOKEN`, or with another token, gets 401.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::{ApiError, AppState};

pub async fn require_token(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = &state.ops.token else {
        return ApiError::unavailable(
            "admin_disabled",
            "the admin API is disabled: set RANKD_ADMIN_TOKEN (or admin_token in the \
             configuration file) and restart",
        )
        .into_response();
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let error = match given {
        None => "missing `Authorization: Bearer TOKEN` header",
        Some(t) if token.matches(t.trim()) => return next.run(request).await,
        Some(_) => "wrong admin token",
    };
    let mut response = ApiError::unauthorized(error).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"rankd admin\""),
    );
    response
}
