//! Deleting the tmp objects of settled uploads once their URLs can no longer be used.
//!
//! A commit (or a rejection) leaves the tmp object in place: while it exists, the presigned
//! PUT URL's signed `If-None-Match: *` makes S3 refuse a second PUT, so a URL stores bytes
//! once. After the URL has expired — plus [`IN_FLIGHT_MARGIN`], for a PUT or POST that started
//! before the expiry and is still sending — every version of the key is deleted, 1,000 per
//! `DeleteObjects` call. A PUT or multipart upload has exactly one version, named in the record;
//! a POST form may have been posted several times (S3 has no conditional POST), so its versions
//! are listed first — and so are a PUT's where `conditional_put` is an accepted gap (RGW 16.2
//! on a versioned bucket ignores `If-None-Match: *`: each PUT of the URL adds a version).
//! Runs inside the sweep job, under its lease.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::catalog::{Catalog, CatalogError, SettledTmp};
use crate::domain::ids::UploadId;
use crate::domain::jobs::JobItem;
use crate::domain::records::UploadMethod;
use crate::storage::{every_version_of, DeleteFailure, ObjectStore, StoreError, DELETE_BATCH};

/// How long after a URL's expiry its tmp object is kept: S3 checks the expiry when a request
/// starts, so an upload begun just before may still be sending. A PUT that is still sending
/// after this finds no object and stores one more copy of at most the declared size, which the
/// sweep of old partitions (and the bucket's tmp/ rule) removes.
pub const IN_FLIGHT_MARGIN: Duration = Duration::hours(1);

/// Uploads read from the catalog per round.
const ROUND: i64 = 1_000;

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct TmpCleanupSummary {
    /// Settled uploads whose tmp key now has no version left (in a dry run: would have none).
    pub uploads_cleared: u64,
    /// Versions deleted (or, in a dry run, that would be).
    pub versions_deleted: u64,
    /// Versions S3 refused to delete; their uploads are tried again next run.
    pub versions_failed: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum TmpCleanupError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Clears every settled upload whose URL expired more than [`IN_FLIGHT_MARGIN`] before `now`
/// (the database's clock). Returns the totals and one item per refused version. With
/// `puts_repeat` (the operator accepted the gap `conditional_put`), a PUT URL may have stored
/// several versions: they are listed as a POST form's are.
pub async fn clear_settled_tmp(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    now: DateTime<Utc>,
    dry_run: bool,
    puts_repeat: bool,
) -> Result<(TmpCleanupSummary, Vec<JobItem>), TmpCleanupError> {
    let mut summary = TmpCleanupSummary::default();
    let mut items = Vec::new();
    let expired_before = now - IN_FLIGHT_MARGIN;
    loop {
        let settled = catalog.settled_tmp(expired_before, ROUND).await?;
        if settled.is_empty() {
            break;
        }
        let round = clear_round(store.as_ref(), &settled, dry_run, puts_repeat).await?;
        summary.versions_deleted += round.deleted;
        summary.versions_failed += u64::try_from(round.failed.len()).unwrap_or(u64::MAX);
        summary.uploads_cleared += u64::try_from(round.cleared.len()).unwrap_or(u64::MAX);
        items.extend(round.failed);
        if dry_run {
            // Nothing is marked in a dry run, so the next read would see the same uploads.
            break;
        }
        catalog.mark_tmp_cleared(&round.cleared, now).await?;
        if round.cleared.is_empty() {
            // Every upload of this round failed: leave them to the next run rather than spin.
            break;
        }
    }
    if summary.uploads_cleared > 0 || summary.versions_failed > 0 {
        tracing::info!(
            uploads = summary.uploads_cleared,
            versions = summary.versions_deleted,
            failed = summary.versions_failed,
            dry_run,
            "cleared the tmp objects of settled uploads"
        );
    }
    Ok((summary, items))
}

struct Round {
    cleared: Vec<UploadId>,
    deleted: u64,
    failed: Vec<JobItem>,
}

async fn clear_round(
    store: &dyn ObjectStore,
    settled: &[SettledTmp],
    dry_run: bool,
    puts_repeat: bool,
) -> Result<Round, TmpCleanupError> {
    let mut round = Round {
        cleared: Vec::new(),
        deleted: 0,
        failed: Vec::new(),
    };
    // A failing S3 call leaves its uploads for the next run; it never stops the sweep.
    let mut refused_keys = std::collections::BTreeSet::new();
    let mut doomed: Vec<(String, Option<String>)> = Vec::new();
    for u in settled {
        match (&u.tmp_version_id, u.method.as_str()) {
            (Some(version), m) if m != UploadMethod::Post.as_str() && !puts_repeat => {
                doomed.push((u.key.clone(), Some(version.clone())));
            }
            _ => match every_version_of(store, &u.key).await {
                Ok(versions) => doomed.extend(versions),
                Err(e) => {
                    refused_keys.insert(u.key.clone());
                    round.failed.push(failed_item(&u.key, None, &e.to_string()));
                }
            },
        }
    }
    for batch in doomed.chunks(DELETE_BATCH) {
        if dry_run {
            round.deleted += u64::try_from(batch.len()).unwrap_or(u64::MAX);
            continue;
        }
        let refused = match store.delete_versions(batch).await {
            Ok(refused) => refused,
            Err(e) => batch
                .iter()
                .map(|(key, version_id)| DeleteFailure {
                    key: key.clone(),
                    version_id: version_id.clone(),
                    reason: e.to_string(),
                })
                .collect(),
        };
        round.deleted += u64::try_from(batch.len() - refused.len()).unwrap_or(0);
        for f in refused {
            refused_keys.insert(f.key.clone());
            round
                .failed
                .push(failed_item(&f.key, f.version_id, &f.reason));
        }
    }
    round.cleared = settled
        .iter()
        .filter(|u| !refused_keys.contains(&u.key))
        .map(|u| u.upload_id.clone())
        .collect();
    Ok(round)
}

fn failed_item(key: &str, version_id: Option<String>, reason: &str) -> JobItem {
    JobItem {
        action: "failed".into(),
        key: key.to_owned(),
        version_id,
        bytes: 0,
        reason: format!("settled tmp object: {reason}"),
    }
}
