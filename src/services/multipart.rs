//! Multipart uploads after presign: part URLs, the parts S3 holds (for resuming), completion
//! checked against S3, and abort. Every step first loads the upload (owner or admin only) and
//! its session, and refuses a session that is aborted, completed or past its own expiry — which
//! comes before the bucket's abort-incomplete rule, so the service never offers to resume an
//! upload S3 may already have removed.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::auth::Identity;
use crate::domain::checksum::Checksum;
use crate::domain::ids::UploadId;
use crate::domain::multipart::{
    check_completion, ClientPart, CompletionError, MultipartSession, PartNumberError, PartRecord,
    SessionState, MAX_PARTS_PER_REQUEST,
};
use crate::domain::records::{self, Upload};
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::{PartInput, StoreError};

/// Largest page of parts one listing returns.
pub const MAX_LIST_PAGE: u32 = 1000;

#[derive(Debug, Clone, Serialize)]
pub struct PartUrl {
    pub part_number: u32,
    pub url: String,
    pub headers: std::collections::BTreeMap<String, String>,
    pub size: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PartUrls {
    pub upload_id: UploadId,
    pub parts: Vec<PartUrl>,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ListedPart {
    pub part_number: u32,
    pub etag: String,
    pub size: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PartListing {
    pub upload_id: UploadId,
    pub state: &'static str,
    pub part_size: u64,
    pub part_count: u32,
    pub parts: Vec<ListedPart>,
    /// Pass as `after` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u32>,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Completed {
    pub upload_id: UploadId,
    pub key: String,
    pub size: u64,
    pub parts: u32,
}

fn listed(p: &PartRecord) -> ListedPart {
    ListedPart {
        part_number: p.part_number,
        etag: p.etag.clone(),
        size: p.size,
    }
}

/// The upload (owner or admin only; anyone else gets the same 404 as an unknown id) and its
/// multipart session.
async fn load(
    state: &AppState,
    who: &Identity,
    id: &str,
) -> Result<(Upload, MultipartSession), AppError> {
    let id = UploadId::parse(id).ok_or(AppError::UploadNotFound)?;
    let upload = state
        .catalog
        .upload_by_id(&id)
        .await?
        .filter(|u| u.owner == who.user_id || who.admin)
        .ok_or(AppError::UploadNotFound)?;
    let session = state
        .catalog
        .multipart_session(&id)
        .await?
        .ok_or(AppError::UploadNotMultipart)?;
    Ok((upload, session))
}

/// An open session still within its expiry.
fn require_open(session: &MultipartSession, now: DateTime<Utc>) -> Result<(), AppError> {
    match session.state {
        SessionState::Aborted => Err(AppError::UploadAborted),
        SessionState::Completed => Err(AppError::MultipartCompleted),
        SessionState::Open if now > session.expires_at => Err(AppError::MultipartSessionExpired),
        SessionState::Open => Ok(()),
    }
}

/// Commit of a multipart upload needs its session completed.
pub async fn require_completed(
    state: &AppState,
    upload: &Upload,
    now: DateTime<Utc>,
) -> Result<(), AppError> {
    let session = state
        .catalog
        .multipart_session(&upload.id)
        .await?
        .ok_or_else(|| AppError::Internal("multipart upload without a session".into()))?;
    match session.state {
        SessionState::Completed => Ok(()),
        SessionState::Aborted => Err(AppError::UploadAborted),
        SessionState::Open if now > session.expires_at => Err(AppError::MultipartSessionExpired),
        SessionState::Open => Err(AppError::MultipartIncomplete),
    }
}

#[tracing::instrument(skip_all, fields(user.id = %who.user_id, upload.id = %id, parts = numbers.len()))]
pub async fn part_urls(
    state: &AppState,
    who: &Identity,
    id: &str,
    numbers: &[i64],
    checksums: Option<&[String]>,
) -> Result<PartUrls, AppError> {
    let (upload, session) = load(state, who, id).await?;
    let now = records::now();
    require_open(&session, now)?;
    let checksums = part_checksums(upload.checksum.as_ref(), numbers.len(), checksums)?;
    let numbers = session.plan.accept_part_numbers(numbers).map_err(|e| {
        AppError::PartNumberInvalid(match e {
            PartNumberError::Count => {
                format!("part_numbers must name 1 to {MAX_PARTS_PER_REQUEST} parts")
            }
            PartNumberError::OutOfRange(n) => format!(
                "part number {n} is not a part of this upload (1..={})",
                session.plan.part_count
            ),
            PartNumberError::Duplicate(n) => format!("part number {n} is named twice"),
        })
    })?;
    let expires_at =
        crate::domain::duration::after(now, state.settings.uploads.presign_expiry_secs)
            .min(session.expires_at);
    let mut parts = Vec::with_capacity(numbers.len());
    for (i, n) in numbers.into_iter().enumerate() {
        let size = session.plan.size_of(n).unwrap_or(0);
        let put = state
            .store
            .presign_part(&PartInput {
                key: &upload.key,
                multipart_id: &session.s3_upload_id,
                part_number: n,
                size,
                now,
                expires_at,
                checksum: checksums.get(i),
            })
            .await?;
        parts.push(PartUrl {
            part_number: n,
            url: put.url,
            headers: put.headers.into_iter().collect(),
            size,
        });
    }
    Ok(PartUrls {
        upload_id: upload.id,
        parts,
        expires_at,
    })
}

/// The part checksums a part-URL request carries: one per part number, in the algorithm of the
/// upload's declared full-object checksum (S3 refuses parts without one on such an upload),
/// and none on an upload that declared none.
fn part_checksums(
    declared: Option<&Checksum>,
    count: usize,
    sent: Option<&[String]>,
) -> Result<Vec<Checksum>, AppError> {
    match (declared, sent) {
        (None, None) => Ok(Vec::new()),
        (None, Some(_)) => Err(AppError::ChecksumAlgorithmUnsupported(
            "this upload declared no checksum at presign: its parts take none".into(),
        )),
        (Some(d), None) => Err(AppError::ChecksumRequired(format!(
            "this upload declared a {} checksum: send checksums, one {} of each part, in the order of part_numbers",
            d.algorithm, d.algorithm
        ))),
        (Some(d), Some(values)) => {
            if values.len() != count {
                return Err(AppError::ChecksumInvalid(format!(
                    "checksums has {} values for {count} part numbers",
                    values.len()
                )));
            }
            values
                .iter()
                .map(|v| {
                    Checksum::parse(d.algorithm.as_str(), v).map_err(|_| {
                        AppError::ChecksumInvalid(format!(
                            "{v:?} is not the base64 of a {}-byte {}",
                            d.algorithm.digest_len(),
                            d.algorithm
                        ))
                    })
                })
                .collect()
        }
    }
}

#[tracing::instrument(skip_all, fields(user.id = %who.user_id, upload.id = %id))]
pub async fn list(
    state: &AppState,
    who: &Identity,
    id: &str,
    after: u32,
    limit: u32,
) -> Result<PartListing, AppError> {
    let (upload, session) = load(state, who, id).await?;
    let now = records::now();
    let limit = limit.clamp(1, MAX_LIST_PAGE);
    let listing = |parts: Vec<ListedPart>, next_after| PartListing {
        upload_id: upload.id.clone(),
        state: session.state.as_str(),
        part_size: session.plan.part_size,
        part_count: session.plan.part_count,
        parts,
        next_after,
        expires_at: session.expires_at,
    };
    if session.state == SessionState::Completed {
        // S3 forgets the parts once completed; the catalog recorded them.
        let recorded = state.catalog.parts(&upload.id).await?;
        let page: Vec<ListedPart> = recorded
            .iter()
            .filter(|p| p.part_number > after)
            .take(limit as usize)
            .map(listed)
            .collect();
        let next = page
            .last()
            .filter(|last| recorded.iter().any(|p| p.part_number > last.part_number))
            .map(|last| last.part_number);
        return Ok(listing(page, next));
    }
    require_open(&session, now)?;
    let page = match state
        .store
        .list_parts(&upload.key, &session.s3_upload_id, after, limit)
        .await
    {
        Ok(page) => page,
        Err(StoreError::NotFound) => return Err(AppError::MultipartSessionExpired),
        Err(e) => return Err(e.into()),
    };
    state
        .catalog
        .record_parts(&upload.id, &page.parts, now)
        .await?;
    Ok(listing(page.parts.iter().map(listed).collect(), page.next))
}

/// Every part S3 holds, following ListParts pages.
async fn all_parts(
    state: &AppState,
    key: &str,
    session: &MultipartSession,
) -> Result<Vec<PartRecord>, AppError> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page = match state
            .store
            .list_parts(key, &session.s3_upload_id, after, MAX_LIST_PAGE)
            .await
        {
            Ok(page) => page,
            Err(StoreError::NotFound) => return Err(AppError::MultipartSessionExpired),
            Err(e) => return Err(e.into()),
        };
        out.extend(page.parts);
        match page.next {
            Some(next) if next > after => after = next,
            _ => return Ok(out),
        }
    }
}

#[tracing::instrument(skip_all, fields(user.id = %who.user_id, upload.id = %id, parts = client.len()))]
pub async fn complete(
    state: &AppState,
    who: &Identity,
    id: &str,
    client: &[ClientPart],
) -> Result<Completed, AppError> {
    let (upload, session) = load(state, who, id).await?;
    let done = Completed {
        upload_id: upload.id.clone(),
        key: upload.key.clone(),
        size: session.plan.total,
        parts: session.plan.part_count,
    };
    if session.state == SessionState::Completed {
        // A retry after a lost response: the same answer.
        return Ok(done);
    }
    let now = records::now();
    require_open(&session, now)?;
    // One completion reaches S3 at a time: two CompleteMultipartUpload calls of one upload
    // can leave a broken object behind (seen on LocalStack: 0 bytes). A concurrent call — a
    // client's retry after a timeout, the normal path — waits for the holder's answer.
    let token = uuid::Uuid::new_v4().simple().to_string();
    let Some(claimed) = claim(state, &upload, &token).await? else {
        return Ok(done);
    };
    // The claimed completion runs in a task of its own: a client that gives up (a timeout, a
    // closed app) does not cancel it half-way, so S3's answer is always recorded. The claim is
    // renewed while it runs: one CompleteMultipartUpload of thousands of parts can take minutes.
    let lease_secs = state.settings.uploads.commit_lease_secs;
    let (state, client) = (state.clone(), client.to_vec());
    let task = tokio::spawn(async move {
        let work = complete_claimed(&state, &upload, &session, &client, done, now);
        let result = crate::services::heartbeat::holding(work, lease_secs, "completion", |secs| {
            state.catalog.renew_session_claim(&claimed, &token, secs)
        })
        .await;
        if result.is_err() {
            if let Err(e) = state.catalog.release_session_claim(&claimed, &token).await {
                tracing::warn!(error = %e, "could not release the completion claim; it will expire");
            }
        }
        result
    });
    task.await
        .unwrap_or_else(|e| Err(AppError::Internal(format!("completion task: {e}"))))
}

/// Claims the session for this call, waiting (at most until the holder's claim would run out,
/// and never past the request timeout) while another call holds it. `Ok(None)`: the holder
/// completed it meanwhile.
async fn claim(
    state: &AppState,
    upload: &Upload,
    token: &str,
) -> Result<Option<UploadId>, AppError> {
    let settings = &state.settings;
    let lease_secs = settings.uploads.commit_lease_secs;
    let wait = (lease_secs + 5).min(settings.http.request_timeout_secs.saturating_sub(2).max(1));
    let give_up_at = std::time::Instant::now() + std::time::Duration::from_secs(wait);
    let lease = i64::try_from(lease_secs).unwrap_or(30);
    loop {
        if state
            .catalog
            .claim_session(&upload.id, token, lease)
            .await?
        {
            return Ok(Some(upload.id.clone()));
        }
        match state.catalog.multipart_session(&upload.id).await? {
            Some(s) if s.state == SessionState::Completed => return Ok(None),
            Some(s) if s.state == SessionState::Aborted => return Err(AppError::UploadAborted),
            _ => {}
        }
        if std::time::Instant::now() >= give_up_at {
            return Err(AppError::CompletionInProgress);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Completion under the claim: the parts S3 holds checked against the plan and the client's
/// list, CompleteMultipartUpload, the completed object's size checked, then the session
/// recorded completed.
async fn complete_claimed(
    state: &AppState,
    upload: &Upload,
    session: &MultipartSession,
    client: &[ClientPart],
    done: Completed,
    now: DateTime<Utc>,
) -> Result<Completed, AppError> {
    let max_size = state
        .settings
        .profile(&upload.profile)
        .map_or(session.plan.total, |p| p.max_size);
    let parts = match all_parts(state, &upload.key, session).await {
        Ok(held) => {
            let parts = check_completion(&session.plan, max_size, client, &held)
                .map_err(completion_error)?;
            let list: Vec<(u32, String)> = parts
                .iter()
                .map(|p| (p.part_number, p.etag.clone()))
                .collect();
            crate::pause::point("multipart_before_complete").await;
            match state
                .store
                .complete_multipart(
                    &upload.key,
                    &session.s3_upload_id,
                    &list,
                    upload.checksum.as_ref(),
                    false,
                )
                .await
            {
                Ok(()) => parts,
                Err(StoreError::InvalidPart) => return Err(AppError::PartChanged),
                // The parts do not add up to the declared full-object checksum. The session
                // stays open: parts sent again with the right bytes can still complete it.
                Err(StoreError::ChecksumMismatch(detail)) => {
                    tracing::warn!(%detail, "completion refused: the parts do not have the declared checksum");
                    return Err(AppError::ChecksumMismatch);
                }
                Err(StoreError::NotFound) => {
                    return finish_lost_completion(state, upload, session, client, done, now).await
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(AppError::MultipartSessionExpired) => {
            return finish_lost_completion(state, upload, session, client, done, now).await
        }
        Err(e) => return Err(e),
    };
    // The session says completed only for an object that is there with the planned size.
    let landed = state.store.head(&upload.key).await?;
    let size = landed.as_ref().map(|h| h.size);
    if size.and_then(|s| u64::try_from(s).ok()) != Some(session.plan.total) {
        return Err(AppError::Internal(format!(
            "completed multipart object {} has size {size:?}, planned {}",
            upload.key, session.plan.total
        )));
    }
    if !state
        .catalog
        .finish_session(&upload.id, SessionState::Completed, &parts, now)
        .await?
    {
        let current = state.catalog.multipart_session(&upload.id).await?;
        if current.is_some_and(|s| s.state == SessionState::Aborted) {
            return Err(AppError::UploadAborted);
        }
    }
    tracing::info!(
        size_bytes = session.plan.total,
        "multipart upload completed"
    );
    Ok(done)
}

fn completion_error(e: CompletionError) -> AppError {
    match e {
        CompletionError::Invalid(m) => AppError::PartsInvalid(m),
        CompletionError::NotUploaded(n) => AppError::PartNotUploaded(n),
        CompletionError::EtagMismatch(n) => AppError::PartEtagMismatch(n),
        CompletionError::PartSize {
            part,
            expected,
            actual,
        } => AppError::PartSizeMismatch {
            part,
            expected,
            actual,
        },
        CompletionError::TooLarge { total, max } => AppError::ObjectTooLarge { total, max },
    }
}

/// S3 no longer knows the multipart upload. Completed by a concurrent call, or by an earlier
/// attempt whose answer was lost (F18), or aborted: the catalog says, then the object — there
/// with the planned size means the completion happened, and it is recorded now.
async fn finish_lost_completion(
    state: &AppState,
    upload: &Upload,
    session: &MultipartSession,
    client: &[ClientPart],
    done: Completed,
    now: DateTime<Utc>,
) -> Result<Completed, AppError> {
    match state.catalog.multipart_session(&upload.id).await? {
        Some(s) if s.state == SessionState::Completed => return Ok(done),
        Some(s) if s.state == SessionState::Aborted => return Err(AppError::UploadAborted),
        _ => {}
    }
    let landed = state.store.head(&upload.key).await?;
    if !landed.is_some_and(|h| u64::try_from(h.size).ok() == Some(session.plan.total)) {
        return Err(AppError::MultipartSessionExpired);
    }
    let parts: Vec<PartRecord> = client
        .iter()
        .filter_map(|p| {
            let n = u32::try_from(p.part_number).ok()?;
            Some(PartRecord {
                part_number: n,
                etag: p.etag.clone(),
                size: session.plan.size_of(n)?,
                checksum: None,
            })
        })
        .collect();
    // The list must still name every part once, in order.
    let parts =
        check_completion(&session.plan, u64::MAX, client, &parts).map_err(completion_error)?;
    state
        .catalog
        .finish_session(&upload.id, SessionState::Completed, &parts, now)
        .await?;
    tracing::info!("multipart upload found completed by an earlier attempt");
    Ok(done)
}

#[tracing::instrument(skip_all, fields(user.id = %who.user_id, upload.id = %id))]
pub async fn abort(state: &AppState, who: &Identity, id: &str) -> Result<(), AppError> {
    let (upload, session) = load(state, who, id).await?;
    match session.state {
        SessionState::Aborted => return Ok(()),
        SessionState::Completed => return Err(AppError::MultipartCompleted),
        SessionState::Open => {}
    }
    // Never beside a completion in flight: the abort takes the same claim.
    let token = uuid::Uuid::new_v4().simple().to_string();
    let lease = i64::try_from(state.settings.uploads.commit_lease_secs).unwrap_or(30);
    if !state
        .catalog
        .claim_session(&upload.id, &token, lease)
        .await?
    {
        return match state.catalog.multipart_session(&upload.id).await? {
            Some(s) if s.state == SessionState::Aborted => Ok(()),
            Some(s) if s.state == SessionState::Completed => Err(AppError::MultipartCompleted),
            _ => Err(AppError::CompletionInProgress),
        };
    }
    // S3 first: if it fails, the catalog still says open and a retried DELETE aborts again.
    if let Err(e) = state
        .store
        .abort_multipart(&upload.key, &session.s3_upload_id)
        .await
    {
        if let Err(e) = state
            .catalog
            .release_session_claim(&upload.id, &token)
            .await
        {
            tracing::warn!(error = %e, "could not release the abort's claim; it will expire");
        }
        return Err(e.into());
    }
    // S3 answers an abort of an upload it no longer knows as done — also when a completion
    // whose answer never reached its caller finished it. A completed object is not aborted.
    let landed = state.store.head(&upload.key).await;
    if let Ok(Some(h)) = &landed {
        if u64::try_from(h.size).ok() == Some(session.plan.total) {
            state
                .catalog
                .finish_session(&upload.id, SessionState::Completed, &[], records::now())
                .await?;
            tracing::warn!("abort found the multipart upload completed; recorded it completed");
            return Err(AppError::MultipartCompleted);
        }
    }
    let now = records::now();
    if !state
        .catalog
        .finish_session(&upload.id, SessionState::Aborted, &[], now)
        .await?
    {
        let current = state.catalog.multipart_session(&upload.id).await?;
        if current.is_some_and(|s| s.state == SessionState::Completed) {
            return Err(AppError::MultipartCompleted);
        }
    }
    tracing::info!("multipart upload aborted");
    Ok(())
}
