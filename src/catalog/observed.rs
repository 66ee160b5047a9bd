//! The catalog wrapped with timing: every call is measured into
//! `upcommit_db_query_duration_seconds{operation, result}`. The server wraps whichever catalog
//! it is given, so both backends (and the tests) are observed the same way. With traces
//! exported, each call is also a span (`db.operation.name` = the method).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use tracing::Instrument as _;

use super::{
    Catalog, CatalogError, ClaimKind, EventDeliveryCatalog, EventOutbox, HygieneCatalog,
    HygieneGuard, JobCatalog, LeaseRequest, LinkScan, MultipartCatalog, NewCopy, PruneCounts,
    RetentionCatalog, ScanCompletion, Settle, SettledTmp, TableSize,
};
use crate::domain::ids::{FileId, UploadId};
use crate::domain::jobs::{JobItem, JobRun, RunState};
use crate::domain::multipart::{MultipartSession, PartRecord, SessionState};
use crate::domain::quota::QuotaLimits;
use crate::domain::records::{FileHandle, HandleStatus, Upload};
use crate::metrics::Metrics;

pub struct ObservedCatalog {
    inner: Arc<dyn Catalog>,
    metrics: Arc<Metrics>,
}

impl ObservedCatalog {
    pub fn new(inner: Arc<dyn Catalog>, metrics: Arc<Metrics>) -> Self {
        Self { inner, metrics }
    }
}

/// Calls the inner catalog's method of the same name and records its latency and result; when
/// traces are exported, inside a `catalog` span named for the method.
macro_rules! timed {
    ($self:ident, $op:ident($($arg:expr),*)) => {{
        let started = Instant::now();
        let span = crate::telemetry::spans::catalog(stringify!($op));
        let result = match crate::pause::catalog_fault(stringify!($op)) {
            crate::pause::Fault::Pass => $self.inner.$op($($arg),*).instrument(span.clone()).await,
            crate::pause::Fault::Fail(why) => Err(CatalogError::Unavailable(why)),
            crate::pause::Fault::Panic(why) => panic!("{why}"),
        };
        $self
            .metrics
            .db_call(stringify!($op), result.is_ok(), started.elapsed());
        if let Err(e) = &result {
            crate::telemetry::spans::failed(&span, error_type(e));
        }
        result
    }};
}

// Each trait whose calls are observed in a file of its own, past this file's length limit.
mod render_failures;

/// `error.type` of a failed call: the kind of refusal, never its detail.
fn error_type(e: &CatalogError) -> &'static str {
    match e {
        CatalogError::Unavailable(_) => "unavailable",
        CatalogError::QuotaExceeded => "quota_exceeded",
        CatalogError::FinalKeyTaken => "final_key_taken",
        CatalogError::Duplicate(_) => "duplicate",
        CatalogError::Corrupt(_) => "corrupt",
        CatalogError::Other(_) => "database_error",
    }
}

#[async_trait]
impl MultipartCatalog for ObservedCatalog {
    async fn multipart_session(
        &self,
        id: &UploadId,
    ) -> Result<Option<MultipartSession>, CatalogError> {
        timed!(self, multipart_session(id))
    }
    async fn record_parts(
        &self,
        id: &UploadId,
        parts: &[PartRecord],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError> {
        timed!(self, record_parts(id, parts, now))
    }
    async fn parts(&self, id: &UploadId) -> Result<Vec<PartRecord>, CatalogError> {
        timed!(self, parts(id))
    }
    async fn finish_session(
        &self,
        id: &UploadId,
        to: SessionState,
        parts: &[PartRecord],
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        timed!(self, finish_session(id, to, parts, now))
    }
    async fn claim_session(
        &self,
        id: &UploadId,
        token: &str,
        lease_secs: i64,
    ) -> Result<bool, CatalogError> {
        timed!(self, claim_session(id, token, lease_secs))
    }
    async fn release_session_claim(&self, id: &UploadId, token: &str) -> Result<(), CatalogError> {
        timed!(self, release_session_claim(id, token))
    }
    async fn renew_session_claim(
        &self,
        id: &UploadId,
        token: &str,
        lease_secs: i64,
    ) -> Result<bool, CatalogError> {
        timed!(self, renew_session_claim(id, token, lease_secs))
    }
}

#[async_trait]
impl super::AdminCatalog for ObservedCatalog {
    async fn endpoint_exists(&self, id: &str) -> Result<bool, CatalogError> {
        timed!(self, endpoint_exists(id))
    }
    async fn storage_by(
        &self,
        dimension: super::HandleDimension,
    ) -> Result<Vec<super::Share>, CatalogError> {
        timed!(self, storage_by(dimension))
    }
    async fn uploads_per_day(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<super::DayOfUploads>, CatalogError> {
        timed!(self, uploads_per_day(since))
    }
    async fn deliveries_page(
        &self,
        endpoint: &str,
        state: Option<&str>,
        after: i64,
        limit: i64,
    ) -> Result<Vec<super::DeliveryRow>, CatalogError> {
        timed!(self, deliveries_page(endpoint, state, after, limit))
    }
    async fn runs_page(
        &self,
        job: Option<&str>,
        before: Option<&super::Before>,
        limit: i64,
    ) -> Result<Vec<JobRun>, CatalogError> {
        timed!(self, runs_page(job, before, limit))
    }
    async fn find_handles(
        &self,
        filter: &super::HandleFilter,
        before: Option<&super::Before>,
        limit: i64,
    ) -> Result<Vec<FileHandle>, CatalogError> {
        timed!(self, find_handles(filter, before, limit))
    }
    async fn handles_of_key(&self, key: &str, limit: i64) -> Result<Vec<FileHandle>, CatalogError> {
        timed!(self, handles_of_key(key, limit))
    }
    async fn file_links(
        &self,
        file_id: &str,
        limit: i64,
    ) -> Result<Vec<super::LinkRow>, CatalogError> {
        timed!(self, file_links(file_id, limit))
    }
    async fn events_of_subject(
        &self,
        subject: &str,
        limit: i64,
    ) -> Result<Vec<super::SubjectEvent>, CatalogError> {
        timed!(self, events_of_subject(subject, limit))
    }
    async fn prunable_runs(&self, cutoff: DateTime<Utc>) -> Result<u64, CatalogError> {
        timed!(self, prunable_runs(cutoff))
    }
    async fn prune_runs(&self, cutoff: DateTime<Utc>, limit: i64) -> Result<u64, CatalogError> {
        timed!(self, prune_runs(cutoff, limit))
    }
}

#[async_trait]
impl JobCatalog for ObservedCatalog {
    async fn acquire_job_lock(
        &self,
        job: &str,
        holder: &str,
        lease_secs: u64,
    ) -> Result<bool, CatalogError> {
        timed!(self, acquire_job_lock(job, holder, lease_secs))
    }
    async fn release_job_lock(&self, job: &str, holder: &str) -> Result<(), CatalogError> {
        timed!(self, release_job_lock(job, holder))
    }
    async fn insert_run(&self, run: &JobRun) -> Result<(), CatalogError> {
        timed!(self, insert_run(run))
    }
    async fn unfinished_run(&self, job: &str) -> Result<Option<JobRun>, CatalogError> {
        timed!(self, unfinished_run(job))
    }
    async fn last_run(&self, job: &str) -> Result<Option<JobRun>, CatalogError> {
        timed!(self, last_run(job))
    }
    async fn last_finished_run(&self, job: &str) -> Result<Option<JobRun>, CatalogError> {
        timed!(self, last_finished_run(job))
    }
    async fn run_by_id(&self, id: &str) -> Result<Option<JobRun>, CatalogError> {
        timed!(self, run_by_id(id))
    }
    async fn update_run(
        &self,
        id: &str,
        state: RunState,
        checkpoint: Option<&str>,
        summary: &str,
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError> {
        timed!(self, update_run(id, state, checkpoint, summary, now))
    }
    async fn add_job_items(&self, run_id: &str, items: &[JobItem]) -> Result<(), CatalogError> {
        timed!(self, add_job_items(run_id, items))
    }
    async fn job_items(&self, run_id: &str) -> Result<Vec<JobItem>, CatalogError> {
        timed!(self, job_items(run_id))
    }
    async fn job_items_page(
        &self,
        run_id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<(i64, JobItem)>, CatalogError> {
        timed!(self, job_items_page(run_id, after, limit))
    }
    async fn handle_ids_of_key(&self, key: &str, limit: i64) -> Result<Vec<String>, CatalogError> {
        timed!(self, handle_ids_of_key(key, limit))
    }
    async fn handle_keys_after(
        &self,
        after: &str,
        limit: i64,
        now: DateTime<Utc>,
    ) -> Result<Vec<crate::domain::reconcile::HandleKey>, CatalogError> {
        timed!(self, handle_keys_after(after, limit, now))
    }
    async fn upload_names_key(&self, key: &str) -> Result<bool, CatalogError> {
        timed!(self, upload_names_key(key))
    }
    async fn clock(&self) -> Result<DateTime<Utc>, CatalogError> {
        timed!(self, clock())
    }
    async fn mark_swept_many(
        &self,
        upload_ids: &[UploadId],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError> {
        timed!(self, mark_swept_many(upload_ids, now))
    }
}

#[async_trait]
impl HygieneCatalog for ObservedCatalog {
    async fn put_link(
        &self,
        file: &FileId,
        object_type: &str,
        object_id: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        timed!(self, put_link(file, object_type, object_id, now))
    }
    async fn delete_link(
        &self,
        file: &FileId,
        object_type: &str,
        object_id: &str,
    ) -> Result<(), CatalogError> {
        timed!(self, delete_link(file, object_type, object_id))
    }
    async fn links_of(&self, file: &FileId) -> Result<i64, CatalogError> {
        timed!(self, links_of(file))
    }
    async fn create_scan(&self, id: &str, now: DateTime<Utc>) -> Result<(), CatalogError> {
        timed!(self, create_scan(id, now))
    }
    async fn scan(&self, id: &str) -> Result<Option<LinkScan>, CatalogError> {
        timed!(self, scan(id))
    }
    async fn add_scan_batch(
        &self,
        scan: &str,
        n: i64,
        files: &[String],
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        timed!(self, add_scan_batch(scan, n, files, now))
    }
    async fn complete_scan(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<ScanCompletion, CatalogError> {
        timed!(self, complete_scan(id, now))
    }
    async fn latest_completed_scan(&self) -> Result<Option<LinkScan>, CatalogError> {
        timed!(self, latest_completed_scan())
    }
    async fn unlinked_candidates(
        &self,
        cutoff: DateTime<Utc>,
        profiles: &[String],
        after: &str,
        limit: i64,
    ) -> Result<Vec<FileHandle>, CatalogError> {
        timed!(self, unlinked_candidates(cutoff, profiles, after, limit))
    }
    async fn unlink_if_unused(
        &self,
        id: &FileId,
        cutoff: DateTime<Utc>,
        profiles: &[String],
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        timed!(self, unlink_if_unused(id, cutoff, profiles, now))
    }
    async fn return_vouched(&self, now: DateTime<Utc>) -> Result<u64, CatalogError> {
        timed!(self, return_vouched(now))
    }
    async fn vouched_moved(
        &self,
        after: &str,
        limit: i64,
    ) -> Result<Vec<FileHandle>, CatalogError> {
        timed!(self, vouched_moved(after, limit))
    }
    async fn handles_in_status(
        &self,
        status: HandleStatus,
        changed_before: DateTime<Utc>,
        profiles: &[String],
        after: &str,
        limit: i64,
    ) -> Result<Vec<FileHandle>, CatalogError> {
        timed!(
            self,
            handles_in_status(status, changed_before, profiles, after, limit)
        )
    }
    async fn key_has_status(
        &self,
        key: &str,
        statuses: &[HandleStatus],
    ) -> Result<bool, CatalogError> {
        timed!(self, key_has_status(key, statuses))
    }
    async fn claim_handle(
        &self,
        id: &FileId,
        kind: ClaimKind,
        guard: Option<&HygieneGuard<'_>>,
        token: &str,
        lease_secs: u64,
    ) -> Result<bool, CatalogError> {
        timed!(self, claim_handle(id, kind, guard, token, lease_secs))
    }
    async fn renew_claim(
        &self,
        id: &FileId,
        token: &str,
        lease_secs: u64,
    ) -> Result<bool, CatalogError> {
        timed!(self, renew_claim(id, token, lease_secs))
    }
    async fn settle_claim(
        &self,
        id: &FileId,
        token: &str,
        settle: &Settle<'_>,
    ) -> Result<bool, CatalogError> {
        timed!(self, settle_claim(id, token, settle))
    }
    async fn release_claim(&self, id: &FileId, token: &str) -> Result<(), CatalogError> {
        timed!(self, release_claim(id, token))
    }
    async fn handle_totals_by_status(&self) -> Result<Vec<(String, i64, i64)>, CatalogError> {
        timed!(self, handle_totals_by_status())
    }
    async fn unlinked_per_month(&self) -> Result<Vec<(String, i64)>, CatalogError> {
        timed!(self, unlinked_per_month())
    }
    async fn storage_class_of(&self, id: &FileId) -> Result<Option<String>, CatalogError> {
        timed!(self, storage_class_of(id))
    }
    async fn copy_handle(
        &self,
        source: &FileId,
        copy: &NewCopy<'_>,
    ) -> Result<Option<FileHandle>, CatalogError> {
        timed!(self, copy_handle(source, copy))
    }
}

#[async_trait]
impl RetentionCatalog for ObservedCatalog {
    async fn prunable_uploads(&self, cutoff: DateTime<Utc>) -> Result<PruneCounts, CatalogError> {
        timed!(self, prunable_uploads(cutoff))
    }
    async fn prune_uploads(
        &self,
        cutoff: DateTime<Utc>,
        limit: i64,
    ) -> Result<PruneCounts, CatalogError> {
        timed!(self, prune_uploads(cutoff, limit))
    }
    async fn prunable_quota_days(&self, before: NaiveDate) -> Result<u64, CatalogError> {
        timed!(self, prunable_quota_days(before))
    }
    async fn prune_quota_days(&self, before: NaiveDate, limit: i64) -> Result<u64, CatalogError> {
        timed!(self, prune_quota_days(before, limit))
    }
    async fn table_sizes(&self) -> Result<Vec<TableSize>, CatalogError> {
        timed!(self, table_sizes())
    }
    async fn discardable_deliveries(
        &self,
        cutoff: DateTime<Utc>,
    ) -> Result<Vec<(String, u64)>, CatalogError> {
        timed!(self, discardable_deliveries(cutoff))
    }
    async fn discard_deliveries(
        &self,
        cutoff: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<(String, u64)>, CatalogError> {
        timed!(self, discard_deliveries(cutoff, limit))
    }
    async fn prunable_events(&self, cutoff: DateTime<Utc>) -> Result<u64, CatalogError> {
        timed!(self, prunable_events(cutoff))
    }
    async fn prune_events(&self, cutoff: DateTime<Utc>, limit: i64) -> Result<u64, CatalogError> {
        timed!(self, prune_events(cutoff, limit))
    }
    async fn event_positions(&self) -> Result<Option<(i64, i64)>, CatalogError> {
        timed!(self, event_positions())
    }
    async fn prunable_scans(
        &self,
        cutoff: DateTime<Utc>,
    ) -> Result<super::ScanPruneCounts, CatalogError> {
        timed!(self, prunable_scans(cutoff))
    }
    async fn expire_scans(&self, cutoff: DateTime<Utc>, limit: i64) -> Result<u64, CatalogError> {
        timed!(self, expire_scans(cutoff, limit))
    }
    async fn prune_scans(
        &self,
        cutoff: DateTime<Utc>,
        limit: i64,
    ) -> Result<super::ScanPruneCounts, CatalogError> {
        timed!(self, prune_scans(cutoff, limit))
    }
}

#[async_trait]
impl EventOutbox for ObservedCatalog {
    async fn record_event(
        &self,
        event: &crate::domain::events::NewEvent,
    ) -> Result<(), CatalogError> {
        timed!(self, record_event(event))
    }
    async fn sequence_events(
        &self,
        limit: i64,
        retry_window_secs: i64,
    ) -> Result<u64, CatalogError> {
        timed!(self, sequence_events(limit, retry_window_secs))
    }
    async fn events_after(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::domain::events::StoredEvent>, CatalogError> {
        timed!(self, events_after(after, limit))
    }
    async fn unsequenced_events(&self) -> Result<i64, CatalogError> {
        timed!(self, unsequenced_events())
    }
}

#[async_trait]
impl EventDeliveryCatalog for ObservedCatalog {
    async fn sync_settings_endpoints(
        &self,
        endpoints: &[super::EndpointSpec],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError> {
        timed!(self, sync_settings_endpoints(endpoints, now))
    }
    async fn enabled_endpoints(&self) -> Result<Vec<super::EndpointSpec>, CatalogError> {
        timed!(self, enabled_endpoints())
    }
    async fn claim_deliveries(
        &self,
        endpoint: &str,
        token: &str,
        lease_secs: i64,
        limit: i64,
    ) -> Result<Vec<super::ClaimedDelivery>, CatalogError> {
        timed!(self, claim_deliveries(endpoint, token, lease_secs, limit))
    }
    async fn mark_delivered(
        &self,
        endpoint: &str,
        position: i64,
        token: &str,
        status: i32,
    ) -> Result<bool, CatalogError> {
        timed!(self, mark_delivered(endpoint, position, token, status))
    }
    async fn mark_attempt_failed(
        &self,
        endpoint: &str,
        position: i64,
        token: &str,
        outcome: &super::FailedAttempt<'_>,
    ) -> Result<Option<bool>, CatalogError> {
        timed!(
            self,
            mark_attempt_failed(endpoint, position, token, outcome)
        )
    }
    async fn retry_failed_deliveries(
        &self,
        endpoint: &str,
        retry_window_secs: i64,
    ) -> Result<Option<u64>, CatalogError> {
        timed!(self, retry_failed_deliveries(endpoint, retry_window_secs))
    }
    async fn delivery_gauges(&self) -> Result<super::DeliveryGauges, CatalogError> {
        timed!(self, delivery_gauges())
    }
    async fn endpoint_counts(&self) -> Result<Vec<super::EndpointCounts>, CatalogError> {
        timed!(self, endpoint_counts())
    }
    async fn create_api_endpoint(
        &self,
        endpoint: &super::EndpointSpec,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        timed!(self, create_api_endpoint(endpoint, now))
    }
    async fn disable_api_endpoint(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<String>, CatalogError> {
        timed!(self, disable_api_endpoint(id, now))
    }
    async fn replay_deliveries(
        &self,
        endpoint: &str,
        after: i64,
        retry_window_secs: i64,
        dry_run: bool,
    ) -> Result<Option<u64>, CatalogError> {
        timed!(
            self,
            replay_deliveries(endpoint, after, retry_window_secs, dry_run)
        )
    }
}

#[async_trait]
impl Catalog for ObservedCatalog {
    async fn ping(&self) -> Result<(), CatalogError> {
        timed!(self, ping())
    }
    async fn close(&self) {
        self.inner.close().await;
    }
    async fn create_upload(
        &self,
        upload: &Upload,
        session: Option<&MultipartSession>,
        day: NaiveDate,
        limits: QuotaLimits,
    ) -> Result<(), CatalogError> {
        timed!(self, create_upload(upload, session, day, limits))
    }
    async fn import_upload(&self, upload: &Upload) -> Result<(), CatalogError> {
        timed!(self, import_upload(upload))
    }
    async fn upload_by_key(&self, key: &str) -> Result<Option<Upload>, CatalogError> {
        timed!(self, upload_by_key(key))
    }
    async fn uploads_by_keys(&self, keys: &[String]) -> Result<Vec<Upload>, CatalogError> {
        timed!(self, uploads_by_keys(keys))
    }
    async fn upload_by_id(&self, id: &UploadId) -> Result<Option<Upload>, CatalogError> {
        timed!(self, upload_by_id(id))
    }
    async fn stale_promoting(
        &self,
        lease_expired_before: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Upload>, CatalogError> {
        timed!(self, stale_promoting(lease_expired_before, limit))
    }
    async fn take_lease(&self, req: &LeaseRequest<'_>) -> Result<bool, CatalogError> {
        timed!(self, take_lease(req))
    }
    async fn renew_lease(
        &self,
        id: &UploadId,
        token: &str,
        lease_secs: i64,
    ) -> Result<bool, CatalogError> {
        timed!(self, renew_lease(id, token, lease_secs))
    }
    async fn release_lease(
        &self,
        id: &UploadId,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        timed!(self, release_lease(id, token, now))
    }
    async fn expire_lease(
        &self,
        id: &UploadId,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        timed!(self, expire_lease(id, token, now))
    }
    async fn reject(
        &self,
        id: &UploadId,
        token: &str,
        code: &str,
        tmp_version: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError> {
        timed!(self, reject(id, token, code, tmp_version, now))
    }
    async fn record_handle(
        &self,
        handle: &FileHandle,
        token: &str,
        tmp_version: Option<&str>,
    ) -> Result<Option<FileHandle>, CatalogError> {
        timed!(self, record_handle(handle, token, tmp_version))
    }
    async fn settled_tmp(
        &self,
        expired_before: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<SettledTmp>, CatalogError> {
        timed!(self, settled_tmp(expired_before, limit))
    }
    async fn mark_tmp_cleared(
        &self,
        ids: &[UploadId],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError> {
        timed!(self, mark_tmp_cleared(ids, now))
    }
    async fn handle_by_id(&self, id: &FileId) -> Result<Option<FileHandle>, CatalogError> {
        timed!(self, handle_by_id(id))
    }
    async fn handle_by_upload(&self, id: &UploadId) -> Result<Option<FileHandle>, CatalogError> {
        timed!(self, handle_by_upload(id))
    }

    async fn mark_expired_handles(
        &self,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<FileId>, CatalogError> {
        timed!(self, mark_expired_handles(now, limit))
    }
    async fn quota_usage(&self, owner: &str, day: NaiveDate) -> Result<(i64, i64), CatalogError> {
        timed!(self, quota_usage(owner, day))
    }
}
