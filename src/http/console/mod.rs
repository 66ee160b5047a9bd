//! The admin console (`UPCOMMIT_ADMIN_CONSOLE=true`): `/admin` (HTML) and `/admin/app.js`, one
//! page whose hash routes (`#/overview`, `#/files`, `#/events`, `#/jobs`) draw what the admin
//! API answers, with the token an operator pastes. The page holds no data and no secret of its
//! own: every number and action is a documented `/v1/...` call, which a script can make as well.
//! Neither route exists when the console is off.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::HeaderName;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::config::Settings;
use crate::state::AppState;

const PAGE: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");

/// Only this origin: the page calls its own API and draws its charts as inline SVG, so it
/// needs no other place, and a file name the API echoes cannot load anything.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; \
                   connect-src 'self'; img-src 'self' data:; form-action 'none'; \
                   frame-ancestors 'none'; base-uri 'none'";

pub fn router(settings: &Settings) -> Router<AppState> {
    if !settings.console.enabled {
        return Router::new();
    }
    Router::new()
        .route("/admin", get(page))
        .route("/admin/app.js", get(script))
}

async fn page() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
            (HeaderName::from_static("content-security-policy"), CSP),
        ],
        PAGE,
    )
}

async fn script() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
        ],
        SCRIPT,
    )
}
