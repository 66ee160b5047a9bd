//! Unlinked data, staged and reversible until the last step: handles nothing uses become
//! `unlinked` after a grace period (still downloadable), are `archived` after a further period
//! (their object rewritten in an archive class and tagged `upcommit-status=archived`, unless it
//! is too small to be worth it), and only after the retention period are their objects deleted
//! (`deleted`; the row stays). A key is archived only when no available handle shares it, and
//! deleted only when every other handle of it is deleted or archived past the same period (those
//! copies are deleted with it); candidates are walked in id order so handles that are blocked are
//! passed over, never fetched again and again. Every stage spares a file the latest completed
//! link scan saw, judged in the statement that makes the transition. Restore brings a handle back.
//!
//! This file holds the run, detection and the claims every stage takes; the stages that change
//! S3 have their own files: `archive`, `delete`, and `restore` (also the HTTP layer's).

mod archive;
mod delete;
mod restore;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::catalog::{Catalog, CatalogError, ClaimKind, HygieneGuard};
use crate::config::Settings;
use crate::domain::jobs::{JobItem, JobRun, RunState};
use crate::domain::records::FileHandle;
use crate::pause;
use crate::services::jobs::{self, Begin};
use crate::storage::{ObjectStore, StoreError};

use archive::archive;
use delete::delete;
pub use restore::{restore, RestoreError};

pub const JOB: &str = crate::domain::jobs::HYGIENE;
pub const ARCHIVED_TAG: (&str, &str) = ("upcommit-status", "archived");
const PAGE: i64 = 200;

/// Whether archival tags the objects it moves and a restore clears the tag: not where the
/// operator accepted the store's `object_tags` gap, and then no tagging header is sent at all
/// (a store without tags may refuse one). Read from the settings, not from one run's probe, so
/// an archival and a later restore always agree.
fn writes_tags(settings: &Settings) -> bool {
    !settings
        .s3
        .accept_gaps
        .contains(&crate::domain::capabilities::Capability::ObjectTags)
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct HygieneSummary {
    pub dry_run: bool,
    pub at: Option<DateTime<Utc>>,
    pub unlinked: u64,
    pub archived: u64,
    pub archived_bytes: u64,
    /// Archived without a class change: below `UPCOMMIT_ARCHIVE_MIN_BYTES`.
    pub archived_in_place: u64,
    /// Candidates passed over because an available handle shares their key.
    pub blocked: u64,
    pub deleted: u64,
    pub deleted_bytes: u64,
    /// Candidates that changed between the read and the claim (linked, restored, claimed,
    /// vouched for by a scan completed since), or whose claim was lost before S3 was changed.
    pub skipped: u64,
    /// Unlinked files the latest completed link scan saw, made available again.
    pub returned: u64,
    /// Archivals whose claim was taken over after S3 was changed: the object was put back.
    pub undone: u64,
    pub failed: u64,
    /// The profiles hygiene acted on: those that track links.
    pub profiles: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub enum HygieneOutcome {
    Ran {
        run: Box<JobRun>,
        summary: Box<HygieneSummary>,
    },
    Busy,
}

#[derive(Debug, thiserror::Error)]
pub enum HygieneError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("another replica holds the job")]
    Busy,
}

fn item(action: &str, h: &FileHandle, reason: impl Into<String>) -> JobItem {
    JobItem {
        action: action.into(),
        key: h.key.clone(),
        version_id: None,
        bytes: h.size,
        reason: format!("file {}: {}", h.id, reason.into()),
    }
}

/// A run's report items, written to the catalog page by page (see [`Items::flush`]), so a run
/// over millions of handles holds one page of them, not all.
struct Items {
    run_id: String,
    pending: Vec<JobItem>,
}

impl Items {
    fn new(run_id: &str) -> Self {
        Self {
            run_id: run_id.to_owned(),
            pending: Vec::new(),
        }
    }

    fn push(&mut self, item: JobItem) {
        self.pending.push(item);
    }

    async fn flush(&mut self, catalog: &Arc<dyn Catalog>) -> Result<(), CatalogError> {
        if !self.pending.is_empty() {
            catalog.add_job_items(&self.run_id, &self.pending).await?;
            self.pending.clear();
        }
        Ok(())
    }
}

/// Runs detection, archival and deletion, in that order, as of `now`.
#[tracing::instrument(skip_all, fields(job = JOB, dry_run))]
pub async fn run(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    dry_run: bool,
    now: DateTime<Utc>,
) -> Result<HygieneOutcome, HygieneError> {
    let job = match jobs::begin(catalog, JOB, dry_run, settings.jobs.lease_secs).await? {
        Begin::Started(job) => job,
        Begin::Busy => return Ok(HygieneOutcome::Busy),
    };
    run_begun(job, catalog, store, settings, dry_run, now).await
}

/// Starts a dry run ("what the next run would do") in the background and returns its run id
/// at once with its task: its row is `running` until it ends, then holds the summary and the
/// findings (`GET /v1/admin/jobs/runs/{id}`). A dry run changes nothing and takes no lease.
pub async fn start_dry_run(
    catalog: Arc<dyn Catalog>,
    store: Arc<dyn ObjectStore>,
    settings: Arc<Settings>,
    metrics: Option<Arc<crate::metrics::Metrics>>,
) -> Result<(String, tokio::task::JoinHandle<()>), HygieneError> {
    let job = match jobs::begin(&catalog, JOB, true, settings.jobs.lease_secs).await? {
        Begin::Started(job) => job,
        // Dry runs take no lease; kept exhaustive should that change.
        Begin::Busy => return Err(HygieneError::Busy),
    };
    let run_id = job.run_id().to_owned();
    let now = crate::domain::records::now();
    let task = tokio::spawn(async move {
        let run = run_begun(job, &catalog, &store, &settings, true, now);
        // Under the guard `serve`'s jobs run under: a panic is recorded with its message.
        if let Some(Err(e)) =
            crate::state::supervise::catching("hygiene", metrics.as_deref(), run).await
        {
            tracing::error!(error = %e, "hygiene dry run failed");
        }
    });
    Ok((run_id, task))
}

async fn run_begun(
    job: jobs::JobHandle,
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    dry_run: bool,
    now: DateTime<Utc>,
) -> Result<HygieneOutcome, HygieneError> {
    let mut summary = HygieneSummary {
        dry_run,
        at: Some(now),
        profiles: settings.hygiene_profiles(),
        ..HygieneSummary::default()
    };
    let mut items = Items::new(&job.run.id);
    let result = async {
        detect(catalog, settings, dry_run, now, &mut summary, &mut items).await?;
        if !dry_run {
            return_moved(catalog, store, settings, now, &mut summary, &mut items).await?;
        }
        archive(
            catalog,
            store,
            settings,
            dry_run,
            now,
            &mut summary,
            &mut items,
        )
        .await?;
        delete(
            catalog,
            store,
            settings,
            dry_run,
            now,
            &mut summary,
            &mut items,
        )
        .await
    }
    .await;
    let state = match &result {
        Ok(()) => RunState::Finished,
        Err(e) => {
            summary.error = Some(e.to_string());
            RunState::Failed
        }
    };
    let run = job.finish(catalog, state, &items.pending, &summary).await?;
    tracing::info!(
        run.id = %run.id,
        unlinked = summary.unlinked,
        archived = summary.archived,
        deleted = summary.deleted,
        blocked = summary.blocked,
        "unlinked-data run finished"
    );
    Ok(HygieneOutcome::Ran {
        run: Box::new(run),
        summary: Box::new(summary),
    })
}

async fn detect(
    catalog: &Arc<dyn Catalog>,
    settings: &Settings,
    dry_run: bool,
    now: DateTime<Utc>,
    summary: &mut HygieneSummary,
    items: &mut Items,
) -> Result<(), HygieneError> {
    let cutoff = crate::domain::duration::before(now, settings.jobs.unlinked_grace_secs);
    let profiles = settings.hygiene_profiles();
    // A scan is evidence of use: unlinked files the latest one saw come back first.
    if !dry_run {
        summary.returned = catalog.return_vouched(now).await?;
    }
    // For the report only: each update judges the latest completed scan itself.
    let scan = catalog.latest_completed_scan().await?;
    let mut after = String::new();
    loop {
        // The previous page's items go to the report now: a run holds one page of them.
        items.flush(catalog).await?;
        let page = catalog
            .unlinked_candidates(cutoff, &profiles, &after, PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = last.id.as_str().to_owned();
        pause::point("hygiene_unlink").await;
        for h in page {
            // The update re-checks everything the read did: a link added or a scan completed
            // since wins.
            let done = dry_run
                || catalog
                    .unlink_if_unused(&h.id, cutoff, &profiles, now)
                    .await?;
            if done {
                summary.unlinked += 1;
                let why = match &scan {
                    Some(s) => format!(
                        "no links and not seen by the latest completed link scan ({} when the run began)",
                        s.id
                    ),
                    None => "no links".to_owned(),
                };
                items.push(item(
                    if dry_run { "would_unlink" } else { "unlinked" },
                    &h,
                    why,
                ));
            }
        }
    }
}

/// Unlinked handles the latest completed scan vouches for whose object an archival of a copy
/// moved (or may have moved: a claim on the key) come back through a restore, which puts the
/// object back in STANDARD, untagged, before the handle is available again; detection's
/// `return_vouched` brings back only those whose object is untouched.
async fn return_moved(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    now: DateTime<Utc>,
    summary: &mut HygieneSummary,
    items: &mut Items,
) -> Result<(), HygieneError> {
    let mut after = String::new();
    loop {
        items.flush(catalog).await?;
        let page = catalog.vouched_moved(&after, PAGE).await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = last.id.as_str().to_owned();
        for h in page {
            match restore(catalog, store, &h, None, settings, now).await {
                Ok(_) => {
                    summary.returned += 1;
                    items.push(item(
                        "returned",
                        &h,
                        "seen by the latest completed link scan; the object a copy's archival \
                         moved is back in STANDARD",
                    ));
                }
                Err(RestoreError::Busy | RestoreError::Deleted) => {
                    summary.skipped += 1;
                    items.push(item(
                        "skipped",
                        &h,
                        "seen by the latest completed link scan, but another step holds its \
                         key: a later run returns it",
                    ));
                }
                Err(RestoreError::Failed(e)) => {
                    summary.failed += 1;
                    items.push(item("failed", &h, format!("return: {e}")));
                }
            }
        }
    }
}

fn token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Claims `h` for `kind` under `guard` (links, scans, shared keys and status checked in the
/// same statement). `None`: it changed since it was read, and is reported skipped.
async fn claim_or_skip(
    catalog: &Arc<dyn Catalog>,
    h: &FileHandle,
    kind: ClaimKind,
    guard: &HygieneGuard<'_>,
    settings: &Settings,
    summary: &mut HygieneSummary,
    items: &mut Items,
) -> Result<Option<String>, HygieneError> {
    let claim = token();
    if catalog
        .claim_handle(&h.id, kind, Some(guard), &claim, settings.jobs.lease_secs)
        .await?
    {
        return Ok(Some(claim));
    }
    summary.skipped += 1;
    items.push(item(
        "skipped",
        h,
        "changed since read: linked, restored or claimed",
    ));
    Ok(None)
}
