//! The rows of uploads and file handles as both backends read and write them: the column lists,
//! the raw row fields, their decoding into domain records (a row that does not decode is
//! [`CatalogError::Corrupt`]), and the two checksum columns.

use chrono::{DateTime, Utc};

use super::CatalogError;
use crate::domain::checksum::{Checksum, ChecksumAlgorithm};
use crate::domain::ids::{FileId, UploadId};
use crate::domain::image::Dimensions;
use crate::domain::records::{FileHandle, HandleStatus, Upload, UploadState};

pub(super) const UPLOAD_COLUMNS: &str =
    "id, owner, profile, content_type, declared_size, key, method, state, \
     final_key, reject_code, lease_token, lease_until, created_at, expires_at, commit_deadline, \
     original_filename, checksum_algorithm, checksum_value";

pub(super) const HANDLE_COLUMNS: &str =
    "id, upload_id, key, size, content_type, etag, profile, created_by, created_at, status, \
     original_filename, checksum_algorithm, checksum_value, copied_from, expires_at, expired_at, \
     image_width, image_height";

/// Row fields in [`UPLOAD_COLUMNS`] order, decoded by the backend-specific code.
pub(super) struct UploadRow {
    pub id: String,
    pub owner: String,
    pub profile: String,
    pub content_type: String,
    pub declared_size: i64,
    pub key: String,
    pub method: String,
    pub state: String,
    pub final_key: Option<String>,
    pub reject_code: Option<String>,
    pub lease_token: Option<String>,
    pub lease_until: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub commit_deadline: DateTime<Utc>,
    pub original_filename: Option<String>,
    pub checksum_algorithm: Option<String>,
    pub checksum_value: Option<String>,
}

impl TryFrom<UploadRow> for Upload {
    type Error = CatalogError;
    fn try_from(r: UploadRow) -> Result<Self, CatalogError> {
        Ok(Upload {
            id: UploadId::parse(&r.id)
                .ok_or_else(|| CatalogError::Corrupt(format!("upload id {:?}", r.id)))?,
            owner: r.owner,
            profile: r.profile,
            content_type: r.content_type,
            declared_size: r.declared_size,
            key: r.key,
            method: r.method,
            state: UploadState::parse(&r.state)
                .ok_or_else(|| CatalogError::Corrupt(format!("state {:?}", r.state)))?,
            final_key: r.final_key,
            reject_code: r.reject_code,
            lease_token: r.lease_token,
            lease_until: r.lease_until,
            created_at: r.created_at,
            expires_at: r.expires_at,
            commit_deadline: r.commit_deadline,
            original_filename: r.original_filename,
            checksum: checksum_of(r.checksum_algorithm, r.checksum_value)?,
        })
    }
}

pub(super) struct HandleRow {
    pub id: String,
    pub upload_id: String,
    pub key: String,
    pub size: i64,
    pub content_type: String,
    pub etag: String,
    pub profile: String,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub status: String,
    pub original_filename: Option<String>,
    pub checksum_algorithm: Option<String>,
    pub checksum_value: Option<String>,
    pub copied_from: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub expired_at: Option<DateTime<Utc>>,
    pub image_width: Option<i64>,
    pub image_height: Option<i64>,
}

impl TryFrom<HandleRow> for FileHandle {
    type Error = CatalogError;
    fn try_from(r: HandleRow) -> Result<Self, CatalogError> {
        Ok(FileHandle {
            id: FileId::parse(&r.id)
                .ok_or_else(|| CatalogError::Corrupt(format!("file id {:?}", r.id)))?,
            upload_id: UploadId::parse(&r.upload_id)
                .ok_or_else(|| CatalogError::Corrupt(format!("upload id {:?}", r.upload_id)))?,
            key: r.key,
            size: r.size,
            content_type: r.content_type,
            etag: r.etag,
            profile: r.profile,
            created_by: r.created_by,
            created_at: r.created_at,
            // `expired` is the one status kept in its own column (see migration 0011).
            status: match r.expired_at {
                Some(_) => HandleStatus::Expired,
                None => HandleStatus::parse(&r.status).ok_or_else(|| {
                    CatalogError::Corrupt(format!("handle status {:?}", r.status))
                })?,
            },
            original_filename: r.original_filename,
            checksum: checksum_of(r.checksum_algorithm, r.checksum_value)?,
            copied_from: r
                .copied_from
                .map(|c| {
                    FileId::parse(&c)
                        .ok_or_else(|| CatalogError::Corrupt(format!("copied_from {c:?}")))
                })
                .transpose()?,
            expires_at: r.expires_at,
            image: image_of(r.image_width, r.image_height)?,
        })
    }
}

/// The two image size columns as one value: both set or both NULL.
fn image_of(width: Option<i64>, height: Option<i64>) -> Result<Option<Dimensions>, CatalogError> {
    match (width, height) {
        (None, None) => Ok(None),
        (Some(w), Some(h)) => match (u32::try_from(w), u32::try_from(h)) {
            (Ok(width), Ok(height)) => Ok(Some(Dimensions { width, height })),
            _ => Err(CatalogError::Corrupt(format!("image size {w} x {h}"))),
        },
        (w, h) => Err(CatalogError::Corrupt(format!(
            "image size half set: width {w:?}, height {h:?}"
        ))),
    }
}

/// The two checksum columns as one value: both set or both NULL.
fn checksum_of(
    algorithm: Option<String>,
    value: Option<String>,
) -> Result<Option<Checksum>, CatalogError> {
    match (algorithm, value) {
        (None, None) => Ok(None),
        (Some(a), Some(v)) => ChecksumAlgorithm::parse(&a)
            .map(|alg| Some(Checksum::from_trusted(alg, v)))
            .ok_or_else(|| CatalogError::Corrupt(format!("checksum algorithm {a:?}"))),
        (a, v) => Err(CatalogError::Corrupt(format!(
            "checksum half set: algorithm {a:?}, value {v:?}"
        ))),
    }
}

/// Binds as the `checksum_algorithm` column.
pub(super) fn checksum_algorithm(c: Option<&Checksum>) -> Option<&'static str> {
    c.map(|c| c.algorithm.as_str())
}

/// Binds as the `checksum_value` column.
pub(super) fn checksum_value(c: Option<&Checksum>) -> Option<&str> {
    c.map(|c| c.value.as_str())
}
