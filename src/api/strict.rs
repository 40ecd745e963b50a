//! Every route refuses query parameters it does not take, as `/search` does: the OpenAPI
//! document generated from the handlers lists each operation's parameters, and a request
//! naming another one gets a 400 that names it, before its handler runs. The document is the
//! single source of truth, so a parameter a handler reads but does not document is refused
//! too (the API tests would show it). `/doc/{id}` ignores parameters (INTERFACE.md); the search
//! page `/` documents the ones its script reads (`/?q=...`, a shareable search).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::OpenApi;

use super::error::ApiError;
use super::params::decode;

/// (method, route template) → the query parameters it takes.
#[derive(Debug, Default)]
pub(crate) struct Declared {
    routes: HashMap<(String, String), HashSet<String>>,
}

impl Declared {
    pub fn from_openapi(doc: &OpenApi) -> Self {
        let mut routes = HashMap::new();
        for (path, item) in &doc.paths.paths {
            let operations = [
                ("GET", &item.get),
                ("POST", &item.post),
                ("PUT", &item.put),
                ("DELETE", &item.delete),
                ("PATCH", &item.patch),
            ];
            for (method, op) in operations {
                let Some(op) = op else { continue };
                let names = op
                    .parameters
                    .iter()
                    .flatten()
                    .filter(|p| matches!(p.parameter_in, ParameterIn::Query))
                    .map(|p| p.name.clone())
                    .collect();
                routes.insert((method.to_string(), path.clone()), names);
            }
        }
        Declared { routes }
    }
}

/// The middleware: refuses undeclared query parameters of documented routes.
pub(crate) async fn refuse_unknown(
    declared: Arc<Declared>,
    request: Request,
    next: Next,
) -> Response {
    if let (Some(query), Some(route)) = (
        request.uri().query().filter(|q| !q.is_empty()),
        request.extensions().get::<MatchedPath>(),
    ) {
        let key = (
            request.method().as_str().to_string(),
            route.as_str().to_string(),
        );
        if let Some(known) = declared.routes.get(&key) {
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let raw = pair.split('=').next().unwrap_or("");
                let name = match decode(raw, "query string") {
                    Ok(name) => name,
                    Err(e) => return e.into_response(),
                };
                if !known.contains(&name) {
                    let mut names: Vec<&str> = known.iter().map(String::as_str).collect();
                    names.sort_unstable();
                    let known = if names.is_empty() {
                        "this route takes none".to_string()
                    } else {
                        format!("known: {}", names.join(", "))
                    };
                    return ApiError::bad_request(
                        name.clone(),
                        format!("unknown parameter `{name}` ({known})"),
                    )
                    .into_response();
                }
            }
        }
    }
    next.run(request).await
}
