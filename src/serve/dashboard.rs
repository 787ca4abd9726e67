//! The dashboard: one HTML page, its script and its style sheet, embedded in the binary
//! (no build chain). The script polls the JSON API and inserts every text from Redis
//! with `textContent`; the Content-Security-Policy allows no other script.

use std::sync::Arc;

use axum::{
    http::header,
    response::{IntoResponse, Response},
    routing::get,
    Router,
};

use super::App;

const HTML: &str = include_str!("assets/dashboard.html");
const JS: &str = include_str!("assets/dashboard.js");
const CSS: &str = include_str!("assets/dashboard.css");

/// Scripts, styles and requests from this origin only; no inline script, no frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The dashboard's routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", HTML) }),
        )
        .route(
            "/assets/dashboard.js",
            get(|| async { asset("text/javascript; charset=utf-8", JS) }),
        )
        .route(
            "/assets/dashboard.css",
            get(|| async { asset("text/css; charset=utf-8", CSS) }),
        )
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
