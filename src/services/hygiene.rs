//! Unlinked data, staged and reversible until the last step: handles nothing uses become
//! `unlinked` after a grace period (still downloadable), are `archived` after a further period
//! (their object rewritten in an archive class and tagged `upcommit-status=archived`, unless it
//! is too small to be worth it), and only after the retention period are their objects deleted
//! (`deleted`; the row stays). A key is archived or deleted only when no available (or, for
//! deletion, unlinked) handle shares it; candidates are walked in id order so handles that are
//! blocked are passed over, never fetched again and again. Restore brings a handle back.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::catalog::{Catalog, CatalogError};
use crate::config::Settings;
use crate::domain::jobs::{JobItem, JobRun, RunState};
use crate::domain::records::{FileHandle, HandleStatus};
use crate::services::jobs::{self, Begin};
use crate::storage::{ObjectStore, StoreError, DELETE_BATCH};

pub const JOB: &str = "hygiene";
pub const ARCHIVED_TAG: (&str, &str) = ("upcommit-status", "archived");
const PAGE: i64 = 200;

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
}

fn secs(s: u64) -> Duration {
    Duration::seconds(i64::try_from(s).unwrap_or(i64::MAX / 4))
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
    let mut summary = HygieneSummary {
        dry_run,
        at: Some(now),
        profiles: settings.hygiene_profiles(),
        ..HygieneSummary::default()
    };
    let mut items = Vec::new();
    let result = async {
        detect(catalog, settings, dry_run, now, &mut summary, &mut items).await?;
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
    let run = job.finish(catalog, state, &items, &summary).await?;
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
    items: &mut Vec<JobItem>,
) -> Result<(), HygieneError> {
    let cutoff = now - secs(settings.jobs.unlinked_grace_secs);
    let profiles = settings.hygiene_profiles();
    let scan = catalog.latest_completed_scan().await?;
    let mut after = String::new();
    loop {
        let page = catalog
            .unlinked_candidates(cutoff, scan.as_ref(), &profiles, &after, PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = last.id.as_str().to_owned();
        for h in page {
            let done = dry_run
                || catalog
                    .set_status(
                        &h.id,
                        &[HandleStatus::Available],
                        HandleStatus::Unlinked,
                        None,
                        false,
                        now,
                    )
                    .await?;
            if done {
                summary.unlinked += 1;
                let why = match &scan {
                    Some(s) => format!("not seen by link scan {} and no links", s.id),
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

async fn archive(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    dry_run: bool,
    now: DateTime<Utc>,
    summary: &mut HygieneSummary,
    items: &mut Vec<JobItem>,
) -> Result<(), HygieneError> {
    let cutoff = now - secs(settings.jobs.archive_after_secs);
    let class = settings.jobs.archive_storage_class.as_str();
    let profiles = settings.hygiene_profiles();
    let mut after = String::new();
    loop {
        let page = catalog
            .handles_in_status(HandleStatus::Unlinked, cutoff, &profiles, &after, PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        // Keyset progress: a blocked handle is passed over, never fetched again this run.
        after = last.id.as_str().to_owned();
        for h in page {
            if catalog
                .key_has_status(&h.key, &[HandleStatus::Available])
                .await?
            {
                summary.blocked += 1;
                items.push(item("blocked", &h, "an available handle shares its key"));
                continue;
            }
            let small = u64::try_from(h.size).unwrap_or(0) < settings.jobs.archive_min_bytes;
            let current = catalog.storage_class_of(&h.id).await?;
            let already = current.as_deref() == Some(class);
            if dry_run {
                summary.archived += 1;
                items.push(item(
                    "would_archive",
                    &h,
                    if small {
                        "kept in its class (small)"
                    } else {
                        class
                    },
                ));
                continue;
            }
            if !small && !already {
                if let Err(e) = store
                    .change_storage_class(&h.key, class, &[ARCHIVED_TAG])
                    .await
                {
                    summary.failed += 1;
                    items.push(item("failed", &h, format!("archive: {e}")));
                    continue;
                }
            }
            let new_class = (!small).then_some(class);
            if catalog
                .set_status(
                    &h.id,
                    &[HandleStatus::Unlinked],
                    HandleStatus::Archived,
                    new_class,
                    false,
                    now,
                )
                .await?
            {
                summary.archived += 1;
                if small {
                    summary.archived_in_place += 1;
                    items.push(item(
                        "archived",
                        &h,
                        "below the archive threshold: class kept",
                    ));
                } else {
                    summary.archived_bytes += u64::try_from(h.size).unwrap_or(0);
                    items.push(item("archived", &h, format!("moved to {class}")));
                }
            }
        }
    }
}

async fn delete(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    dry_run: bool,
    now: DateTime<Utc>,
    summary: &mut HygieneSummary,
    items: &mut Vec<JobItem>,
) -> Result<(), HygieneError> {
    let cutoff = now - secs(settings.jobs.delete_after_secs);
    let profiles = settings.hygiene_profiles();
    let mut after = String::new();
    loop {
        let page = catalog
            .handles_in_status(HandleStatus::Archived, cutoff, &profiles, &after, PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = last.id.as_str().to_owned();
        for h in page {
            if catalog
                .key_has_status(&h.key, &[HandleStatus::Available, HandleStatus::Unlinked])
                .await?
            {
                summary.blocked += 1;
                items.push(item("blocked", &h, "another live handle shares its key"));
                continue;
            }
            if dry_run {
                summary.deleted += 1;
                items.push(item(
                    "would_delete",
                    &h,
                    "archived past the retention period",
                ));
                continue;
            }
            if let Err(e) = delete_every_version(store.as_ref(), &h.key).await {
                summary.failed += 1;
                items.push(item("failed", &h, format!("delete: {e}")));
                continue;
            }
            if catalog
                .set_status(
                    &h.id,
                    &[HandleStatus::Archived],
                    HandleStatus::Deleted,
                    None,
                    false,
                    now,
                )
                .await?
            {
                summary.deleted += 1;
                summary.deleted_bytes += u64::try_from(h.size).unwrap_or(0);
                items.push(item("deleted", &h, "archived past the retention period"));
            }
        }
    }
}

/// Every version and delete marker of exactly `key` (a prefix listing also returns longer keys).
async fn delete_every_version(store: &dyn ObjectStore, key: &str) -> Result<(), StoreError> {
    let mut doomed = Vec::new();
    let mut from = None;
    loop {
        let page = store.list_versions(key, from.take()).await?;
        doomed.extend(
            page.versions
                .into_iter()
                .filter(|v| v.key == key)
                .map(|v| (v.key, v.version_id)),
        );
        match page.next {
            Some(next) => from = Some(next),
            None => break,
        }
    }
    for batch in doomed.chunks(DELETE_BATCH) {
        let refused = store.delete_versions(batch).await?;
        if let Some(f) = refused.first() {
            return Err(StoreError::Other(format!("{}: {}", f.key, f.reason)));
        }
    }
    Ok(())
}

/// Brings an unlinked or archived handle back to `available` (the object back to STANDARD and
/// untagged, when it was moved). `Ok(false)` when it was already available.
pub async fn restore(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    handle: &FileHandle,
    now: DateTime<Utc>,
) -> Result<bool, HygieneError> {
    match handle.status {
        HandleStatus::Available | HandleStatus::Deleted => return Ok(false),
        HandleStatus::Unlinked | HandleStatus::Archived => {}
    }
    let class = catalog.storage_class_of(&handle.id).await?;
    let moved = class.as_deref().is_some_and(|c| c != "STANDARD");
    if moved {
        store
            .change_storage_class(&handle.key, "STANDARD", &[])
            .await?;
    }
    Ok(catalog
        .set_status(
            &handle.id,
            &[HandleStatus::Unlinked, HandleStatus::Archived],
            HandleStatus::Available,
            Some("STANDARD"),
            true,
            now,
        )
        .await?)
}
