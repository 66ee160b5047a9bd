//! `GET /healthz` (the process answers) and `GET /readyz` (database and bucket reachable,
//! judged at most a second ago, and the drift watch's verdict on the bucket's configuration).
//!
//! Both need no token, so they say only what a load balancer and an orchestrator act on: ready
//! or not, and each check's state by name. The detail — the watch's report, the store's
//! capabilities and the gaps the server runs with, each with its weakened promise — is an
//! attacker's map (issue 35: `/readyz` served it to anyone), and is `GET /v1/admin/bucket`'s,
//! behind an admin token. `/readyz` reads no token: the same answer for everyone, so a probe
//! never waits on a token's verification.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    // At most a second old, shared by concurrent probes (see `state::readiness`).
    let probe = state
        .readiness
        .current(state.catalog.as_ref(), state.store.as_ref())
        .await;
    let (db, bucket) = (probe.database.is_ok(), probe.bucket.is_ok());
    let show = |ok: bool| if ok { "ok" } else { "unavailable" };
    let report = state.bucket_watch.latest();
    let config_status = crate::state::bucket_watch::verdict(
        report.as_deref(),
        state.settings.bucket_check.interval_secs,
    );
    // The store's verdict is no check here: a server whose store lacks a capability a promise
    // needs, unaccepted, does not start; the gaps it runs with are the admin view's.
    let checks = json!({
        "database": show(db),
        "bucket": show(bucket),
        "bucket_config": config_status,
    });
    let config_blocks = state.settings.bucket_check.fails_readiness && config_status == "failing";
    let body = if db && bucket && !config_blocks {
        json!({ "status": "ready", "checks": checks })
    } else {
        json!({
            "error": { "code": "not_ready", "message": "a dependency is unavailable or the bucket's configuration fails its checks" },
            "checks": checks,
        })
    };
    let status = if body.get("error").is_some() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (status, Json(body))
}
