//! `GET /healthz` (the process answers), `GET /readyz` (database and bucket reachable, judged at
//! most a second ago, the latest check of the bucket's configuration in detail, and the store
//! capabilities the server runs without).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::domain::capabilities::Standing;
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
    let verdict = &state.store_verdict;
    let gaps: Vec<Value> = verdict
        .lines
        .iter()
        .filter(|l| l.standing == Standing::Accepted)
        .map(|l| {
            json!({
                "capability": l.capability,
                "finding": l.finding,
                "promise": l.promise,
                "without": l.without,
            })
        })
        .collect();
    let checks = json!({
        "database": show(db),
        "bucket": show(bucket),
        "bucket_config": config_status,
        // Every capability a promise needs is present, or its gap accepted (`gaps_accepted`):
        // a server whose store lacks one unaccepted does not start.
        "store": if gaps.is_empty() { "ok" } else { "gaps_accepted" },
    });
    let config_blocks = state.settings.bucket_check.fails_readiness && config_status == "failing";
    let mut body = if db && bucket && !config_blocks {
        json!({ "status": "ready", "checks": checks })
    } else {
        json!({
            "error": { "code": "not_ready", "message": "a dependency is unavailable or the bucket's configuration fails its checks" },
            "checks": checks,
        })
    };
    if let Some(r) = report {
        body["bucket_config"] = json!(r.as_ref());
    }
    body["store_gaps"] = json!(gaps);
    let status = if body.get("error").is_some() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (status, Json(body))
}
