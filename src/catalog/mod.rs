//! The catalog: uploads, file handles and the quota ledger in SQL. One trait, two
//! implementations (SQLite, the embedded default; PostgreSQL, for production) that share one
//! body of queries, and one contract-test suite run against both.

mod checkpoint;
mod delivery_queries;
mod errors;
mod event_queries;
mod group_commit;
mod hygiene_queries;
mod job_queries;
mod multipart_queries;
mod observed;
mod postgres;
mod queries;
mod retention_queries;
mod sqlite;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use crate::domain::ids::{FileId, UploadId};
use crate::domain::jobs::{JobItem, JobRun, RunState};
use crate::domain::multipart::{MultipartSession, PartRecord, SessionState};
use crate::domain::quota::QuotaLimits;
use crate::domain::records::{FileHandle, HandleStatus, Upload, UploadState};

pub use errors::CatalogError;
pub use observed::ObservedCatalog;
pub use postgres::PostgresCatalog;
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
    /// The latest finished, failed or refused run of `job`.
    async fn last_run(&self, job: &str) -> Result<Option<JobRun>, CatalogError>;
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

/// A bulk link scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkScan {
    pub id: String,
    pub completed: bool,
    pub started_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
}

/// What completing a link scan did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanCompletion {
    Completed,
    /// It was not open (completed before, or unknown).
    NotOpen,
    /// A deletion holds a key whose handle the scan saw and is past its last check (changing
    /// S3): nothing was recorded; complete again once it settles.
    Busy,
}

/// What a hygiene claim is for. Hygiene's own claims (`Archive`, `Delete`) and a restore's are
/// exclusive: while one holds, no other transition of the handle applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimKind {
    Archive,
    Delete,
    Restore,
}

impl ClaimKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimKind::Archive => "archive",
            ClaimKind::Delete => "delete",
            ClaimKind::Restore => "restore",
        }
    }
}

/// What must still hold, in the claiming statement itself, for hygiene to claim a handle: its
/// status and age, no link, a profile hygiene may act on, not vouched for by the latest completed
/// link scan, no handle sharing its key in one of `key_not_in`, and with `key_retired` every
/// other handle of its key deleted or archived since before `changed_before` (unclaimed but for
/// a deletion, not vouched for by the scan).
#[derive(Debug, Clone)]
pub struct HygieneGuard<'a> {
    pub from: HandleStatus,
    pub changed_before: DateTime<Utc>,
    pub profiles: &'a [String],
    pub key_not_in: &'a [HandleStatus],
    pub key_retired: bool,
}

/// How a claim ends: the handle's new status, and for a restore from a link, that link.
#[derive(Debug, Clone)]
pub struct Settle<'a> {
    pub to: HandleStatus,
    pub storage_class: Option<&'a str>,
    pub restored: bool,
    /// `(object_type, object_id)` inserted in the same transaction.
    pub link: Option<(&'a str, &'a str)>,
    pub now: DateTime<Utc>,
}

/// Links, link scans, and handle statuses.
#[async_trait]
pub trait HygieneCatalog: Send + Sync + 'static {
    /// Links an *available*, unclaimed handle (idempotent), in one transaction with the handle
    /// row's link count. `Ok(false)`: the handle is not available (nothing is recorded).
    async fn put_link(
        &self,
        file: &FileId,
        object_type: &str,
        object_id: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError>;
    /// Idempotent.
    async fn delete_link(
        &self,
        file: &FileId,
        object_type: &str,
        object_id: &str,
    ) -> Result<(), CatalogError>;
    async fn links_of(&self, file: &FileId) -> Result<i64, CatalogError>;

    async fn create_scan(&self, id: &str, now: DateTime<Utc>) -> Result<(), CatalogError>;
    async fn scan(&self, id: &str) -> Result<Option<LinkScan>, CatalogError>;
    /// Records batch `n` and the files it saw; `Ok(false)` when that batch was received before
    /// (nothing is added again).
    async fn add_scan_batch(
        &self,
        scan: &str,
        n: i64,
        files: &[String],
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError>;
    /// `open → completed`, unless a deletion holds a key whose handle the scan saw (see
    /// [`ScanCompletion::Busy`]).
    async fn complete_scan(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<ScanCompletion, CatalogError>;
    async fn latest_completed_scan(&self) -> Result<Option<LinkScan>, CatalogError>;

    /// Available handles of `profiles` nothing uses (no link, not vouched for by the latest
    /// completed link scan), older than `cutoff`, after id `after`, in id order.
    async fn unlinked_candidates(
        &self,
        cutoff: DateTime<Utc>,
        profiles: &[String],
        after: &str,
        limit: i64,
    ) -> Result<Vec<FileHandle>, CatalogError>;
    /// `available → unlinked`, only if everything [`Self::unlinked_candidates`] checks still
    /// holds when the row is updated (a link added or a scan completed since the read wins).
    async fn unlink_if_unused(
        &self,
        id: &FileId,
        cutoff: DateTime<Utc>,
        profiles: &[String],
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError>;
    /// `unlinked → available` (as if restored at `now`) for every unclaimed unlinked handle the
    /// latest completed link scan vouches for whose object no archival of a copy can have
    /// moved; how many.
    async fn return_vouched(&self, now: DateTime<Utc>) -> Result<u64, CatalogError>;
    /// The unclaimed unlinked handles the latest completed link scan vouches for that
    /// [`Self::return_vouched`] leaves (a copy's archival moved, or may have moved, the shared
    /// object): they come back through a restore. After id `after`, in id order.
    async fn vouched_moved(&self, after: &str, limit: i64)
        -> Result<Vec<FileHandle>, CatalogError>;
    /// Handles of `profiles` in `status` since before `changed_before`, after id `after`, in
    /// id order.
    async fn handles_in_status(
        &self,
        status: HandleStatus,
        changed_before: DateTime<Utc>,
        profiles: &[String],
        after: &str,
        limit: i64,
    ) -> Result<Vec<FileHandle>, CatalogError>;
    /// Whether any handle of `key` is in one of `statuses`.
    async fn key_has_status(
        &self,
        key: &str,
        statuses: &[HandleStatus],
    ) -> Result<bool, CatalogError>;
    /// Claims a handle for `kind` with `token` for `lease_secs` of the database's clock. Hygiene
    /// claims check `guard` in the same statement; a restore claims an unlinked or archived
    /// handle. An expired claim may be taken over, except that a restore never takes over a
    /// deletion (its objects may be partly gone: only deletion can roll forward).
    async fn claim_handle(
        &self,
        id: &FileId,
        kind: ClaimKind,
        guard: Option<&HygieneGuard<'_>>,
        token: &str,
        lease_secs: u64,
    ) -> Result<bool, CatalogError>;
    /// Extends the claim `token` holds by `lease_secs` (database clock), if it still holds it,
    /// the handle still has no link, no copy of its key is available or being restored, and
    /// the latest completed scan vouches for no handle of the key: hygiene's last check right
    /// before it changes S3, which it records (`claim_s3_at`; see [`ScanCompletion::Busy`]).
    async fn renew_claim(
        &self,
        id: &FileId,
        token: &str,
        lease_secs: u64,
    ) -> Result<bool, CatalogError>;
    /// Ends the claim `token` holds with `settle`; `Ok(false)`: the claim was taken over. A
    /// deletion also marks `deleted` the archived copies sharing the key (their object is gone).
    async fn settle_claim(
        &self,
        id: &FileId,
        token: &str,
        settle: &Settle<'_>,
    ) -> Result<bool, CatalogError>;
    /// Gives a claim up with nothing changed.
    async fn release_claim(&self, id: &FileId, token: &str) -> Result<(), CatalogError>;
    /// (status, count, bytes) per status.
    async fn handle_totals_by_status(&self) -> Result<Vec<(String, i64, i64)>, CatalogError>;
    /// Handles that left `available`, by the month they did.
    async fn unlinked_per_month(&self) -> Result<Vec<(String, i64)>, CatalogError>;
    async fn storage_class_of(&self, id: &FileId) -> Result<Option<String>, CatalogError>;
    /// Inserts `copy` as a new handle of `source`'s object (key, size, type, checksum, upload
    /// id and storage class taken from the source row, `copied_from` = `source`), only while
    /// the source is available and unclaimed and no other handle of its key is claimed by
    /// hygiene (an archival or deletion of the object under way), checked in the inserting
    /// statement. `Ok(None)`: one of those did not hold; nothing was inserted.
    async fn copy_handle(
        &self,
        source: &FileId,
        copy: &NewCopy<'_>,
    ) -> Result<Option<FileHandle>, CatalogError>;
}

/// A copy of a handle: what is its own (id, owner, time); the rest comes from the source row.
#[derive(Debug, Clone)]
pub struct NewCopy<'a> {
    pub id: &'a FileId,
    pub owner: &'a str,
    pub now: DateTime<Utc>,
    /// The insert is refused once the key has this many handles (the source counted).
    pub max_handles_per_key: i64,
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
    /// The oldest and newest positions the feed holds (`None`: no event positioned yet): a
    /// cursor before the oldest lost events to pruning; one past the newest was never given.
    async fn event_positions(&self) -> Result<Option<(i64, i64)>, CatalogError>;
}

/// The transactional outbox: events are written by the transactions that make their changes
/// (inside the other traits' methods); this is the rest — alarms that are no catalog change,
/// the sequencer, and the feed.
#[async_trait]
pub trait EventOutbox: Send + Sync + 'static {
    /// Records an event that goes with no catalog change (an operator alarm), on its own;
    /// idempotent by event id (an alarm whose id derives from its cause is recorded once).
    async fn record_event(
        &self,
        event: &crate::domain::events::NewEvent,
    ) -> Result<(), CatalogError>;
    /// Gives up to `limit` committed, unpositioned events their feed positions, in the order
    /// they were written, and creates their deliveries to every enabled endpoint subscribed to
    /// their type (due at once and retried until `retry_window_secs` from then, both on the
    /// database's clock, which the claims compare with), in one transaction. One replica at a
    /// time sequences; the others answer `Ok(0)` at once. Returns how many it positioned.
    async fn sequence_events(
        &self,
        limit: i64,
        retry_window_secs: i64,
    ) -> Result<u64, CatalogError>;
    /// Up to `limit` positioned events after position `after`, in feed order.
    async fn events_after(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::domain::events::StoredEvent>, CatalogError>;
    /// Events written but not positioned yet (the outbox's depth before fan-out).
    async fn unsequenced_events(&self) -> Result<i64, CatalogError>;
}

/// One event endpoint as stored: a webhook (`kind` = `webhook`, `secret` = `whsec_…`) or a
/// queue (`kind` = `sqs`, `url` = the queue URL). `event_types`: `*` or `,a,b,`
/// ([`crate::domain::events::subscription_text`]).
#[derive(Clone, PartialEq, Eq)]
pub struct EndpointSpec {
    pub id: String,
    pub kind: String,
    pub url: String,
    pub secret: Option<String>,
    pub event_types: String,
}

/// Never prints the secret.
impl std::fmt::Debug for EndpointSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSpec")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("url", &self.url)
            .field("secret", &self.secret.as_ref().map(|_| "[redacted]"))
            .field("event_types", &self.event_types)
            .finish()
    }
}

/// A delivery a worker claimed: what one attempt sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedDelivery {
    pub endpoint_id: String,
    pub position: i64,
    /// The `webhook-id`: the receivers' deduplication key.
    pub event_id: String,
    pub subject: String,
    pub event_type: String,
    /// Attempts made before this one.
    pub attempts: i32,
    /// The body sent, byte for byte as stored.
    pub payload: String,
}

/// How an attempt failed.
#[derive(Debug, Clone)]
pub struct FailedAttempt<'a> {
    /// The receiver's status, when it answered.
    pub status: Option<i32>,
    pub error: &'a str,
    /// The next attempt is due this many milliseconds from the database's now.
    pub retry_in_ms: i64,
}

/// The outbox's depth for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryGauges {
    /// Deliveries to enabled endpoints not delivered yet, still retried.
    pub pending: i64,
    /// Deliveries past their retry window (kept until retried).
    pub failed: i64,
    /// Deliveries to disabled endpoints not delivered (kept for the retention, then
    /// discarded by the prune).
    pub disabled: i64,
    /// Deliveries the prune discarded undelivered, all endpoints, ever.
    pub discarded: i64,
    /// Events written but not positioned yet.
    pub unsequenced: i64,
    /// When the oldest of those events (unsequenced, or with a pending or failed delivery)
    /// happened.
    pub oldest_undelivered: Option<DateTime<Utc>>,
}

/// One endpoint and its deliveries by state, for `upcommit events list`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EndpointCounts {
    pub id: String,
    pub kind: String,
    pub url: String,
    pub source: String,
    /// `*` or `,a,b,`.
    pub event_types: String,
    pub enabled: bool,
    pub pending: i64,
    pub failed: i64,
    pub delivered: i64,
}

/// Event delivery: endpoints, and the workers' claims and outcomes. Every lease and due time
/// is judged on the database's clock, the one every replica shares.
#[async_trait]
pub trait EventDeliveryCatalog: Send + Sync + 'static {
    /// Writes the settings' endpoints (`source = 'settings'`, enabled) and disables every other
    /// endpoint of the settings, in one transaction. An id an admin-API endpoint holds is
    /// refused.
    async fn sync_settings_endpoints(
        &self,
        endpoints: &[EndpointSpec],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError>;
    async fn enabled_endpoints(&self) -> Result<Vec<EndpointSpec>, CatalogError>;
    /// Leases up to `limit` due deliveries of `endpoint` to `token` for `lease_secs`, in
    /// position order: pending, due, not leased (or the lease ran out), and no earlier
    /// delivery of the same subject to the endpoint undelivered (pending or failed).
    async fn claim_deliveries(
        &self,
        endpoint: &str,
        token: &str,
        lease_secs: i64,
        limit: i64,
    ) -> Result<Vec<ClaimedDelivery>, CatalogError>;
    /// `pending → delivered` while `token` holds the lease. `Ok(false)`: it does not any more
    /// (another worker took the delivery over); nothing changed.
    async fn mark_delivered(
        &self,
        endpoint: &str,
        position: i64,
        token: &str,
        status: i32,
    ) -> Result<bool, CatalogError>;
    /// Counts a failed attempt while `token` holds the lease: due again after the backoff, or
    /// `failed` once the retry window has passed. `Ok(None)`: the lease was lost, nothing
    /// changed; `Ok(Some(true))`: the delivery is now failed.
    async fn mark_attempt_failed(
        &self,
        endpoint: &str,
        position: i64,
        token: &str,
        outcome: &FailedAttempt<'_>,
    ) -> Result<Option<bool>, CatalogError>;
    /// `failed → pending` for every failed delivery of `endpoint`, due now, retried for
    /// another `retry_window_secs`; how many.
    async fn retry_failed_deliveries(
        &self,
        endpoint: &str,
        retry_window_secs: i64,
    ) -> Result<u64, CatalogError>;
    async fn delivery_gauges(&self) -> Result<DeliveryGauges, CatalogError>;
    /// Every endpoint (enabled or not) with its deliveries counted by state, in id order.
    async fn endpoint_counts(&self) -> Result<Vec<EndpointCounts>, CatalogError>;
    /// Sends `endpoint` again every event after feed position `after` it subscribes to: a
    /// delivery is created where none exists, and an existing one (delivered or failed) is
    /// pending again, due now, retried for `retry_window_secs`. With `dry_run`, only counts.
    /// Returns how many events that is.
    async fn replay_deliveries(
        &self,
        endpoint: &str,
        after: i64,
        retry_window_secs: i64,
        dry_run: bool,
    ) -> Result<u64, CatalogError>;
    /// Inserts an endpoint of the admin API (`source = 'api'`, enabled). `Ok(false)`: an
    /// endpoint (of either source, enabled or not) already has this id; nothing changed.
    async fn create_api_endpoint(
        &self,
        endpoint: &EndpointSpec,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError>;
    /// Disables an endpoint of the admin API (idempotent; its deliveries are kept). Returns the
    /// endpoint's source, `None` when no endpoint has this id; a `settings` one is left as is.
    async fn disable_api_endpoint(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<String>, CatalogError>;
}

#[async_trait]
pub trait Catalog:
    MultipartCatalog
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
    /// (oldest expiry first); returns how many it marked. Run until it returns less than `limit`.
    async fn mark_expired_handles(
        &self,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64, CatalogError>;

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
