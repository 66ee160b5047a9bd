//! The tmp sweeper: for stores that do not run lifecycle rules (LocalStack, some S3-compatible
//! stores) and to mark abandoned uploads in the catalog. It lists only `tmp/YYYY/MM/DD/`
//! partitions wholly older than the cutoff, several at once, a listing page at a time, reads the
//! records of each page's keys in one batch after listing it (a commit records `promoting` before
//! it copies, so it is never swept from under a commit), removes every version and delete marker
//! of the keys it sweeps (DeleteObjects, 1,000 a call), aborts abandoned multipart uploads, and
//! refuses to delete anything when it sees a partition dated in the future. Every run has an id, a checkpoint and a stored report.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::catalog::{Catalog, CatalogError};
use crate::config::Settings;
use crate::domain::ids::UploadId;
use crate::domain::jobs::{JobItem, JobRun, RunState};
use crate::domain::multipart::SessionState;
use crate::domain::prefixes::TMP_PREFIX;
use crate::domain::records::{self, Upload, UploadState};
use crate::domain::sweep::{classify, partition_day, SweepPolicy, Verdict};
use crate::services::jobs::{self, Begin};
use crate::storage::{ObjectStore, ObjectVersion, StoreError, DELETE_BATCH};

pub const JOB: &str = crate::domain::jobs::SWEEP;

/// A run's totals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SweepSummary {
    pub dry_run: bool,
    pub resumed: bool,
    pub cutoff: Option<DateTime<Utc>>,
    pub partitions_swept: u32,
    pub partitions_kept: u32,
    pub future_partitions: Vec<String>,
    /// Versions (and delete markers) deleted — or, in a dry run, that would be.
    pub deleted_versions: u64,
    pub deleted_bytes: u64,
    pub skipped_keys: u64,
    pub failed_versions: u64,
    pub multipart_aborted: u64,
    pub uploads_marked: u64,
    /// Temporary file handles past their `expires_at`, marked `expired` (none in a dry run).
    pub handles_expired: u64,
    /// Versions of those files' renditions (`cache/<id>/`) removed after the mark.
    pub expired_rendition_versions_removed: u64,
    /// Expired files whose renditions could not be listed or removed (reconcile's
    /// `--remove-orphan-renditions` finds them later).
    pub expired_renditions_failed: u64,
    /// Stale `promoting` commits finished or released (see `services::recovery`).
    pub recovery: crate::services::recovery::RecoverySummary,
    /// Tmp objects of settled uploads whose URLs expired (see `services::tmp_cleanup`).
    pub settled_tmp: crate::services::tmp_cleanup::TmpCleanupSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub enum SweepOutcome {
    Ran {
        run: Box<JobRun>,
        summary: Box<SweepSummary>,
    },
    /// Another replica is sweeping.
    Busy,
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::services::tmp_cleanup::TmpCleanupError> for SweepError {
    fn from(e: crate::services::tmp_cleanup::TmpCleanupError) -> Self {
        use crate::services::tmp_cleanup::TmpCleanupError;
        match e {
            TmpCleanupError::Catalog(e) => SweepError::Catalog(e),
            TmpCleanupError::Store(e) => SweepError::Store(e),
        }
    }
}

pub fn policy(settings: &Settings) -> SweepPolicy {
    SweepPolicy {
        presign_expiry_secs: settings.uploads.presign_expiry_secs,
        commit_window_secs: settings.uploads.commit_window_secs,
        grace_secs: settings.jobs.sweep_grace_secs,
        skew_tolerance_secs: settings.jobs.sweep_skew_tolerance_secs,
    }
}

/// Every `tmp/YYYY/MM/DD/` partition in date order, and anything else found at that depth
/// under `tmp/`. The storage report walks the same partitions.
pub async fn partitions(
    store: &dyn ObjectStore,
) -> Result<(Vec<(NaiveDate, String)>, Vec<String>), StoreError> {
    let mut days = Vec::new();
    let mut other = Vec::new();
    for year in store.list_prefixes(TMP_PREFIX).await? {
        for month in store.list_prefixes(&year).await? {
            for day in store.list_prefixes(&month).await? {
                match partition_day(&day) {
                    Some(d) => days.push((d, day)),
                    None => other.push(day),
                }
            }
        }
    }
    days.sort();
    Ok((days, other))
}

pub async fn sweep(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    dry_run: bool,
) -> Result<SweepOutcome, SweepError> {
    // The database's clock, not this machine's: every replica judges ages by the same clock.
    let now = catalog.clock().await?;
    sweep_at(catalog, store, settings, dry_run, now).await
}

/// [`sweep`] judging ages as of `now`: tests use it to let days pass.
#[tracing::instrument(skip_all, fields(job = JOB, dry_run))]
pub async fn sweep_at(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    dry_run: bool,
    now: DateTime<Utc>,
) -> Result<SweepOutcome, SweepError> {
    let mut job = match jobs::begin(catalog, JOB, dry_run, settings.jobs.lease_secs).await? {
        Begin::Started(job) => job,
        Begin::Busy => return Ok(SweepOutcome::Busy),
    };
    let policy = policy(settings);
    let mut summary = SweepSummary {
        dry_run,
        resumed: job.resumed,
        cutoff: Some(policy.cutoff(now)),
        ..SweepSummary::default()
    };
    tracing::info!(run.id = %job.run.id, resumed = job.resumed, "sweep started");
    crate::pause::point("sweep_began").await;

    let (days, _) = match partitions(store.as_ref()).await {
        Ok(found) => found,
        Err(e) => {
            summary.error = Some(e.to_string());
            let run = job.finish(catalog, RunState::Failed, &[], &summary).await?;
            return Ok(SweepOutcome::Ran {
                run: Box::new(run),
                summary: Box::new(summary),
            });
        }
    };
    let future: Vec<&(NaiveDate, String)> = days
        .iter()
        .filter(|(d, _)| policy.in_the_future(*d, now))
        .collect();
    if !future.is_empty() {
        summary.future_partitions = future.iter().map(|(_, p)| p.clone()).collect();
        tracing::error!(
            partitions = ?summary.future_partitions,
            "tmp partitions dated in the future: a clock is wrong; the sweeper deletes nothing"
        );
        let items: Vec<JobItem> = future
            .iter()
            .map(|(_, p)| JobItem {
                action: "refused".into(),
                key: p.clone(),
                version_id: None,
                bytes: 0,
                reason: "partition_in_the_future".into(),
            })
            .collect();
        let run = job
            .finish(catalog, RunState::Refused, &items, &summary)
            .await?;
        return Ok(SweepOutcome::Ran {
            run: Box::new(run),
            summary: Box::new(summary),
        });
    }

    // Commits whose caller went away are finished (or released) first, so what they leave
    // under tmp/ is judged with everything else.
    let (recovery, recovered) =
        crate::services::recovery::recover_stale_commits(catalog, store, settings, now, dry_run)
            .await?;
    if !recovered.is_empty() {
        catalog.add_job_items(&job.run.id, &recovered).await?;
    }
    summary.recovery = recovery;

    // Settled uploads whose URLs can no longer store anything lose their tmp objects, every
    // version, whatever partition they are in.
    let (settled, refused) = crate::services::tmp_cleanup::clear_settled_tmp(
        catalog,
        store,
        now,
        dry_run,
        settings
            .s3
            .accept_gaps
            .contains(&crate::domain::capabilities::Capability::ConditionalPut),
    )
    .await?;
    if !refused.is_empty() {
        catalog.add_job_items(&job.run.id, &refused).await?;
    }
    summary.settled_tmp = settled;

    if !dry_run {
        let expired = mark_expired(catalog, store.as_ref(), now).await?;
        summary.handles_expired = expired.marked;
        summary.expired_rendition_versions_removed = expired.rendition_versions;
        summary.expired_renditions_failed = expired.renditions_failed;
    }

    let done_through = job
        .run
        .checkpoint
        .as_deref()
        .and_then(|c| NaiveDate::parse_from_str(c, "%Y-%m-%d").ok());
    let (old, young): (Vec<_>, Vec<_>) = days
        .into_iter()
        .partition(|(d, _)| policy.sweepable(*d, now));
    summary.partitions_kept = u32::try_from(young.len()).unwrap_or(u32::MAX);
    let todo: Vec<(NaiveDate, String)> = old
        .into_iter()
        .filter(|(d, _)| done_through.map_or(true, |done| *d > done))
        .collect();

    for chunk in todo.chunks(settings.jobs.sweep_concurrency.max(1)) {
        if job.lost() {
            summary.error = Some("lost the job's lease to another replica".into());
            let run = job.finish(catalog, RunState::Failed, &[], &summary).await?;
            return Ok(SweepOutcome::Ran {
                run: Box::new(run),
                summary: Box::new(summary),
            });
        }
        let mut tasks = JoinSet::new();
        for (day, prefix) in chunk {
            let (catalog, store, prefix, day, run_id) = (
                catalog.clone(),
                store.clone(),
                prefix.clone(),
                *day,
                job.run.id.clone(),
            );
            tasks.spawn(async move {
                sweep_partition(&catalog, &store, &run_id, &prefix, now, dry_run)
                    .await
                    .map(|r| (day, r))
            });
        }
        let mut failure = None;
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(Ok((_, part))) => {
                    summary.partitions_swept += 1;
                    summary.deleted_versions += part.deleted_versions;
                    summary.deleted_bytes += part.deleted_bytes;
                    summary.skipped_keys += part.skipped_keys;
                    summary.failed_versions += part.failed_versions;
                    summary.multipart_aborted += part.multipart_aborted;
                    summary.uploads_marked += part.uploads_marked;
                }
                Ok(Err(e)) => failure = Some(e.to_string()),
                Err(e) => failure = Some(format!("partition task: {e}")),
            }
        }
        if let Some(e) = failure {
            summary.error = Some(e);
            let run = job.finish(catalog, RunState::Failed, &[], &summary).await?;
            return Ok(SweepOutcome::Ran {
                run: Box::new(run),
                summary: Box::new(summary),
            });
        }
        // The partitions' items are in the report already (written page by page).
        let last = chunk.last().map(|(d, _)| d.to_string()).unwrap_or_default();
        if !dry_run {
            job.checkpoint(catalog, &[], &last, &summary).await?;
        }
    }
    let run = job
        .finish(catalog, RunState::Finished, &[], &summary)
        .await?;
    tracing::info!(
        run.id = %run.id,
        partitions = summary.partitions_swept,
        deleted_versions = summary.deleted_versions,
        deleted_bytes = summary.deleted_bytes,
        skipped_keys = summary.skipped_keys,
        "sweep finished"
    );
    Ok(SweepOutcome::Ran {
        run: Box::new(run),
        summary: Box::new(summary),
    })
}

/// Handles marked per statement: small enough that one batch holds the table briefly.
const EXPIRE_BATCH: i64 = 500;

#[derive(Default)]
struct Expired {
    marked: u64,
    rendition_versions: u64,
    renditions_failed: u64,
}

/// Marks every temporary handle past its `expires_at` as expired, a batch at a time; the bucket's
/// lifecycle rule removes the files' objects (see `domain::temporary`). Their renditions, which
/// the `cache/` rule would keep for 30 days more, are removed here once the mark (the claim) is
/// written: an expired file's renditions are never served again (410 `file_expired`).
async fn mark_expired(
    catalog: &Arc<dyn Catalog>,
    store: &dyn ObjectStore,
    now: DateTime<Utc>,
) -> Result<Expired, SweepError> {
    let mut done = Expired::default();
    loop {
        let ids = catalog.mark_expired_handles(now, EXPIRE_BATCH).await?;
        done.marked += ids.len() as u64;
        for id in &ids {
            match crate::services::renditions::delete_all(store, id).await {
                Ok(n) => done.rendition_versions += n,
                Err(e) => {
                    done.renditions_failed += 1;
                    tracing::warn!(file.id = %id, error = %e, "the renditions of an expired file were not removed");
                }
            }
        }
        if ids.len() < EXPIRE_BATCH.unsigned_abs() as usize {
            return Ok(done);
        }
    }
}

#[derive(Default)]
struct PartitionResult {
    deleted_versions: u64,
    deleted_bytes: u64,
    skipped_keys: u64,
    failed_versions: u64,
    multipart_aborted: u64,
    uploads_marked: u64,
}

/// Sweeps one partition a listing page at a time: each page's keys are looked up in the catalog
/// in one batch, their doomed versions deleted, the swept uploads marked and the page's items
/// written to the run's report before the next page is listed, so memory holds one page (plus
/// the versions of one key that continues on the next page) whatever the size of the day.
async fn sweep_partition(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    run_id: &str,
    prefix: &str,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<PartitionResult, SweepError> {
    let mut out = PartitionResult::default();
    // The versions of the page's last key: the next page may hold more of them, and a key is
    // judged (and marked swept) only once all its versions are in hand.
    let mut carried: Vec<ObjectVersion> = Vec::new();
    let mut from = None;
    loop {
        let page = store.list_versions(prefix, from.take()).await?;
        let mut versions = std::mem::take(&mut carried);
        versions.extend(page.versions);
        if page.next.is_some() {
            if let Some(last) = versions.last().map(|v| v.key.clone()) {
                // S3 lists a key's versions together.
                let split = versions
                    .iter()
                    .rposition(|v| v.key != last)
                    .map_or(0, |i| i + 1);
                carried = versions.split_off(split);
            }
        }
        // The page was listed before its records are read: an upload whose commit began before
        // our read shows `promoting` and is kept.
        let items = sweep_versions(catalog, store, versions, now, dry_run, &mut out).await?;
        if !items.is_empty() {
            catalog.add_job_items(run_id, &items).await?;
        }
        match page.next {
            Some(next) => from = Some(next),
            None => break,
        }
    }
    abort_multipart(catalog, store, run_id, prefix, now, dry_run, &mut out).await?;
    Ok(out)
}

/// The records of `keys`, by key: one catalog query per batch of keys, not one per key.
async fn records_of(
    catalog: &Arc<dyn Catalog>,
    keys: &[String],
) -> Result<HashMap<String, Upload>, CatalogError> {
    Ok(catalog
        .uploads_by_keys(keys)
        .await?
        .into_iter()
        .map(|u| (u.key.clone(), u))
        .collect())
}

/// Judges, deletes and marks the keys of `versions` (every version of each key, grouped by key
/// as S3 lists them); returns their report items.
async fn sweep_versions(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    versions: Vec<ObjectVersion>,
    now: DateTime<Utc>,
    dry_run: bool,
    out: &mut PartitionResult,
) -> Result<Vec<JobItem>, SweepError> {
    let mut by_key: BTreeMap<String, Vec<ObjectVersion>> = BTreeMap::new();
    for v in versions {
        by_key.entry(v.key.clone()).or_default().push(v);
    }
    let keys: Vec<String> = by_key.keys().cloned().collect();
    let mut records = records_of(catalog, &keys).await?;
    let mut items = Vec::new();
    let mut doomed: Vec<(ObjectVersion, &'static str)> = Vec::new();
    let mut mark = Vec::new();
    for (key, versions) in by_key {
        let upload = records.remove(&key);
        match classify(upload.as_ref(), now) {
            Verdict::Skip(reason) => {
                out.skipped_keys += 1;
                items.push(JobItem {
                    action: "skipped".into(),
                    key,
                    version_id: None,
                    bytes: versions.iter().map(|v| v.size).sum(),
                    reason: reason.into(),
                });
            }
            Verdict::Delete(reason) => {
                if let Some(u) = upload.filter(|u| u.state == UploadState::Issued) {
                    mark.push((u.id, key.clone()));
                }
                doomed.extend(versions.into_iter().map(|v| (v, reason)));
            }
        }
    }

    let mut failed_keys = std::collections::BTreeSet::new();
    for batch in doomed.chunks(DELETE_BATCH) {
        let refused = if dry_run {
            Vec::new()
        } else {
            let ids: Vec<(String, Option<String>)> = batch
                .iter()
                .map(|(v, _)| (v.key.clone(), v.version_id.clone()))
                .collect();
            store.delete_versions(&ids).await?
        };
        for (v, reason) in batch {
            let failed = refused
                .iter()
                .find(|f| f.key == v.key && f.version_id == v.version_id);
            let (action, why) = match (failed, dry_run) {
                (Some(f), _) => {
                    out.failed_versions += 1;
                    failed_keys.insert(v.key.clone());
                    ("failed", f.reason.clone())
                }
                (None, dry) => {
                    // In a dry run the totals count what would go.
                    out.deleted_versions += 1;
                    out.deleted_bytes += u64::try_from(v.size).unwrap_or(0);
                    let action = if dry { "would_delete" } else { "deleted" };
                    (action, (*reason).to_owned())
                }
            };
            items.push(JobItem {
                action: action.into(),
                key: v.key.clone(),
                version_id: v.version_id.clone(),
                bytes: v.size,
                reason: if v.delete_marker {
                    format!("{why} (delete marker)")
                } else {
                    why
                },
            });
        }
    }

    if !dry_run {
        // Only uploads whose every version went are marked swept.
        let swept: Vec<UploadId> = mark
            .into_iter()
            .filter(|(_, k)| !failed_keys.contains(k))
            .map(|(id, _)| id)
            .collect();
        if !swept.is_empty() {
            catalog.mark_swept_many(&swept, records::now()).await?;
            out.uploads_marked += swept.len() as u64;
        }
    }
    Ok(items)
}

/// Aborts the partition's abandoned multipart uploads, their records read in batches.
async fn abort_multipart(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    run_id: &str,
    prefix: &str,
    now: DateTime<Utc>,
    dry_run: bool,
    out: &mut PartitionResult,
) -> Result<(), SweepError> {
    let open = store.list_multipart_uploads(prefix).await?;
    for chunk in open.chunks(crate::catalog::KEY_BATCH) {
        let keys: Vec<String> = chunk.iter().map(|(k, _)| k.clone()).collect();
        let records = records_of(catalog, &keys).await?;
        let mut items = Vec::new();
        for (key, multipart_id) in chunk {
            let upload = records.get(key);
            let Verdict::Delete(reason) = classify(upload, now) else {
                continue;
            };
            if !dry_run {
                store.abort_multipart(key, multipart_id).await?;
                if let Some(u) = upload {
                    catalog
                        .finish_session(&u.id, SessionState::Aborted, &[], records::now())
                        .await?;
                }
            }
            out.multipart_aborted += 1;
            items.push(JobItem {
                action: if dry_run { "would_abort" } else { "aborted" }.into(),
                key: key.clone(),
                version_id: None,
                bytes: 0,
                reason: format!("{reason} (multipart upload)"),
            });
        }
        if !items.is_empty() {
            catalog.add_job_items(run_id, &items).await?;
        }
    }
    Ok(())
}
