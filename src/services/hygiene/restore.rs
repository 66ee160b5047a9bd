//! Restore: an unlinked or archived handle back to `available`, its object back in STANDARD and
//! untagged when it was moved, under a claim (claim, S3, then settle). The HTTP layer's link
//! and restore calls use it, and so does hygiene for the files a link scan vouches for.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{token, writes_tags, HygieneError};
use crate::catalog::{Catalog, CatalogError, ClaimKind, Settle};
use crate::config::Settings;
use crate::domain::records::{FileHandle, HandleStatus};
use crate::storage::{ObjectStore, StoreError};

/// Why a restore did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// Hygiene holds the handle (archiving or deleting it): retry shortly.
    #[error("the file is being archived or deleted; retry shortly")]
    Busy,
    #[error("the file is deleted")]
    Deleted,
    #[error(transparent)]
    Failed(#[from] HygieneError),
}

impl From<CatalogError> for RestoreError {
    fn from(e: CatalogError) -> Self {
        Self::Failed(e.into())
    }
}

impl From<StoreError> for RestoreError {
    fn from(e: StoreError) -> Self {
        Self::Failed(e.into())
    }
}

/// Brings an unlinked or archived handle back to `available` (the object back to STANDARD and
/// untagged, when it was moved), under a claim: claim, S3, then settle. With `link`, that link
/// is recorded in the settling transaction, so a link exists only if the file is available
/// again. `Ok(false)` when it was already available (the link, if any, is recorded then too).
/// The tag is cleared where archival writes one ([`writes_tags`]).
pub async fn restore(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    handle: &FileHandle,
    link: Option<(&str, &str)>,
    settings: &Settings,
    now: DateTime<Utc>,
) -> Result<bool, RestoreError> {
    let mut status = handle.status;
    // An available handle links without a claim; if hygiene unlinked it meanwhile, the
    // restore below runs instead (twice at most: once per way it can have moved).
    for _ in 0..2 {
        match status {
            HandleStatus::Deleted => return Err(RestoreError::Deleted),
            // A temporary file is never unlinked or archived, so there is nothing to restore;
            // once expired it stays expired (the HTTP layer answers 410 before this).
            HandleStatus::Expired => return Err(RestoreError::Deleted),
            HandleStatus::Available => {
                let linked = match link {
                    Some((t, o)) => catalog.put_link(&handle.id, t, o, now).await?,
                    None => true,
                };
                if linked {
                    return Ok(false);
                }
            }
            HandleStatus::Unlinked | HandleStatus::Archived => {
                let claim = token();
                if catalog
                    .claim_handle(
                        &handle.id,
                        ClaimKind::Restore,
                        None,
                        &claim,
                        settings.jobs.lease_secs,
                    )
                    .await?
                {
                    let tags = writes_tags(settings).then_some(&[][..]);
                    return restore_claimed(catalog, store, handle, link, &claim, tags, now).await;
                }
            }
        }
        let fresh = catalog
            .handle_by_id(&handle.id)
            .await?
            .ok_or(RestoreError::Deleted)?;
        if fresh.status == status && status != HandleStatus::Available {
            // Same status and no claim to be had: hygiene holds it.
            return Err(RestoreError::Busy);
        }
        status = fresh.status;
    }
    Err(RestoreError::Busy)
}

async fn restore_claimed(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    handle: &FileHandle,
    link: Option<(&str, &str)>,
    claim: &str,
    tags: Option<&[(&str, &str)]>,
    now: DateTime<Utc>,
) -> Result<bool, RestoreError> {
    let class = catalog.storage_class_of(&handle.id).await?;
    let mut moved = class.as_deref().is_some_and(|c| c != "STANDARD");
    if !moved && handle.status == HandleStatus::Unlinked {
        // This restore may have taken over an archival whose process died after it changed
        // the object (before it could settle): the object's own class says so.
        moved = store
            .head(&handle.key)
            .await?
            .and_then(|h| h.storage_class)
            .is_some_and(|c| c != "STANDARD");
    }
    if moved {
        if let Err(e) = store
            .change_storage_class(&handle.key, "STANDARD", tags)
            .await
        {
            catalog.release_claim(&handle.id, claim).await?;
            return Err(e.into());
        }
    }
    let settle = Settle {
        to: HandleStatus::Available,
        storage_class: Some("STANDARD"),
        restored: true,
        link,
        now,
    };
    if catalog.settle_claim(&handle.id, claim, &settle).await? {
        Ok(true)
    } else {
        Err(RestoreError::Busy)
    }
}
