//! Archival, hygiene's second stage: unlinked handles past `archive_after_secs` whose key no
//! available handle shares are claimed, their object rewritten in the archive class and tagged
//! (or, when small or on a store that keeps no classes, archived in the catalog only), then
//! settled `archived`. An archival that loses its claim after S3 changed puts the object back.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{claim_or_skip, item, HygieneError, HygieneSummary, Items, ARCHIVED_TAG, PAGE};
use crate::catalog::{Catalog, ClaimKind, HygieneGuard, Settle};
use crate::config::Settings;
use crate::domain::capabilities::{judge, Capability, Needs};
use crate::domain::records::{FileHandle, HandleStatus};
use crate::pause;
use crate::storage::ObjectStore;

pub(super) async fn archive(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
    dry_run: bool,
    now: DateTime<Utc>,
    summary: &mut HygieneSummary,
    items: &mut Items,
) -> Result<(), HygieneError> {
    // `never`: nothing is archived.
    let Some(after) = settings.jobs.archive_after_secs else {
        return Ok(());
    };
    let cutoff = crate::domain::duration::before(now, after);
    let class = settings.jobs.archive_storage_class.as_str();
    let profiles = settings.hygiene_profiles();
    let guard = HygieneGuard {
        from: HandleStatus::Unlinked,
        changed_before: cutoff,
        profiles: &profiles,
        key_not_in: &[HandleStatus::Available],
        key_retired: false,
    };
    let mut after = String::new();
    let mut keeps_classes: Option<bool> = None;
    loop {
        // The previous page's items go to the report now: a run holds one page of them.
        items.flush(catalog).await?;
        let page = catalog
            .handles_in_status(HandleStatus::Unlinked, cutoff, &profiles, &after, PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        // Keyset progress: a blocked handle is passed over, never fetched again this run.
        after = last.id.as_str().to_owned();
        for h in page {
            if catalog
                .key_has_status(&h.key, &[HandleStatus::Available])
                .await?
            {
                summary.blocked += 1;
                items.push(item("blocked", &h, "an available handle shares its key"));
                continue;
            }
            // A store that keeps no storage classes or tags (Garage: the probe's
            // `storage_class`, `object_tags`) archives in the catalog only: the object is not
            // rewritten, as for a small one (docs/stores.md). Asked once per run, when there is
            // something to archive, so a store that gained the capability is used at once.
            // Judged as `serve` judges it: present, or missing and accepted by name (then the
            // catalog-only fallback); missing and not accepted, or not known (a call that got no
            // answer), and this run archives nothing (review 27: one failed probe call turned a
            // whole run catalog-only, a gap nobody accepted).
            let classes = match keeps_classes {
                Some(k) => k,
                None => {
                    // The same verdict `serve` reaches, for the two capabilities archival uses.
                    let verdict = judge(
                        &store.probe_archival(class).await,
                        Needs { archival: true },
                        &settings.s3.accept_gaps,
                    );
                    let needed = [Capability::StorageClass, Capability::ObjectTags];
                    let mode = if needed.iter().all(|c| verdict.has(*c)) {
                        Some(true)
                    } else if needed
                        .iter()
                        .all(|c| verdict.has(*c) || verdict.accepted().contains(c))
                    {
                        tracing::warn!(class, "the store keeps no storage classes or tags (accepted): archival records files as archived without rewriting their objects");
                        Some(false)
                    } else {
                        None
                    };
                    match mode {
                        Some(k) => *keeps_classes.insert(k),
                        None => {
                            let why = "archive: the store was not found to keep storage classes \
                                       and tags (storage_class, object_tags) and the gap is not \
                                       accepted (UPCOMMIT_ACCEPT_STORE_GAPS): nothing archived \
                                       this run";
                            tracing::error!(class, "{why}");
                            summary.failed += 1;
                            items.push(item("failed", &h, why));
                            return Ok(());
                        }
                    }
                }
            };
            let small = u64::try_from(h.size).unwrap_or(0) < settings.jobs.archive_min_bytes;
            let kept_reason = if small {
                "kept in its class (small)"
            } else {
                "kept in its class (the store has no storage classes)"
            };
            let small = small || !classes;
            let current = catalog.storage_class_of(&h.id).await?;
            let already = current.as_deref() == Some(class);
            if dry_run {
                summary.archived += 1;
                items.push(item(
                    "would_archive",
                    &h,
                    if small { kept_reason } else { class },
                ));
                continue;
            }
            // Claim first (checking links, shared keys and status in the same statement), then
            // S3, then settle: a restore meanwhile waits for the claim instead of losing.
            let Some(claim) = claim_or_skip(
                catalog,
                &h,
                ClaimKind::Archive,
                &guard,
                settings,
                summary,
                items,
            )
            .await?
            else {
                continue;
            };
            pause::point("hygiene_archive_claimed").await;
            let moves = !small && !already;
            // The lease may have run out meanwhile and a restore taken the file back: renew
            // (only while the claim is ours) right before S3 is changed.
            if moves
                && !catalog
                    .renew_claim(&h.id, &claim, settings.jobs.lease_secs)
                    .await?
            {
                catalog.release_claim(&h.id, &claim).await?;
                summary.skipped += 1;
                items.push(item(
                    "skipped",
                    &h,
                    "archive: the claim was lost (or a scan saw the file or a copy of its key) \
                     before S3 was changed",
                ));
                continue;
            }
            pause::point("hygiene_archive_s3").await;
            if moves {
                if let Err(e) = store
                    .change_storage_class(&h.key, class, &[ARCHIVED_TAG])
                    .await
                {
                    catalog.release_claim(&h.id, &claim).await?;
                    summary.failed += 1;
                    items.push(item("failed", &h, format!("archive: {e}")));
                    continue;
                }
            }
            pause::point("hygiene_archive_changed").await;
            let new_class = (!small).then_some(class);
            let settle = Settle {
                to: HandleStatus::Archived,
                storage_class: new_class,
                restored: false,
                link: None,
                now,
            };
            if !catalog.settle_claim(&h.id, &claim, &settle).await? {
                // Taken over after S3 changed (a restore that found the class unchanged), or a
                // copy came back or a scan vouched for the key meanwhile (the settle refused):
                // never leave a live file archived in S3.
                if !moves {
                    catalog.release_claim(&h.id, &claim).await?;
                    summary.skipped += 1;
                    items.push(item(
                        "skipped",
                        &h,
                        "archive: the claim was taken over, a copy came back or a scan saw the \
                         key meanwhile; nothing was changed in S3",
                    ));
                    continue;
                }
                let (undone, why) = undo_archive(catalog, store, &h).await?;
                // Still ours when the settle refused: give it up.
                catalog.release_claim(&h.id, &claim).await?;
                if undone {
                    summary.undone += 1;
                } else {
                    summary.failed += 1;
                }
                items.push(item(if undone { "undone" } else { "failed" }, &h, why));
                continue;
            }
            summary.archived += 1;
            if small {
                summary.archived_in_place += 1;
                items.push(item("archived", &h, kept_reason));
            } else if already {
                // A copy of its key was archived first: the shared object moved once.
                items.push(item(
                    "archived",
                    &h,
                    format!("already in {class} (the object a copy shares)"),
                ));
            } else {
                summary.archived_bytes += u64::try_from(h.size).unwrap_or(0);
                items.push(item("archived", &h, format!("moved to {class}")));
            }
        }
    }
}

/// After an archival lost its claim once S3 was changed: if the handle is live (available or
/// unlinked), the object goes back to the handle's recorded class, untagged. Whether it was put
/// back, and what to report.
async fn undo_archive(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    h: &FileHandle,
) -> Result<(bool, String), HygieneError> {
    let fresh = catalog.handle_by_id(&h.id).await?;
    if !fresh
        .as_ref()
        .is_some_and(|f| matches!(f.status, HandleStatus::Available | HandleStatus::Unlinked))
    {
        return Ok((
            false,
            "archive: the claim was taken over (the file is no longer live)".to_owned(),
        ));
    }
    let class = catalog
        .storage_class_of(&h.id)
        .await?
        .unwrap_or_else(|| "STANDARD".to_owned());
    match store.change_storage_class(&h.key, &class, &[]).await {
        Ok(()) => Ok((
            true,
            format!("the claim was taken over after S3 changed; the object is back in {class}"),
        )),
        Err(e) => {
            tracing::error!(file = %h.id, key = %h.key, error = %e, "could not undo an archival");
            Ok((
                false,
                format!(
                    "archive: the claim was taken over and the object could not be put back to {class}: {e}"
                ),
            ))
        }
    }
}
