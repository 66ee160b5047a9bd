//! Promotion of objects over the single-copy limit: CreateMultipartUpload at the final key,
//! UploadPartCopy of byte ranges with bounded concurrency, each guarded by the source's ETag,
//! then CompleteMultipartUpload. On any failure the in-flight copies are stopped and the
//! multipart upload is aborted (and checked gone), so no incomplete upload is left behind.

use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::domain::multipart::PartPlan;
use crate::storage::{ObjectStore, StoreError, UPLOAD_ID_METADATA};

/// What to copy where.
pub(super) struct CopyJob<'a> {
    pub src: &'a str,
    pub src_etag: &'a str,
    pub size: u64,
    pub dst: &'a str,
    pub upload_id: &'a str,
    pub content_type: &'a str,
    pub part_size: u64,
    pub concurrency: usize,
}

pub(super) async fn copy_in_parts(
    store: &Arc<dyn ObjectStore>,
    job: &CopyJob<'_>,
) -> Result<(), StoreError> {
    let plan = PartPlan::new(job.size, job.part_size).map_err(|e| {
        StoreError::Other(format!("cannot plan a copy of {} bytes: {e:?}", job.size))
    })?;
    let multipart_id = store
        .create_multipart(
            job.dst,
            job.content_type,
            Some((UPLOAD_ID_METADATA, job.upload_id)),
            None,
        )
        .await?;
    tracing::info!(
        parts = plan.part_count,
        part_size = plan.part_size,
        "multipart copy started"
    );
    let copied = copy_parts(store, job, &plan, &multipart_id).await;
    let completed = match copied {
        Ok(etags) => {
            store
                // Only if nothing arrived at the final key while the parts were copied: the
                // HEAD before the copy is minutes old for a large object.
                .complete_multipart(job.dst, &multipart_id, &etags, None, true)
                .await
        }
        Err(e) => Err(e),
    };
    if let Err(e) = completed {
        abort_and_confirm(store, job.dst, &multipart_id).await;
        return Err(e);
    }
    Ok(())
}

/// Copies every part, at most `concurrency` at once; the first failure stops the rest.
async fn copy_parts(
    store: &Arc<dyn ObjectStore>,
    job: &CopyJob<'_>,
    plan: &PartPlan,
    multipart_id: &str,
) -> Result<Vec<(u32, String)>, StoreError> {
    let permits = Arc::new(Semaphore::new(job.concurrency.max(1)));
    let mut tasks: JoinSet<Result<(u32, String), StoreError>> = JoinSet::new();
    let mut parts = Vec::with_capacity(plan.part_count as usize);
    for n in 1..=plan.part_count {
        let Some(range) = plan.range_of(n) else {
            continue;
        };
        let permit = permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| StoreError::Other(e.to_string()))?;
        // Collect what has finished; a failure stops the loop before more copies start.
        while let Some(joined) = tasks.try_join_next() {
            if let Err(e) = collect(joined, &mut parts) {
                tasks.shutdown().await;
                return Err(e);
            }
        }
        let store = store.clone();
        let (src, etag, dst, id) = (
            job.src.to_owned(),
            job.src_etag.to_owned(),
            job.dst.to_owned(),
            multipart_id.to_owned(),
        );
        tasks.spawn(async move {
            let _permit = permit;
            store
                .copy_part(&src, &etag, &dst, &id, n, range)
                .await
                .map(|etag| (n, etag))
        });
    }
    while let Some(joined) = tasks.join_next().await {
        if let Err(e) = collect(joined, &mut parts) {
            tasks.shutdown().await;
            return Err(e);
        }
    }
    parts.sort_by_key(|(n, _)| *n);
    Ok(parts)
}

fn collect(
    joined: Result<Result<(u32, String), StoreError>, tokio::task::JoinError>,
    parts: &mut Vec<(u32, String)>,
) -> Result<(), StoreError> {
    match joined {
        Ok(Ok(part)) => {
            parts.push(part);
            Ok(())
        }
        Ok(Err(e)) => Err(e),
        Err(e) => Err(StoreError::Other(format!("part copy task: {e}"))),
    }
}

/// Aborts, then lists: a part copy that was still landing can outlive one abort, so abort
/// again while S3 still knows the upload (a few times at most).
async fn abort_and_confirm(store: &Arc<dyn ObjectStore>, dst: &str, multipart_id: &str) {
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
