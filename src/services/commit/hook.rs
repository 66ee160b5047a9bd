//! Asking the profile's validation hook, between the validation and the copy.
//!
//! The hook is told the facts of the bytes this commit checked — above all their ETag — and
//! the copy that follows is guarded on that same ETag (`x-amz-copy-source-if-match`, or each
//! part copy's guard), so what the hook allowed is exactly what gets copied: bytes swapped
//! after its answer make the copy fail (`object_changed`) and nothing is committed. The hook
//! runs only before a copy: a retry that finds an earlier attempt's copy at the final key rolls
//! forward without asking again, so a second answer can never change a copied file.

use std::time::Instant;

use serde_json::json;

use crate::domain::records::Upload;
use crate::domain::validation_hook::{
    parse_answer, AnswerError, OnError, ValidationHook, Verdict, DOWNLOAD_URL_SECS,
    MAX_ANSWER_BYTES,
};
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::ObjectHead;

use super::{Failure, Lease};

/// Why the hook gave no verdict.
#[derive(Debug)]
enum HookError {
    Timeout,
    Unreachable(String),
    Status(u16),
    Malformed(AnswerError),
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookError::Timeout => f.write_str("no answer within the timeout"),
            HookError::Unreachable(why) => write!(f, "unreachable: {why}"),
            HookError::Status(code) => write!(f, "answered HTTP {code}"),
            HookError::Malformed(why) => write!(f, "malformed answer: {why:?}"),
        }
    }
}

impl HookError {
    fn is_ambiguous(&self) -> bool {
        matches!(self, HookError::Malformed(why) if why.is_ambiguous())
    }

    fn label(&self) -> &'static str {
        match self {
            HookError::Timeout => "timeout",
            HookError::Unreachable(_) => "unreachable",
            HookError::Status(_) => "status",
            HookError::Malformed(_) => "malformed",
        }
    }
}

/// `Ok(())`: go on with the copy (the hook allowed, there is no hook, or it failed open).
/// A refusal rejects the upload (`rejected_by_hook`, through the ordinary reject path); no
/// answer with `on_error = "reject"` hands the upload back untouched (503
/// `validation_hook_unavailable`), so a retry asks again.
///
/// `head`: the facts of the bytes the validation read (the copy is guarded on its ETag).
/// `sniffed_type`: the type the magic bytes showed (`None` when the type has no known
/// signature).
pub(super) async fn ask(
    state: &AppState,
    upload: &Upload,
    lease: &Lease,
    head: &ObjectHead,
    sniffed_type: Option<&str>,
) -> Result<(), Failure> {
    let Some(hook) = state
        .settings
        .profile(&upload.profile)
        .and_then(|p| p.validation_hook.as_ref())
    else {
        return Ok(());
    };
    // The hook reads the bytes through this URL (a bearer credential: never logged), pinned
    // to the version the validation read: bytes written to the key later — even bytes with
    // the same ETag put back before the copy — are not what it scans.
    let download_url = state
        .store
        .presign_get_version(&upload.key, head.version_id.as_deref(), DOWNLOAD_URL_SECS)
        .await
        .map_err(|e| Failure::Release(e.into()))?;
    let body = json!({
        "type": "upload.validate",
        "upload_id": upload.id.as_str(),
        "owner": upload.owner,
        "profile": upload.profile,
        "content_type": upload.content_type,
        "stored_content_type": head.content_type,
        "sniffed_content_type": sniffed_type,
        "size": head.size,
        "etag": head.etag,
        "checksum": upload.checksum,
        "original_filename": upload.original_filename,
        "key": upload.key,
        "final_key": lease.final_key.as_str(),
        "download_url": download_url,
        "download_url_expires_in_secs": DOWNLOAD_URL_SECS,
    });
    let started = Instant::now();
    let answer = call(&state.http, hook, &body).await;
    let label = match &answer {
        Ok(Verdict::Allow) => "allow",
        Ok(Verdict::Refuse(_)) => "refuse",
        Err(e) => e.label(),
    };
    let elapsed = started.elapsed();
    state
        .metrics
        .validation_hook(&upload.profile, label, elapsed);
    let duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    match answer {
        Ok(Verdict::Allow) => {
            tracing::info!(duration_ms, "the validation hook allowed the upload");
            Ok(())
        }
        Ok(Verdict::Refuse(reason)) => {
            tracing::info!(duration_ms, reason = %reason, "the validation hook refused the upload");
            Err(Failure::Reject(
                AppError::RejectedByHook(reason),
                Some(Box::new(head.clone())),
            ))
        }
        Err(e) => match hook.on_error {
            OnError::Reject => {
                tracing::warn!(duration_ms, error = %e, "the validation hook gave no answer; failing closed");
                Err(Failure::Release(AppError::ValidationHookUnavailable))
            }
            // An answer another parser could read as a yes (a repeated `allow`) may be a
            // refusal with a second `allow` smuggled in: failing open would let that through.
            OnError::Allow if e.is_ambiguous() => {
                tracing::warn!(duration_ms, error = %e, "the validation hook's answer is ambiguous; failing closed although the profile fails open");
                Err(Failure::Release(AppError::ValidationHookUnavailable))
            }
            OnError::Allow => {
                tracing::warn!(duration_ms, error = %e, "the validation hook gave no answer; failing open");
                state.metrics.validation_hook_failed_open(&upload.profile);
                Ok(())
            }
        },
    }
}

/// POSTs the facts and reads the verdict, all within the hook's timeout, through the process's
/// one HTTP client, which follows no redirect: a hook answers where it is configured, and a
/// 3xx counts as no answer.
async fn call(
    http: &reqwest::Client,
    hook: &ValidationHook,
    body: &serde_json::Value,
) -> Result<Verdict, HookError> {
    let bytes = serde_json::to_vec(body).map_err(|e| HookError::Unreachable(e.to_string()))?;
    let mut req = http
        .post(&hook.url)
        .timeout(hook.timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json");
    if let Some(secret) = &hook.secret {
        let id = format!("msg_{}", uuid::Uuid::new_v4().simple());
        let timestamp = chrono::Utc::now().timestamp();
        let signature = secret.signature(&id, timestamp, &bytes);
        req = req
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature);
    }
    let mut resp = req.body(bytes).send().await.map_err(transport)?;
    let status = resp.status();
    if !status.is_success() {
        return Err(HookError::Status(status.as_u16()));
    }
    let mut answer = Vec::new();
    // The hook answered 2xx: a body that breaks off is an unreadable answer, not no answer.
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|_| HookError::Malformed(AnswerError::Cut))?
    {
        answer.extend_from_slice(&chunk);
        if answer.len() > MAX_ANSWER_BYTES {
            return Err(HookError::Malformed(AnswerError::TooLarge));
        }
    }
    parse_answer(&answer).map_err(HookError::Malformed)
}

fn transport(e: reqwest::Error) -> HookError {
    if e.is_timeout() {
        HookError::Timeout
    } else {
        // Without the URL: it may carry a credential in its query.
        HookError::Unreachable(e.without_url().to_string())
    }
}
