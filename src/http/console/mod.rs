//! The admin console (`UPCOMMIT_ADMIN_CONSOLE=true`): `/admin` (HTML), `/admin/app.js` and
//! `/admin/config` (how to sign in), one page whose hash routes (`#/overview`, `#/files`,
//! `#/events`, `#/jobs`) draw what the admin API answers, with the token an operator pastes or,
//! with `UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID`, the one the identity provider gives the page (the
//! authorization code flow with PKCE, in the browser: the server never sees the code). The
//! page holds no data and no secret of its own: every number and action is a documented
//! `/v1/...` call, which a script can make as well. None of the routes exists when the console
//! is off.

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::HeaderName;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};

use crate::config::Settings;
use crate::state::AppState;

const PAGE: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");

/// Only this origin (and, with provider sign-in, the provider's, for its discovery document
/// and token endpoint): the page calls its own API and draws its charts as inline SVG, so it
/// needs no other place, and a file name the API echoes cannot load anything. Images may also
/// come from the bucket's origin, and only while a profile has variants: a file's rendition is
/// shown from its presigned URL (issue 37); scripts and connections never may.
fn csp(settings: &Settings) -> String {
    let provider = sign_in(settings)
        .and_then(|s| origin(&s.issuer))
        .map(|o| format!(" {o}"))
        .unwrap_or_default();
    let renders = settings
        .uploads
        .profiles
        .iter()
        .any(|p| !p.variants.is_empty());
    let storage = if renders {
        format!(" {}", crate::http::demo::storage_origin(settings))
    } else {
        String::new()
    };
    format!(
        "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; \
         connect-src 'self'{provider}; img-src 'self' data:{storage}; form-action 'none'; \
         frame-ancestors 'none'; base-uri 'none'"
    )
}

/// `scheme://host[:port]` of an http(s) URL.
fn origin(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    matches!(parsed.scheme(), "http" | "https").then(|| parsed.origin().ascii_serialization())
}

/// How the page may sign in besides a pasted token: the identity provider's issuer (its
/// discovery document is `<issuer>/.well-known/openid-configuration`), the console's client id
/// there, and the scopes to ask for. `rules` made sure there is exactly one provider.
#[derive(serde::Serialize)]
struct SignIn {
    issuer: String,
    client_id: String,
    scope: String,
}

fn sign_in(settings: &Settings) -> Option<SignIn> {
    let client_id = settings.console.client_id.clone()?;
    let provider = settings.auth.issuers.first()?;
    Some(SignIn {
        issuer: provider.issuer.clone(),
        client_id,
        scope: settings.console.scope.clone(),
    })
}

pub fn router(settings: &Settings) -> Router<AppState> {
    if !settings.console.enabled {
        return Router::new();
    }
    Router::new()
        .route("/admin", get(page))
        .route("/admin/app.js", get(script))
        .route("/admin/config", get(config))
}

async fn page(State(state): State<AppState>) -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8".to_owned()),
            (CACHE_CONTROL, "no-store".to_owned()),
            (
                HeaderName::from_static("content-security-policy"),
                csp(&state.settings),
            ),
            // The address may carry the provider's code for a moment: no request names it.
            (
                HeaderName::from_static("referrer-policy"),
                "no-referrer".to_owned(),
            ),
        ],
        PAGE,
    )
}

/// What the sign-in page offers: `{"sign_in": null}` (a pasted token only) or the provider's
/// issuer, the client id and the scopes.
async fn config(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(CACHE_CONTROL, "no-store")],
        Json(serde_json::json!({ "sign_in": sign_in(&state.settings) })),
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
