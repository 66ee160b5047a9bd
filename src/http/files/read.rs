//! `GET /v1/files/{id}` and `GET /v1/files/{id}/content`: owner or admin only; anyone else
//! gets the same 404 as an unknown id.

use crate::http::extract::ApiPath;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::Json;

use crate::auth::Identity;
use crate::domain::checksum::{Checksum, ChecksumAlgorithm};
use crate::domain::filename::{content_disposition, OriginalName};
use crate::domain::ids::FileId;
use crate::domain::keys::SafeName;
use crate::domain::records::{FileHandle, HandleStatus};
use crate::error::AppError;
use crate::state::AppState;

pub(super) async fn visible_handle(
    state: &AppState,
    who: &Identity,
    id: &str,
) -> Result<FileHandle, AppError> {
    let id = FileId::parse(id).ok_or(AppError::FileNotFound)?;
    state
        .catalog
        .handle_by_id(&id)
        .await?
        .filter(|h| h.created_by == who.user_id || who.admin)
        .ok_or(AppError::FileNotFound)
}

pub(super) async fn handle(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<FileHandle>, AppError> {
    let h = visible_handle(&state, &who, &id).await?;
    refuse_expired(&h)?;
    Ok(Json(h))
}

/// A temporary file past its `expires_at` is gone for the API (410 `file_expired`) from that
/// instant, whether or not the sweep has marked it yet: the bucket may remove its bytes then.
pub(super) fn refuse_expired(h: &FileHandle) -> Result<(), AppError> {
    if h.is_expired(crate::domain::records::now()) {
        return Err(AppError::FileExpired);
    }
    Ok(())
}

/// A short-lived presigned GET of the file, served as an attachment with the stored type so
/// an uploaded document can never run as a page, under the name the user gave it
/// (RFC 6266 `filename*`) with the key's ASCII name as the fallback.
async fn download(
    state: &AppState,
    who: &Identity,
    id: &str,
) -> Result<(String, Option<Checksum>), AppError> {
    let h = visible_handle(state, who, id).await?;
    if h.status == HandleStatus::Deleted {
        return Err(AppError::FileDeleted);
    }
    refuse_expired(&h)?;
    let original = h.original_filename.clone().map(OriginalName::from_trusted);
    let ascii = download_name(&h.key, original.as_ref());
    let disposition = content_disposition(ascii.as_str(), original.as_ref());
    let url = state
        .store
        .presign_get(
            &h.key,
            &h.content_type,
            &disposition,
            state.settings.uploads.download_expiry_secs,
        )
        .await?;
    Ok((url, h.checksum))
}

/// The file's checksum on a download answer, so a client can check what it fetched: under
/// S3's own header name (`x-amz-checksum-sha256: <base64>`, …) and, for SHA-256, as an RFC 9530
/// `Repr-Digest`.
fn checksum_headers(headers: &mut HeaderMap, checksum: Option<&Checksum>) -> Result<(), AppError> {
    let Some(c) = checksum else { return Ok(()) };
    let value = |v: &str| {
        HeaderValue::from_str(v).map_err(|e| AppError::Internal(format!("checksum header: {e}")))
    };
    headers.insert(c.algorithm.header(), value(&c.value)?);
    if c.algorithm == ChecksumAlgorithm::Sha256 {
        headers.insert("repr-digest", value(&format!("sha-256=:{}:", c.value))?);
    }
    Ok(())
}

/// The ASCII fallback name: the slug of the original name, else of the key's last segment.
fn download_name(key: &str, original: Option<&OriginalName>) -> SafeName {
    let raw = match original {
        Some(name) => name.as_str(),
        None => key.rsplit('/').next().unwrap_or(key),
    };
    SafeName::sanitize(Some(raw)).unwrap_or_else(|_| SafeName::unnamed())
}

/// 302 to the presigned GET.
pub(super) async fn content(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(id): ApiPath<String>,
) -> Result<(StatusCode, HeaderMap), AppError> {
    let (url, checksum) = download(&state, &who, &id).await?;
    let mut headers = HeaderMap::new();
    checksum_headers(&mut headers, checksum.as_ref())?;
    headers.insert(
        header::LOCATION,
        HeaderValue::from_str(&url)
            .map_err(|e| AppError::Internal(format!("download URL: {e}")))?,
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok((StatusCode::FOUND, headers))
}

/// The presigned GET as JSON, for clients that cannot read a redirect's Location (a browser's
/// `fetch` follows it blindly) and want the URL for an `<img>` or a player.
pub(super) async fn download_url(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(id): ApiPath<String>,
) -> Result<(HeaderMap, Json<serde_json::Value>), AppError> {
    let (url, checksum) = download(&state, &who, &id).await?;
    let expires_in = state.settings.uploads.download_expiry_secs;
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    checksum_headers(&mut headers, checksum.as_ref())?;
    let mut body = serde_json::json!({ "url": url, "expires_in": expires_in });
    if let Some(c) = checksum {
        body["checksum"] = serde_json::json!(c);
    }
    Ok((headers, Json(body)))
}
