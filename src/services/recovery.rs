//! Commits whose caller went away. A commit records its intent (`promoting`, under a lease)
//! before it copies; if the process dies or the database fails after that and the client never
//! retries, the upload stays `promoting`, and the sweeper rightly never touches a promoting
//! upload's objects. Once the lease has been expired for a further lease period, this run does
//! what the client's retry would have done, as the upload's owner, through the same commit code:
//! it rolls forward (recognises its own final object, or copies from tmp, records the handle,
//! deletes tmp) or, when neither object is there, releases the upload back to `issued`, where
//! the usual expiry applies. Part of every sweep.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::auth::Identity;
use crate::catalog::{Catalog, CatalogError};
use crate::config::Settings;
use crate::domain::jobs::JobItem;
use crate::domain::records::UploadState;
use crate::services::commit::{self, CommitCommand};
use crate::state::AppState;
use crate::storage::ObjectStore;

/// Stale commits looked at per run; the rest wait for the next run.
const BATCH: i64 = 500;

#[derive(Debug, Default, Clone, Serialize)]
pub struct RecoverySummary {
    /// Uploads found `promoting` with a long-expired lease.
    pub stale_commits: u64,
    /// Finished: the handle is recorded.
    pub commits_finished: u64,
    /// Released back to `issued` (nothing had been uploaded or copied).
    pub commits_released: u64,
    /// Still stuck (an error; retried next run).
    pub commits_failed: u64,
}

pub async fn recover_stale_commits(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<(RecoverySummary, Vec<JobItem>), CatalogError> {
    let stale = catalog
        .stale_promoting(
            crate::domain::duration::before(now, settings.uploads.commit_lease_secs),
            BATCH,
        )
        .await?;
    let mut summary = RecoverySummary {
        stale_commits: stale.len() as u64,
        ..RecoverySummary::default()
    };
    let mut items = Vec::new();
    if stale.is_empty() {
        return Ok((summary, items));
    }
    // Nothing probed here: every capability-dependent step takes its fallback.
    let state = AppState::for_tool(settings.clone(), catalog.clone(), store.clone());
    for upload in stale {
        let item = |action: &str, reason: String| JobItem {
            action: action.into(),
            key: upload.key.clone(),
            version_id: None,
            bytes: upload.declared_size,
            reason,
        };
        if dry_run {
            items.push(item("would_recover_commit", "lease expired".into()));
            continue;
        }
        let owner = Identity {
            user_id: upload.owner.clone(),
            admin: false,
        };
        let cmd = CommitCommand {
            key: upload.key.clone(),
            final_key: None,
        };
        match commit::commit(&state, &owner, cmd).await {
            Ok(outcome) => {
                summary.commits_finished += 1;
                tracing::info!(upload.id = %upload.id, "recovered a commit whose caller went away");
                items.push(item("recovered_commit", outcome.handle().id.to_string()));
            }
            Err(e) => {
                let now_state = catalog.upload_by_id(&upload.id).await?.map(|u| u.state);
                if now_state == Some(UploadState::Issued) {
                    summary.commits_released += 1;
                    items.push(item("released_commit", e.code().to_owned()));
                } else {
                    summary.commits_failed += 1;
                    tracing::warn!(upload.id = %upload.id, error.code = e.code(), "could not recover a stale commit; retried next run");
                    items.push(item("recovery_failed", e.code().to_owned()));
                }
            }
        }
    }
    Ok((summary, items))
}
