//! The records the catalog keeps: uploads (one per presign) and file handles (one per commit).

use super::checksum::Checksum;
use chrono::{DateTime, SubsecRound, Utc};

/// The current time at the precision both databases store (microseconds), so a record read
/// back equals the record written and a 201 body equals every later 200 body.
pub fn now() -> DateTime<Utc> {
    (Utc::now() + test_clock_skew()).trunc_subsecs(6)
}

/// Debug builds only: `UPCOMMIT_CLOCK_SKEW_SECS` moves this process's clock (read once), so a
/// test can run a replica whose clock is wrong beside one whose clock is right. Release builds
/// have no such switch.
#[cfg(debug_assertions)]
fn test_clock_skew() -> chrono::Duration {
    static SKEW: std::sync::OnceLock<chrono::Duration> = std::sync::OnceLock::new();
    *SKEW.get_or_init(|| {
        std::env::var("UPCOMMIT_CLOCK_SKEW_SECS")
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .map_or_else(chrono::Duration::zero, chrono::Duration::seconds)
    })
}

#[cfg(not(debug_assertions))]
fn test_clock_skew() -> chrono::Duration {
    chrono::Duration::zero()
}
use serde::Serialize;

use super::ids::{FileId, UploadId};

/// Where an upload is in its life. Transitions are conditional updates in the catalog:
/// `issued → promoting` (a commit holds the lease), `promoting → committed` (handle recorded),
/// `promoting → issued` (validation failed before anything was copied; retry allowed),
/// `promoting → rejected` (the bytes are not what was declared; final).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadState {
    Issued,
    Promoting,
    Committed,
    Rejected,
}

impl UploadState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Issued => "issued",
            Self::Promoting => "promoting",
            Self::Committed => "committed",
            Self::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "issued" => Self::Issued,
            "promoting" => Self::Promoting,
            "committed" => Self::Committed,
            "rejected" => Self::Rejected,
            _ => return None,
        })
    }
}

/// How the client uploads the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum UploadMethod {
    Put,
    Post,
    /// Parts through presigned UploadPart URLs, then complete.
    Multipart,
}

impl UploadMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Put => "PUT",
            Self::Post => "POST",
            Self::Multipart => "MULTIPART",
        }
    }
}

/// One presigned upload.
#[derive(Debug, Clone)]
pub struct Upload {
    pub id: UploadId,
    pub owner: String,
    pub profile: String,
    pub content_type: String,
    pub declared_size: i64,
    /// The key the client uploads to: a tmp key, or a legacy key committed in place.
    pub key: String,
    pub method: String,
    pub state: UploadState,
    pub final_key: Option<String>,
    pub reject_code: Option<String>,
    pub lease_token: Option<String>,
    pub lease_until: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// When the presigned URL stops working.
    pub expires_at: DateTime<Utc>,
    /// After this, a commit answers 410: the tmp object may already be gone.
    pub commit_deadline: DateTime<Utc>,
    /// The filename as the client wrote it (see [`super::filename::OriginalName`]); the key
    /// holds only its ASCII slug.
    pub original_filename: Option<String>,
    /// The checksum the client declared: bound into what it uploads with, verified at commit.
    pub checksum: Option<Checksum>,
}

/// Where a file handle is in its life: `available` → `unlinked` (nothing uses it, past the
/// grace period; still downloadable) → `archived` (moved to an archive storage class) →
/// `deleted` (object removed after retention; the row stays for audit). Restore brings an
/// unlinked or archived handle back to `available`. A temporary profile's handle (one with an
/// `expires_at`) never enters that path: the sweep marks it `expired` once its time to live has
/// passed, and the bucket's lifecycle rule removes its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HandleStatus {
    Available,
    Unlinked,
    Archived,
    Deleted,
    /// Past its `expires_at`: a temporary file, marked by the sweep; the API answers 410
    /// `file_expired` for it (from `expires_at` alone, before the sweep has run too).
    Expired,
}

impl HandleStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Available => "available",
            Self::Unlinked => "unlinked",
            Self::Archived => "archived",
            Self::Deleted => "deleted",
            Self::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "available" => Self::Available,
            "unlinked" => Self::Unlinked,
            "archived" => Self::Archived,
            "deleted" => Self::Deleted,
            "expired" => Self::Expired,
            _ => return None,
        })
    }
}

/// A committed file: the API's file handle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileHandle {
    pub id: FileId,
    pub upload_id: UploadId,
    pub key: String,
    pub size: i64,
    pub content_type: String,
    pub etag: String,
    pub profile: String,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub status: HandleStatus,
    /// The upload's original filename, as written (absent when the client gave none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_filename: Option<String>,
    /// The object's checksum as S3 reported it when the file was committed (the declared one,
    /// verified, when the client declared one). Absent on files committed before checksums.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum: Option<Checksum>,
    /// The handle this one was copied from (`POST /v1/files/{id}/copies`): a copy shares that
    /// handle's object (key) and upload id. Absent on handles a commit made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copied_from: Option<FileId>,
    /// A temporary file's end: commit time + its profile's TTL. Absent on ordinary files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// An image's width and height as displayed (its orientation applied), read from its
    /// header at commit. Absent on other files and on images committed before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<crate::domain::image::Dimensions>,
}

impl FileHandle {
    /// A temporary file whose time to live has passed at `now` (swept or not yet).
    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.status == HandleStatus::Expired || self.expires_at.is_some_and(|at| now >= at)
    }
}

impl Serialize for FileId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Serialize for UploadId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_through_their_names() {
        for s in [
            UploadState::Issued,
            UploadState::Promoting,
            UploadState::Committed,
            UploadState::Rejected,
        ] {
            assert_eq!(UploadState::parse(s.as_str()), Some(s));
        }
        assert_eq!(UploadState::parse("ISSUED"), None);
        for s in [
            HandleStatus::Available,
            HandleStatus::Unlinked,
            HandleStatus::Archived,
            HandleStatus::Deleted,
            HandleStatus::Expired,
        ] {
            assert_eq!(HandleStatus::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn now_has_microsecond_precision() {
        assert_eq!(now().timestamp_subsec_nanos() % 1000, 0);
    }
}
