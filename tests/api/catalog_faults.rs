//! A fault-injecting wrapper around the real catalog (tests only): calls of chosen operations
//! fail *before* reaching the database (nothing happened: F5, F6, F7, F17) or *after* it
//! (the change is durable but the caller sees an error — the outcome is unknown to it: F8).
//! Which calls fail is drawn from a seeded random generator, so a failing history replays
//! from its seed.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use upcommit::catalog::{
    Catalog, CatalogError, ClaimKind, EventDeliveryCatalog, EventOutbox, HygieneCatalog,
    HygieneGuard, JobCatalog, LeaseRequest, LinkScan, MultipartCatalog, NewCopy, PruneCounts,
    RetentionCatalog, ScanCompletion, Settle, SettledTmp, TableSize,
};
use upcommit::domain::ids::{FileId, UploadId};
use upcommit::domain::jobs::{JobItem, JobRun, RunState};
use upcommit::domain::multipart::{MultipartSession, PartRecord, SessionState};
use upcommit::domain::quota::QuotaLimits;
use upcommit::domain::records::{FileHandle, HandleStatus, Upload};

/// A small seeded generator (xorshift64*): reproducible, no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Where an injected failure lands relative to the real call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Before,
    After,
}

#[derive(Debug, Default)]
pub struct CatalogFaults {
    /// Percent of calls to each faulty operation that fail before / after the real call.
    pub before_percent: u64,
    pub after_percent: u64,
    /// Added to the database's clock: a database whose clock disagrees with this machine's.
    pub clock_offset: chrono::Duration,
    /// What was injected, for the failure report: (operation, when).
    pub injected: Vec<(&'static str, When)>,
    rng: Option<Rng>,
}

impl CatalogFaults {
    pub fn seeded(seed: u64) -> Self {
        Self {
            rng: Some(Rng::new(seed)),
            ..Self::default()
        }
    }
    pub fn off(&mut self) {
        self.before_percent = 0;
        self.after_percent = 0;
    }
    fn draw(&mut self, op: &'static str) -> Option<When> {
        let (before, after) = (self.before_percent, self.after_percent);
        let rng = self.rng.as_mut()?;
        let roll = rng.below(100);
        let when = if roll < before {
            When::Before
        } else if roll < before + after {
            When::After
        } else {
            return None;
        };
        self.injected.push((op, when));
        Some(when)
    }
}

pub struct FaultyCatalog {
    inner: Arc<dyn Catalog>,
    faults: Arc<Mutex<CatalogFaults>>,
}

impl FaultyCatalog {
    pub fn new(inner: Arc<dyn Catalog>, faults: Arc<Mutex<CatalogFaults>>) -> Self {
        Self { inner, faults }
    }
}

fn injected(op: &str, when: When) -> CatalogError {
    CatalogError::Unavailable(format!("injected fault {when:?} {op}"))
}

/// The real call, unless the draw says it fails before it; or the real call whose result is
/// replaced by an error when the draw says it fails after it.
macro_rules! faulty {
    ($self:ident, $op:ident($($arg:expr),*)) => {{
        let draw = $self.faults.lock().map(|mut f| f.draw(stringify!($op))).unwrap_or(None);
        match draw {
            Some(When::Before) => Err(injected(stringify!($op), When::Before)),
            Some(When::After) => {
                let _ = $self.inner.$op($($arg),*).await;
                Err(injected(stringify!($op), When::After))
            }
            None => $self.inner.$op($($arg),*).await,
        }
    }};
}

#[async_trait]
impl MultipartCatalog for FaultyCatalog {
    async fn multipart_session(
        &self,
        id: &UploadId,
    ) -> Result<Option<MultipartSession>, CatalogError> {
        self.inner.multipart_session(id).await
    }
    async fn record_parts(
        &self,
        id: &UploadId,
        parts: &[PartRecord],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError> {
        self.inner.record_parts(id, parts, now).await
    }
    async fn parts(&self, id: &UploadId) -> Result<Vec<PartRecord>, CatalogError> {
        self.inner.parts(id).await
    }
    async fn finish_session(
        &self,
        id: &UploadId,
        to: SessionState,
        parts: &[PartRecord],
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        self.inner.finish_session(id, to, parts, now).await
    }
    async fn claim_session(
        &self,
        id: &UploadId,
        token: &str,
        lease_secs: i64,
    ) -> Result<bool, CatalogError> {
        self.inner.claim_session(id, token, lease_secs).await
    }
    async fn release_session_claim(&self, id: &UploadId, token: &str) -> Result<(), CatalogError> {
        self.inner.release_session_claim(id, token).await
    }
    async fn renew_session_claim(
        &self,
        id: &UploadId,
        token: &str,
        lease_secs: i64,
    ) -> Result<bool, CatalogError> {
        self.inner.renew_session_claim(id, token, lease_secs).await
    }
}

#[async_trait]
impl upcommit::catalog::RenderFailureCatalog for FaultyCatalog {
    async fn render_failure(
        &self,
        file: &str,
        content: &str,
        variant: &str,
    ) -> Result<Option<upcommit::catalog::RenderFailure>, CatalogError> {
        self.inner.render_failure(file, content, variant).await
    }
    async fn record_render_failure(
        &self,
        file: &str,
        content: &str,
        variant: &str,
        cause: &str,
        at: DateTime<Utc>,
    ) -> Result<upcommit::catalog::RenderFailure, CatalogError> {
        self.inner
            .record_render_failure(file, content, variant, cause, at)
            .await
    }
    async fn clear_render_failures(
        &self,
        file: &str,
        content: &str,
        variant: Option<&str>,
    ) -> Result<u64, CatalogError> {
        self.inner
            .clear_render_failures(file, content, variant)
            .await
    }
    async fn render_failures(
        &self,
        of: Option<(&str, &str)>,
        limit: i64,
    ) -> Result<Vec<upcommit::catalog::RenderFailure>, CatalogError> {
        self.inner.render_failures(of, limit).await
    }
}

#[async_trait]
impl upcommit::catalog::AdminCatalog for FaultyCatalog {
    async fn endpoint_exists(&self, id: &str) -> Result<bool, CatalogError> {
        self.inner.endpoint_exists(id).await
    }
    async fn storage_by(
        &self,
        dimension: upcommit::catalog::HandleDimension,
    ) -> Result<Vec<upcommit::catalog::Share>, CatalogError> {
        self.inner.storage_by(dimension).await
    }
    async fn uploads_per_day(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<upcommit::catalog::DayOfUploads>, CatalogError> {
        self.inner.uploads_per_day(since).await
    }
    async fn deliveries_page(
        &self,
        endpoint: &str,
        state: Option<&str>,
        after: i64,
        limit: i64,
    ) -> Result<Vec<upcommit::catalog::DeliveryRow>, CatalogError> {
        self.inner
            .deliveries_page(endpoint, state, after, limit)
            .await
    }
    async fn runs_page(
        &self,
        job: Option<&str>,
        before: Option<&upcommit::catalog::Before>,
        limit: i64,
    ) -> Result<Vec<JobRun>, CatalogError> {
        self.inner.runs_page(job, before, limit).await
    }
    async fn find_handles(
        &self,
        filter: &upcommit::catalog::HandleFilter,
        before: Option<&upcommit::catalog::Before>,
        limit: i64,
    ) -> Result<Vec<FileHandle>, CatalogError> {
        self.inner.find_handles(filter, before, limit).await
    }
    async fn handles_of_key(&self, key: &str, limit: i64) -> Result<Vec<FileHandle>, CatalogError> {
        self.inner.handles_of_key(key, limit).await
    }
    async fn file_links(
        &self,
        file_id: &str,
        limit: i64,
    ) -> Result<Vec<upcommit::catalog::LinkRow>, CatalogError> {
        self.inner.file_links(file_id, limit).await
    }
    async fn events_of_subject(
        &self,
        subject: &str,
        limit: i64,
    ) -> Result<Vec<upcommit::catalog::SubjectEvent>, CatalogError> {
        self.inner.events_of_subject(subject, limit).await
    }
    async fn prunable_runs(&self, cutoff: DateTime<Utc>) -> Result<u64, CatalogError> {
        self.inner.prunable_runs(cutoff).await
    }
    async fn prune_runs(&self, cutoff: DateTime<Utc>, limit: i64) -> Result<u64, CatalogError> {
        self.inner.prune_runs(cutoff, limit).await
    }
}

#[async_trait]
impl JobCatalog for FaultyCatalog {
    async fn acquire_job_lock(
        &self,
        job: &str,
        holder: &str,
        lease_secs: u64,
    ) -> Result<bool, CatalogError> {
        self.inner.acquire_job_lock(job, holder, lease_secs).await
    }
    async fn release_job_lock(&self, job: &str, holder: &str) -> Result<(), CatalogError> {
        self.inner.release_job_lock(job, holder).await
    }
    async fn insert_run(&self, run: &JobRun) -> Result<(), CatalogError> {
        self.inner.insert_run(run).await
    }
    async fn unfinished_run(&self, job: &str) -> Result<Option<JobRun>, CatalogError> {
        self.inner.unfinished_run(job).await
    }
    async fn last_run(&self, job: &str) -> Result<Option<JobRun>, CatalogError> {
        self.inner.last_run(job).await
    }
    async fn last_finished_run(&self, job: &str) -> Result<Option<JobRun>, CatalogError> {
        self.inner.last_finished_run(job).await
    }
    async fn run_by_id(&self, id: &str) -> Result<Option<JobRun>, CatalogError> {
        self.inner.run_by_id(id).await
    }
    async fn update_run(
        &self,
        id: &str,
        state: RunState,
        checkpoint: Option<&str>,
        summary: &str,
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError> {
        self.inner
            .update_run(id, state, checkpoint, summary, now)
            .await
    }
    async fn add_job_items(&self, run_id: &str, items: &[JobItem]) -> Result<(), CatalogError> {
        self.inner.add_job_items(run_id, items).await
    }
    async fn job_items(&self, run_id: &str) -> Result<Vec<JobItem>, CatalogError> {
        self.inner.job_items(run_id).await
    }
    async fn job_items_page(
        &self,
        run_id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<(i64, JobItem)>, CatalogError> {
        self.inner.job_items_page(run_id, after, limit).await
    }
    async fn handle_keys_after(
        &self,
        after: &str,
        limit: i64,
        now: DateTime<Utc>,
    ) -> Result<Vec<upcommit::domain::reconcile::HandleKey>, CatalogError> {
        self.inner.handle_keys_after(after, limit, now).await
    }
    async fn handle_ids_of_key(&self, key: &str, limit: i64) -> Result<Vec<String>, CatalogError> {
        self.inner.handle_ids_of_key(key, limit).await
    }
    async fn upload_names_key(&self, key: &str) -> Result<bool, CatalogError> {
        self.inner.upload_names_key(key).await
    }
    async fn clock(&self) -> Result<DateTime<Utc>, CatalogError> {
        let offset = self
            .faults
            .lock()
            .map(|f| f.clock_offset)
            .unwrap_or_default();
        Ok(self.inner.clock().await? + offset)
    }
    async fn mark_swept_many(
        &self,
        upload_ids: &[UploadId],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError> {
        self.inner.mark_swept_many(upload_ids, now).await
    }
}

#[async_trait]
impl HygieneCatalog for FaultyCatalog {
    async fn put_link(
        &self,
        file: &FileId,
        object_type: &str,
        object_id: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        self.inner.put_link(file, object_type, object_id, now).await
    }
    async fn delete_link(
        &self,
        file: &FileId,
        object_type: &str,
        object_id: &str,
    ) -> Result<(), CatalogError> {
        self.inner.delete_link(file, object_type, object_id).await
    }
    async fn links_of(&self, file: &FileId) -> Result<i64, CatalogError> {
        self.inner.links_of(file).await
    }
    async fn create_scan(&self, id: &str, now: DateTime<Utc>) -> Result<(), CatalogError> {
        self.inner.create_scan(id, now).await
    }
    async fn scan(&self, id: &str) -> Result<Option<LinkScan>, CatalogError> {
        self.inner.scan(id).await
    }
    async fn add_scan_batch(
        &self,
        scan: &str,
        n: i64,
        files: &[String],
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        self.inner.add_scan_batch(scan, n, files, now).await
    }
    async fn complete_scan(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<ScanCompletion, CatalogError> {
        self.inner.complete_scan(id, now).await
    }
    async fn latest_completed_scan(&self) -> Result<Option<LinkScan>, CatalogError> {
        self.inner.latest_completed_scan().await
    }
    async fn unlinked_candidates(
        &self,
        cutoff: DateTime<Utc>,
        profiles: &[String],
        after: &str,
        limit: i64,
    ) -> Result<Vec<FileHandle>, CatalogError> {
        self.inner
            .unlinked_candidates(cutoff, profiles, after, limit)
            .await
    }
    async fn unlink_if_unused(
        &self,
        id: &FileId,
        cutoff: DateTime<Utc>,
        profiles: &[String],
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        self.inner.unlink_if_unused(id, cutoff, profiles, now).await
    }
    async fn return_vouched(&self, now: DateTime<Utc>) -> Result<u64, CatalogError> {
        self.inner.return_vouched(now).await
    }
    async fn vouched_moved(
        &self,
        after: &str,
        limit: i64,
    ) -> Result<Vec<FileHandle>, CatalogError> {
        self.inner.vouched_moved(after, limit).await
    }
    async fn handles_in_status(
        &self,
        status: HandleStatus,
        changed_before: DateTime<Utc>,
        profiles: &[String],
        after: &str,
        limit: i64,
    ) -> Result<Vec<FileHandle>, CatalogError> {
        self.inner
            .handles_in_status(status, changed_before, profiles, after, limit)
            .await
    }
    async fn key_has_status(
        &self,
        key: &str,
        statuses: &[HandleStatus],
    ) -> Result<bool, CatalogError> {
        self.inner.key_has_status(key, statuses).await
    }
    async fn claim_handle(
        &self,
        id: &FileId,
        kind: ClaimKind,
        guard: Option<&HygieneGuard<'_>>,
        token: &str,
        lease_secs: u64,
    ) -> Result<bool, CatalogError> {
        self.inner
            .claim_handle(id, kind, guard, token, lease_secs)
            .await
    }
    async fn renew_claim(
        &self,
        id: &FileId,
        token: &str,
        lease_secs: u64,
    ) -> Result<bool, CatalogError> {
        self.inner.renew_claim(id, token, lease_secs).await
    }
    async fn settle_claim(
        &self,
        id: &FileId,
        token: &str,
        settle: &Settle<'_>,
    ) -> Result<bool, CatalogError> {
        self.inner.settle_claim(id, token, settle).await
    }
    async fn release_claim(&self, id: &FileId, token: &str) -> Result<(), CatalogError> {
        self.inner.release_claim(id, token).await
    }
    async fn handle_totals_by_status(&self) -> Result<Vec<(String, i64, i64)>, CatalogError> {
        self.inner.handle_totals_by_status().await
    }
    async fn unlinked_per_month(&self) -> Result<Vec<(String, i64)>, CatalogError> {
        self.inner.unlinked_per_month().await
    }
    async fn storage_class_of(&self, id: &FileId) -> Result<Option<String>, CatalogError> {
        self.inner.storage_class_of(id).await
    }
    async fn copy_handle(
        &self,
        source: &FileId,
        copy: &NewCopy<'_>,
    ) -> Result<Option<FileHandle>, CatalogError> {
        faulty!(self, copy_handle(source, copy))
    }
}

#[async_trait]
impl RetentionCatalog for FaultyCatalog {
    async fn prunable_uploads(&self, cutoff: DateTime<Utc>) -> Result<PruneCounts, CatalogError> {
        self.inner.prunable_uploads(cutoff).await
    }
    async fn prune_uploads(
        &self,
        cutoff: DateTime<Utc>,
        limit: i64,
    ) -> Result<PruneCounts, CatalogError> {
        self.inner.prune_uploads(cutoff, limit).await
    }
    async fn prunable_quota_days(&self, before: NaiveDate) -> Result<u64, CatalogError> {
        self.inner.prunable_quota_days(before).await
    }
    async fn prune_quota_days(&self, before: NaiveDate, limit: i64) -> Result<u64, CatalogError> {
        self.inner.prune_quota_days(before, limit).await
    }
    async fn table_sizes(&self) -> Result<Vec<TableSize>, CatalogError> {
        self.inner.table_sizes().await
    }
    async fn discardable_deliveries(
        &self,
        cutoff: DateTime<Utc>,
    ) -> Result<Vec<(String, u64)>, CatalogError> {
        faulty!(self, discardable_deliveries(cutoff))
    }
    async fn discard_deliveries(
        &self,
        cutoff: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<(String, u64)>, CatalogError> {
        faulty!(self, discard_deliveries(cutoff, limit))
    }
    async fn prunable_events(&self, cutoff: DateTime<Utc>) -> Result<u64, CatalogError> {
        faulty!(self, prunable_events(cutoff))
    }
    async fn prune_events(&self, cutoff: DateTime<Utc>, limit: i64) -> Result<u64, CatalogError> {
        faulty!(self, prune_events(cutoff, limit))
    }
    async fn event_positions(&self) -> Result<Option<(i64, i64)>, CatalogError> {
        faulty!(self, event_positions())
    }
    async fn prunable_scans(
        &self,
        cutoff: DateTime<Utc>,
    ) -> Result<upcommit::catalog::ScanPruneCounts, CatalogError> {
        self.inner.prunable_scans(cutoff).await
    }
    async fn expire_scans(&self, cutoff: DateTime<Utc>, limit: i64) -> Result<u64, CatalogError> {
        self.inner.expire_scans(cutoff, limit).await
    }
    async fn prune_scans(
        &self,
        cutoff: DateTime<Utc>,
        limit: i64,
    ) -> Result<upcommit::catalog::ScanPruneCounts, CatalogError> {
        self.inner.prune_scans(cutoff, limit).await
    }
}

#[async_trait]
impl EventOutbox for FaultyCatalog {
    async fn record_event(
        &self,
        event: &upcommit::domain::events::NewEvent,
    ) -> Result<(), CatalogError> {
        faulty!(self, record_event(event))
    }
    async fn sequence_events(
        &self,
        limit: i64,
        retry_window_secs: i64,
    ) -> Result<u64, CatalogError> {
        faulty!(self, sequence_events(limit, retry_window_secs))
    }
    async fn events_after(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<upcommit::domain::events::StoredEvent>, CatalogError> {
        faulty!(self, events_after(after, limit))
    }
    async fn unsequenced_events(&self) -> Result<i64, CatalogError> {
        faulty!(self, unsequenced_events())
    }
}

#[async_trait]
impl EventDeliveryCatalog for FaultyCatalog {
    async fn sync_settings_endpoints(
        &self,
        endpoints: &[upcommit::catalog::EndpointSpec],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError> {
        self.inner.sync_settings_endpoints(endpoints, now).await
    }
    async fn enabled_endpoints(
        &self,
    ) -> Result<Vec<upcommit::catalog::EndpointSpec>, CatalogError> {
        self.inner.enabled_endpoints().await
    }
    async fn claim_deliveries(
        &self,
        endpoint: &str,
        token: &str,
        lease_secs: i64,
        limit: i64,
    ) -> Result<Vec<upcommit::catalog::ClaimedDelivery>, CatalogError> {
        self.inner
            .claim_deliveries(endpoint, token, lease_secs, limit)
            .await
    }
    async fn mark_delivered(
        &self,
        endpoint: &str,
        position: i64,
        token: &str,
        status: i32,
    ) -> Result<bool, CatalogError> {
        self.inner
            .mark_delivered(endpoint, position, token, status)
            .await
    }
    async fn mark_attempt_failed(
        &self,
        endpoint: &str,
        position: i64,
        token: &str,
        outcome: &upcommit::catalog::FailedAttempt<'_>,
    ) -> Result<Option<bool>, CatalogError> {
        self.inner
            .mark_attempt_failed(endpoint, position, token, outcome)
            .await
    }
    async fn retry_failed_deliveries(
        &self,
        endpoint: &str,
        retry_window_secs: i64,
    ) -> Result<Option<u64>, CatalogError> {
        self.inner
            .retry_failed_deliveries(endpoint, retry_window_secs)
            .await
    }
    async fn delivery_gauges(&self) -> Result<upcommit::catalog::DeliveryGauges, CatalogError> {
        self.inner.delivery_gauges().await
    }
    async fn endpoint_counts(
        &self,
    ) -> Result<Vec<upcommit::catalog::EndpointCounts>, CatalogError> {
        self.inner.endpoint_counts().await
    }
    async fn create_api_endpoint(
        &self,
        endpoint: &upcommit::catalog::EndpointSpec,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        self.inner.create_api_endpoint(endpoint, now).await
    }
    async fn disable_api_endpoint(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<String>, CatalogError> {
        self.inner.disable_api_endpoint(id, now).await
    }
    async fn replay_deliveries(
        &self,
        endpoint: &str,
        after: i64,
        retry_window_secs: i64,
        dry_run: bool,
    ) -> Result<Option<u64>, CatalogError> {
        self.inner
            .replay_deliveries(endpoint, after, retry_window_secs, dry_run)
            .await
    }
}

#[async_trait]
impl Catalog for FaultyCatalog {
    async fn ping(&self) -> Result<(), CatalogError> {
        self.inner.ping().await
    }
    async fn create_upload(
        &self,
        upload: &Upload,
        session: Option<&MultipartSession>,
        day: NaiveDate,
        limits: QuotaLimits,
    ) -> Result<(), CatalogError> {
        faulty!(self, create_upload(upload, session, day, limits))
    }
    async fn import_upload(&self, upload: &Upload) -> Result<(), CatalogError> {
        self.inner.import_upload(upload).await
    }
    async fn upload_by_key(&self, key: &str) -> Result<Option<Upload>, CatalogError> {
        self.inner.upload_by_key(key).await
    }
    async fn uploads_by_keys(&self, keys: &[String]) -> Result<Vec<Upload>, CatalogError> {
        self.inner.uploads_by_keys(keys).await
    }
    async fn upload_by_id(&self, id: &UploadId) -> Result<Option<Upload>, CatalogError> {
        self.inner.upload_by_id(id).await
    }
    async fn stale_promoting(
        &self,
        lease_expired_before: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Upload>, CatalogError> {
        self.inner
            .stale_promoting(lease_expired_before, limit)
            .await
    }
    async fn take_lease(&self, req: &LeaseRequest<'_>) -> Result<bool, CatalogError> {
        faulty!(self, take_lease(req))
    }
    async fn renew_lease(
        &self,
        id: &UploadId,
        token: &str,
        lease_secs: i64,
    ) -> Result<bool, CatalogError> {
        self.inner.renew_lease(id, token, lease_secs).await
    }
    async fn release_lease(
        &self,
        id: &UploadId,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        self.inner.release_lease(id, token, now).await
    }
    async fn expire_lease(
        &self,
        id: &UploadId,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        self.inner.expire_lease(id, token, now).await
    }
    async fn reject(
        &self,
        id: &UploadId,
        token: &str,
        code: &str,
        tmp_version: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        self.inner.reject(id, token, code, tmp_version, now).await
    }
    async fn record_handle(
        &self,
        handle: &FileHandle,
        token: &str,
        tmp_version: Option<&str>,
    ) -> Result<Option<FileHandle>, CatalogError> {
        faulty!(self, record_handle(handle, token, tmp_version))
    }
    async fn settled_tmp(
        &self,
        expired_before: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<SettledTmp>, CatalogError> {
        self.inner.settled_tmp(expired_before, limit).await
    }
    async fn mark_tmp_cleared(
        &self,
        ids: &[UploadId],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError> {
        self.inner.mark_tmp_cleared(ids, now).await
    }
    async fn handle_by_id(&self, id: &FileId) -> Result<Option<FileHandle>, CatalogError> {
        self.inner.handle_by_id(id).await
    }
    async fn handle_by_upload(&self, id: &UploadId) -> Result<Option<FileHandle>, CatalogError> {
        self.inner.handle_by_upload(id).await
    }
    async fn mark_expired_handles(
        &self,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<upcommit::domain::ids::FileId>, CatalogError> {
        self.inner.mark_expired_handles(now, limit).await
    }
    async fn quota_usage(&self, owner: &str, day: NaiveDate) -> Result<(i64, i64), CatalogError> {
        self.inner.quota_usage(owner, day).await
    }
}
