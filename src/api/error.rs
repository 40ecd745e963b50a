//! The one error type of the HTTP API: `{"error":{"code":..,"message":..,"field":..}}` with
//! the matching status. Bad input is always a 4xx, never a 500 or a panic.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::error::{ErrorKind, Kinded};
use crate::text::SearchError;

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
                ErrorKind::Internal => "internal",
            },
            message,
            field,
        }
    }
}

impl From<SearchError> for ApiError {
    fn from(e: SearchError) -> Self {
        let field = match &e {
            SearchError::Query(_) => Some("q".to_string()),
            SearchError::Param { field, .. } => Some(field.to_string()),
            SearchError::Internal(_) => None,
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
        (self.status, Json(body)).into_response()
    }
}
