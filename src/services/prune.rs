//! Upload retention: every presign leaves an `uploads` row, so finished ones are pruned once
//! nothing can use them any more (`catalog::retention_queries::PRUNABLE` says what that means:
//! past the retention, commit window closed, tmp object cleared, no multipart session open),
//! with their multipart sessions and parts, and quota rows of days that can no longer be
//! charged. A committed upload's handle keeps its upload id, which is all an idempotent commit
//! retry needs once the row is gone (`services::commit` answers it from the handle). By the job
//! history's retention, maintenance runs and link scans go too: those a newer completed scan
//! superseded, and open ones abandoned (expired first); never the latest completed scan.
//!
//! Deletes go in batches of [`BATCH`] rows, one short transaction each (PostgreSQL skips rows
//! another transaction holds), under the job's lease; a dry run counts and changes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::catalog::{Catalog, CatalogError, PruneCounts};
use crate::config::Settings;
use crate::domain::jobs::{JobRun, RunState};
use crate::domain::quota::quota_day;
use crate::services::jobs::{self, Begin};

pub const JOB: &str = crate::domain::jobs::PRUNE;

/// Rows deleted per transaction.
pub const BATCH: i64 = 1_000;

/// A run's totals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PruneSummary {
    pub dry_run: bool,
    pub retention_secs: u64,
    /// Rows older than this were pruned (now minus the retention).
    pub cutoff: Option<DateTime<Utc>>,
    /// Upload rows (by state), multipart sessions and parts pruned, or that would be.
    pub uploads: PruneCounts,
    /// Quota rows of days before `quota_before` pruned, or that would be.
    pub quota_rows: u64,
    pub quota_before: Option<NaiveDate>,
    /// Deliveries discarded undelivered (or that would be), by endpoint: their endpoint was
    /// disabled, or their retry window closed, longer than the retention ago (docs/events.md,
    /// "Retention"). `upcommit_event_deliveries_discarded_total` counts them too.
    pub discarded_deliveries: BTreeMap<String, u64>,
    /// Events the feed carried and every endpoint received (or that were owed only deliveries
    /// discarded above), older than the retention, pruned (or that would be).
    pub events: u64,
    /// Maintenance runs (with their findings) that ended before `job_history_cutoff` pruned,
    /// or that would be (`UPCOMMIT_JOB_HISTORY_RETENTION`); the newest run of each job, kind
    /// and outcome always stays.
    pub job_runs: u64,
    pub job_history_cutoff: Option<DateTime<Utc>>,
    /// Link scans pruned with their batches and seen rows, or that would be, by the same
    /// cutoff: completed ones a newer completed scan superseded, and open ones nothing was sent
    /// to since (expired first, so no scanner completes a scan half pruned). The latest
    /// completed scan, the one hygiene judges by, always stays.
    pub link_scans: crate::catalog::ScanPruneCounts,
    /// Transactions it took.
    pub batches: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub enum PruneOutcome {
    Ran {
        run: Box<JobRun>,
        summary: Box<PruneSummary>,
    },
    /// Another replica holds the job.
    Busy,
}

/// [`prune_at`] as of the database's clock.
pub async fn prune(
    catalog: &Arc<dyn Catalog>,
    settings: &Settings,
    dry_run: bool,
) -> Result<PruneOutcome, CatalogError> {
    let now = catalog.clock().await?;
    prune_at(catalog, settings, dry_run, now).await
}

/// Prunes what the retention lets go as of `now` (tests let years pass with it).
#[tracing::instrument(skip_all, fields(job = JOB, dry_run))]
pub async fn prune_at(
    catalog: &Arc<dyn Catalog>,
    settings: &Settings,
    dry_run: bool,
    now: DateTime<Utc>,
) -> Result<PruneOutcome, CatalogError> {
    let mut job = match jobs::begin(catalog, JOB, dry_run, settings.jobs.lease_secs).await? {
        Begin::Started(job) => job,
        Begin::Busy => return Ok(PruneOutcome::Busy),
    };
    let retention = settings.jobs.upload_retention_secs;
    let cutoff = crate::domain::duration::before(now, retention);
    // The quota day the cutoff falls in may still hold charges from before the cutoff; the
    // days before it hold only charges older than the retention (at least a day).
    let quota_before = quota_day(cutoff);
    let history = settings.jobs.job_history_retention_secs;
    let history_cutoff = crate::domain::duration::before(now, history);
    let mut summary = PruneSummary {
        dry_run,
        retention_secs: retention,
        cutoff: Some(cutoff),
        quota_before: Some(quota_before),
        job_history_cutoff: Some(history_cutoff),
        ..PruneSummary::default()
    };
    let state = if dry_run {
        summary.uploads = catalog.prunable_uploads(cutoff).await?;
        summary.quota_rows = catalog.prunable_quota_days(quota_before).await?;
        summary.discarded_deliveries = catalog
            .discardable_deliveries(cutoff)
            .await?
            .into_iter()
            .collect();
        summary.events = catalog.prunable_events(cutoff).await?;
        summary.job_runs = catalog.prunable_runs(history_cutoff).await?;
        summary.link_scans = catalog.prunable_scans(history_cutoff).await?;
        RunState::Finished
    } else {
        match prune_batches(
            catalog,
            &mut job,
            &mut summary,
            (cutoff, history_cutoff),
            quota_before,
        )
        .await
        {
            Ok(()) => RunState::Finished,
            Err(e) => {
                summary.error = Some(e);
                RunState::Failed
            }
        }
    };
    let run = job.finish(catalog, state, &[], &summary).await?;
    let discarded: u64 = summary.discarded_deliveries.values().sum();
    if discarded > 0 {
        // Events some endpoint never received: said loudly, never silently.
        tracing::warn!(
            run.id = %run.id,
            discarded,
            by_endpoint = ?summary.discarded_deliveries,
            dry_run,
            "prune discarded undelivered event deliveries (endpoint disabled, or retry window closed, longer than the retention ago)"
        );
    }
    tracing::info!(
        run.id = %run.id,
        uploads = summary.uploads.uploads(),
        parts = summary.uploads.upload_parts,
        quota_rows = summary.quota_rows,
        events = summary.events,
        job_runs = summary.job_runs,
        link_scans = summary.link_scans.scans(),
        link_scan_rows = summary.link_scans.rows(),
        batches = summary.batches,
        dry_run,
        "prune finished"
    );
    Ok(PruneOutcome::Ran {
        run: Box::new(run),
        summary: Box::new(summary),
    })
}

/// Batch after batch until one comes back empty; each is checkpointed, so a crash loses at
/// most one batch's count (never rows: each batch commits on its own).
async fn prune_batches(
    catalog: &Arc<dyn Catalog>,
    job: &mut jobs::JobHandle,
    summary: &mut PruneSummary,
    (cutoff, history_cutoff): (DateTime<Utc>, DateTime<Utc>),
    quota_before: NaiveDate,
) -> Result<(), String> {
    loop {
        if job.lost() {
            return Err("lost the job's lease to another replica".into());
        }
        let batch = catalog
            .prune_uploads(cutoff, BATCH)
            .await
            .map_err(|e| e.to_string())?;
        if batch.uploads() == 0 {
            break;
        }
        summary.batches += 1;
        summary.uploads.add(&batch);
        job.checkpoint(catalog, &[], "uploads", &*summary)
            .await
            .map_err(|e| e.to_string())?;
    }
    loop {
        if job.lost() {
            return Err("lost the job's lease to another replica".into());
        }
        let n = catalog
            .prune_quota_days(quota_before, BATCH)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        summary.batches += 1;
        summary.quota_rows += n;
        job.checkpoint(catalog, &[], "quota", &*summary)
            .await
            .map_err(|e| e.to_string())?;
    }
    // Before the events: a discarded delivery no longer keeps its event.
    loop {
        if job.lost() {
            return Err("lost the job's lease to another replica".into());
        }
        let batch = catalog
            .discard_deliveries(cutoff, BATCH)
            .await
            .map_err(|e| e.to_string())?;
        if batch.is_empty() {
            break;
        }
        summary.batches += 1;
        for (endpoint, n) in batch {
            *summary.discarded_deliveries.entry(endpoint).or_default() += n;
        }
        job.checkpoint(catalog, &[], "deliveries", &*summary)
            .await
            .map_err(|e| e.to_string())?;
    }
    loop {
        if job.lost() {
            return Err("lost the job's lease to another replica".into());
        }
        let n = catalog
            .prune_events(cutoff, BATCH)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        summary.batches += 1;
        summary.events += n;
        job.checkpoint(catalog, &[], "events", &*summary)
            .await
            .map_err(|e| e.to_string())?;
    }
    loop {
        if job.lost() {
            return Err("lost the job's lease to another replica".into());
        }
        // This run's own row is `running`, so never among them.
        let n = catalog
            .prune_runs(history_cutoff, BATCH)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        summary.batches += 1;
        summary.job_runs += n;
        job.checkpoint(catalog, &[], "job_runs", &*summary)
            .await
            .map_err(|e| e.to_string())?;
    }
    prune_scans(catalog, job, summary, history_cutoff).await
}

/// Expires abandoned open link scans, then deletes the retired scans' rows, in batches.
async fn prune_scans(
    catalog: &Arc<dyn Catalog>,
    job: &mut jobs::JobHandle,
    summary: &mut PruneSummary,
    cutoff: DateTime<Utc>,
) -> Result<(), String> {
    loop {
        if job.lost() {
            return Err("lost the job's lease to another replica".into());
        }
        // Counted when their rows go (as `abandoned`), below.
        let n = catalog
            .expire_scans(cutoff, BATCH)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        summary.batches += 1;
    }
    loop {
        if job.lost() {
            return Err("lost the job's lease to another replica".into());
        }
        let batch = catalog
            .prune_scans(cutoff, BATCH)
            .await
            .map_err(|e| e.to_string())?;
        if batch.rows() == 0 {
            break;
        }
        summary.batches += 1;
        summary.link_scans.add(&batch);
        job.checkpoint(catalog, &[], "link_scans", &*summary)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
