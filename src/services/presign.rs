//! Presign: validate the request against its profile, generate the tmp key, sign the URL, and
//! record the upload together with its quota charge. The URL leaves the server only after the
//! record is durable, so a database outage issues no URL.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::auth::Identity;
use crate::catalog::CatalogError;
use crate::domain::ids::UploadId;
use crate::domain::keys::{SafeName, TmpKey};
use crate::domain::profile::{PresignRejection, RawSize};
use crate::domain::quota::{quota_day, seconds_until_next_day};
use crate::domain::records::{self, Upload, UploadMethod, UploadState};
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::PresignInput;

/// A presign request after JSON parsing, before validation.
#[derive(Debug, Clone)]
pub struct PresignCommand {
    pub profile: String,
    pub content_type: Option<String>,
    pub size: RawSize,
    pub filename: Option<String>,
    pub method: UploadMethod,
}

/// What the client needs to upload.
#[derive(Debug, Clone, Serialize)]
pub struct PresignedUpload {
    pub upload_id: UploadId,
    pub key: String,
    pub method: UploadMethod,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fields: Option<BTreeMap<String, String>>,
    pub expires_at: DateTime<Utc>,
    pub max_size: u64,
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

    let now = records::now();
    let expires_at =
        now + Duration::seconds(i64::try_from(settings.uploads.presign_expiry_secs).unwrap_or(900));
    let commit_deadline = now
        + Duration::seconds(i64::try_from(settings.uploads.commit_window_secs).unwrap_or(86_400));
    let upload_id = UploadId::generate();
    let key = TmpKey::new(quota_day(now), upload_id.clone(), name);

    let input = PresignInput {
        key: key.as_str(),
        content_type: content_type.as_str(),
        size,
        max_size: profile.max_size,
        now,
        expires_at,
    };
    let (url, headers, fields) = match cmd.method {
        UploadMethod::Put => {
            let put = state.store.presign_put(&input).await?;
            (put.url, Some(put.headers.into_iter().collect()), None)
        }
        UploadMethod::Post => {
            let form = state.store.presign_post(&input).await?;
            (form.url, None, Some(form.fields.into_iter().collect()))
        }
    };

    let upload = Upload {
        id: upload_id.clone(),
        owner: who.user_id.clone(),
        profile: profile.name.clone(),
        content_type: content_type.to_string(),
        declared_size: i64::try_from(size).map_err(|_| PresignRejection::SizeInvalid)?,
        key: key.as_str().to_owned(),
        method: cmd.method.as_str().to_owned(),
        state: UploadState::Issued,
        final_key: None,
        reject_code: None,
        lease_token: None,
        lease_until: None,
        created_at: now,
        expires_at,
        commit_deadline,
    };
    match state
        .catalog
        .create_upload(&upload, None, quota_day(now), settings.quota)
        .await
    {
        Ok(()) => {}
        Err(CatalogError::QuotaExceeded) => {
            return Err(AppError::QuotaExceeded {
                retry_after_secs: seconds_until_next_day(now),
            });
        }
        Err(e) => return Err(e.into()),
    }
    tracing::info!(upload.id = %upload_id, size_bytes = size, method = cmd.method.as_str(), "upload presigned");
    Ok(PresignedUpload {
        upload_id,
        key: upload.key,
        method: cmd.method,
        url,
        headers,
        fields,
        expires_at,
        max_size: profile.max_size,
    })
}
