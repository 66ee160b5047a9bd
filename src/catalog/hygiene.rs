//! The hygiene catalog's contract: links, link scans, and the claims and statuses of unlinked
//! data (unlinked → archived → deleted, and restore). Its SQL, shared by both backends, is in
//! `hygiene_queries`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::CatalogError;
use crate::domain::ids::FileId;
use crate::domain::records::{FileHandle, HandleStatus};

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
