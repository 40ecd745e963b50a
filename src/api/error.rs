//! The one error type of the HTTP API: `{"error":{"code":..,"message":..,"field":..}}` with
//! the matching status. Bad input is always a 4xx, never a 500 or a panic.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::error::{ErrorKind, Kinded};
use crate::search::SearchError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn bad_request(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "bad_request",
            message: message.into(),
            field: Some(field.into()),
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            code: "not_found",
            message: message.into(),
            field: None,
        }
    }

    /// Missing or wrong admin token.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            code: "unauthorized",
            message: message.into(),
            field: None,
        }
    }

    /// The request is valid but clashes with the current state (a job already finished, a
    /// job of the same kind already running).
    pub fn conflict(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::CONFLICT,
            code: "conflict",
            message: message.into(),
            field: None,
        }
    }

    /// A feature switched off by configuration.
    pub fn unavailable(code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code,
            message: message.into(),
            field: None,
        }
    }

    pub fn internal(e: impl std::fmt::Display) -> Self {
        tracing::error!("internal error: {e}");
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "internal",
            message: e.to_string(),
            field: None,
        }
    }
}

impl ApiError {
    /// The answer to an error of `kind` (`crate::error`): its status and code follow from the
    /// kind, the message is the whole chain.
    pub fn of_kind(kind: ErrorKind, message: String, field: Option<String>) -> Self {
        if kind == ErrorKind::Internal {
            return ApiError::internal(message);
        }
        ApiError {
            status: StatusCode::from_u16(kind.http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            code: match kind {
                ErrorKind::Invalid => "bad_request",
                ErrorKind::NotFound => "not_found",
                ErrorKind::Conflict => "conflict",
                ErrorKind::Cancelled => "cancelled",
                ErrorKind::Unavailable => "unavailable",
                ErrorKind::Internal => "internal",
            },
            message,
            field,
        }
    }
}

impl ApiError {
    /// The answer to a library error: the kind of its first kinded cause
    /// (`crate::search::error::kind_of`), the whole chain as the message.
    pub fn of_error(e: &anyhow::Error) -> Self {
        ApiError::of_kind(crate::search::error::kind_of(e), format!("{e:#}"), None)
    }
}

impl From<SearchError> for ApiError {
    fn from(e: SearchError) -> Self {
        let field = match &e {
            SearchError::Query(_) => Some("q".to_string()),
            SearchError::Param { field, .. } => Some(field.to_string()),
            SearchError::Unavailable(_) | SearchError::OverBudget(_) | SearchError::Internal(_) => {
                None
            }
        };
        let message = match &e {
            SearchError::Param { message, .. } => message.clone(),
            other => format!("{other:#}"),
        };
        ApiError::of_kind(e.kind(), message, field)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        crate::metrics::count_error(self.code);
        let body =
            json!({"error": {"code": self.code, "message": self.message, "field": self.field}});
        let mut response = (self.status, Json(body)).into_response();
        // Every 503 of rankd's is worth retrying: overload, a busy index, a shard down.
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}

/// The body of every error answer, as the OpenAPI document describes it (schema `Error`).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub(crate) struct ErrorBody {
    #[schema(inline)]
    pub error: ErrorDetail,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorDetail {
    /// what went wrong, for programs: `bad_request`, `not_found`, `unauthorized`, …
    pub code: String,
    /// what went wrong and where, for people
    pub message: String,
    /// the parameter or body field at fault, if one is
    pub field: Option<String>,
}

/// Completes the OpenAPI document with the error answers every operation can give besides
/// its own (an unknown query parameter is a 400 everywhere; the limits of `guard.rs` answer
/// 408, 413, 414, 431 and 503; wrong admin tokens 429) and gives every 4xx and 5xx answer
/// the [`ErrorBody`] schema, so clients (and schemathesis) can rely on both.
pub(crate) fn document_errors(openapi: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{Content, Ref, RefOr, Response};
    use utoipa::{PartialSchema, ToSchema};

    openapi
        .components
        .get_or_insert_with(Default::default)
        .schemas
        .insert(ErrorBody::name().into_owned(), ErrorBody::schema());
    let error_content = || Content::new(Some(Ref::from_schema_name(ErrorBody::name())));
    let common: &[(u16, &str)] = &[
        (
            400,
            "bad request: an unknown or malformed parameter, named in `error.field`",
        ),
        (
            408,
            "the request took longer than `limits.request_timeout_secs`; nothing was written \
             (a write that has begun is answered when it is done)",
        ),
        (414, "the request line is longer than the server takes"),
        (431, "the request headers are larger than the server takes"),
        (
            503,
            "unavailable for now, retry after `Retry-After`: over \
             `limits.max_concurrent_requests`, a search over its time budget, the index being \
             written by another process, or starting or draining",
        ),
    ];
    for item in openapi.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
            &mut item.head,
        ];
        for operation in operations.into_iter().flatten() {
            let mut extra = common.to_vec();
            if operation.request_body.is_some() {
                extra.push((413, "the body is larger than `limits.max_body_bytes`"));
                extra.push((
                    415,
                    "the body has a `Content-Encoding` other than `identity` (bodies are read \
                     uncompressed)",
                ));
            }
            if operation.security.is_some() {
                extra.push((
                    429,
                    "too many wrong admin tokens from this address; retry after `Retry-After` \
                     seconds",
                ));
            }
            let responses = &mut operation.responses.responses;
            for (status, description) in extra {
                responses
                    .entry(status.to_string())
                    .or_insert_with(|| RefOr::T(Response::new(description)));
            }
            for (status, response) in responses.iter_mut() {
                let is_error = status.starts_with('4') || status.starts_with('5');
                if let (true, RefOr::T(response)) = (is_error, response) {
                    if response.content.is_empty() {
                        response
                            .content
                            .insert("application/json".into(), error_content());
                    }
                }
            }
        }
    }
}
