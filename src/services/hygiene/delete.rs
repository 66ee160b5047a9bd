//! Deletion, hygiene's last stage: archived handles past `delete_after_secs` whose key no live
//! handle shares are claimed, every version of their object and of its renditions (`cache/<file
//! id>/`) deleted, then settled `deleted`
//! (the row stays). A deletion that fails part-way keeps its claim: only a later run finishes it.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{claim_or_skip, item, HygieneError, HygieneSummary, Items, PAGE};
use crate::catalog::{Catalog, ClaimKind, HygieneGuard, Settle};
use crate::config::Settings;
use crate::domain::records::HandleStatus;
use crate::pause;
use crate::storage::{ObjectStore, StoreError, DELETE_BATCH};

pub(super) async fn delete(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    dry_run: bool,
    now: DateTime<Utc>,
    summary: &mut HygieneSummary,
    items: &mut Items,
) -> Result<(), HygieneError> {
    // `never`: archived objects stay.
    let Some(after) = settings.jobs.delete_after_secs else {
        return Ok(());
    };
    let cutoff = crate::domain::duration::before(now, after);
    let profiles = settings.hygiene_profiles();
    let live = [HandleStatus::Available, HandleStatus::Unlinked];
    let guard = HygieneGuard {
        from: HandleStatus::Archived,
        changed_before: cutoff,
        profiles: &profiles,
        key_not_in: &[],
        key_retired: true,
    };
    let mut after = String::new();
    loop {
        // The previous page's items go to the report now: a run holds one page of them.
        items.flush(catalog).await?;
        let page = catalog
            .handles_in_status(HandleStatus::Archived, cutoff, &profiles, &after, PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = last.id.as_str().to_owned();
        for h in page {
            if catalog.key_has_status(&h.key, &live).await? {
                summary.blocked += 1;
                items.push(item("blocked", &h, "another live handle shares its key"));
                continue;
            }
            if dry_run {
                summary.deleted += 1;
                items.push(item(
                    "would_delete",
                    &h,
                    "archived past the retention period",
                ));
                continue;
            }
            let Some(claim) = claim_or_skip(
                catalog,
                &h,
                ClaimKind::Delete,
                &guard,
                settings,
                summary,
                items,
            )
            .await?
            else {
                continue;
            };
            pause::point("hygiene_delete_claimed").await;
            if !catalog
                .renew_claim(&h.id, &claim, settings.jobs.lease_secs)
                .await?
            {
                // Nothing is deleted yet: giving the claim up is safe.
                catalog.release_claim(&h.id, &claim).await?;
                summary.skipped += 1;
                items.push(item(
                    "skipped",
                    &h,
                    "delete: the claim was lost (or a scan saw the file or a copy of its key) \
                     before S3 was changed",
                ));
                continue;
            }
            pause::point("hygiene_delete_s3").await;
            if let Err(e) = delete_every_version(store.as_ref(), &h.key).await {
                // The claim stays: some versions may be gone, so only a later run may finish
                // the deletion (a restore never takes a deletion over).
                summary.failed += 1;
                items.push(item("failed", &h, format!("delete: {e}")));
                continue;
            }
            // Its renditions go with it (issue 37), under the same claim.
            if let Err(e) = crate::services::renditions::delete_all(store.as_ref(), &h.id).await {
                summary.failed += 1;
                items.push(item("failed", &h, format!("delete renditions: {e}")));
                continue;
            }
            let settle = Settle {
                to: HandleStatus::Deleted,
                storage_class: None,
                restored: false,
                link: None,
                now,
            };
            if catalog.settle_claim(&h.id, &claim, &settle).await? {
                summary.deleted += 1;
                summary.deleted_bytes += u64::try_from(h.size).unwrap_or(0);
                items.push(item("deleted", &h, "archived past the retention period"));
            } else {
                summary.failed += 1;
                items.push(item("failed", &h, "delete: the claim was taken over"));
            }
        }
    }
}

/// Every version and delete marker of exactly `key` (a prefix listing also returns longer keys).
async fn delete_every_version(store: &dyn ObjectStore, key: &str) -> Result<(), StoreError> {
    let doomed = crate::storage::every_version_of(store, key).await?;
    for batch in doomed.chunks(DELETE_BATCH) {
        let refused = store.delete_versions(batch).await?;
        if let Some(f) = refused.first() {
            return Err(StoreError::Other(format!("{}: {}", f.key, f.reason)));
        }
    }
    Ok(())
}
