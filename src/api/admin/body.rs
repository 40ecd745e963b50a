//! Request bodies of the admin API, parsed strictly: a wrong type, a missing or unknown key
//! is a 400 that names the field (`ids[2]`, `[0].grade`), never axum's plain-text rejection.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::de::DeserializeOwned;

use crate::api::ApiError;

/// The raw body, or a JSON error (413 when it exceeds `limits.max_body_bytes`) in place of
/// axum's plain-text rejection.
pub fn bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        let status = rejection.status();
        let code = if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            "payload_too_large"
        } else {
            "bad_request"
        };
        ApiError {
            status,
            code,
            message: format!("cannot read the request body: {}", rejection.body_text()),
            field: Some("body".into()),
        }
    })
}

/// Parses a JSON body into `T`, naming the offending field in the error.
pub fn json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "body".to_string()
        } else {
            path
        };
        ApiError::bad_request(field, format!("invalid JSON body: {}", e.inner()))
    })
}

/// A text body (qrels, query lists) as UTF-8.
pub fn text(body: &[u8]) -> Result<&str, ApiError> {
    std::str::from_utf8(body).map_err(|e| {
        ApiError::bad_request(
            "body",
            format!("the body is not UTF-8 (byte {})", e.valid_up_to() + 1),
        )
    })
}

/// A non-empty, trimmed identifier.
pub fn id(field: &str, value: &str) -> Result<String, ApiError> {
    let v = value.trim();
    if v.is_empty() {
        return Err(ApiError::bad_request(field, format!("`{field}` is empty")));
    }
    Ok(v.to_string())
}

/// `limit` (1..=1000, default 100) and `offset` (default 0) of a listing.
pub fn page(limit: Option<i64>, offset: Option<i64>) -> Result<(i64, i64), ApiError> {
    let (limit, offset) = (limit.unwrap_or(100), offset.unwrap_or(0));
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request(
            "limit",
            format!("limit must be between 1 and 1000, got {limit}"),
        ));
    }
    if offset < 0 {
        return Err(ApiError::bad_request(
            "offset",
            format!("offset must not be negative, got {offset}"),
        ));
    }
    Ok((limit, offset))
}
