//! Copies over the single-copy limit (S3 refuses a CopyObject above 5 GiB): CreateMultipartUpload
//! at the destination, UploadPartCopy of byte ranges with bounded concurrency — each of exactly
//! the source version read before, guarded by its ETag — then CompleteMultipartUpload. On any
//! failure the in-flight copies are stopped and the multipart upload is aborted (and checked
//! gone), so no incomplete upload is left behind. Commit promotes large objects with it; the
//! facade's own copies (archival in place, quarantine) use it above the limit.

use futures_util::{StreamExt, TryStreamExt};

use super::{CopySource, NewMultipart, ObjectHead, ObjectStore, StoreError};
use crate::config::UploadSettings;
use crate::domain::checksum::{Checksum, ChecksumAlgorithm};
use crate::domain::multipart::PartPlan;

/// When a copy goes in parts, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyLimits {
    /// Largest object one CopyObject copies.
    pub max_single_copy_bytes: u64,
    pub part_size_bytes: u64,
    /// Part copies in flight at once.
    pub concurrency: usize,
}

impl CopyLimits {
    pub fn from_settings(uploads: &UploadSettings) -> Self {
        CopyLimits {
            max_single_copy_bytes: uploads.max_single_copy_bytes,
            part_size_bytes: uploads.copy_part_size_bytes,
            concurrency: uploads.copy_concurrency,
        }
    }

    /// Whether an object of `size` bytes must be copied in parts.
    pub fn in_parts(&self, size: i64) -> bool {
        u64::try_from(size).unwrap_or(u64::MAX) > self.max_single_copy_bytes
    }
}

impl Default for CopyLimits {
    /// S3's own limit (5 GiB), 512 MiB parts, 4 at once: the settings' defaults.
    fn default() -> Self {
        CopyLimits {
            max_single_copy_bytes: 5 * 1024 * 1024 * 1024,
            part_size_bytes: 512 * 1024 * 1024,
            concurrency: 4,
        }
    }
}

/// What to copy where.
pub struct PartCopy<'a> {
    /// The version read and checked before (its ETag guards every part copy).
    pub src: CopySource<'a>,
    pub size: u64,
    /// The destination object (it may be the source's own key: a copy in place).
    pub dst: NewMultipart<'a>,
    /// Complete only if nothing is at the destination (`If-None-Match: *`).
    pub if_absent: bool,
    /// The full-object checksum S3 must find at completion (the upload was created with its
    /// algorithm).
    pub checksum: Option<&'a Checksum>,
    pub limits: CopyLimits,
}

pub async fn copy_in_parts<S>(store: &S, job: &PartCopy<'_>) -> Result<(), StoreError>
where
    S: ObjectStore + ?Sized,
{
    let plan = PartPlan::new(job.size, job.limits.part_size_bytes).map_err(|e| {
        StoreError::Other(format!("cannot plan a copy of {} bytes: {e:?}", job.size))
    })?;
    // Without a version to name (an unversioned bucket), the parts are bound to the source
    // only by their ETag guard, which some stores ignore on UploadPartCopy (RGW 16.2: the gap
    // `part_copy_source_if_match`). The source's ETag is read again before the first part and
    // after the last: bytes written over it meanwhile stop the copy before its completion.
    let unpinned = job.src.version_id.is_none();
    if unpinned {
        source_unchanged(store, &job.src).await?;
    }
    let multipart_id = store.create_multipart(&job.dst).await?;
    tracing::info!(
        parts = plan.part_count,
        part_size = plan.part_size,
        "multipart copy started"
    );
    let copied = match copy_parts(store, job, &plan, &multipart_id).await {
        Ok(etags) if unpinned => source_unchanged(store, &job.src).await.map(|()| etags),
        other => other,
    };
    let completed = match copied {
        Ok(etags) => {
            store
                // With `if_absent`, only if nothing arrived at the destination while the parts
                // were copied: the HEAD before the copy is minutes old for a large object.
                .complete_multipart(
                    job.dst.key,
                    &multipart_id,
                    &etags,
                    job.checksum,
                    job.if_absent,
                )
                .await
        }
        Err(e) => Err(e),
    };
    if let Err(e) = completed {
        abort_and_confirm(store, job.dst.key, &multipart_id).await;
        return Err(e);
    }
    Ok(())
}

/// Whether the object at the source key still has the ETag the copy was asked for
/// (`PreconditionFailed` when it has another or is gone, as the guard's 412 would say).
async fn source_unchanged<S>(store: &S, src: &CopySource<'_>) -> Result<(), StoreError>
where
    S: ObjectStore + ?Sized,
{
    use crate::domain::multipart::bare;
    match store.head(src.key).await? {
        Some(h) if bare(&h.etag) == bare(src.etag) => Ok(()),
        _ => Err(StoreError::PreconditionFailed),
    }
}

/// The version `head` describes of `src` copied in parts to `dst` (`src` itself: in place),
/// with its type and metadata, as a single CopyObject keeping them would. Its full-object CRC,
/// if it has one, is named at completion (S3 refuses an assembled object that does not have
/// it), so the copy reports the same checksum; a SHA-256 cannot be a multipart upload's
/// full-object checksum, so such a copy reports none.
pub(super) async fn copy_like<S>(
    store: &S,
    src: &str,
    head: &ObjectHead,
    dst: &str,
    storage_class: Option<&str>,
    tagging: Option<&str>,
    limits: CopyLimits,
) -> Result<(), StoreError>
where
    S: ObjectStore + ?Sized,
{
    let metadata: Vec<(&str, &str)> = head
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    // A composite checksum ("…-<parts>") is not one of the whole object either.
    let checksum = head
        .checksum
        .as_ref()
        .filter(|c| c.algorithm != ChecksumAlgorithm::Sha256 && !c.value.contains('-'));
    let job = PartCopy {
        src: CopySource::of(src, head),
        size: u64::try_from(head.size).unwrap_or(0),
        dst: NewMultipart {
            key: dst,
            // S3's own default for an object stored without one.
            content_type: head
                .content_type
                .as_deref()
                .unwrap_or("binary/octet-stream"),
            metadata: &metadata,
            checksum: checksum.map(|c| c.algorithm),
            storage_class,
            tagging,
            headers: Some(&head.headers),
        },
        if_absent: false,
        checksum,
        limits,
    };
    copy_in_parts(store, &job).await
}

/// Copies every part, at most `concurrency` at once; the first failure drops (stops) the
/// copies still in flight and starts no more.
async fn copy_parts<S>(
    store: &S,
    job: &PartCopy<'_>,
    plan: &PartPlan,
    multipart_id: &str,
) -> Result<Vec<(u32, String)>, StoreError>
where
    S: ObjectStore + ?Sized,
{
    let ranges = (1..=plan.part_count).filter_map(|n| plan.range_of(n).map(|r| (n, r)));
    let mut parts: Vec<(u32, String)> = futures_util::stream::iter(ranges)
        .map(|(n, range)| async move {
            store
                .copy_part(&job.src, job.dst.key, multipart_id, n, range)
                .await
                .map(|etag| (n, etag))
        })
        .buffer_unordered(job.limits.concurrency.max(1))
        .try_collect()
        .await?;
    parts.sort_by_key(|(n, _)| *n);
    Ok(parts)
}

/// Aborts, then lists: a part copy that was still landing can outlive one abort, so abort
/// again while S3 still knows the upload (a few times at most).
async fn abort_and_confirm<S>(store: &S, dst: &str, multipart_id: &str)
where
    S: ObjectStore + ?Sized,
{
    for attempt in 1..=3 {
        if let Err(e) = store.abort_multipart(dst, multipart_id).await {
            tracing::warn!(attempt, error = %e, "could not abort the multipart copy");
            continue;
        }
        match store.list_parts(dst, multipart_id, 0, 1).await {
            Err(StoreError::NotFound) => {
                tracing::info!("multipart copy aborted");
                return;
            }
            Ok(_) => tracing::warn!(attempt, "multipart copy still listed after abort"),
            Err(e) => tracing::warn!(attempt, error = %e, "could not confirm the abort"),
        }
    }
    tracing::error!(
        "multipart copy could not be confirmed aborted; the bucket's abort-incomplete rule removes it within a day"
    );
}
