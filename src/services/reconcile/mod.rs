//! Unindexed reconciliation: a streaming merge-join of the bucket's keys (ListObjectsV2, or an
//! S3 Inventory) against the catalog's handle keys, both in byte order, in constant memory.
//! It reports objects under final prefixes that no handle records (older than a grace period),
//! handles whose object must exist but is missing (a data-loss alarm; deleted handles do not
//! count), tmp objects older than the lifecycle rule allows, and stray objects outside every
//! prefix the service knows. It never deletes: `--quarantine` moves unindexed objects (and
//! `--quarantine-stray` stray ones) under `quarantine/`, which has an expiring rule of its own,
//! after verifying the copy — never an object that an upload record names.
//!
//! This file holds the run and the judging of each finding; the bucket side of the join is in
//! `source`, the report's shape in `summary`, the move under `quarantine/` in `quarantine`.

mod quarantine;
mod summary;

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use crate::catalog::{Catalog, CatalogError};
use crate::config::Settings;
use crate::domain::events::{EventType, NewEvent};
use crate::domain::jobs::{JobItem, JobRun, RunState};
use crate::domain::lifecycle::required_rules;
use crate::domain::prefixes::QUARANTINE_PREFIX;
use crate::domain::reconcile::{Finding, HandleKey, Join, JoinError, Need, ReconcilePolicy};
use crate::services::jobs::{self, Begin};
use crate::storage::{ObjectStore, StoreError};

use crate::services::bucket_source::{BucketSource, ListingSource};
use quarantine::quarantine;
pub use summary::ReconcileSummary;

pub const JOB: &str = crate::domain::jobs::RECONCILE;
const PAGE: i32 = crate::services::bucket_source::PAGE;
/// Handle keys read per catalog page: [`PAGE`]; debug builds only, `UPCOMMIT_RECONCILE_CATALOG_PAGE`
/// makes it small, so a test crosses page boundaries with a handful of files (release builds
/// have no such switch).
#[cfg(debug_assertions)]
fn catalog_page() -> i64 {
    std::env::var("UPCOMMIT_RECONCILE_CATALOG_PAGE")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(i64::from(PAGE))
}

#[cfg(not(debug_assertions))]
fn catalog_page() -> i64 {
    i64::from(PAGE)
}

/// Pages judged between checkpoints.
const CHECKPOINT_EVERY: u32 = 10;
/// Missing objects logged one by one before only counting.
const MISSING_LOGGED: u64 = 100;

pub enum ReconcileOutcome {
    Ran {
        run: Box<JobRun>,
        summary: Box<ReconcileSummary>,
    },
    Busy,
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub struct ReconcileOptions {
    pub grace: Duration,
    pub quarantine: bool,
    /// Also move stray objects (outside every known prefix) under `quarantine/`.
    pub quarantine_stray: bool,
    /// Key ranges listed at once when listing the bucket (1: one sequential listing). The
    /// findings are the same for any number.
    pub workers: usize,
    /// When the inventory read as the bucket side was taken (its manifest's
    /// `creationTimestamp`, checked with [`crate::domain::reconcile::inventory_taken_at`]):
    /// handles recorded after it that it does not show are left to a later inventory.
    pub inventory_taken_at: Option<DateTime<Utc>>,
    /// Remove the renditions (every version under `cache/<file id>/`) of files that are gone:
    /// not recorded, deleted or expired. Without it they are reported only.
    pub remove_orphan_renditions: bool,
}

/// What the catalog said of the file the last rendition named: the listing gives a file's
/// renditions one after the other (`cache/<file id>/…`), so one lookup serves them all.
#[derive(Default)]
struct RenditionMemo {
    last: Option<(String, RenditionOwner)>,
}

#[derive(Clone)]
enum RenditionOwner {
    /// The file is there (available, unlinked or archived, which a restore brings back).
    Live,
    /// The file is gone; `removed` once its renditions were removed in this run.
    Gone { why: String, removed: bool },
    /// The catalog could not be read: nothing is judged, nothing removed.
    Unknown(String),
}

async fn rendition_owner(
    catalog: &Arc<dyn Catalog>,
    id: &crate::domain::ids::FileId,
    now: DateTime<Utc>,
) -> RenditionOwner {
    use crate::domain::records::HandleStatus;
    match catalog.handle_by_id(id).await {
        Ok(None) => RenditionOwner::Gone {
            why: format!("file {} is not recorded", id.as_str()),
            removed: false,
        },
        Ok(Some(h)) if h.status == HandleStatus::Deleted => RenditionOwner::Gone {
            why: format!("file {} is deleted", id.as_str()),
            removed: false,
        },
        Ok(Some(h)) if h.is_expired(now) => RenditionOwner::Gone {
            why: format!("file {} has expired", id.as_str()),
            removed: false,
        },
        Ok(Some(_)) => RenditionOwner::Live,
        Err(e) => RenditionOwner::Unknown(e.to_string()),
    }
}

/// Prefixes the service owns besides the final ones: tmp/, quarantine/ and every lifecycle
/// rule's (the empty, whole-bucket prefix excepted).
fn known_prefixes() -> Vec<String> {
    let mut known: Vec<String> = required_rules()
        .iter()
        .map(|r| r.prefix.clone())
        .filter(|p| !p.is_empty())
        .chain([
            crate::domain::prefixes::TMP_PREFIX.to_owned(),
            QUARANTINE_PREFIX.to_owned(),
        ])
        .collect();
    known.sort();
    known.dedup();
    known
}

/// Tmp objects older than the tmp rule's expiry plus a day mean the rule is not running.
fn tmp_max_age() -> Duration {
    let days = required_rules()
        .iter()
        .filter(|r| r.prefix == crate::domain::prefixes::TMP_PREFIX)
        .filter_map(|r| r.expiration_days)
        .min()
        .unwrap_or(7);
    Duration::days(i64::from(days) + 1)
}

/// Runs a reconcile. `source` is the bucket side (a listing or an inventory); `None` lists the
/// bucket, resuming after a crashed run's checkpoint.
#[tracing::instrument(skip_all, fields(job = JOB))]
pub async fn reconcile(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    options: &ReconcileOptions,
    source: Option<Box<dyn BucketSource>>,
) -> Result<ReconcileOutcome, ReconcileError> {
    let mut job = match jobs::begin(catalog, JOB, false, settings.jobs.lease_secs).await? {
        Begin::Started(job) => job,
        Begin::Busy => return Ok(ReconcileOutcome::Busy),
    };
    let resume_after = job.run.checkpoint.clone();
    let listed_by = if source.is_some() {
        1
    } else {
        options.workers.max(1)
    };
    let mut source: Box<dyn BucketSource> = match source {
        Some(s) => s,
        None if listed_by > 1 => Box::new(crate::services::ranged_listing::RangedListing::new(
            store.clone(),
            listed_by,
            PAGE,
            resume_after.clone(),
        )),
        None => Box::new(ListingSource::new(store.clone(), resume_after.clone())),
    };
    // The database's clock, like every job that judges ages.
    let now = catalog.clock().await?;
    let policy = ReconcilePolicy {
        final_prefixes: settings.bucket_expectations().final_prefixes,
        known_prefixes: known_prefixes(),
        now,
        grace: options.grace,
        tmp_max_age: tmp_max_age(),
        taken_at: options.inventory_taken_at,
    };
    let mut summary = ReconcileSummary {
        source: source.name(),
        resumed: job.resumed,
        quarantine: options.quarantine,
        quarantine_stray: options.quarantine_stray,
        grace_secs: options.grace.num_seconds(),
        list_workers: listed_by,
        inventory_taken_at: options.inventory_taken_at,
        remove_orphan_renditions: options.remove_orphan_renditions,
        ..ReconcileSummary::default()
    };
    if job.resumed {
        if let Some(saved) = job
            .run
            .summary
            .as_deref()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
        {
            summary.carry_over(&saved);
        }
    }
    let mut join = Join::new(policy);
    let mut renditions = RenditionMemo::default();
    let mut catalog_after = resume_after.clone().unwrap_or_default();
    let mut found = Vec::new();
    let mut items = Vec::new();
    let mut pages = 0u32;
    let result: Result<(), String> = async {
        loop {
            let need = join.advance(&mut found);
            for f in found.drain(..) {
                let judged = judge(
                    catalog,
                    store,
                    &mut summary,
                    f,
                    options,
                    &mut renditions,
                    now,
                );
                items.extend(judged.await);
            }
            match need {
                Need::Done => return Ok(()),
                Need::Catalog => {
                    let page = catalog
                        .handle_keys_after(&catalog_after, catalog_page(), now)
                        .await
                        .map_err(|e| e.to_string())?;
                    summary.handles_read += page.len() as u64;
                    let page = match page.last() {
                        Some(last) => {
                            catalog_after = last.key.clone();
                            Some(page)
                        }
                        None => None,
                    };
                    join.feed_catalog(page)
                        .map_err(|e: JoinError| e.to_string())?;
                }
                Need::Bucket => {
                    // Everything up to the last bucket key is judged: a safe checkpoint.
                    pages += 1;
                    if pages % CHECKPOINT_EVERY == 0 {
                        if let Some(k) = join.last_bucket_key().map(str::to_owned) {
                            let so_far = summary.with_join(&join, source.as_ref());
                            job.checkpoint(catalog, &items, &k, &so_far)
                                .await
                                .map_err(|e| e.to_string())?;
                            items.clear();
                        }
                        if job.lost() {
                            return Err("lost the job's lease to another replica".into());
                        }
                    }
                    let mut page = source.next_page().await.map_err(|e| e.to_string())?;
                    if let (Some(keys), Some(after)) = (page.as_mut(), resume_after.as_deref()) {
                        // An inventory cannot start mid-way: skip what the crashed run judged.
                        keys.retain(|k| k.key.as_bytes() > after.as_bytes());
                    }
                    if let Some(keys) = &page {
                        summary.keys_listed += keys.len() as u64;
                    }
                    join.feed_bucket(page).map_err(|e| e.to_string())?;
                }
            }
        }
    }
    .await;
    let mut summary = summary.with_join(&join, source.as_ref());
    let state = match result {
        Ok(()) => RunState::Finished,
        Err(e) if e.contains("byte order") => {
            tracing::error!(error = %e, "reconcile refused");
            summary.error = Some(e);
            RunState::Refused
        }
        Err(e) => {
            tracing::error!(error = %e, "reconcile failed");
            summary.error = Some(e);
            RunState::Failed
        }
    };
    if summary.missing > 0 {
        tracing::error!(
            missing = summary.missing,
            bytes = summary.missing_bytes,
            "file handles whose object is missing from the bucket"
        );
        // Before the run is finished, under an id of the run's: a crash in between resumes
        // the run, which records the same alarm again as a no-op.
        let alarm = missing_alarm(job.run_id(), store.bucket(), &summary);
        catalog.record_event(&alarm).await?;
    }
    let run = job.finish(catalog, state, &items, &summary).await?;
    tracing::info!(
        run.id = %run.id,
        keys = summary.keys_listed,
        unindexed = summary.unindexed,
        missing = summary.missing,
        stray = summary.stray,
        tmp_past_lifecycle = summary.tmp_past_lifecycle,
        "reconcile finished"
    );
    Ok(ReconcileOutcome::Ran {
        run: Box::new(run),
        summary: Box::new(summary),
    })
}

/// The `reconcile.missing` alarm of one run: one per run, its id derived from the run's.
fn missing_alarm(run_id: &str, bucket: &str, summary: &ReconcileSummary) -> NewEvent {
    let mut event = NewEvent::new(
        EventType::ReconcileMissing,
        "reconcile",
        crate::domain::records::now(),
        &serde_json::json!({
            "run_id": run_id,
            "bucket": bucket,
            "missing": summary.missing,
            "missing_bytes": summary.missing_bytes,
        }),
    );
    event.id = format!("evt_reconcile_{run_id}");
    event
}

fn size(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Handle ids named in one missing object's report; more are counted, not listed.
const MISSING_IDS_LISTED: i64 = 100;

/// Which handles lost their object: one, or every copy sharing the key (read when it is found
/// missing, which is rare, rather than carried through the join for every key).
async fn missing_reason(catalog: &Arc<dyn Catalog>, h: &HandleKey) -> String {
    if h.handles <= 1 {
        return format!("file {} has no object", h.file_id);
    }
    match catalog.handle_ids_of_key(&h.key, MISSING_IDS_LISTED).await {
        Ok(ids) => {
            let more = h.handles - i64::try_from(ids.len()).unwrap_or(0);
            let extra = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!(
                "files {}{extra} ({} handles share the key) have no object",
                ids.join(", "),
                h.handles
            )
        }
        Err(e) => format!(
            "file {} and {} other handles sharing the key have no object (their ids could not be read: {e})",
            h.file_id,
            h.handles - 1
        ),
    }
}

/// Counts a finding, logs what must be logged, quarantines when asked, and reports it.
async fn judge(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    summary: &mut ReconcileSummary,
    finding: Finding,
    options: &ReconcileOptions,
    renditions: &mut RenditionMemo,
    now: DateTime<Utc>,
) -> Option<JobItem> {
    Some(match finding {
        Finding::Rendition(b) => {
            let Some(id) = crate::domain::variants::file_of_key(&b.key) else {
                // Under cache/ but named for no file: nobody's, like a stray object.
                return Box::pin(judge(
                    catalog,
                    store,
                    summary,
                    Finding::Stray(b),
                    options,
                    renditions,
                    now,
                ))
                .await;
            };
            let owner = match &renditions.last {
                Some((last, owner)) if last == id.as_str() => owner.clone(),
                _ => rendition_owner(catalog, &id, now).await,
            };
            let owner = match owner {
                RenditionOwner::Live => {
                    summary.renditions += 1;
                    renditions.last = Some((id.as_str().to_owned(), RenditionOwner::Live));
                    return None;
                }
                RenditionOwner::Unknown(e) => {
                    renditions.last = None;
                    return Some(JobItem {
                        action: "rendition_unchecked".into(),
                        key: b.key,
                        version_id: None,
                        bytes: b.size,
                        reason: format!("its file could not be looked up: {e}"),
                    });
                }
                gone @ RenditionOwner::Gone { .. } => gone,
            };
            let RenditionOwner::Gone { why, mut removed } = owner else {
                unreachable!("matched above")
            };
            summary.orphan_renditions += 1;
            summary.orphan_rendition_bytes += size(b.size);
            let mut item = JobItem {
                action: "orphan_rendition".into(),
                key: b.key,
                version_id: None,
                bytes: b.size,
                reason: format!("a rendition of a file that is gone: {why}"),
            };
            if options.remove_orphan_renditions {
                if !removed {
                    match crate::services::renditions::delete_all(store.as_ref(), &id).await {
                        Ok(versions) => {
                            removed = true;
                            summary.rendition_versions_removed += versions;
                            tracing::info!(file.id = %id.as_str(), versions, "removed the renditions of a file that is gone");
                        }
                        Err(e) => {
                            item.reason
                                .push_str(&format!("; removing its renditions failed: {e}"));
                        }
                    }
                }
                if removed {
                    summary.orphan_renditions_removed += 1;
                    item.action = "rendition_removed".into();
                }
            }
            renditions.last = Some((
                id.as_str().to_owned(),
                RenditionOwner::Gone { why, removed },
            ));
            item
        }
        Finding::Missing(h) => {
            // The listing (or the inventory) did not show the key; a data-loss alarm needs the
            // object to be absent now too. A commit recorded after the listing passed its key,
            // or after the inventory was taken, has its object: that is no loss.
            // (Of the handle's size: another object put at the key since is no evidence.)
            let check = store.head(&h.key).await;
            if matches!(&check, Ok(Some(head)) if head.size == h.size) {
                summary.appeared += 1;
                return None;
            }
            summary.missing += 1;
            summary.missing_bytes += size(h.size);
            if summary.missing <= MISSING_LOGGED {
                tracing::error!(key = %h.key, file.id = %h.file_id, handles = h.handles, "file handle without its object");
            }
            let mut reason = missing_reason(catalog, &h).await;
            if let Err(e) = check {
                reason.push_str(&format!(" (not listed; a HEAD to confirm failed: {e})"));
            }
            JobItem {
                action: "missing".into(),
                reason,
                key: h.key,
                version_id: None,
                bytes: h.size,
            }
        }
        Finding::TmpPastLifecycle(b) => {
            summary.tmp_past_lifecycle += 1;
            summary.tmp_past_lifecycle_bytes += size(b.size);
            JobItem {
                action: "tmp_past_lifecycle".into(),
                key: b.key,
                version_id: None,
                bytes: b.size,
                reason: "older than the tmp lifecycle rule allows: is the rule running?".into(),
            }
        }
        Finding::Unindexed(b) => {
            summary.unindexed += 1;
            summary.unindexed_bytes += size(b.size);
            let item = JobItem {
                action: "unindexed".into(),
                key: b.key.clone(),
                version_id: None,
                bytes: b.size,
                reason: "no file handle records this object".into(),
            };
            if !options.quarantine {
                return Some(item);
            }
            let moved = quarantine(catalog, store, summary, &b, item).await;
            if moved.action == "quarantined" {
                summary.quarantined += 1;
            }
            moved
        }
        Finding::Stray(b) => {
            summary.stray += 1;
            summary.stray_bytes += size(b.size);
            let item = JobItem {
                action: "stray".into(),
                key: b.key.clone(),
                version_id: None,
                bytes: b.size,
                reason: "outside every prefix the service knows: no owner".into(),
            };
            // `--quarantine` alone never moves stray objects: they may belong to someone else.
            if !options.quarantine_stray {
                return Some(item);
            }
            let moved = quarantine(catalog, store, summary, &b, item).await;
            if moved.action == "quarantined" {
                summary.stray_quarantined += 1;
            }
            moved
        }
    })
}
