//! The admin API's reads of the catalog: storage broken down by a handle column, uploads per
//! day, a page of an endpoint's deliveries, the job history, file handles found by their
//! columns, a file's links and events, and the job history's retention. Each is one indexed
//! read (or one batched delete) with a bounded page; the SQL is in `admin_queries`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::CatalogError;
use crate::domain::jobs::JobRun;
use crate::domain::records::FileHandle;

/// The handle column storage is broken down by. A closed set: the column name is never text
/// a caller chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleDimension {
    Status,
    StorageClass,
    Profile,
}

impl HandleDimension {
    pub(super) fn column(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::StorageClass => "storage_class",
            Self::Profile => "profile",
        }
    }
}

/// One value of a [`HandleDimension`] with the handles that have it: distinct objects (copies
/// share one) and their bytes, counted once per object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Share {
    pub name: String,
    pub count: i64,
    pub bytes: i64,
}

/// One UTC day of uploads: presigned (upload rows created that day), committed (handles a
/// commit recorded that day, copies left out) and the bytes committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DayOfUploads {
    pub day: String,
    pub presigned: i64,
    pub committed: i64,
    pub committed_bytes: i64,
}

/// One delivery of an endpoint, with its event's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    pub position: i64,
    pub event_id: String,
    pub event_type: String,
    pub subject: String,
    pub state: String,
    pub attempts: i64,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub next_attempt_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

/// What file handles are found by; every field given must match (`key_prefix`: the key starts
/// with it, compared as bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandleFilter {
    pub id: Option<String>,
    pub owner: Option<String>,
    pub key_prefix: Option<String>,
    pub status: Option<String>,
    pub profile: Option<String>,
}

/// Where a newest-first page continues: strictly before this (time, id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Before {
    pub at: DateTime<Utc>,
    pub id: String,
}

/// One link of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkRow {
    pub object_type: String,
    pub object_id: String,
    pub created_at: DateTime<Utc>,
}

/// One event about a subject, as stored: its feed position (absent until sequenced) and
/// payload text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectEvent {
    pub position: Option<i64>,
    pub id: String,
    pub payload: String,
}

#[async_trait]
pub trait AdminCatalog: Send + Sync + 'static {
    /// Handles that are not deleted or expired, by `dimension`: objects (a key counts once,
    /// however many copies share it) and their bytes; largest first.
    async fn storage_by(&self, dimension: HandleDimension) -> Result<Vec<Share>, CatalogError>;
    /// Uploads per UTC day from `since` on, oldest day first; days without any are absent.
    async fn uploads_per_day(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<DayOfUploads>, CatalogError>;
    /// Whether an event endpoint (enabled or not) has this id: one primary-key read.
    async fn endpoint_exists(&self, id: &str) -> Result<bool, CatalogError>;
    /// Up to `limit` deliveries of `endpoint` after feed position `after`, in feed order,
    /// only those in `state` when given.
    async fn deliveries_page(
        &self,
        endpoint: &str,
        state: Option<&str>,
        after: i64,
        limit: i64,
    ) -> Result<Vec<DeliveryRow>, CatalogError>;
    /// Up to `limit` job runs, newest first (by start), of `job` when given, strictly before
    /// `before` when given.
    async fn runs_page(
        &self,
        job: Option<&str>,
        before: Option<&Before>,
        limit: i64,
    ) -> Result<Vec<JobRun>, CatalogError>;
    /// Up to `limit` handles matching `filter`, newest first (by creation), strictly before
    /// `before` when given.
    async fn find_handles(
        &self,
        filter: &HandleFilter,
        before: Option<&Before>,
        limit: i64,
    ) -> Result<Vec<FileHandle>, CatalogError>;
    /// Every handle of `key` (a file and its copies share it), oldest first, at most `limit`.
    async fn handles_of_key(&self, key: &str, limit: i64) -> Result<Vec<FileHandle>, CatalogError>;
    /// A file's links, oldest first, at most `limit`.
    async fn file_links(&self, file_id: &str, limit: i64) -> Result<Vec<LinkRow>, CatalogError>;
    /// The newest `limit` events about `subject`, oldest first.
    async fn events_of_subject(
        &self,
        subject: &str,
        limit: i64,
    ) -> Result<Vec<SubjectEvent>, CatalogError>;
    /// How many job runs the history's retention lets go as of `cutoff`: ended before it and
    /// not the newest of its job, kind and outcome (what `/metrics`, the report and the console
    /// show as the last run), or a dry run left `running` since before it by a process that
    /// died; never a real run still `running` (a resumable checkpoint).
    async fn prunable_runs(&self, cutoff: DateTime<Utc>) -> Result<u64, CatalogError>;
    /// Deletes up to `limit` of those runs with their items, oldest first, in one transaction;
    /// returns how many runs.
    async fn prune_runs(&self, cutoff: DateTime<Utc>, limit: i64) -> Result<u64, CatalogError>;
}
