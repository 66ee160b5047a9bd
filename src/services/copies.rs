//! Shared handles: a copy is a new handle of an existing file's object — no bytes copied, no
//! S3 call, no quota charged — with its own id, owner, links and status. The object then lives
//! as long as any handle of its key needs it: hygiene archives a key only when no handle of it
//! is available, deletes it only when every handle is deleted or archived past the retention
//! period, and a restore of one handle restores the object for all (see `services::hygiene`).

use chrono::{DateTime, Utc};

use crate::auth::{valid_user_id, Identity};
use crate::catalog::NewCopy;
use crate::domain::ids::FileId;
use crate::domain::records::{self, FileHandle, HandleStatus};
use crate::error::AppError;
use crate::state::AppState;

#[derive(Debug, Clone, Default)]
pub struct CopyCommand {
    /// The copy's owner: admins only; the caller by default.
    pub owner: Option<String>,
}

/// Makes a copy of `source` (owned by the caller, or any file for an admin). Someone else's
/// file is "not found", with the same answer as an unknown id.
#[tracing::instrument(skip_all, fields(user.id = %who.user_id, admin = who.admin, file.id = %source))]
pub async fn copy(
    state: &AppState,
    who: &Identity,
    source: &str,
    cmd: CopyCommand,
) -> Result<FileHandle, AppError> {
    let owner = match (cmd.owner, who.admin) {
        (Some(_), false) => return Err(AppError::OwnerForbidden),
        (Some(o), true) if !valid_user_id(&o) => {
            return Err(AppError::InvalidRequest(
                "owner must be 1-128 bytes with no control characters".into(),
            ))
        }
        (Some(o), true) => o,
        (None, _) => who.user_id.clone(),
    };
    let source = FileId::parse(source).ok_or(AppError::FileNotFound)?;
    let visible = |h: &FileHandle| h.created_by == who.user_id || who.admin;
    let found = state
        .catalog
        .handle_by_id(&source)
        .await?
        .filter(visible)
        .ok_or(AppError::FileNotFound)?;
    let now = records::now();
    refuse_unless_available(&found, now)?;
    // One object's handles are bounded (hygiene's work on a key grows with their square); the
    // insert checks the bound under the key's lock, and only a refusal asks which rule refused.
    let max = i64::try_from(state.settings.jobs.max_copies_per_file).unwrap_or(i64::MAX);
    let id = FileId::generate();
    // A copy of a temporary file shares its object under `temp/`, so it ends with it: the insert
    // copies `expires_at`.
    let new = NewCopy {
        id: &id,
        owner: &owner,
        now,
        max_handles_per_key: max,
    };
    // The insert re-checks the source's status and the key's hygiene claims itself: what was
    // read above only chooses the answer.
    if let Some(copy) = state.catalog.copy_handle(&source, &new).await? {
        tracing::info!(copy.id = %copy.id, copy.owner = %copy.created_by, "file copied");
        return Ok(copy);
    }
    let fresh = state
        .catalog
        .handle_by_id(&source)
        .await?
        .ok_or(AppError::FileNotFound)?;
    refuse_unless_available(&fresh, records::now())?;
    if state
        .catalog
        .handle_ids_of_key(&fresh.key, max)
        .await?
        .len() as i64
        >= max
    {
        return Err(AppError::TooManyCopies);
    }
    // Available, yet refused: hygiene holds it or a copy of its key.
    Err(AppError::FileBusy)
}

fn refuse_unless_available(h: &FileHandle, now: DateTime<Utc>) -> Result<(), AppError> {
    if h.is_expired(now) {
        return Err(AppError::FileExpired);
    }
    match h.status {
        HandleStatus::Available => Ok(()),
        HandleStatus::Expired => Err(AppError::FileExpired),
        HandleStatus::Deleted => Err(AppError::FileDeleted),
        HandleStatus::Unlinked | HandleStatus::Archived => Err(AppError::FileNotAvailable),
    }
}
