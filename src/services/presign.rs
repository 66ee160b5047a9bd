//! Presign: validate the request against its profile, generate the tmp key, sign the URL, and
//! record the upload together with its quota charge. The URL leaves the server only after the
//! record is durable, so a database outage issues no URL.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::auth::Identity;
use crate::catalog::CatalogError;
use crate::domain::capabilities::Capability;
use crate::domain::checksum::{Checksum, ChecksumAlgorithm, ChecksumError};
use crate::domain::filename::OriginalName;
use crate::domain::ids::UploadId;
use crate::domain::keys::{SafeName, TmpKey};
use crate::domain::multipart::{MultipartSession, PartPlan, SessionState, MAX_PART_SIZE};
use crate::domain::profile::{PresignRejection, RawSize};
use crate::domain::quota::{quota_day, seconds_until_next_day};
use crate::domain::records::{self, Upload, UploadMethod, UploadState};
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::{NewMultipart, PresignInput, UPLOAD_ID_METADATA};

/// A presign request after JSON parsing, before validation.
#[derive(Debug, Clone)]
pub struct PresignCommand {
    pub profile: String,
    pub content_type: Option<String>,
    pub size: RawSize,
    pub filename: Option<String>,
    /// `PUT` or `POST` when the client chose one.
    pub method: Option<UploadMethod>,
    /// `Some(true)`: multipart; `Some(false)`: never; `None`: multipart above the threshold.
    pub multipart: Option<bool>,
    /// `(algorithm, base64 value)` as the client sent them.
    pub checksum: Option<(String, String)>,
}

/// How a multipart upload is cut.
#[derive(Debug, Clone, Serialize)]
pub struct MultipartPlan {
    pub part_size: u64,
    pub part_count: u32,
}

/// What the client needs to upload.
#[derive(Debug, Clone, Serialize)]
pub struct PresignedUpload {
    pub upload_id: UploadId,
    pub key: String,
    pub method: UploadMethod,
    /// Absent for multipart uploads: ask for part URLs instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fields: Option<BTreeMap<String, String>>,
    pub expires_at: DateTime<Utc>,
    pub max_size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multipart: Option<MultipartPlan>,
    /// The declared checksum, as bound into the URL, form or multipart upload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum: Option<Checksum>,
}

#[tracing::instrument(skip_all, fields(user.id = %who.user_id, profile = %cmd.profile))]
pub async fn presign(
    state: &AppState,
    who: &Identity,
    cmd: PresignCommand,
) -> Result<PresignedUpload, AppError> {
    let settings = &state.settings;
    let profile = settings
        .profile(&cmd.profile)
        .ok_or(PresignRejection::UnknownProfile)?;
    let content_type = profile.accept_content_type(cmd.content_type.as_deref())?;
    let size = profile.accept_size(cmd.size)?;
    let name = SafeName::sanitize(cmd.filename.as_deref()).map_err(PresignRejection::from)?;
    let original_filename = cmd.filename.as_deref().and_then(OriginalName::clean);
    let uploads = &settings.uploads;
    let method = choose_method(
        cmd.multipart,
        cmd.method,
        size,
        uploads.multipart_threshold_bytes,
    )?;
    let checksum = accept_checksum(cmd.checksum.as_ref(), profile.require_checksum, method)?;
    // What the store cannot enforce is not offered (the fallbacks of docs/stores.md).
    if let Some(c) = &checksum {
        let multipart = method == UploadMethod::Multipart;
        if let Some(lacks) = state.store_verdict.checksum_gap(c.algorithm, multipart) {
            return Err(AppError::StoreLacks(lacks));
        }
    }
    if method == UploadMethod::Post && !state.store_verdict.has(Capability::PostSizeRange) {
        return Err(AppError::StoreLacks(Capability::PostSizeRange));
    }
    // A commit copies a file over the single-copy limit in parts: not offered where the store
    // was not found to do that (issue 36: RGW refused every part copy; the commit failed 500).
    if size > uploads.max_single_copy_bytes && !state.store_verdict.has(Capability::CopyInParts) {
        return Err(AppError::StoreLacks(Capability::CopyInParts));
    }
    // The token is taken only for a request that passed validation: refused presigns cost the
    // caller nothing, so a client's mistakes cannot lock it out.
    let limited = match state.presign_limiter.lock() {
        Ok(mut l) => l.take(&who.user_id, std::time::Instant::now()),
        Err(poisoned) => poisoned
            .into_inner()
            .take(&who.user_id, std::time::Instant::now()),
    };
    if let Err(retry_after_secs) = limited {
        tracing::warn!("presign rate limit reached");
        return Err(AppError::RateLimited { retry_after_secs });
    }
    // Any failure from here on (quota, S3, database) gives the token back.
    let mut token = TakenToken {
        limiter: &state.presign_limiter,
        user: &who.user_id,
        keep: false,
    };

    let now = records::now();
    let url_secs = match method {
        UploadMethod::Multipart => uploads.multipart_session_secs,
        _ => uploads.presign_expiry_secs,
    };
    let expires_at = crate::domain::duration::after(now, url_secs);
    let commit_deadline = crate::domain::duration::after(now, settings.uploads.commit_window_secs);
    let upload_id = UploadId::generate();
    let key = TmpKey::new(quota_day(now), upload_id.clone(), name);

    let input = PresignInput {
        key: key.as_str(),
        content_type: content_type.as_str(),
        size,
        now,
        expires_at,
        checksum: checksum.as_ref(),
    };
    let (mut url, mut headers, mut fields, mut session) = (None, None, None, None);
    match method {
        UploadMethod::Put => {
            let put = state.store.presign_put(&input).await?;
            url = Some(put.url);
            headers = Some(put.headers.into_iter().collect());
        }
        UploadMethod::Post => {
            let form = state.store.presign_post(&input).await?;
            url = Some(form.url);
            fields = Some(form.fields.into_iter().collect());
        }
        UploadMethod::Multipart => {
            let plan = PartPlan::new(size, uploads.multipart_part_size_bytes)
                .map_err(|_| AppError::Presign(PresignRejection::SizeInvalid))?;
            let s3_upload_id = state
                .store
                .create_multipart(&NewMultipart {
                    key: key.as_str(),
                    content_type: content_type.as_str(),
                    metadata: &[(UPLOAD_ID_METADATA, upload_id.as_str())],
                    checksum: checksum.as_ref().map(|c| c.algorithm),
                    storage_class: None,
                    tagging: None,
                    headers: None,
                })
                .await?;
            session = Some(MultipartSession {
                upload_id: upload_id.clone(),
                s3_upload_id,
                plan,
                state: SessionState::Open,
                created_at: now,
                expires_at,
            });
        }
    }

    let upload = Upload {
        id: upload_id.clone(),
        owner: who.user_id.clone(),
        profile: profile.name.clone(),
        content_type: content_type.to_string(),
        declared_size: i64::try_from(size).map_err(|_| PresignRejection::SizeInvalid)?,
        key: key.as_str().to_owned(),
        method: method.as_str().to_owned(),
        state: UploadState::Issued,
        final_key: None,
        reject_code: None,
        lease_token: None,
        lease_until: None,
        created_at: now,
        expires_at,
        commit_deadline,
        original_filename: original_filename.map(|n| n.as_str().to_owned()),
        checksum: checksum.clone(),
    };
    let created = state
        .catalog
        .create_upload(&upload, session.as_ref(), quota_day(now), settings.quota)
        .await;
    if created.is_err() {
        if let Some(s) = &session {
            // Nothing records this multipart upload: abort it now rather than leave its parts
            // to the bucket's abort rule.
            if let Err(e) = state
                .store
                .abort_multipart(&upload.key, &s.s3_upload_id)
                .await
            {
                tracing::warn!(error = %e, "could not abort an unrecorded multipart upload; the bucket's abort rule will");
            }
        }
    }
    match created {
        Ok(()) => {}
        Err(CatalogError::QuotaExceeded) => {
            return Err(AppError::QuotaExceeded {
                retry_after_secs: seconds_until_next_day(now),
            });
        }
        Err(e) => return Err(e.into()),
    }
    token.keep = true;
    tracing::info!(upload.id = %upload_id, size_bytes = size, method = method.as_str(), "upload presigned");
    Ok(PresignedUpload {
        upload_id,
        key: upload.key,
        method,
        url,
        headers,
        fields,
        expires_at,
        max_size: profile.max_size,
        multipart: session.map(|s| MultipartPlan {
            part_size: s.plan.part_size,
            part_count: s.plan.part_count,
        }),
        checksum,
    })
}

/// A rate-limit token taken for a presign: returned when the presign fails after all.
struct TakenToken<'a> {
    limiter: &'a std::sync::Mutex<crate::domain::rate::RateLimiter>,
    user: &'a str,
    keep: bool,
}

impl Drop for TakenToken<'_> {
    fn drop(&mut self) {
        if !self.keep {
            match self.limiter.lock() {
                Ok(mut l) => l.give_back(self.user),
                Err(poisoned) => poisoned.into_inner().give_back(self.user),
            }
        }
    }
}

/// The declared checksum, checked for shape, for the profile (which may require one) and for
/// the method (a multipart upload's full-object checksum is a CRC).
fn accept_checksum(
    declared: Option<&(String, String)>,
    required: bool,
    method: UploadMethod,
) -> Result<Option<Checksum>, AppError> {
    let Some((algorithm, value)) = declared else {
        return if required {
            Err(AppError::ChecksumRequired(
                "this profile requires a checksum: send checksum {algorithm, value}".into(),
            ))
        } else {
            Ok(None)
        };
    };
    let checksum = Checksum::parse(algorithm, value).map_err(|e| {
        AppError::ChecksumInvalid(match e {
            ChecksumError::UnknownAlgorithm => {
                "algorithm must be SHA256, CRC32C or CRC64NVME".into()
            }
            ChecksumError::BadValue => format!(
                "value must be the base64 of a {}-byte {} digest",
                ChecksumAlgorithm::parse(algorithm).map_or(0, |a| a.digest_len()),
                algorithm
            ),
        })
    })?;
    if method == UploadMethod::Multipart && !checksum.algorithm.full_object_multipart() {
        return Err(AppError::ChecksumAlgorithmUnsupported(format!(
            "this upload is multipart, whose whole-object checksum S3 keeps only as a CRC: declare CRC64NVME or CRC32C, not {}",
            checksum.algorithm
        )));
    }
    Ok(Some(checksum))
}

/// PUT, POST or multipart: what the client asked for, multipart above the threshold when it
/// did not say, and never a single request over S3's 5 GiB limit.
fn choose_method(
    multipart: Option<bool>,
    method: Option<UploadMethod>,
    size: u64,
    threshold: u64,
) -> Result<UploadMethod, AppError> {
    match (multipart, method) {
        (Some(true), Some(_)) => Err(AppError::InvalidRequest(
            "a multipart upload has no method; omit method or multipart".into(),
        )),
        (Some(true), None) => Ok(UploadMethod::Multipart),
        (None, None) if size > threshold => Ok(UploadMethod::Multipart),
        _ if size > MAX_PART_SIZE => Err(AppError::MultipartRequired),
        (_, method) => Ok(method.unwrap_or(UploadMethod::Put)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 100;

    fn code(r: Result<UploadMethod, AppError>) -> String {
        match r {
            Ok(m) => m.as_str().to_owned(),
            Err(e) => e.code().to_owned(),
        }
    }

    #[test]
    fn checksums_are_checked_for_shape_profile_and_method() {
        let sha = Checksum::of(ChecksumAlgorithm::Sha256, b"x");
        let crc = Checksum::of(ChecksumAlgorithm::Crc64Nvme, b"x");
        let pair = |c: &Checksum| (c.algorithm.as_str().to_owned(), c.value.clone());
        let code = |r: Result<Option<Checksum>, AppError>| match r {
            Ok(Some(c)) => c.algorithm.as_str().to_owned(),
            Ok(None) => "none".to_owned(),
            Err(e) => e.code().to_owned(),
        };
        use UploadMethod::{Multipart, Post, Put};
        assert_eq!(code(accept_checksum(None, false, Put)), "none");
        assert_eq!(code(accept_checksum(None, true, Put)), "checksum_required");
        assert_eq!(
            code(accept_checksum(None, true, Multipart)),
            "checksum_required"
        );
        assert_eq!(
            code(accept_checksum(Some(&pair(&sha)), true, Put)),
            "SHA256"
        );
        assert_eq!(
            code(accept_checksum(Some(&pair(&sha)), false, Post)),
            "SHA256"
        );
        assert_eq!(
            code(accept_checksum(Some(&pair(&sha)), false, Multipart)),
            "checksum_algorithm_unsupported"
        );
        assert_eq!(
            code(accept_checksum(Some(&pair(&crc)), false, Multipart)),
            "CRC64NVME"
        );
        let bad = ("SHA256".to_owned(), crc.value.clone());
        assert_eq!(
            code(accept_checksum(Some(&bad), false, Put)),
            "checksum_invalid"
        );
        let unknown = ("MD5".to_owned(), sha.value.clone());
        assert_eq!(
            code(accept_checksum(Some(&unknown), false, Put)),
            "checksum_invalid"
        );
    }

    #[test]
    fn the_method_follows_the_request_then_the_threshold_then_s3s_limit() {
        use UploadMethod::{Multipart, Post, Put};
        assert_eq!(code(choose_method(None, None, T, T)), "PUT");
        assert_eq!(code(choose_method(None, None, T + 1, T)), "MULTIPART");
        assert_eq!(code(choose_method(None, Some(Post), T + 1, T)), "POST");
        assert_eq!(code(choose_method(Some(false), None, T + 1, T)), "PUT");
        assert_eq!(code(choose_method(Some(true), None, 1, T)), "MULTIPART");
        assert_eq!(
            code(choose_method(Some(true), Some(Put), 1, T)),
            "invalid_request"
        );
        let huge = MAX_PART_SIZE + 1;
        assert_eq!(
            code(choose_method(Some(false), None, huge, u64::MAX)),
            "multipart_required"
        );
        assert_eq!(
            code(choose_method(None, Some(Put), huge, T)),
            "multipart_required"
        );
        assert_eq!(code(choose_method(None, None, huge, T)), Multipart.as_str());
    }
}
