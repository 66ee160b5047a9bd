//! Where a file is used: `PUT`/`DELETE /v1/files/{id}/links/{object_type}/{object_id}`
//! (idempotent; owner or admin), and `POST /v1/files/{id}/restore`.

use crate::http::extract::ApiPath;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;

use super::read::visible_handle;
use crate::auth::Identity;
use crate::domain::records::{self, FileHandle, HandleStatus};
use crate::error::AppError;
use crate::services::hygiene::{self, HygieneError, RestoreError};
use crate::state::AppState;

/// 1–128 of `[A-Za-z0-9_.:-]`: application ids, never paths.
fn valid_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

fn check(object_type: &str, object_id: &str) -> Result<(), AppError> {
    if valid_part(object_type) && valid_part(object_id) {
        Ok(())
    } else {
        Err(AppError::InvalidRequest(
            "object_type and object_id must be 1-128 of [A-Za-z0-9_.:-]".into(),
        ))
    }
}

fn restore_error(e: RestoreError) -> AppError {
    match e {
        RestoreError::Busy => AppError::FileBusy,
        RestoreError::Deleted => AppError::FileDeleted,
        RestoreError::Failed(HygieneError::Catalog(e)) => e.into(),
        RestoreError::Failed(HygieneError::Store(e)) => e.into(),
        RestoreError::Failed(HygieneError::Busy) => AppError::FileBusy,
    }
}

pub(super) async fn put_link(
    State(state): State<AppState>,
    who: Identity,
    ApiPath((id, object_type, object_id)): ApiPath<(String, String, String)>,
) -> Result<StatusCode, AppError> {
    check(&object_type, &object_id)?;
    let h = visible_handle(&state, &who, &id).await?;
    if h.status == HandleStatus::Deleted {
        return Err(AppError::FileDeleted);
    }
    super::read::refuse_expired(&h)?;
    // In use again: an unlinked or archived file comes back, and the link is recorded in the
    // same transaction as its return (never a link on a file left archived).
    hygiene::restore(
        &state.catalog,
        &state.store,
        &h,
        Some((&object_type, &object_id)),
        &state.settings,
        records::now(),
    )
    .await
    .map_err(restore_error)?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn delete_link(
    State(state): State<AppState>,
    who: Identity,
    ApiPath((id, object_type, object_id)): ApiPath<(String, String, String)>,
) -> Result<StatusCode, AppError> {
    check(&object_type, &object_id)?;
    let h = visible_handle(&state, &who, &id).await?;
    state
        .catalog
        .delete_link(&h.id, &object_type, &object_id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn restore(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<FileHandle>, AppError> {
    let h = visible_handle(&state, &who, &id).await?;
    if h.status == HandleStatus::Deleted {
        return Err(AppError::FileDeleted);
    }
    super::read::refuse_expired(&h)?;
    hygiene::restore(
        &state.catalog,
        &state.store,
        &h,
        None,
        &state.settings,
        records::now(),
    )
    .await
    .map_err(restore_error)?;
    let fresh = state
        .catalog
        .handle_by_id(&h.id)
        .await?
        .ok_or(AppError::FileNotFound)?;
    Ok(Json(fresh))
}
