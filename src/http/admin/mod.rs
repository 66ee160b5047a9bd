//! Admin routes that read what the service holds and run its maintenance from the API — what
//! the console (`/admin`) shows and does, each also a plain call any admin client can make:
//! `GET /v1/admin/storage-report`, `GET /v1/admin/bucket` (here), the job history and
//! hygiene's dry run (`jobs`), and finding files (`files`). Every handler takes [`Admin`] first:
//! a token that is not an admin's is answered 403 `admin_required` before anything else is read.

mod files;
mod jobs;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use crate::domain::capabilities::Line;
use crate::error::AppError;
use crate::http::extract::Admin;
use crate::services::report::{self, ReportError, StorageReport};
use crate::state::bucket_watch::{self, BucketReport};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/admin/storage-report", get(storage_report))
        .route("/v1/admin/bucket", get(bucket))
        .merge(jobs::router())
        .merge(files::router())
}

/// A query string that did not parse (a number that is none, a repeated key): one message.
pub(super) fn bad_query(what: &str) -> AppError {
    AppError::InvalidRequest(format!("query: {what}"))
}

async fn storage_report(
    _admin: Admin,
    State(state): State<AppState>,
) -> Result<Json<StorageReport>, AppError> {
    report::storage_report(&state.catalog, &state.store, &state.settings)
        .await
        .map(Json)
        .map_err(|e| match e {
            ReportError::Catalog(e) => e.into(),
            ReportError::Store(e) => e.into(),
        })
}

#[derive(Serialize)]
struct Bucket<'a> {
    bucket: &'a str,
    /// The drift watch's verdict, as `/readyz` says it.
    verdict: &'static str,
    /// The watch's latest run (every check with its detail, and the fix of each that failed).
    report: Option<&'a BucketReport>,
    /// What the store was found to do at start, one line per capability.
    capabilities: &'a [Line],
}

/// The live bucket's checks and the store's capabilities, from this replica's memory (the
/// drift watch and the start-up probe): no call to the store.
async fn bucket(
    _admin: Admin,
    State(state): State<AppState>,
) -> Result<Json<serde_json::Value>, AppError> {
    let report = state.bucket_watch.latest();
    let body = Bucket {
        bucket: state.store.bucket(),
        verdict: bucket_watch::verdict(
            report.as_deref(),
            state.settings.bucket_check.interval_secs,
        ),
        report: report.as_deref(),
        capabilities: &state.store_verdict.lines,
    };
    serde_json::to_value(&body)
        .map(Json)
        .map_err(|e| AppError::Internal(format!("bucket view: {e}")))
}
