//! The browser upload page (`UPCOMMIT_DEMO=true`): `/demo` (HTML), `/demo/app.js`, the
//! browser client it uploads with (`/demo/upcommit.js`, the file `clients/js/upcommit.js`),
//! `/demo/config` (profiles, whether minting is on) and, in dev mode only
//! (`UPCOMMIT_DEMO_MINT_TOKENS=true`), `POST /demo/token`. None of these routes exist when the
//! demo is off.

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderName, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use validator::Validate;

use crate::config::Settings;
use crate::error::AppError;
use crate::http::extract::ApiJson;
use crate::signing::S3Location;
use crate::state::AppState;

const PAGE: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
/// The browser client (`clients/js/`), compiled into the binary so the page works from it alone.
const CLIENT: &str = include_str!("../../../clients/js/upcommit.js");
/// Lifetime of a minted token.
const MINTED_TTL_SECS: i64 = 3600;

pub fn router(settings: &Settings) -> Router<AppState> {
    if !settings.demo.enabled {
        return Router::new();
    }
    let mut router = Router::new()
        .route("/demo", get(page))
        .route("/demo/app.js", get(script))
        .route("/demo/upcommit.js", get(client))
        .route("/demo/config", get(config));
    if settings.demo.mint_tokens {
        router = router.route("/demo/token", post(mint));
    }
    router
}

/// The storage origin the page uploads to and shows images from, for the CSP.
pub(crate) fn storage_origin(settings: &Settings) -> String {
    let s3 = &settings.s3;
    s3.endpoint
        .as_deref()
        .and_then(|e| S3Location::path_style(e, &s3.bucket))
        .unwrap_or_else(|| S3Location::virtual_hosted(&s3.bucket, &s3.region))
        .origin()
}

async fn page(State(state): State<AppState>) -> impl IntoResponse {
    let storage = storage_origin(&state.settings);
    let csp = format!(
        "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; \
         connect-src 'self' {storage}; img-src 'self' {storage}; form-action 'none'; \
         frame-ancestors 'none'; base-uri 'none'"
    );
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8".to_owned()),
            (CACHE_CONTROL, "no-store".to_owned()),
            (HeaderName::from_static("content-security-policy"), csp),
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

async fn client() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
        ],
        CLIENT,
    )
}

async fn config(State(state): State<AppState>) -> Json<Value> {
    let profiles: Vec<Value> = state
        .settings
        .uploads
        .profiles
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "content_types": p.content_types.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
                "max_size": p.max_size,
                "variants": p.variants.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
            })
        })
        .collect();
    Json(json!({ "mint_tokens": state.settings.demo.mint_tokens, "profiles": profiles }))
}

#[derive(Debug, Deserialize, Validate)]
struct MintBody {
    #[validate(length(min = 1, max = 64))]
    sub: String,
}

/// Dev mode only: a 1-hour, non-admin token for any user id.
async fn mint(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<MintBody>,
) -> Result<(StatusCode, Json<Value>), AppError> {
    let sub = body.sub.trim();
    let valid = !sub.is_empty()
        && sub.len() <= 64
        && sub
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
    if !valid {
        return Err(AppError::InvalidRequest(
            "sub: 1 to 64 characters of letters, digits, - _ . @".into(),
        ));
    }
    let now = chrono::Utc::now().timestamp();
    let token = crate::auth::issue(
        state.settings.auth.jwt_secret.expose().as_bytes(),
        sub,
        false,
        MINTED_TTL_SECS,
        now,
    );
    tracing::warn!(user.id = sub, "demo: minted a dev token");
    Ok((
        StatusCode::CREATED,
        Json(json!({ "token": token, "expires_in": MINTED_TTL_SECS })),
    ))
}
