//! Archival, hygiene's second stage: unlinked handles past `archive_after_secs` whose key no
//! available handle shares are claimed, their object rewritten in the archive class and tagged
//! (untagged where the store's `object_tags` gap is accepted; when small or on a store that keeps
//! no classes, archived in the catalog only), then
//! settled `archived`. An archival that loses its claim after S3 changed puts the object back.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{
    claim_or_skip, item, writes_tags, HygieneError, HygieneSummary, Items, ARCHIVED_TAG, PAGE,
};
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
    let mut mode: Option<Mode> = None;
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
            // Asked once per run, when there is something to archive, so a store that gained
            // a capability is used at once; judged as `serve` judges it (review 27: one failed
            // probe call turned a whole run catalog-only, a gap nobody accepted).
            let mode = match mode {
                Some(m) => m,
                None => match Mode::judge(store, settings, class).await {
                    Some(m) => *mode.insert(m),
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
                },
            };
            let small = u64::try_from(h.size).unwrap_or(0) < settings.jobs.archive_min_bytes;
            let kept_reason = if small {
                "kept in its class (small)"
            } else {
                "kept in its class (the store has no storage classes)"
            };
            let small = small || !mode.moves;
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
                if let Err(e) = store.change_storage_class(&h.key, class, mode.tags()).await {
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
                let (undone, why) = undo_archive(catalog, store, &h, mode).await?;
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

/// What archival does to an object on this store: each capability is used where the store has
/// it, independently (issue 35: on a store that keeps classes, accepting only the tags gap
/// turned the class move off too, and the report said the store had no classes).
#[derive(Debug, Clone, Copy)]
struct Mode {
    /// `storage_class` present: objects move to the archive class; otherwise (the gap
    /// accepted) the file is archived in the catalog only, as a small one is.
    moves: bool,
    /// `object_tags` not an accepted gap (so present): a moved object is tagged; otherwise it
    /// is moved untagged ([`writes_tags`]).
    tags: bool,
}

impl Mode {
    /// The store's answer for the two capabilities archival uses, judged with the accepted
    /// gaps: `None` when one is missing (or not known: a call that got no answer) and not
    /// accepted, and then the run archives nothing.
    async fn judge(store: &Arc<dyn ObjectStore>, settings: &Settings, class: &str) -> Option<Self> {
        let verdict = judge(
            &store.probe_archival(class).await,
            Needs { archival: true },
            &settings.s3.accept_gaps,
        );
        let accepted = verdict.accepted();
        let usable = |c: Capability| verdict.has(c) || accepted.contains(&c);
        if !(usable(Capability::StorageClass) && usable(Capability::ObjectTags)) {
            return None;
        }
        let mode = Mode {
            moves: verdict.has(Capability::StorageClass),
            tags: writes_tags(settings),
        };
        if !mode.moves {
            tracing::warn!(class, "the store keeps no storage classes (accepted): archival records files as archived without rewriting their objects");
        } else if !mode.tags {
            tracing::warn!(class, "the store keeps no object tags (accepted): archival moves objects to the archive class untagged");
        }
        Some(mode)
    }

    /// The tags a moved object carries: none sent where the store keeps none.
    fn tags(self) -> Option<&'static [(&'static str, &'static str)]> {
        self.tags.then_some(&[ARCHIVED_TAG])
    }

    /// The tags of an object put back: cleared, where the store keeps tags.
    fn untagged(self) -> Option<&'static [(&'static str, &'static str)]> {
        self.tags.then_some(&[])
    }
}

/// After an archival lost its claim once S3 was changed: if the handle is live (available or
/// unlinked), the object goes back to the handle's recorded class, untagged (where the store
/// keeps tags). Whether it was put
/// back, and what to report.
async fn undo_archive(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    h: &FileHandle,
    mode: Mode,
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
    match store
        .change_storage_class(&h.key, &class, mode.untagged())
        .await
    {
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
