//! Bulk link scans for applications that cannot keep links exact (admins):
//! `POST /v1/link-scans`, `PUT /v1/link-scans/{id}/batches/{n}` (idempotent per batch, so a
//! crashed scanner resumes), `POST /v1/link-scans/{id}/complete`.

use crate::http::extract::ApiPath;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{post, put};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use validator::Validate;

use super::extract::ApiJson;
use crate::auth::Identity;
use crate::catalog::{LinkScan, ScanCompletion};
use crate::domain::ids::FileId;
use crate::domain::records;
use crate::error::AppError;
use crate::state::AppState;

/// Most file ids in one batch.
const MAX_BATCH: usize = 20_000;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/link-scans", post(create))
        .route(
            "/v1/link-scans/{id}/batches/{n}",
            put(batch).layer(DefaultBodyLimit::max(1024 * 1024)),
        )
        .route("/v1/link-scans/{id}/complete", post(complete))
}

#[derive(Debug, Serialize)]
struct ScanView {
    id: String,
    state: &'static str,
    started_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed_at: Option<DateTime<Utc>>,
}

impl From<LinkScan> for ScanView {
    fn from(s: LinkScan) -> Self {
        Self {
            id: s.id,
            state: if s.completed { "completed" } else { "open" },
            started_at: s.started_at,
            completed_at: s.completed_at,
        }
    }
}

fn admin(who: &Identity) -> Result<(), AppError> {
    if who.admin {
        Ok(())
    } else {
        Err(AppError::AdminRequired)
    }
}

async fn open_scan(state: &AppState, id: &str) -> Result<LinkScan, AppError> {
    let scan = state
        .catalog
        .scan(id)
        .await?
        .ok_or(AppError::LinkScanNotFound)?;
    if scan.completed {
        return Err(AppError::LinkScanCompleted);
    }
    Ok(scan)
}

async fn create(
    State(state): State<AppState>,
    who: Identity,
) -> Result<(StatusCode, Json<ScanView>), AppError> {
    admin(&who)?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let now = records::now();
    state.catalog.create_scan(&id, now).await?;
    Ok((
        StatusCode::CREATED,
        Json(ScanView {
            id,
            state: "open",
            started_at: now,
            completed_at: None,
        }),
    ))
}

#[derive(Debug, Deserialize, Validate)]
struct BatchBody {
    file_ids: Vec<String>,
}

#[derive(Debug, Serialize)]
struct BatchView {
    scan_id: String,
    batch: i64,
    files: usize,
    /// This batch number was received before; nothing was added again.
    duplicate: bool,
}

async fn batch(
    State(state): State<AppState>,
    who: Identity,
    ApiPath((id, n)): ApiPath<(String, i64)>,
    ApiJson(body): ApiJson<BatchBody>,
) -> Result<Json<BatchView>, AppError> {
    admin(&who)?;
    if n < 0 || body.file_ids.len() > MAX_BATCH {
        return Err(AppError::InvalidRequest(format!(
            "batch numbers start at 0; a batch holds at most {MAX_BATCH} file ids"
        )));
    }
    if let Some(bad) = body.file_ids.iter().find(|f| FileId::parse(f).is_none()) {
        return Err(AppError::InvalidRequest(format!(
            "{bad:?} is not a file id"
        )));
    }
    open_scan(&state, &id).await?;
    let fresh = state
        .catalog
        .add_scan_batch(&id, n, &body.file_ids, records::now())
        .await?;
    Ok(Json(BatchView {
        scan_id: id,
        batch: n,
        files: body.file_ids.len(),
        duplicate: !fresh,
    }))
}

async fn complete(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ScanView>, AppError> {
    admin(&who)?;
    let scan = state
        .catalog
        .scan(&id)
        .await?
        .ok_or(AppError::LinkScanNotFound)?;
    if !scan.completed {
        let done = state.catalog.complete_scan(&id, records::now()).await?;
        if done == ScanCompletion::Busy {
            // Hygiene is deleting a key whose handle this scan saw; it settles within its
            // lease, then the scan completes (and the next run judges by it).
            return Err(AppError::FileBusy);
        }
    }
    let scan = state
        .catalog
        .scan(&id)
        .await?
        .ok_or(AppError::LinkScanNotFound)?;
    Ok(Json(scan.into()))
}
