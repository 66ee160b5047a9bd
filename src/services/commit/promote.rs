//! Steps 2–5 of a commit, run under the upload's lease, and what each failure does to it.

use super::{CommitOutcome, Failure, Lease};
use crate::domain::capabilities::Capability;
use crate::domain::checksum::{Checksum, ChecksumAlgorithm};
use crate::domain::content::ContentType;
use crate::domain::ids::FileId;
use crate::domain::image::Dimensions;
use crate::domain::records::{self, FileHandle, HandleStatus, Upload, UploadState};
use crate::domain::sniff::{read_len, sniff, Sniff};
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::{
    copy_in_parts, CopyLimits, CopySource, NewMultipart, ObjectHead, PartCopy, PromoteRequest,
    Sniffed, StoreError, UPLOAD_ID_METADATA,
};

fn is_ours(head: &ObjectHead, upload: &Upload) -> bool {
    head.metadata
        .get(UPLOAD_ID_METADATA)
        .is_some_and(|v| v == upload.id.as_str())
}

/// What the handle records of the final object.
struct Final {
    etag: String,
    size: i64,
    version_id: Option<String>,
    checksum: Option<Checksum>,
    /// An image's size as displayed, from the header the validation read (issue 37).
    image: Option<Dimensions>,
}

impl From<ObjectHead> for Final {
    fn from(h: ObjectHead) -> Self {
        Final {
            etag: h.etag,
            size: h.size,
            version_id: h.version_id,
            checksum: h.checksum,
            image: None,
        }
    }
}

/// Type, size and magic bytes of the object as one response told them.
fn validate(upload: &Upload, head: &ObjectHead, first: &[u8]) -> Result<(), AppError> {
    let stored_type = head
        .content_type
        .as_deref()
        .and_then(|t| ContentType::parse(t).ok());
    if stored_type.as_ref().map(ContentType::as_str) != Some(upload.content_type.as_str()) {
        return Err(AppError::ContentTypeMismatch);
    }
    if head.size <= 0 || head.size != upload.declared_size {
        return Err(AppError::SizeMismatch);
    }
    if sniff(&upload.content_type, first) == Sniff::Mismatch {
        return Err(AppError::ContentMismatch);
    }
    Ok(())
}

/// Steps 2–5 under the lease. On the common path two S3 calls: a ranged GET (type, size,
/// ETag, version and the first bytes in one response) and a CopyObject guarded on both
/// sides, whose own answer (ETag, version, checksum) is the verification.
/// `prefetched`: the ranged GET, when it ran beside the lease's write.
pub(super) async fn promote(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
    legacy: bool,
    prefetched: Option<Result<Option<Sniffed>, StoreError>>,
) -> Result<CommitOutcome, Failure> {
    crate::pause::point("after_lease").await;
    if legacy {
        return promote_in_place(state, upload, lease).await;
    }
    let store = &state.store;
    let sniffed = match prefetched {
        Some(read) => read,
        None => {
            store
                .sniff(&upload.key, read_len(&upload.content_type))
                .await
        }
    };
    let Some(Sniffed { head, first }) = sniffed.map_err(|e| Failure::Release(e.into()))? else {
        // The source is gone. If an earlier attempt copied it and died before recording,
        // the final object names this upload: roll forward.
        return match final_if_ours(state, upload, lease).await? {
            Some(fin) => {
                let image = super::image::size_of_final(state, upload, &fin, lease).await;
                roll_forward(state, upload, lease, fin, None, image).await
            }
            None => Err(Failure::Release(AppError::ObjectNotUploaded)),
        };
    };
    if let Err(e) = validate(upload, &head, &first) {
        return Err(Failure::Reject(e, Some(Box::new(head))));
    }
    let image = super::image::checked_size(state, upload, &head, &first).await?;
    // Validated, so the magic bytes either showed the declared type or it has no signature.
    let sniffed_type = (sniff(&upload.content_type, &first) == Sniff::Matches)
        .then_some(upload.content_type.as_str());

    let size = u64::try_from(head.size).unwrap_or(u64::MAX);
    if size > state.settings.uploads.max_single_copy_bytes {
        return promote_in_parts(state, upload, lease, head, sniffed_type, image).await;
    }
    if has_hook(state, upload) {
        // A takeover: an earlier attempt may have asked the hook and copied. Its copy is
        // recorded as it is, never put to the hook again (another answer must not undo it).
        if upload.state == UploadState::Promoting {
            if let Some(fin) = final_if_ours(state, upload, lease).await? {
                tracing::info!("final object already copied by an earlier attempt");
                return roll_forward(state, upload, lease, fin, Some(head), image).await;
            }
        }
        super::hook::ask(state, upload, lease, &head, sniffed_type).await?;
    }
    // A store that ignores If-None-Match on CopyObject (the gap `conditional_copy`,
    // docs/stores.md): the final key is read right before the copy instead. Final keys are
    // reserved in the catalog, so only a writer other than upcommit could slip in between.
    if !state.store_verdict.has(Capability::ConditionalCopy) {
        match store.head(lease.final_key.as_str()).await {
            Ok(Some(fin)) if is_ours(&fin, upload) => {
                tracing::info!("final object already copied by an earlier attempt");
                return roll_forward(state, upload, lease, fin, Some(head), image).await;
            }
            Ok(Some(_)) => return Err(Failure::Release(AppError::FinalKeyConflict)),
            Ok(None) => {}
            Err(e) => return Err(Failure::Release(e.into())),
        }
    }
    // Of the version the validation read and the hook was given, guarded on its ETag.
    let copied = store
        .promote(&PromoteRequest {
            src: CopySource::of(&upload.key, &head),
            dst: &lease.final_key,
            upload_id: upload.id.as_str(),
            content_type: &upload.content_type,
            // The declared algorithm, else CRC64NVME: S3 then computes the copy's checksum
            // over the copied bytes, and every handle records one.
            checksum: upload
                .checksum
                .as_ref()
                .map_or(ChecksumAlgorithm::Crc64Nvme, |c| c.algorithm),
            // RGW 16.2 keeps the source guard only under its older name (docs/stores.md).
            legacy_guard: state.store_verdict.has(Capability::CopyIfMatchLegacy),
        })
        .await;
    match copied {
        Ok(copied) => {
            crate::pause::point("after_copy").await;
            let fin = Final {
                etag: copied.etag,
                // The copy was of the version whose size the GET read (the ETag guard).
                size: head.size,
                version_id: copied.version_id,
                checksum: copied.checksum,
                image,
            };
            verify_then_record(state, upload, lease, fin, Some(head)).await
        }
        // The source's ETag guard refused, or the source is gone (deleted after the
        // validation read it: answered 500 before issue 36's review): the final key tells.
        Err(StoreError::PreconditionFailed | StoreError::NotFound) => {
            refused(state, upload, lease, head, image).await
        }
        Err(e) => Err(Failure::Abandon(e.into())),
    }
}

fn has_hook(state: &AppState, upload: &Upload) -> bool {
    state
        .settings
        .profile(&upload.profile)
        .is_some_and(|p| p.validation_hook.is_some())
}

/// A guard refused the copy (S3 answers 412 for either). Which one the final key tells: an
/// object naming this upload (an earlier attempt copied and died before recording: roll
/// forward), someone else's object (`final_key_conflict`), or nothing (the source changed
/// after it was checked: `object_changed`).
async fn refused(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
    source: ObjectHead,
    image: Option<Dimensions>,
) -> Result<CommitOutcome, Failure> {
    match state.store.head(lease.final_key.as_str()).await {
        Ok(Some(fin)) if is_ours(&fin, upload) => {
            tracing::info!("final object already copied by an earlier attempt");
            roll_forward(state, upload, lease, fin, Some(source), image).await
        }
        Ok(Some(_)) => Err(Failure::Release(AppError::FinalKeyConflict)),
        Ok(None) => Err(Failure::Release(AppError::ObjectChanged)),
        Err(e) => Err(Failure::Release(e.into())),
    }
}

/// Whether the object the validation read is still at `key` (same ETag; a store error counts
/// as yes, leaving the answer retryable).
async fn source_still(
    store: &dyn crate::storage::ObjectStore,
    key: &str,
    read: &ObjectHead,
) -> bool {
    match store.head(key).await {
        Ok(Some(now)) => {
            crate::domain::multipart::bare(&now.etag) == crate::domain::multipart::bare(&read.etag)
        }
        Ok(None) => false,
        Err(_) => true,
    }
}

/// A final object that does not have the declared size (or does not name this upload).
fn unverified(lease: &Lease, size: i64, upload: &Upload) -> Failure {
    Failure::Abandon(AppError::Internal(format!(
        "final object at {} does not verify (size {size}, declared {})",
        lease.final_key, upload.declared_size
    )))
}

/// Before a copy from a stored object: a declared checksum must be the one S3 holds for it —
/// another one, or none of that algorithm, means these are not the bytes the client uploaded
/// with its checksum.
fn stored_checksum_holds(upload: &Upload, head: &ObjectHead) -> bool {
    matches!(
        verdict(upload.checksum.as_ref(), head.checksum.as_ref()),
        Verdict::Holds
    )
}

/// The final object, when it exists and names this upload.
async fn final_if_ours(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
) -> Result<Option<ObjectHead>, Failure> {
    match state.store.head(lease.final_key.as_str()).await {
        Ok(Some(fin)) if is_ours(&fin, upload) => Ok(Some(fin)),
        Ok(_) => Ok(None),
        Err(e) => Err(Failure::Release(e.into())),
    }
}

/// An earlier attempt's copy, found by its metadata: checked like a fresh one, then recorded.
async fn roll_forward(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
    fin: ObjectHead,
    source: Option<ObjectHead>,
    image: Option<Dimensions>,
) -> Result<CommitOutcome, Failure> {
    if fin.size != upload.declared_size {
        return Err(unverified(lease, fin.size, upload));
    }
    let fin = Final {
        image,
        ..fin.into()
    };
    verify_then_record(state, upload, lease, fin, source).await
}

/// Large objects: CopyObject stops at 5 GiB, so the copy is UploadPartCopy in parts. A copy
/// assembled from parts has no full-object checksum of its own: the source's is checked
/// before the copy (HEAD with checksum mode) and the ETag guard binds the copy to it.
async fn promote_in_parts(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
    sniffed: ObjectHead,
    sniffed_type: Option<&str>,
    image: Option<Dimensions>,
) -> Result<CommitOutcome, Failure> {
    let store = &state.store;
    let head = match store.head(&upload.key).await {
        // The version validated, not another one with the same ETag.
        Ok(Some(h)) if h.etag == sniffed.etag && h.version_id == sniffed.version_id => h,
        Ok(_) => return Err(Failure::Release(AppError::ObjectChanged)),
        Err(e) => return Err(Failure::Release(e.into())),
    };
    if !stored_checksum_holds(upload, &head) {
        return Err(Failure::Reject(
            AppError::ChecksumMismatch,
            Some(Box::new(head)),
        ));
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
            // Only before a copy; every part copy is of the version the hook was given,
            // guarded on its ETag.
            super::hook::ask(state, upload, lease, &head, sniffed_type).await?;
            // The hook may have taken its whole timeout: where the completion's
            // `If-None-Match` is ignored (the gap `conditional_complete`), the final key is read
            // again right before the copy starts, as docs/stores.md says.
            if has_hook(state, upload) && !state.store_verdict.has(Capability::ConditionalComplete)
            {
                match store.head(lease.final_key.as_str()).await {
                    Ok(Some(fin)) if !is_ours(&fin, upload) => {
                        return Err(Failure::Release(AppError::FinalKeyConflict))
                    }
                    Ok(_) => {}
                    Err(e) => return Err(Failure::Release(e.into())),
                }
            }
            let job = PartCopy {
                src: CopySource::of(&upload.key, &head),
                size: u64::try_from(head.size).unwrap_or(u64::MAX),
                dst: NewMultipart {
                    key: lease.final_key.as_str(),
                    content_type: &upload.content_type,
                    metadata: &[(UPLOAD_ID_METADATA, upload.id.as_str())],
                    checksum: None,
                    storage_class: None,
                    tagging: None,
                    headers: None,
                },
                if_absent: true,
                checksum: None,
                limits: CopyLimits::from_settings(&state.settings.uploads),
            };
            match copy_in_parts(store.as_ref(), &job).await {
                Ok(()) => crate::pause::point("after_copy").await,
                // The source changed (a part copy's guard) or something arrived at the final
                // key during the copy (the completion's `If-None-Match`): the final key tells.
                // (A copy naming this upload cannot be checked here: one assembled from parts
                // has no full-object checksum. The retry's HEAD before copying records it.)
                //
                // A store without conditional completion (Garage) ends the multipart upload
                // when another object is written at its key meanwhile: the completion answers
                // NoSuchUpload, and the final key tells too. Nothing foreign there: the upload
                // went for another reason (or the source did), and a retry starts over.
                Err(refused @ (StoreError::PreconditionFailed | StoreError::NotFound)) => {
                    return Err(match store.head(lease.final_key.as_str()).await {
                        Ok(Some(fin)) if !is_ours(&fin, upload) => {
                            Failure::Release(AppError::FinalKeyConflict)
                        }
                        Ok(_) if matches!(refused, StoreError::PreconditionFailed) => {
                            Failure::Release(AppError::ObjectChanged)
                        }
                        // The source itself gone (or replaced) since the validation read it:
                        // not a store to wait for.
                        Ok(_) if !source_still(store.as_ref(), &upload.key, &head).await => {
                            Failure::Release(AppError::ObjectChanged)
                        }
                        Ok(_) => Failure::Release(
                            StoreError::Unavailable(
                                "the copy's multipart upload was gone at its completion".into(),
                            )
                            .into(),
                        ),
                        Err(e) => Failure::Release(e.into()),
                    });
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
        return Err(unverified(lease, fin.size, upload));
    }
    let checksum = head.checksum.clone();
    let fin = Final {
        checksum,
        image,
        ..fin.into()
    };
    record(state, upload, lease, fin, Some(head)).await
}

/// Legacy keys are committed in place: HEAD (with the stored checksum) and the first bytes
/// of that same version.
async fn promote_in_place(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
) -> Result<CommitOutcome, Failure> {
    let store = &state.store;
    let Some(head) = store
        .head(&upload.key)
        .await
        .map_err(|e| Failure::Release(e.into()))?
    else {
        return Err(Failure::Release(AppError::ObjectNotUploaded));
    };
    let first = match store
        .sniff(&upload.key, read_len(&upload.content_type))
        .await
    {
        Ok(Some(s)) if s.head.etag == head.etag => s.first,
        Ok(_) => return Err(Failure::Release(AppError::ObjectChanged)),
        Err(e) => return Err(Failure::Release(e.into())),
    };
    if let Err(e) = validate(upload, &head, &first) {
        return Err(Failure::Reject(e, Some(Box::new(head))));
    }
    if !stored_checksum_holds(upload, &head) {
        return Err(Failure::Reject(
            AppError::ChecksumMismatch,
            Some(Box::new(head)),
        ));
    }
    let image = super::image::checked_size(state, upload, &head, &first).await?;
    let fin = Final {
        image,
        ..head.into()
    };
    record(state, upload, lease, fin, None).await
}

/// A declared checksum against the one S3 reported for the final object.
enum Verdict {
    /// Equal, or nothing was declared.
    Holds,
    Mismatch,
    /// Declared, but S3 reported none for this object.
    NotReported,
}

fn verdict(declared: Option<&Checksum>, reported: Option<&Checksum>) -> Verdict {
    match (declared, reported) {
        (None, _) => Verdict::Holds,
        (Some(d), Some(r)) if d == r => Verdict::Holds,
        (Some(_), Some(_)) => Verdict::Mismatch,
        (Some(_), None) => Verdict::NotReported,
    }
}

/// The copy's checksum against the declared one, then the record. A copy whose bytes are not
/// the declared ones is this commit's own, never recorded object: it is removed (that exact
/// version) and the upload rejected; nothing else is touched.
async fn verify_then_record(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
    mut fin: Final,
    source: Option<ObjectHead>,
) -> Result<CommitOutcome, Failure> {
    if let Verdict::NotReported = verdict(upload.checksum.as_ref(), fin.checksum.as_ref()) {
        // CopyObject reported no checksum of the declared algorithm: ask the final object.
        match state.store.head(lease.final_key.as_str()).await {
            Ok(Some(h)) if is_ours(&h, upload) => fin.checksum = h.checksum,
            Ok(_) => {
                return Err(Failure::Abandon(AppError::Internal(
                    "final object missing right after its copy".into(),
                )))
            }
            Err(e) => return Err(Failure::Abandon(e.into())),
        }
    }
    match verdict(upload.checksum.as_ref(), fin.checksum.as_ref()) {
        Verdict::Holds => record(state, upload, lease, fin, source).await,
        Verdict::Mismatch | Verdict::NotReported => {
            tracing::warn!(
                declared = ?upload.checksum,
                stored = ?fin.checksum,
                "the committed bytes do not have the declared checksum"
            );
            if let Err(e) = state
                .store
                .delete_version(lease.final_key.as_str(), fin.version_id.as_deref())
                .await
            {
                // Keep the lease's final key: a retry finds the copy by its metadata and
                // removes it then.
                return Err(Failure::Abandon(e.into()));
            }
            Err(Failure::Reject(
                AppError::ChecksumMismatch,
                source.map(Box::new),
            ))
        }
    }
}

/// Step 5: record the handle. The tmp version the copy came from is named in the record and
/// deleted once the upload's URL has expired (`services::tmp_cleanup`), not here: while it is
/// there, the URL's `If-None-Match: *` refuses a second PUT.
async fn record(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
    fin: Final,
    source: Option<ObjectHead>,
) -> Result<CommitOutcome, Failure> {
    let now = records::now();
    // A temporary profile's file is served until commit time + its TTL; the object, created
    // by the copy just before, outlives that (see `domain::temporary`).
    let expires_at = state
        .settings
        .profile(&upload.profile)
        .and_then(|p| p.temporary_ttl)
        .filter(|_| crate::domain::temporary::is_temporary_key(lease.final_key.as_str()))
        .map(|ttl| ttl.expires_at(now));
    let handle = FileHandle {
        id: FileId::generate(),
        upload_id: upload.id.clone(),
        key: lease.final_key.as_str().to_owned(),
        size: fin.size,
        content_type: upload.content_type.clone(),
        etag: fin.etag,
        profile: upload.profile.clone(),
        created_by: upload.owner.clone(),
        created_at: now,
        status: HandleStatus::Available,
        original_filename: upload.original_filename.clone(),
        checksum: fin.checksum,
        copied_from: None,
        expires_at,
        image: fin.image,
    };
    let tmp_version = source.as_ref().and_then(|h| h.version_id.as_deref());
    let recorded = match state
        .catalog
        .record_handle(&handle, &lease.token, tmp_version)
        .await
    {
        Ok(Some(h)) => {
            crate::pause::point("after_record").await;
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
            // A takeover may find an earlier attempt's copy at the final key: the upload will
            // never be recorded, so that copy (it names this upload) goes first. If it cannot,
            // the lease is expired instead and a retry rejects again.
            if let Err(e) = remove_earlier_copy(state, upload, lease).await {
                tracing::warn!(error = %e, "could not remove an earlier attempt's copy; the upload stays promoting");
                if let Err(e) = catalog.expire_lease(&upload.id, &lease.token, now).await {
                    tracing::warn!(error = %e, "could not expire the commit lease; it will time out");
                }
                return err;
            }
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

/// Deletes the object an earlier attempt of this commit copied to the final key (found by the
/// upload id in its metadata), when this commit took the lease over from one. Fresh commits and
/// legacy uploads (committed in place: the object is the upload itself) have none.
async fn remove_earlier_copy(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
) -> Result<(), StoreError> {
    if upload.state != UploadState::Promoting || lease.final_key.as_str() == upload.key {
        return Ok(());
    }
    match state.store.head(lease.final_key.as_str()).await? {
        Some(fin) if is_ours(&fin, upload) => {
            tracing::info!("removing an earlier attempt's copy of a rejected upload");
            state
                .store
                .delete_version(lease.final_key.as_str(), fin.version_id.as_deref())
                .await
        }
        _ => Ok(()),
    }
}
