//! `GET /healthz` (the process answers) and `GET /readyz` (database and bucket reachable).

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
    let (db, bucket) = tokio::join!(state.catalog.ping(), state.store.check_bucket());
    let show = |ok: bool| if ok { "ok" } else { "unavailable" };
    let checks = json!({ "database": show(db.is_ok()), "bucket": show(bucket.is_ok()) });
    if db.is_ok() && bucket.is_ok() {
        (
            StatusCode::OK,
            Json(json!({ "status": "ready", "checks": checks })),
        )
    } else {
        if let Err(e) = &db {
            tracing::warn!(check = "database", error.detail = %e, "readiness check failed");
        }
        if let Err(e) = &bucket {
            tracing::warn!(check = "bucket", error.detail = %e, "readiness check failed");
        }
        let body = json!({
            "error": { "code": "not_ready", "message": "a dependency is unavailable" },
            "checks": checks,
        });
        (StatusCode::SERVICE_UNAVAILABLE, Json(body))
    }
}
