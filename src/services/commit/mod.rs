//! Commit: turn a validated tmp object into a recorded file at its paired final key.
//!
//! Order, so that a crash or error at any step leaves a state a retried commit completes:
//! 1. take the upload's lease in the catalog (`issued → promoting`, final key reserved by a
//!    unique index) — concurrent commits of one upload wait for the holder and return its handle;
//! 2. one ranged GET of the tmp object: its type, total size (Content-Range), ETag and version
//!    come with its first bytes in one response; check type, size and magic bytes;
//!    then, when the profile has a validation hook, ask it (`hook`): it is told the ETag just
//!    read and refuses (the upload is rejected) or allows;
//! 3. CopyObject to the final key guarded on both sides — `x-amz-copy-source-if-match` (the
//!    bytes are the ones just checked) and `If-None-Match: *` (nothing at the final key is
//!    overwritten) — with the upload id in the copy's metadata (a retry recognizes its own
//!    final object by it) and, when the client declared a checksum, S3 computing that
//!    algorithm over the copied bytes; the copy's answer (ETag, version, checksum) is the
//!    verification: a checksum other than the declared one removes that copy and rejects;
//! 4. record the handle and `promoting → committed` in one transaction.
//!
//! When a guard refuses (412), a HEAD of the final key tells which: our own earlier copy (roll
//! forward), someone else's object (`final_key_conflict`), or nothing (the source changed:
//! `object_changed`). Objects over `max_single_copy_bytes` are copied in parts, with HEADs.
//!
//! The tmp object is not deleted here: it stays until the upload's URL has expired, so the
//! URL's `If-None-Match: *` keeps refusing a second PUT (single-use URLs), and the sweep then
//! deletes every version of every settled tmp key in `DeleteObjects` batches
//! (`services::tmp_cleanup`). Lease expiry is judged on the database's clock.

use std::time::{Duration, Instant};

use crate::auth::Identity;
use crate::catalog::{CatalogError, LeaseRequest};
use crate::domain::keys::{is_legacy_key, FinalKey, TmpKey};
use crate::domain::records::{self, FileHandle, Upload, UploadMethod, UploadState};
use crate::domain::sniff::read_len;
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::ObjectHead;

mod hook;
mod image;
mod promote;

/// What to do with the lease when a step fails (the promotion's and the validation hook's).
enum Failure {
    /// Nothing was copied: hand the upload back (`issued`) so a retry starts afresh.
    Release(AppError),
    /// The bytes are not what was declared: mark the upload rejected and drop the tmp object.
    Reject(AppError, Option<Box<ObjectHead>>),
    /// A copy may have happened: keep `promoting` and the final key, expire the lease now, so
    /// a retry takes over at once and rolls forward.
    Abandon(AppError),
}

use promote::{promote, settle};

const POLL_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct CommitCommand {
    pub key: String,
    pub final_key: Option<String>,
}

#[derive(Debug, Clone)]
pub enum CommitOutcome {
    /// This call recorded the handle (201).
    Created(FileHandle),
    /// An earlier or concurrent call did (200).
    Existing(FileHandle),
}

impl CommitOutcome {
    pub fn handle(&self) -> &FileHandle {
        match self {
            CommitOutcome::Created(h) | CommitOutcome::Existing(h) => h,
        }
    }
}

/// A lease on one upload held by this commit.
pub(super) struct Lease {
    pub(super) token: String,
    pub(super) final_key: FinalKey,
}

#[tracing::instrument(skip_all, fields(user.id = %who.user_id, admin = who.admin, upload.id = tracing::field::Empty))]
pub async fn commit(
    state: &AppState,
    who: &Identity,
    cmd: CommitCommand,
) -> Result<CommitOutcome, AppError> {
    let custom = match (&cmd.final_key, who.admin) {
        (Some(_), false) => return Err(AppError::FinalKeyForbidden),
        (Some(raw), true) => Some(FinalKey::parse_custom(raw, &state.reserved_keys())?),
        (None, _) => None,
    };
    let legacy = is_legacy_key(&cmd.key, &state.settings.uploads.legacy_prefixes);
    if legacy && custom.is_some() {
        return Err(AppError::InvalidRequest(
            "legacy uploads are committed in place; final_key is not accepted".into(),
        ));
    }
    // Commit only reads keys this service issued: anything else is "not found", and so is
    // someone else's upload, with the same body, so ids cannot be probed.
    if TmpKey::parse(&cmd.key).is_none() && !legacy {
        return Err(AppError::UploadNotFound);
    }
    let Some(found) = state.catalog.upload_by_key(&cmd.key).await? else {
        return pruned(state, who, &cmd.key, custom.as_ref()).await;
    };
    let mut upload = Some(found)
        .filter(|u| u.owner == who.user_id || who.admin)
        .ok_or(AppError::UploadNotFound)?;
    tracing::Span::current().record("upload.id", tracing::field::display(&upload.id));
    // A temporary file lives only under its TTL's prefix, where the lifecycle rule ends it:
    // an admin key elsewhere would keep it for ever (and any key under `temp/` is reserved).
    if custom.is_some()
        && state
            .settings
            .profile(&upload.profile)
            .is_some_and(|p| p.temporary_ttl.is_some())
    {
        return Err(AppError::FinalKeyTemporary);
    }

    // Wait for a concurrent holder at most until its lease would expire, and never past the
    // request timeout: the caller then gets `commit_in_progress` and retries.
    let uploads = &state.settings.uploads;
    let wait = (uploads.commit_lease_secs + 5).min(
        state
            .settings
            .http
            .request_timeout_secs
            .saturating_sub(2)
            .max(1),
    );
    let give_up_at = Instant::now() + Duration::from_secs(wait);
    // A waiting commit asks the database for a takeover when its own clock says the lease has
    // run out, and once a second anyway (its clock may be behind): not on every poll.
    let mut last_try: Option<Instant> = None;
    let (lease, prefetched) = loop {
        let now = records::now();
        match upload.state {
            UploadState::Committed => return existing(state, &upload, custom.as_ref()).await,
            UploadState::Rejected => {
                return Err(AppError::UploadRejected(
                    upload
                        .reject_code
                        .clone()
                        .unwrap_or_else(|| "upload_rejected".into()),
                ))
            }
            UploadState::Issued => {
                // A legacy upload (imported in place, never handed a URL) has no window to miss:
                // its object is where it always was and no tmp lifecycle ends it, so an import
                // recorded with `--no-commit` is committed however much later.
                if !legacy && now > upload.commit_deadline {
                    return Err(AppError::UploadExpired);
                }
                if upload.method == UploadMethod::Multipart.as_str() {
                    crate::services::multipart::require_completed(state, &upload, now).await?;
                }
                let target = target_key(state, &upload, custom.as_ref(), legacy)?;
                // The ranged GET validation starts with reads only, so it runs beside the
                // lease's write instead of after it; a commit that does not get the lease
                // drops what it read. (Legacy uploads validate in place, after the lease.)
                if legacy {
                    if let Some(lease) = take_lease(state, &upload, target, None).await? {
                        break (lease, None);
                    }
                } else {
                    let (lease, sniffed) = tokio::join!(
                        take_lease(state, &upload, target, None),
                        state
                            .store
                            .sniff(&upload.key, read_len(&upload.content_type))
                    );
                    if let Some(lease) = lease? {
                        break (lease, Some(sniffed));
                    }
                }
            }
            UploadState::Promoting => {
                // Whether the holder's lease has run out is the database's call (its clock),
                // never this replica's: the takeover is a conditional update that only
                // succeeds on an expired lease.
                let looks_expired = !upload.lease_until.is_some_and(|until| until > now);
                let due = !last_try.is_some_and(|t| t.elapsed() < Duration::from_secs(1));
                // A commit to another final key holds the upload (an admin's `final_key` while
                // the owner's commit runs): never taken over to a different key — an earlier
                // attempt may have copied to the held one. Wait for it like any concurrent
                // commit: once it is committed the answer is `upload_already_committed` with
                // its handle; while it runs, 503 `commit_in_progress` (review 26: it answered
                // `final_key_conflict`, "taken by another file", for a free key).
                let other_key = matches!(
                    (&upload.final_key, &custom),
                    (Some(held), Some(wanted)) if held != wanted.as_str()
                );
                if (looks_expired || due) && !other_key {
                    last_try = Some(Instant::now());
                    let target = match (&upload.final_key, &custom) {
                        (Some(held), _) => FinalKey::from_trusted(held.clone()),
                        (None, _) => target_key(state, &upload, custom.as_ref(), legacy)?,
                    };
                    let previous = upload.lease_token.clone();
                    if let Some(lease) =
                        take_lease(state, &upload, target, previous.as_deref()).await?
                    {
                        tracing::info!("took over an expired commit lease");
                        break (lease, None);
                    }
                }
                if Instant::now() >= give_up_at {
                    return Err(AppError::CommitInProgress);
                }
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        }
        upload = state
            .catalog
            .upload_by_id(&upload.id)
            .await?
            .ok_or(AppError::UploadNotFound)?;
    };

    // The lease is renewed while the S3 calls run: a multipart copy of a large object can
    // outlast one lease, and a takeover in the middle would copy again beside it.
    let promoted = crate::services::heartbeat::holding(
        promote(state, &upload, &lease, legacy, prefetched),
        state.settings.uploads.commit_lease_secs,
        "commit",
        |secs| state.catalog.renew_lease(&upload.id, &lease.token, secs),
    )
    .await;
    match promoted {
        Ok(outcome) => Ok(outcome),
        Err(failure) => {
            let err = settle(state, &upload, &lease, failure).await;
            // A commit that lost its lease to a takeover which then finished answers with the
            // handle that takeover recorded, never with an error of its own.
            match state.catalog.upload_by_id(&upload.id).await {
                Ok(Some(now)) if now.state == UploadState::Committed => {
                    tracing::info!(
                        error.code = err.code(),
                        "the upload was committed by another call"
                    );
                    existing(state, &now, custom.as_ref()).await
                }
                _ => Err(err),
            }
        }
    }
}

/// The final key a fresh commit aims at: the admin's, the legacy key itself, or the pair.
fn target_key(
    state: &AppState,
    upload: &Upload,
    custom: Option<&FinalKey>,
    legacy: bool,
) -> Result<FinalKey, AppError> {
    if let Some(k) = custom {
        return Ok(k.clone());
    }
    if legacy {
        return Ok(FinalKey::from_trusted(upload.key.clone()));
    }
    let tmp = TmpKey::parse(&upload.key).ok_or_else(|| {
        AppError::Internal(format!("stored key {:?} is not a tmp key", upload.key))
    })?;
    let profile = state.settings.profile(&upload.profile).ok_or_else(|| {
        AppError::Internal(format!(
            "profile {:?} is no longer configured",
            upload.profile
        ))
    })?;
    Ok(profile.paired_key(&tmp))
}

async fn take_lease(
    state: &AppState,
    upload: &Upload,
    final_key: FinalKey,
    previous: Option<&str>,
) -> Result<Option<Lease>, AppError> {
    let token = uuid::Uuid::new_v4().simple().to_string();
    let req = LeaseRequest {
        upload_id: &upload.id,
        expected_state: upload.state,
        expected_token: previous,
        final_key: final_key.as_str(),
        token: &token,
        lease_secs: i64::try_from(state.settings.uploads.commit_lease_secs).unwrap_or(30),
        now: records::now(),
    };
    match state.catalog.take_lease(&req).await {
        Ok(true) => Ok(Some(Lease { token, final_key })),
        Ok(false) => Ok(None),
        Err(CatalogError::FinalKeyTaken) => Err(AppError::FinalKeyConflict),
        Err(e) => Err(e.into()),
    }
}

/// A commit of a tmp key whose upload row is gone. Retention prunes a committed upload's row
/// long after its window closed, but the handle keeps the upload id (part of the tmp key): a
/// late retry still gets that handle (200), and nothing is copied or recorded again. Any other
/// unknown key, and anyone else's, is "not found".
async fn pruned(
    state: &AppState,
    who: &Identity,
    key: &str,
    custom: Option<&FinalKey>,
) -> Result<CommitOutcome, AppError> {
    let Some(tmp) = TmpKey::parse(key) else {
        return Err(AppError::UploadNotFound);
    };
    let handle = state
        .catalog
        .handle_by_upload(tmp.upload_id())
        .await?
        .filter(|h| h.created_by == who.user_id || who.admin)
        .ok_or(AppError::UploadNotFound)?;
    tracing::info!(file.id = %handle.id, "commit retried after its upload row was pruned");
    answer_with(handle, custom)
}

async fn existing(
    state: &AppState,
    upload: &Upload,
    custom: Option<&FinalKey>,
) -> Result<CommitOutcome, AppError> {
    let handle = state
        .catalog
        .handle_by_upload(&upload.id)
        .await?
        .ok_or_else(|| {
            AppError::Internal(format!(
                "upload {} is committed but has no handle",
                upload.id
            ))
        })?;
    answer_with(handle, custom)
}

/// The answer to a commit of an upload that already has its file: that file (200), unless the
/// commit names another final key — then the upload is committed already (no other file holds
/// that key: nothing was looked up there), and the answer says which file it became.
fn answer_with(handle: FileHandle, custom: Option<&FinalKey>) -> Result<CommitOutcome, AppError> {
    if custom.is_some_and(|k| k.as_str() != handle.key) {
        return Err(AppError::UploadAlreadyCommitted {
            file_id: handle.id.to_string(),
        });
    }
    Ok(CommitOutcome::Existing(handle))
}
