//! Steps 2–6 of a commit, run under the upload's lease, and what each failure does to it.

use crate::domain::content::ContentType;
use crate::domain::ids::FileId;
use crate::domain::records::{self, FileHandle, HandleStatus, Upload};
use crate::domain::sniff::{sniff, Sniff, SNIFF_BYTES};
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::{ObjectHead, StoreError, UPLOAD_ID_METADATA};

use super::multipart_copy::{copy_in_parts, CopyJob};
use super::{CommitOutcome, Lease};

/// What to do with the lease when a step fails.
pub(super) enum Failure {
    /// Nothing was copied: hand the upload back (`issued`) so a retry starts afresh.
    Release(AppError),
    /// The bytes are not what was declared: mark the upload rejected and drop the tmp object.
    Reject(AppError, Option<ObjectHead>),
    /// A copy may have happened: keep `promoting` and the final key, expire the lease now, so
    /// a retry takes over at once and rolls forward.
    Abandon(AppError),
}

fn is_ours(head: &ObjectHead, upload: &Upload) -> bool {
    head.metadata
        .get(UPLOAD_ID_METADATA)
        .is_some_and(|v| v == upload.id.as_str())
}

/// Steps 2–6 under the lease.
pub(super) async fn promote(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
    legacy: bool,
) -> Result<CommitOutcome, Failure> {
    crate::services::pause::point("after_lease").await;
    let store = &state.store;
    let Some(head) = store
        .head(&upload.key)
        .await
        .map_err(|e| Failure::Release(e.into()))?
    else {
        // The source is gone. If an earlier attempt copied it and died before recording,
        // the final object names this upload: roll forward.
        if !legacy {
            if let Some(fin) = store
                .head(lease.final_key.as_str())
                .await
                .map_err(|e| Failure::Release(e.into()))?
            {
                if is_ours(&fin, upload) {
                    return record(state, upload, lease, fin, None).await;
                }
            }
        }
        return Err(Failure::Release(AppError::ObjectNotUploaded));
    };

    let stored_type = head
        .content_type
        .as_deref()
        .and_then(|t| ContentType::parse(t).ok());
    if stored_type.as_ref().map(ContentType::as_str) != Some(upload.content_type.as_str()) {
        return Err(Failure::Reject(AppError::ContentTypeMismatch, Some(head)));
    }
    if head.size <= 0 || head.size != upload.declared_size {
        return Err(Failure::Reject(AppError::SizeMismatch, Some(head)));
    }
    let first = match store
        .read_head_bytes(&upload.key, SNIFF_BYTES, &head.etag)
        .await
    {
        Ok(bytes) => bytes,
        Err(StoreError::PreconditionFailed) => {
            return Err(Failure::Release(AppError::ObjectChanged))
        }
        Err(e) => return Err(Failure::Release(e.into())),
    };
    if sniff(&upload.content_type, &first) == Sniff::Mismatch {
        return Err(Failure::Reject(AppError::ContentMismatch, Some(head)));
    }

    if legacy {
        // Committed in place: the object already sits at its final key.
        return record(state, upload, lease, head, None).await;
    }

    match store
        .head(lease.final_key.as_str())
        .await
        .map_err(|e| Failure::Release(e.into()))?
    {
        Some(fin) if is_ours(&fin, upload) => {
            tracing::info!("final object already copied by an earlier attempt");
        }
        Some(_) => return Err(Failure::Release(AppError::FinalKeyConflict)),
        None => {
            let uploads = &state.settings.uploads;
            let size = u64::try_from(head.size).unwrap_or(u64::MAX);
            let copied = if size > uploads.max_single_copy_bytes {
                let job = CopyJob {
                    src: &upload.key,
                    src_etag: &head.etag,
                    size,
                    dst: lease.final_key.as_str(),
                    upload_id: upload.id.as_str(),
                    content_type: &upload.content_type,
                    part_size: uploads.copy_part_size_bytes,
                    concurrency: uploads.copy_concurrency,
                };
                copy_in_parts(store, &job).await
            } else {
                store
                    .promote(
                        &upload.key,
                        &head.etag,
                        &lease.final_key,
                        upload.id.as_str(),
                        &upload.content_type,
                    )
                    .await
            };
            match copied {
                Ok(()) => crate::services::pause::point("after_copy").await,
                Err(StoreError::PreconditionFailed) => {
                    return Err(Failure::Release(AppError::ObjectChanged))
                }
                Err(e) => return Err(Failure::Abandon(e.into())),
            }
        }
    }

    let fin = match store.head(lease.final_key.as_str()).await {
        Ok(Some(fin)) => fin,
        Ok(None) => {
            return Err(Failure::Abandon(AppError::Internal(
                "final object missing right after its copy".into(),
            )))
        }
        Err(e) => return Err(Failure::Abandon(e.into())),
    };
    if !is_ours(&fin, upload) || fin.size != upload.declared_size {
        return Err(Failure::Abandon(AppError::Internal(format!(
            "final object at {} does not verify (size {}, declared {})",
            lease.final_key, fin.size, upload.declared_size
        ))));
    }
    record(state, upload, lease, fin, Some(head)).await
}

/// Step 5: record the handle. The tmp version the copy came from is named in the record and
/// deleted once the upload's URL has expired (`services::tmp_cleanup`), not here: while it is
/// there, the URL's `If-None-Match: *` refuses a second PUT.
async fn record(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
    fin: ObjectHead,
    source: Option<ObjectHead>,
) -> Result<CommitOutcome, Failure> {
    let handle = FileHandle {
        id: FileId::generate(),
        upload_id: upload.id.clone(),
        key: lease.final_key.as_str().to_owned(),
        size: fin.size,
        content_type: upload.content_type.clone(),
        etag: fin.etag.clone(),
        profile: upload.profile.clone(),
        created_by: upload.owner.clone(),
        created_at: records::now(),
        status: HandleStatus::Available,
        original_filename: upload.original_filename.clone(),
    };
    let tmp_version = source.as_ref().and_then(|h| h.version_id.as_deref());
    let recorded = match state
        .catalog
        .record_handle(&handle, &lease.token, tmp_version)
        .await
    {
        Ok(Some(h)) => {
            crate::services::pause::point("after_record").await;
            h
        }
        Ok(None) => {
            // Lost the lease to a takeover; whoever holds it finishes. Return its handle if done.
            return match state.catalog.handle_by_upload(&upload.id).await {
                Ok(Some(h)) => Ok(CommitOutcome::Existing(h)),
                Ok(None) => Err(Failure::Abandon(AppError::CommitInProgress)),
                Err(e) => Err(Failure::Abandon(e.into())),
            };
        }
        Err(e) => return Err(Failure::Abandon(e.into())),
    };
    tracing::info!(file.id = %recorded.id, key = %recorded.key, size_bytes = recorded.size, "file committed");
    Ok(CommitOutcome::Created(recorded))
}

/// Applies a failure's lease policy and returns the error for the client.
pub(super) async fn settle(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
    failure: Failure,
) -> AppError {
    let now = records::now();
    let catalog = &state.catalog;
    match failure {
        Failure::Release(err) => {
            if let Err(e) = catalog.release_lease(&upload.id, &lease.token, now).await {
                tracing::warn!(error = %e, "could not release the commit lease; it will expire");
            }
            err
        }
        Failure::Reject(err, head) => {
            // The refused object stays until the URL has expired, like a committed one, so
            // the URL cannot store a second object; then the sweep deletes it.
            let version = head.as_ref().and_then(|h| h.version_id.as_deref());
            match catalog
                .reject(&upload.id, &lease.token, err.code(), version, now)
                .await
            {
                Ok(true) => {
                    tracing::warn!(error.code = err.code(), "upload rejected");
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "could not mark the upload rejected; the lease will expire")
                }
            }
            err
        }
        Failure::Abandon(err) => {
            if let Err(e) = catalog.expire_lease(&upload.id, &lease.token, now).await {
                tracing::warn!(error = %e, "could not expire the commit lease; it will time out");
            }
            err
        }
    }
}
