//! `GET /metrics` in the Prometheus text format (version 0.0.4): the bucket checks as gauges.

use std::fmt::Write;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::domain::bucket_check::Check;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let mut out = String::new();
    let report = state.bucket_watch.latest();
    out.push_str("# HELP upcommit_bucket_check_ok 1 when the live bucket passes the check, 0 when it fails.\n");
    out.push_str("# TYPE upcommit_bucket_check_ok gauge\n");
    if let Some(r) = &report {
        for check in Check::ALL {
            let ok = r.results.iter().any(|x| x.check == check && x.ok);
            let _ = writeln!(
                out,
                "upcommit_bucket_check_ok{{check=\"{}\"}} {}",
                check.name(),
                u8::from(ok)
            );
        }
    }
    out.push_str("# HELP upcommit_bucket_check_last_run_timestamp_seconds When the bucket checks last ran (Unix time).\n");
    out.push_str("# TYPE upcommit_bucket_check_last_run_timestamp_seconds gauge\n");
    if let Some(r) = &report {
        let _ = writeln!(
            out,
            "upcommit_bucket_check_last_run_timestamp_seconds {}",
            r.checked_at.timestamp()
        );
    }
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        out,
    )
}
