//! Unlinked data, staged and reversible until the last step: handles nothing uses become
//! `unlinked` after a grace period (still downloadable), are `archived` after a further period
//! (their object rewritten in an archive class and tagged `upcommit-status=archived`, unless it
//! is too small to be worth it), and only after the retention period are their objects deleted
//! (`deleted`; the row stays). A key is archived only when no available handle shares it, and
//! deleted only when every other handle of it is deleted or archived past the same period (those
//! copies are deleted with it); candidates are walked in id order so handles that are blocked are
//! passed over, never fetched again and again. Every stage spares a file the latest completed
//! link scan saw, judged in the statement that makes the transition. Restore brings a handle back.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::catalog::{Catalog, CatalogError, ClaimKind, HygieneGuard, Settle};
use crate::config::Settings;
use crate::domain::capabilities::{judge, Capability, Needs};
use crate::domain::jobs::{JobItem, JobRun, RunState};
use crate::domain::records::{FileHandle, HandleStatus};
use crate::services::jobs::{self, Begin};
use crate::services::pause;
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
    let cutoff = now - secs(settings.jobs.unlinked_grace_secs);
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
            match restore(catalog, store, &h, None, settings.jobs.lease_secs, now).await {
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

async fn archive(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    dry_run: bool,
    now: DateTime<Utc>,
    summary: &mut HygieneSummary,
    items: &mut Items,
) -> Result<(), HygieneError> {
    let cutoff = now - secs(settings.jobs.archive_after_secs);
    let class = settings.jobs.archive_storage_class.as_str();
    let profiles = settings.hygiene_profiles();
    let guard = HygieneGuard {
        from: HandleStatus::Unlinked,
        changed_before: cutoff,
        profiles: &profiles,
        key_not_in: &[HandleStatus::Available],
        key_retired: false,
    };
    let mut after = String::new();
    let mut keeps_classes: Option<bool> = None;
    loop {
        // The previous page's items go to the report now: a run holds one page of them.
        items.flush(catalog).await?;
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
            // A store that keeps no storage classes or tags (Garage: the probe's
            // `storage_class`, `object_tags`) archives in the catalog only: the object is not
            // rewritten, as for a small one (docs/stores.md). Asked once per run, when there is
            // something to archive, so a store that gained the capability is used at once.
            // Judged as `serve` judges it: present, or missing and accepted by name (then the
            // catalog-only fallback); missing and not accepted, or not known (a call that got no
            // answer), and this run archives nothing (review 27: one failed probe call turned a
            // whole run catalog-only, a gap nobody accepted).
            let classes = match keeps_classes {
                Some(k) => k,
                None => {
                    // The same verdict `serve` reaches, for the two capabilities archival uses.
                    let verdict = judge(
                        &store.probe_archival(class).await,
                        Needs { archival: true },
                        &settings.s3.accept_gaps,
                    );
                    let needed = [Capability::StorageClass, Capability::ObjectTags];
                    let mode = if needed.iter().all(|c| verdict.has(*c)) {
                        Some(true)
                    } else if needed
                        .iter()
                        .all(|c| verdict.has(*c) || verdict.accepted().contains(c))
                    {
                        tracing::warn!(class, "the store keeps no storage classes or tags (accepted): archival records files as archived without rewriting their objects");
                        Some(false)
                    } else {
                        None
                    };
                    match mode {
                        Some(k) => *keeps_classes.insert(k),
                        None => {
                            let why = "archive: the store was not found to keep storage classes \
                                       and tags (storage_class, object_tags) and the gap is not \
                                       accepted (UPCOMMIT_ACCEPT_STORE_GAPS): nothing archived \
                                       this run";
                            tracing::error!(class, "{why}");
                            summary.failed += 1;
                            items.push(item("failed", &h, why));
                            return Ok(());
                        }
                    }
                }
            };
            let small = u64::try_from(h.size).unwrap_or(0) < settings.jobs.archive_min_bytes;
            let kept_reason = if small {
                "kept in its class (small)"
            } else {
                "kept in its class (the store has no storage classes)"
            };
            let small = small || !classes;
            let current = catalog.storage_class_of(&h.id).await?;
            let already = current.as_deref() == Some(class);
            if dry_run {
                summary.archived += 1;
                items.push(item(
                    "would_archive",
                    &h,
                    if small { kept_reason } else { class },
                ));
                continue;
            }
            // Claim first (checking links, shared keys and status in the same statement), then
            // S3, then settle: a restore meanwhile waits for the claim instead of losing.
            let Some(claim) = claim_or_skip(
                catalog,
                &h,
                ClaimKind::Archive,
                &guard,
                settings,
                summary,
                items,
            )
            .await?
            else {
                continue;
            };
            pause::point("hygiene_archive_claimed").await;
            let moves = !small && !already;
            // The lease may have run out meanwhile and a restore taken the file back: renew
            // (only while the claim is ours) right before S3 is changed.
            if moves
                && !catalog
                    .renew_claim(&h.id, &claim, settings.jobs.lease_secs)
                    .await?
            {
                catalog.release_claim(&h.id, &claim).await?;
                summary.skipped += 1;
                items.push(item(
                    "skipped",
                    &h,
                    "archive: the claim was lost (or a scan saw the file or a copy of its key) \
                     before S3 was changed",
                ));
                continue;
            }
            pause::point("hygiene_archive_s3").await;
            if moves {
                if let Err(e) = store
                    .change_storage_class(&h.key, class, &[ARCHIVED_TAG])
                    .await
                {
                    catalog.release_claim(&h.id, &claim).await?;
                    summary.failed += 1;
                    items.push(item("failed", &h, format!("archive: {e}")));
                    continue;
                }
            }
            pause::point("hygiene_archive_changed").await;
            let new_class = (!small).then_some(class);
            let settle = Settle {
                to: HandleStatus::Archived,
                storage_class: new_class,
                restored: false,
                link: None,
                now,
            };
            if !catalog.settle_claim(&h.id, &claim, &settle).await? {
                // Taken over after S3 changed (a restore that found the class unchanged), or a
                // copy came back or a scan vouched for the key meanwhile (the settle refused):
                // never leave a live file archived in S3.
                if !moves {
                    catalog.release_claim(&h.id, &claim).await?;
                    summary.skipped += 1;
                    items.push(item(
                        "skipped",
                        &h,
                        "archive: the claim was taken over, a copy came back or a scan saw the \
                         key meanwhile; nothing was changed in S3",
                    ));
                    continue;
                }
                let (undone, why) = undo_archive(catalog, store, &h).await?;
                // Still ours when the settle refused: give it up.
                catalog.release_claim(&h.id, &claim).await?;
                if undone {
                    summary.undone += 1;
                } else {
                    summary.failed += 1;
                }
                items.push(item(if undone { "undone" } else { "failed" }, &h, why));
                continue;
            }
            summary.archived += 1;
            if small {
                summary.archived_in_place += 1;
                items.push(item("archived", &h, kept_reason));
            } else if already {
                // A copy of its key was archived first: the shared object moved once.
                items.push(item(
                    "archived",
                    &h,
                    format!("already in {class} (the object a copy shares)"),
                ));
            } else {
                summary.archived_bytes += u64::try_from(h.size).unwrap_or(0);
                items.push(item("archived", &h, format!("moved to {class}")));
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
    items: &mut Items,
) -> Result<(), HygieneError> {
    let cutoff = now - secs(settings.jobs.delete_after_secs);
    let profiles = settings.hygiene_profiles();
    let live = [HandleStatus::Available, HandleStatus::Unlinked];
    let guard = HygieneGuard {
        from: HandleStatus::Archived,
        changed_before: cutoff,
        profiles: &profiles,
        key_not_in: &[],
        key_retired: true,
    };
    let mut after = String::new();
    loop {
        // The previous page's items go to the report now: a run holds one page of them.
        items.flush(catalog).await?;
        let page = catalog
            .handles_in_status(HandleStatus::Archived, cutoff, &profiles, &after, PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = last.id.as_str().to_owned();
        for h in page {
            if catalog.key_has_status(&h.key, &live).await? {
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
            let Some(claim) = claim_or_skip(
                catalog,
                &h,
                ClaimKind::Delete,
                &guard,
                settings,
                summary,
                items,
            )
            .await?
            else {
                continue;
            };
            pause::point("hygiene_delete_claimed").await;
            if !catalog
                .renew_claim(&h.id, &claim, settings.jobs.lease_secs)
                .await?
            {
                // Nothing is deleted yet: giving the claim up is safe.
                catalog.release_claim(&h.id, &claim).await?;
                summary.skipped += 1;
                items.push(item(
                    "skipped",
                    &h,
                    "delete: the claim was lost (or a scan saw the file or a copy of its key) \
                     before S3 was changed",
                ));
                continue;
            }
            pause::point("hygiene_delete_s3").await;
            if let Err(e) = delete_every_version(store.as_ref(), &h.key).await {
                // The claim stays: some versions may be gone, so only a later run may finish
                // the deletion (a restore never takes a deletion over).
                summary.failed += 1;
                items.push(item("failed", &h, format!("delete: {e}")));
                continue;
            }
            let settle = Settle {
                to: HandleStatus::Deleted,
                storage_class: None,
                restored: false,
                link: None,
                now,
            };
            if catalog.settle_claim(&h.id, &claim, &settle).await? {
                summary.deleted += 1;
                summary.deleted_bytes += u64::try_from(h.size).unwrap_or(0);
                items.push(item("deleted", &h, "archived past the retention period"));
            } else {
                summary.failed += 1;
                items.push(item("failed", &h, "delete: the claim was taken over"));
            }
        }
    }
}

/// After an archival lost its claim once S3 was changed: if the handle is live (available or
/// unlinked), the object goes back to the handle's recorded class, untagged. Whether it was put
/// back, and what to report.
async fn undo_archive(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    h: &FileHandle,
) -> Result<(bool, String), HygieneError> {
    let fresh = catalog.handle_by_id(&h.id).await?;
    if !fresh
        .as_ref()
        .is_some_and(|f| matches!(f.status, HandleStatus::Available | HandleStatus::Unlinked))
    {
        return Ok((
            false,
            "archive: the claim was taken over (the file is no longer live)".to_owned(),
        ));
    }
    let class = catalog
        .storage_class_of(&h.id)
        .await?
        .unwrap_or_else(|| "STANDARD".to_owned());
    match store.change_storage_class(&h.key, &class, &[]).await {
        Ok(()) => Ok((
            true,
            format!("the claim was taken over after S3 changed; the object is back in {class}"),
        )),
        Err(e) => {
            tracing::error!(file = %h.id, key = %h.key, error = %e, "could not undo an archival");
            Ok((
                false,
                format!(
                    "archive: the claim was taken over and the object could not be put back to {class}: {e}"
                ),
            ))
        }
    }
}

/// Every version and delete marker of exactly `key` (a prefix listing also returns longer keys).
async fn delete_every_version(store: &dyn ObjectStore, key: &str) -> Result<(), StoreError> {
    let doomed = crate::storage::every_version_of(store, key).await?;
    for batch in doomed.chunks(DELETE_BATCH) {
        let refused = store.delete_versions(batch).await?;
        if let Some(f) = refused.first() {
            return Err(StoreError::Other(format!("{}: {}", f.key, f.reason)));
        }
    }
    Ok(())
}

/// Why a restore did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// Hygiene holds the handle (archiving or deleting it): retry shortly.
    #[error("the file is being archived or deleted; retry shortly")]
    Busy,
    #[error("the file is deleted")]
    Deleted,
    #[error(transparent)]
    Failed(#[from] HygieneError),
}

impl From<CatalogError> for RestoreError {
    fn from(e: CatalogError) -> Self {
        Self::Failed(e.into())
    }
}

impl From<StoreError> for RestoreError {
    fn from(e: StoreError) -> Self {
        Self::Failed(e.into())
    }
}

/// Brings an unlinked or archived handle back to `available` (the object back to STANDARD and
/// untagged, when it was moved), under a claim: claim, S3, then settle. With `link`, that link
/// is recorded in the settling transaction, so a link exists only if the file is available
/// again. `Ok(false)` when it was already available (the link, if any, is recorded then too).
pub async fn restore(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    handle: &FileHandle,
    link: Option<(&str, &str)>,
    lease_secs: u64,
    now: DateTime<Utc>,
) -> Result<bool, RestoreError> {
    let mut status = handle.status;
    // An available handle links without a claim; if hygiene unlinked it meanwhile, the
    // restore below runs instead (twice at most: once per way it can have moved).
    for _ in 0..2 {
        match status {
            HandleStatus::Deleted => return Err(RestoreError::Deleted),
            // A temporary file is never unlinked or archived, so there is nothing to restore;
            // once expired it stays expired (the HTTP layer answers 410 before this).
            HandleStatus::Expired => return Err(RestoreError::Deleted),
            HandleStatus::Available => {
                let linked = match link {
                    Some((t, o)) => catalog.put_link(&handle.id, t, o, now).await?,
                    None => true,
                };
                if linked {
                    return Ok(false);
                }
            }
            HandleStatus::Unlinked | HandleStatus::Archived => {
                let claim = token();
                if catalog
                    .claim_handle(&handle.id, ClaimKind::Restore, None, &claim, lease_secs)
                    .await?
                {
                    return restore_claimed(catalog, store, handle, link, &claim, now).await;
                }
            }
        }
        let fresh = catalog
            .handle_by_id(&handle.id)
            .await?
            .ok_or(RestoreError::Deleted)?;
        if fresh.status == status && status != HandleStatus::Available {
            // Same status and no claim to be had: hygiene holds it.
            return Err(RestoreError::Busy);
        }
        status = fresh.status;
    }
    Err(RestoreError::Busy)
}

async fn restore_claimed(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    handle: &FileHandle,
    link: Option<(&str, &str)>,
    claim: &str,
    now: DateTime<Utc>,
) -> Result<bool, RestoreError> {
    let class = catalog.storage_class_of(&handle.id).await?;
    let mut moved = class.as_deref().is_some_and(|c| c != "STANDARD");
    if !moved && handle.status == HandleStatus::Unlinked {
        // This restore may have taken over an archival whose process died after it changed
        // the object (before it could settle): the object's own class says so.
        moved = store
            .head(&handle.key)
            .await?
            .and_then(|h| h.storage_class)
            .is_some_and(|c| c != "STANDARD");
    }
    if moved {
        if let Err(e) = store
            .change_storage_class(&handle.key, "STANDARD", &[])
            .await
        {
            catalog.release_claim(&handle.id, claim).await?;
            return Err(e.into());
        }
    }
    let settle = Settle {
        to: HandleStatus::Available,
        storage_class: Some("STANDARD"),
        restored: true,
        link,
        now,
    };
    if catalog.settle_claim(&handle.id, claim, &settle).await? {
        Ok(true)
    } else {
        Err(RestoreError::Busy)
    }
}
