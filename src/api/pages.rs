//! The admin page and the script, style and chart files of the web UI, compiled into the
//! binary like the search page so rankd serves its UI from anywhere, offline.

use axum::extract::Path;
use axum::http::header;
use axum::response::{Html, IntoResponse};

use super::ApiError;

/// `GET /admin`: the page itself is public; everything it shows comes from `/admin/...`
/// with the token the operator types in.
pub(crate) async fn admin_page() -> Html<&'static str> {
    Html(include_str!("../../static/admin.html"))
}

/// `GET /static/{file}`: the UI's assets, a fixed list.
pub(crate) async fn asset(Path(file): Path<String>) -> Result<impl IntoResponse, ApiError> {
    const JS: &str = "text/javascript; charset=utf-8";
    const CSS: &str = "text/css; charset=utf-8";
    let (body, content_type) = match file.as_str() {
        "search.js" => (include_str!("../../static/search.js"), JS),
        "admin.js" => (include_str!("../../static/admin.js"), JS),
        "charts.js" => (include_str!("../../static/charts.js"), JS),
        "admin.css" => (include_str!("../../static/admin.css"), CSS),
        _ => return Err(ApiError::not_found(format!("no static file {file:?}"))),
    };
    Ok(([(header::CONTENT_TYPE, content_type)], body))
}
