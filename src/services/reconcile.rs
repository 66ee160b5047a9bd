//! Unindexed reconciliation: a streaming merge-join of the bucket's keys (ListObjectsV2, or an
//! S3 Inventory) against the catalog's handle keys, both in byte order, in constant memory.
//! It reports objects under final prefixes that no handle records (older than a grace period),
//! handles whose object must exist but is missing (a data-loss alarm; deleted handles do not
//! count), tmp objects older than the lifecycle rule allows, and stray objects outside every
//! prefix the service knows. It never deletes: `--quarantine` moves unindexed objects (and
//! `--quarantine-stray` stray ones) under `quarantine/`, which has an expiring rule of its own,
//! after verifying the copy — never an object that an upload record names.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::catalog::{Catalog, CatalogError};
use crate::config::Settings;
use crate::domain::events::{EventType, NewEvent};
use crate::domain::jobs::{JobItem, JobRun, RunState};
use crate::domain::lifecycle::required_rules;
use crate::domain::reconcile::{
    BucketKey, Finding, HandleKey, Join, JoinError, Need, ReconcilePolicy, QUARANTINE_PREFIX,
};
use crate::services::jobs::{self, Begin};
use crate::storage::{ObjectStore, StoreError};

pub const JOB: &str = "reconcile";
const PAGE: i32 = 1000;
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

/// Where the bucket's keys come from.
#[async_trait]
pub trait BucketSource: Send {
    /// The next page of keys in byte order, `None` at the end.
    async fn next_page(&mut self) -> Result<Option<Vec<BucketKey>>, StoreError>;
    fn name(&self) -> &'static str;
    /// Listing calls made so far, where the source counts them.
    fn requests(&self) -> Option<u64> {
        None
    }
}

/// ListObjectsV2 over the whole bucket (or one prefix of it), from a key on.
pub struct ListingSource {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    start_after: Option<String>,
    token: Option<String>,
    done: bool,
    requests: u64,
}

impl ListingSource {
    pub fn new(store: Arc<dyn ObjectStore>, start_after: Option<String>) -> Self {
        Self::under(store, String::new(), start_after)
    }

    /// The keys under `prefix` only (the legacy import lists each legacy prefix).
    pub fn under(store: Arc<dyn ObjectStore>, prefix: String, start_after: Option<String>) -> Self {
        Self {
            store,
            prefix,
            start_after,
            token: None,
            done: false,
            requests: 0,
        }
    }
}

#[async_trait]
impl BucketSource for ListingSource {
    async fn next_page(&mut self) -> Result<Option<Vec<BucketKey>>, StoreError> {
        if self.done {
            return Ok(None);
        }
        self.requests += 1;
        let page = self
            .store
            .list_objects(
                &self.prefix,
                self.start_after.take(),
                self.token.take(),
                PAGE,
            )
            .await?;
        match page.next {
            Some(t) => self.token = Some(t),
            None => self.done = true,
        }
        Ok(Some(
            page.objects
                .into_iter()
                .map(|o| BucketKey {
                    key: o.key,
                    size: o.size,
                    last_modified: o.last_modified,
                })
                .collect(),
        ))
    }

    fn name(&self) -> &'static str {
        "listing"
    }

    fn requests(&self) -> Option<u64> {
        Some(self.requests)
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReconcileSummary {
    pub source: &'static str,
    pub resumed: bool,
    pub quarantine: bool,
    pub grace_secs: i64,
    pub keys_listed: u64,
    /// Workers that listed the bucket (1: one sequential listing).
    pub list_workers: usize,
    /// ListObjectsV2 calls made (absent for an inventory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list_requests: Option<u64>,
    pub handles_read: u64,
    pub matched: u64,
    pub unindexed: u64,
    pub unindexed_bytes: u64,
    pub missing: u64,
    pub missing_bytes: u64,
    /// Handles the listing (or the inventory) did not show whose object a HEAD then found:
    /// committed while the run listed, or after the inventory was taken. Not missing.
    pub appeared: u64,
    /// When the inventory was taken (its manifest's `creationTimestamp`), when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inventory_taken_at: Option<DateTime<Utc>>,
    /// Handles the inventory did not show, recorded after it was taken: not judged (no HEAD);
    /// the next inventory has them.
    pub recorded_after_inventory: u64,
    pub tmp_past_lifecycle: u64,
    pub tmp_past_lifecycle_bytes: u64,
    /// Objects outside every prefix the service knows.
    pub stray: u64,
    pub stray_bytes: u64,
    pub quarantine_stray: bool,
    pub quarantined: u64,
    /// Stray objects moved under `quarantine/` (`--quarantine-stray`).
    pub stray_quarantined: u64,
    /// Findings left in place because an upload record names them (a commit may come).
    pub named_by_upload: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ReconcileSummary {
    /// Adds the counts a crashed run checkpointed (its `summary`) to this resumed run's: the
    /// keys up to the checkpoint are not judged again, so without them a loss found before the
    /// crash would vanish from the totals, the exit code and the `reconcile.missing` alarm.
    fn carry_over(&mut self, saved: &serde_json::Value) {
        let n = |field: &str| saved.get(field).and_then(serde_json::Value::as_u64);
        let counters: [(&str, &mut u64); 16] = [
            ("keys_listed", &mut self.keys_listed),
            ("handles_read", &mut self.handles_read),
            ("matched", &mut self.matched),
            ("unindexed", &mut self.unindexed),
            ("unindexed_bytes", &mut self.unindexed_bytes),
            ("missing", &mut self.missing),
            ("missing_bytes", &mut self.missing_bytes),
            ("appeared", &mut self.appeared),
            (
                "recorded_after_inventory",
                &mut self.recorded_after_inventory,
            ),
            ("tmp_past_lifecycle", &mut self.tmp_past_lifecycle),
            (
                "tmp_past_lifecycle_bytes",
                &mut self.tmp_past_lifecycle_bytes,
            ),
            ("stray", &mut self.stray),
            ("stray_bytes", &mut self.stray_bytes),
            ("quarantined", &mut self.quarantined),
            ("stray_quarantined", &mut self.stray_quarantined),
            ("named_by_upload", &mut self.named_by_upload),
        ];
        for (field, count) in counters {
            *count += n(field).unwrap_or(0);
        }
        if let Some(before) = n("list_requests") {
            self.list_requests = Some(before + self.list_requests.unwrap_or(0));
        }
    }

    /// This summary with the join's counts so far added (a checkpoint's, or the end's), and
    /// the source's listing calls; the handles read ahead of the last key judged are not
    /// counted (a resumed run reads them again).
    fn with_join(&self, join: &Join, source: &dyn BucketSource) -> Self {
        let mut out = self.clone();
        out.matched += join.matched;
        out.recorded_after_inventory += join.recorded_since_taken;
        out.handles_read = out
            .handles_read
            .saturating_sub(join.catalog_pending() as u64);
        // The crashed run's calls (`carry_over`), then this run's.
        out.list_requests = match (self.list_requests, source.requests()) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        out
    }
}

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
}

/// Prefixes the service owns besides the final ones: tmp/, quarantine/ and every lifecycle
/// rule's (the empty, whole-bucket prefix excepted).
fn known_prefixes() -> Vec<String> {
    let mut known: Vec<String> = required_rules()
        .iter()
        .map(|r| r.prefix.clone())
        .filter(|p| !p.is_empty())
        .chain([
            crate::domain::keys::TMP_PREFIX.to_owned(),
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
        .filter(|r| r.prefix == crate::domain::keys::TMP_PREFIX)
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
    let mut catalog_after = resume_after.clone().unwrap_or_default();
    let mut found = Vec::new();
    let mut items = Vec::new();
    let mut pages = 0u32;
    let result: Result<(), String> = async {
        loop {
            let need = join.advance(&mut found);
            for f in found.drain(..) {
                items.extend(judge(catalog, store, &mut summary, f, options).await);
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
) -> Option<JobItem> {
    Some(match finding {
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

/// Moves a finding under `quarantine/` unless an upload record names it (a legacy upload
/// waiting for its in-place commit, a commit in flight to its final key).
async fn quarantine(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    summary: &mut ReconcileSummary,
    b: &BucketKey,
    mut item: JobItem,
) -> JobItem {
    match catalog.upload_names_key(&b.key).await {
        Ok(false) => {}
        Ok(true) => {
            summary.named_by_upload += 1;
            item.reason = "not quarantined: an upload record names this object".into();
            return item;
        }
        Err(e) => {
            item.reason = format!("not quarantined: cannot check the uploads: {e}");
            return item;
        }
    }
    match move_aside(store.as_ref(), b).await {
        Ok(()) => {
            item.action = "quarantined".into();
            item.reason = format!("moved to {QUARANTINE_PREFIX}{}", b.key);
        }
        Err(e) => item.reason = format!("not quarantined: {e}"),
    }
    item
}

/// Whether two objects (key, version) hold the same bytes, read side by side through
/// short-lived GET URLs: only for an earlier quarantine copy whose ETag cannot tell.
/// Both must deliver `size` bytes, the size their HEADs reported: a body cut short, empty, or
/// an error page served with 200 is no evidence (review 27: two reads cut at the same point
/// counted as the same bytes, and the source was deleted).
/// Each body must also come from the object its HEAD described: its answer names the same ETag
/// (and version), asked with `Cache-Control: no-cache` (review 27: a cache serving signed URLs
/// answered with an older object's body).
async fn same_bytes(
    store: &dyn ObjectStore,
    a: (&str, &crate::storage::ObjectHead),
    b: (&str, &crate::storage::ObjectHead),
    size: i64,
) -> Result<bool, StoreError> {
    // A URL's path loses its `.` and `..` segments on the way (RFC 3986 normalization): such a
    // key would be read from another key. Not compared, so never counted as the same.
    if [a.0, b.0]
        .iter()
        .any(|k| k.split('/').any(|seg| seg == "." || seg == ".."))
    {
        return Err(StoreError::Other(
            "a key with `.` or `..` segments cannot be read back by URL to compare; compare the \
             two objects by hand"
                .into(),
        ));
    }
    let http = reqwest::Client::new();
    let unavailable = |e: reqwest::Error| StoreError::Unavailable(e.to_string());
    let mut open = Vec::new();
    for (key, head) in [a, b] {
        let version = head.version_id.as_deref().filter(|v| *v != "null");
        let url = store.presign_get_version(key, version, 900).await?;
        let resp = http
            .get(url)
            .header("cache-control", "no-cache")
            .send()
            .await
            .map_err(unavailable)?;
        let resp = resp.error_for_status().map_err(unavailable)?;
        let named = |h: &str| resp.headers().get(h).and_then(|v| v.to_str().ok());
        if !crate::storage::known_etag(&head.etag) || named("etag") != Some(head.etag.as_str()) {
            return Err(StoreError::Unavailable(format!(
                "comparing with the earlier copy: the GET of {key} answered ETag {:?}, its HEAD {:?}",
                named("etag"),
                head.etag
            )));
        }
        if version.is_some() && named("x-amz-version-id") != version {
            return Err(StoreError::Unavailable(format!(
                "comparing with the earlier copy: the GET of {key} answered another version"
            )));
        }
        open.push(resp);
    }
    let (mut rb, mut ra) = (open.pop().expect("two"), open.pop().expect("two"));
    // Refills an empty buffer from its body (skipping empty chunks); stays empty at its end.
    async fn fill(resp: &mut reqwest::Response, buf: &mut Vec<u8>) -> Result<(), reqwest::Error> {
        while buf.is_empty() {
            match resp.chunk().await? {
                Some(chunk) => buf.extend_from_slice(&chunk),
                None => break,
            }
        }
        Ok(())
    }
    let (mut left, mut right) = (Vec::new(), Vec::new());
    let mut compared: i64 = 0;
    loop {
        fill(&mut ra, &mut left).await.map_err(unavailable)?;
        fill(&mut rb, &mut right).await.map_err(unavailable)?;
        let n = left.len().min(right.len());
        if n == 0 {
            // One of them ended: the same only if both did, after every byte.
            if left.is_empty() && right.is_empty() && compared == size {
                return Ok(true);
            }
            if compared != size {
                return Err(StoreError::Unavailable(format!(
                    "comparing with the earlier copy: read {compared} of {size} bytes"
                )));
            }
            return Ok(false);
        }
        if left[..n] != right[..n] {
            return Ok(false);
        }
        compared += i64::try_from(n).unwrap_or(i64::MAX);
        if compared > size {
            return Err(StoreError::Unavailable(format!(
                "comparing with the earlier copy: more than the {size} bytes its HEAD reported"
            )));
        }
        left.drain(..n);
        right.drain(..n);
    }
}

/// Copy under `quarantine/` (in parts above the single-copy limit), verify the copy, then
/// remove the version copied. An object already at the quarantine key (an earlier quarantine of
/// the same key) is never overwritten: on an unversioned store it would be gone, on a versioned
/// one left to the one-day noncurrent expiry instead of the quarantine's 30 days (review 27).
/// Only a copy of these very bytes (an earlier run that stopped before its delete) is taken as
/// done, whatever its ETag.
async fn move_aside(store: &dyn ObjectStore, b: &BucketKey) -> Result<(), StoreError> {
    let dst = format!("{QUARANTINE_PREFIX}{}", b.key);
    // (The copy reads its source itself; the source is read here only to compare it with an
    // earlier copy, which is the copy then.)
    let (original, copy) = match store.head(&dst).await? {
        None => {
            let original = store.copy_object(&b.key, &dst).await?;
            let copy = store.head(&dst).await?.ok_or(StoreError::NotFound)?;
            (original, copy)
        }
        Some(earlier) => {
            let source = store.head(&b.key).await?.ok_or(StoreError::NotFound)?;
            // The same ETag says the same bytes; a copy in parts, or a single copy of an
            // object uploaded in parts, has an ETag of its own (review 27): then the two are
            // read side by side.
            let same = earlier.size == source.size
                && ((crate::storage::known_etag(&earlier.etag) && earlier.etag == source.etag)
                    || same_bytes(store, (&b.key, &source), (&dst, &earlier), source.size).await?);
            if !same {
                return Err(StoreError::Other(format!(
                    "{dst} already holds another object (an earlier quarantine of this key): \
                     nothing moved; move that one away first"
                )));
            }
            (source, earlier)
        }
    };
    if copy.size != original.size {
        return Err(StoreError::Other(format!(
            "the quarantine copy has {} bytes, the original {}",
            copy.size, original.size
        )));
    }
    crate::services::pause::point("quarantine_copied").await;
    // A suspended bucket's objects carry the version id "null", which names no version a
    // delete could keep apart from a newer write: unversioned, like no id at all.
    if original.version_id.as_deref().map_or(true, |v| v == "null") {
        // Unversioned (Garage): the delete would remove whatever is at the key by then. The
        // key is read again and its object deleted only if it is still the one copied
        // (review 27: a newer object written meanwhile was deleted, never copied anywhere).
        // What remains is the moment between this read and the delete.
        match store.head(&b.key).await? {
            None => return Ok(()),
            Some(now)
                if crate::storage::known_etag(&now.etag)
                    && now.etag == original.etag
                    && now.size == original.size => {}
            Some(_) => {
                return Err(StoreError::Other(
                    "the object was replaced while it was copied: the newer one is kept in \
                     place, the quarantine holds the one copied"
                        .into(),
                ))
            }
        }
    }
    store
        .delete_version(&b.key, original.version_id.as_deref())
        .await
}
