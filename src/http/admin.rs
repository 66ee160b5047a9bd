//! Admin routes: `GET /v1/admin/storage-report`.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};

use crate::auth::Identity;
use crate::error::AppError;
use crate::services::report::{self, ReportError, StorageReport};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/admin/storage-report", get(storage_report))
}

async fn storage_report(
    State(state): State<AppState>,
    who: Identity,
) -> Result<Json<StorageReport>, AppError> {
    if !who.admin {
        return Err(AppError::AdminRequired);
    }
    report::storage_report(&state.catalog, &state.store, &state.settings)
        .await
        .map(Json)
        .map_err(|e| match e {
            ReportError::Catalog(e) => e.into(),
            ReportError::Store(e) => e.into(),
        })
}
