//! The catalog: uploads, file handles and the quota ledger in SQL. One trait, two
//! implementations (SQLite, the embedded default; PostgreSQL, for production) that share one
//! body of queries, and one contract-test suite run against both.
//!
//! This file holds the core `Catalog` trait (uploads, leases, handles, quota) with the multipart,
//! job and retention traits; the hygiene and events traits, with their types, are in `hygiene`
//! and `events`. Each trait's SQL is in its `*_queries` file.

mod admin;
mod admin_queries;
mod checkpoint;
mod delivery_queries;
mod errors;
mod event_queries;
mod events;
mod group_commit;
mod group_commit_queries;
mod hygiene;
mod hygiene_conditions;
mod hygiene_queries;
mod job_queries;
mod multipart_queries;
mod observed;
mod postgres;
mod queries;
mod render_failures;
mod retention_queries;
mod rows;
mod sqlite;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use crate::domain::ids::{FileId, UploadId};
use crate::domain::jobs::{JobItem, JobRun, RunState};
use crate::domain::multipart::{MultipartSession, PartRecord, SessionState};
use crate::domain::quota::QuotaLimits;
use crate::domain::records::{FileHandle, Upload, UploadState};

pub use admin::{
    AdminCatalog, Before, DayOfUploads, DeliveryRow, HandleDimension, HandleFilter, LinkRow, Share,
    SubjectEvent,
};
pub use errors::CatalogError;
pub use events::{
    ClaimedDelivery, DeliveryGauges, EndpointCounts, EndpointSpec, EventDeliveryCatalog,
    EventOutbox, FailedAttempt,
};
pub use hygiene::{
    ClaimKind, HygieneCatalog, HygieneGuard, LinkScan, NewCopy, ScanCompletion, Settle,
};
pub use observed::ObservedCatalog;
pub use postgres::PostgresCatalog;
pub use render_failures::{RenderFailure, RenderFailureCatalog};
pub use sqlite::SqliteCatalog;

/// How many keys or ids one batched lookup or update binds: well under SQLite's limit on bound
/// parameters (32,766 since 3.32; 999 before) and a listing page (1,000 keys) in two statements.
pub const KEY_BATCH: usize = 500;

/// A request to move an upload into `promoting` under a new lease.
#[derive(Debug, Clone)]
pub struct LeaseRequest<'a> {
    pub upload_id: &'a UploadId,
    /// The state and lease token the caller saw; the update only applies if both still hold.
    pub expected_state: UploadState,
    pub expected_token: Option<&'a str>,
    pub final_key: &'a str,
    pub token: &'a str,
    /// How long the new lease runs, counted on the database's clock.
    pub lease_secs: i64,
    pub now: DateTime<Utc>,
}

/// A settled (committed or rejected) upload whose tmp object may still be in the bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettledTmp {
    pub upload_id: UploadId,
    pub key: String,
    pub method: String,
    /// The version the commit checked; `None` when it did not see one (then every version of
    /// the key is listed before deleting).
    pub tmp_version_id: Option<String>,
}

/// Multipart sessions and their parts.
#[async_trait]
pub trait MultipartCatalog: Send + Sync + 'static {
    async fn multipart_session(
        &self,
        id: &UploadId,
    ) -> Result<Option<MultipartSession>, CatalogError>;

    /// Inserts or overwrites parts by (upload, part number): what S3 reported holding.
    async fn record_parts(
        &self,
        id: &UploadId,
        parts: &[PartRecord],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError>;

    /// The recorded parts of one upload, in part-number order.
    async fn parts(&self, id: &UploadId) -> Result<Vec<PartRecord>, CatalogError>;

    /// `open → to` and the given parts recorded, in one transaction. `Ok(false)`: the session
    /// was not open any more (completed or aborted by someone else).
    async fn finish_session(
        &self,
        id: &UploadId,
        to: SessionState,
        parts: &[PartRecord],
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError>;

    /// Claims the session for one completion (or abort) for `lease_secs` on the database's
    /// clock. `Ok(false)`: it is not open, or another call's claim is still alive.
    async fn claim_session(
        &self,
        id: &UploadId,
        token: &str,
        lease_secs: i64,
    ) -> Result<bool, CatalogError>;

    /// Gives a claim back (the call failed before changing anything).
    async fn release_session_claim(&self, id: &UploadId, token: &str) -> Result<(), CatalogError>;

    /// Extends a claim this call holds by `lease_secs` from the database's now, while its S3
    /// call runs. `Ok(false)`: the claim is not held any more.
    async fn renew_session_claim(
        &self,
        id: &UploadId,
        token: &str,
        lease_secs: i64,
    ) -> Result<bool, CatalogError>;
}

/// Maintenance job runs, their items, and one lease per job across replicas.
#[async_trait]
pub trait JobCatalog: Send + Sync + 'static {
    /// Takes (or renews, for the same holder) the job's lease for `lease_secs` of the
    /// database's clock, which also judges whether another holder's lease ran out.
    /// `Ok(false)`: another holder's lease is still running.
    async fn acquire_job_lock(
        &self,
        job: &str,
        holder: &str,
        lease_secs: u64,
    ) -> Result<bool, CatalogError>;
    async fn release_job_lock(&self, job: &str, holder: &str) -> Result<(), CatalogError>;

    async fn insert_run(&self, run: &JobRun) -> Result<(), CatalogError>;
    /// The latest run of `job` (not a dry run) that never finished: a crash to resume from.
    async fn unfinished_run(&self, job: &str) -> Result<Option<JobRun>, CatalogError>;
    /// The latest finished, failed or refused run of `job` that was not a dry run: a dry run
    /// changes nothing, so it never stands for the job having run (on `/metrics`, in the report,
    /// in `GET /v1/admin/jobs`).
    async fn last_run(&self, job: &str) -> Result<Option<JobRun>, CatalogError>;
    /// The latest run of `job` that finished (not failed, not refused, not a dry run): the
    /// last complete findings.
    async fn last_finished_run(&self, job: &str) -> Result<Option<JobRun>, CatalogError>;
    async fn run_by_id(&self, id: &str) -> Result<Option<JobRun>, CatalogError>;
    async fn update_run(
        &self,
        id: &str,
        state: RunState,
        checkpoint: Option<&str>,
        summary: &str,
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError>;
    async fn add_job_items(&self, run_id: &str, items: &[JobItem]) -> Result<(), CatalogError>;
    async fn job_items(&self, run_id: &str) -> Result<Vec<JobItem>, CatalogError>;
    /// Up to `limit` items of a run after the item numbered `after` (0: from the start), with
    /// their numbers, in the order they were written: a report read a page at a time.
    async fn job_items_page(
        &self,
        run_id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<(i64, JobItem)>, CatalogError>;

    /// Up to `limit` handle keys after `after`, in S3's byte order (reconcile's catalog side):
    /// one row per key, however many handles (copies) share it, with their count, and only the
    /// handles whose object must exist at `now` (the run's start): recorded by then, and not
    /// those of temporary files expired by then.
    async fn handle_keys_after(
        &self,
        after: &str,
        limit: i64,
        now: DateTime<Utc>,
    ) -> Result<Vec<crate::domain::reconcile::HandleKey>, CatalogError>;

    /// Up to `limit` ids, in order, of the handles of `key` whose object must exist (not
    /// deleted, not claimed for deletion: copies sharing the key): a missing object's report
    /// names them all. Unlike [`Self::handle_keys_after`] it takes no run start, so it also
    /// names a copy recorded since, and a temporary file's handle past its `expires_at`.
    async fn handle_ids_of_key(&self, key: &str, limit: i64) -> Result<Vec<String>, CatalogError>;

    /// Whether an upload record names `key` (its tmp or legacy key, or its final key):
    /// reconcile never moves such an object.
    async fn upload_names_key(&self, key: &str) -> Result<bool, CatalogError>;

    /// The database's clock: the one clock every age decision of a deleting job uses, so
    /// replicas whose clocks drift cannot disagree about what is old (F12).
    async fn clock(&self) -> Result<DateTime<Utc>, CatalogError>;

    /// Notes that the sweeper removed these uploads' tmp objects: one statement per
    /// [`KEY_BATCH`] ids.
    async fn mark_swept_many(
        &self,
        upload_ids: &[UploadId],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError>;
}

/// What a prune removed in one batch (or, counted for a dry run, would remove).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PruneCounts {
    pub committed: u64,
    pub rejected: u64,
    /// Never committed; their commit window closed (multipart ones aborted or completed).
    pub expired: u64,
    pub multipart_sessions: u64,
    pub upload_parts: u64,
}

impl PruneCounts {
    fn add_state(&mut self, state: &str, n: u64) {
        match state {
            "committed" => self.committed += n,
            "rejected" => self.rejected += n,
            _ => self.expired += n,
        }
    }

    pub fn uploads(&self) -> u64 {
        self.committed + self.rejected + self.expired
    }

    pub fn add(&mut self, other: &PruneCounts) {
        self.committed += other.committed;
        self.rejected += other.rejected;
        self.expired += other.expired;
        self.multipart_sessions += other.multipart_sessions;
        self.upload_parts += other.upload_parts;
    }
}

/// Link scans pruned (or that would be), by why, with their rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScanPruneCounts {
    /// Completed scans a newer completed one superseded, completed before the cutoff.
    pub superseded: u64,
    /// Open scans nothing was sent to since before the cutoff (expired, then pruned).
    pub abandoned: u64,
    /// Their `link_scan_batches` rows.
    pub batches: u64,
    /// Their `link_scan_seen` rows (one per file a scan saw).
    pub seen: u64,
}

impl ScanPruneCounts {
    pub fn scans(&self) -> u64 {
        self.superseded + self.abandoned
    }

    /// Rows of the three tables together.
    pub fn rows(&self) -> u64 {
        self.scans() + self.batches + self.seen
    }

    pub fn add(&mut self, other: &ScanPruneCounts) {
        self.superseded += other.superseded;
        self.abandoned += other.abandoned;
        self.batches += other.batches;
        self.seen += other.seen;
    }
}

/// One table's size for the report: rows, and bytes (with its indexes) where the database can
/// tell.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableSize {
    pub table: String,
    pub rows: i64,
    pub bytes: Option<i64>,
}

/// Upload retention: pruning the rows of finished uploads, and the tables' sizes.
#[async_trait]
pub trait RetentionCatalog: Send + Sync + 'static {
    /// What [`RetentionCatalog::prune_uploads`] would remove, all batches together (dry runs).
    async fn prunable_uploads(&self, cutoff: DateTime<Utc>) -> Result<PruneCounts, CatalogError>;
    /// Deletes up to `limit` upload rows that nothing needs as of `cutoff` (now minus the
    /// retention), with their multipart sessions and parts, in one short transaction.
    async fn prune_uploads(
        &self,
        cutoff: DateTime<Utc>,
        limit: i64,
    ) -> Result<PruneCounts, CatalogError>;
    /// Quota rows of days before `before`.
    async fn prunable_quota_days(&self, before: NaiveDate) -> Result<u64, CatalogError>;
    /// Deletes up to `limit` quota rows of days before `before`.
    async fn prune_quota_days(&self, before: NaiveDate, limit: i64) -> Result<u64, CatalogError>;
    async fn table_sizes(&self) -> Result<Vec<TableSize>, CatalogError>;
    /// What [`RetentionCatalog::discard_deliveries`] would discard, by endpoint (dry runs).
    async fn discardable_deliveries(
        &self,
        cutoff: DateTime<Utc>,
    ) -> Result<Vec<(String, u64)>, CatalogError>;
    /// Deletes up to `limit` undelivered deliveries the retention lets go as of `cutoff` (their
    /// endpoint disabled before it, or their retry window closed before it), adding each
    /// endpoint's number to its `discarded_deliveries`, in one transaction; by endpoint.
    async fn discard_deliveries(
        &self,
        cutoff: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<(String, u64)>, CatalogError>;
    /// What [`RetentionCatalog::prune_events`] would remove, all batches together.
    async fn prunable_events(&self, cutoff: DateTime<Utc>) -> Result<u64, CatalogError>;
    /// Deletes up to `limit` events older than `cutoff` that the feed has positioned and every
    /// endpoint has received (none pending or failed), never the last one, with their
    /// deliveries, in one transaction.
    async fn prune_events(&self, cutoff: DateTime<Utc>, limit: i64) -> Result<u64, CatalogError>;
    /// What expiring and pruning link scans as of `cutoff` would remove, all batches together
    /// (dry runs): the scans [`RetentionCatalog::prune_scans`] takes, and the open ones
    /// [`RetentionCatalog::expire_scans`] would let go, with their rows.
    async fn prunable_scans(&self, cutoff: DateTime<Utc>) -> Result<ScanPruneCounts, CatalogError>;
    /// `open → expired` for up to `limit` open scans started before `cutoff` that received no
    /// batch since: no batch or completion is taken for them any more; how many.
    async fn expire_scans(&self, cutoff: DateTime<Utc>, limit: i64) -> Result<u64, CatalogError>;
    /// Deletes up to `limit` rows of expired scans and of completed scans that a newer
    /// completed one superseded and that completed before `cutoff` — seen rows, then batches,
    /// then the scans left with neither — in one transaction. The latest completed scan (the
    /// one hygiene judges by) is never among them.
    async fn prune_scans(
        &self,
        cutoff: DateTime<Utc>,
        limit: i64,
    ) -> Result<ScanPruneCounts, CatalogError>;
    /// The oldest and newest positions the feed holds (`None`: no event positioned yet): a
    /// cursor before the oldest lost events to pruning; one past the newest was never given.
    async fn event_positions(&self) -> Result<Option<(i64, i64)>, CatalogError>;
}

#[async_trait]
pub trait Catalog:
    MultipartCatalog
    + AdminCatalog
    + RenderFailureCatalog
    + JobCatalog
    + HygieneCatalog
    + RetentionCatalog
    + EventOutbox
    + EventDeliveryCatalog
    + Send
    + Sync
    + 'static
{
    /// Cheap round trip for readiness.
    async fn ping(&self) -> Result<(), CatalogError>;

    /// Closes the catalog at a graceful stop: waits for connections in use to come back, then
    /// closes every one (SQLite, closing its last connection, checkpoints the WAL into the
    /// database file and removes it). Calls after it fail.
    async fn close(&self) {}

    /// Records a presigned upload (with its multipart session, if any) and charges the owner's
    /// daily quota in one transaction: either all happen or none. Over the limit →
    /// [`CatalogError::QuotaExceeded`].
    async fn create_upload(
        &self,
        upload: &Upload,
        session: Option<&MultipartSession>,
        day: NaiveDate,
        limits: QuotaLimits,
    ) -> Result<(), CatalogError>;

    /// Records an upload without charging quota: uploads imported from the layout that
    /// predates `tmp/` (legacy keys), which were charged when they were issued.
    async fn import_upload(&self, upload: &Upload) -> Result<(), CatalogError>;

    async fn upload_by_key(&self, key: &str) -> Result<Option<Upload>, CatalogError>;

    /// The uploads recorded under any of `keys`, in no particular order (keys without one are
    /// simply absent): the sweep's lookup of one listing page, one query per [`KEY_BATCH`]
    /// keys. Required of every catalog (wrappers forward it), so no layer falls back to one
    /// query per key.
    async fn uploads_by_keys(&self, keys: &[String]) -> Result<Vec<Upload>, CatalogError>;
    async fn upload_by_id(&self, id: &UploadId) -> Result<Option<Upload>, CatalogError>;

    /// Uploads left `promoting` whose lease ran out before `lease_expired_before`: commits whose
    /// caller went away (crashed, gave up) — the recovery run finishes or releases them.
    async fn stale_promoting(
        &self,
        lease_expired_before: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Upload>, CatalogError>;

    /// Compare-and-set into `promoting`: from `issued`, or from `promoting` when the held lease
    /// has run out on the database's clock. `Ok(false)`: someone else moved the upload first,
    /// or the lease it saw is still alive.
    /// [`CatalogError::FinalKeyTaken`]: another upload already holds that final key.
    async fn take_lease(&self, req: &LeaseRequest<'_>) -> Result<bool, CatalogError>;

    /// Extends a commit lease this call holds by `lease_secs` from the database's now, while its
    /// S3 calls run (a large copy can outlast one lease). `Ok(false)`: the lease was lost.
    async fn renew_lease(
        &self,
        id: &UploadId,
        token: &str,
        lease_secs: i64,
    ) -> Result<bool, CatalogError>;

    /// `promoting → issued`, releasing the final key, when nothing was copied yet.
    async fn release_lease(
        &self,
        id: &UploadId,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError>;

    /// Ends a lease early but keeps `promoting` and the final key: a copy may have happened,
    /// so the next commit must take over and roll forward rather than start afresh.
    async fn expire_lease(
        &self,
        id: &UploadId,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError>;

    /// `promoting → rejected`, releasing the final key.
    async fn reject(
        &self,
        id: &UploadId,
        token: &str,
        code: &str,
        tmp_version: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError>;

    /// Inserts the handle and moves the upload `promoting → committed` in one transaction,
    /// only while `token` still holds the lease. `Ok(None)`: the lease was lost. `tmp_version`
    /// is the tmp version the commit checked, deleted once the upload's URL has expired.
    async fn record_handle(
        &self,
        handle: &FileHandle,
        token: &str,
        tmp_version: Option<&str>,
    ) -> Result<Option<FileHandle>, CatalogError>;

    /// Up to `limit` settled uploads whose URL expired before `expired_before` and whose tmp
    /// object was not cleared yet, oldest first.
    async fn settled_tmp(
        &self,
        expired_before: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<SettledTmp>, CatalogError>;

    /// Notes that every version of these uploads' tmp keys is gone.
    async fn mark_tmp_cleared(
        &self,
        ids: &[UploadId],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError>;

    async fn handle_by_id(&self, id: &FileId) -> Result<Option<FileHandle>, CatalogError>;
    async fn handle_by_upload(&self, id: &UploadId) -> Result<Option<FileHandle>, CatalogError>;

    /// Marks up to `limit` temporary handles whose `expires_at` has passed at `now` as expired
    /// (oldest expiry first); returns the ids it marked. Run until it returns fewer than `limit`.
    async fn mark_expired_handles(
        &self,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<FileId>, CatalogError>;

    /// (uploads, bytes) charged to `owner` on `day`.
    async fn quota_usage(&self, owner: &str, day: NaiveDate) -> Result<(i64, i64), CatalogError>;
}

/// Opens the catalog named by a `DATABASE_URL` and runs its migrations.
pub async fn connect(
    url: &str,
    max_connections: u32,
) -> Result<std::sync::Arc<dyn Catalog>, CatalogError> {
    if url.starts_with("sqlite:") {
        Ok(std::sync::Arc::new(
            SqliteCatalog::connect(url, max_connections).await?,
        ))
    } else {
        Ok(std::sync::Arc::new(
            PostgresCatalog::connect(url, max_connections).await?,
        ))
    }
}

/// Runs the migrations only (`upcommit migrate`).
pub async fn migrate(url: &str) -> Result<(), CatalogError> {
    connect(url, 1).await.map(|_| ())
}

/// Closes `pool` and waits until every one of its connections is closed. sqlx 0.8's
/// `Pool::close` can return while a connection checked out before it is still open (closing an
/// idle connection hands back a permit it never held, so its wait for every permit ends early);
/// the pool's size, which drops only once a connection has closed, is what is waited for here.
/// The caller bounds the whole (the graceful stop waits a few seconds at most).
async fn pool_closed<DB: sqlx::Database>(pool: &sqlx::Pool<DB>) {
    pool.close().await;
    while pool.size() > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
