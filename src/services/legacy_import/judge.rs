//! One listed key: decide, read the object, record it, commit it in place.

use chrono::Duration;

use crate::auth::Identity;
use crate::domain::filename::OriginalName;
use crate::domain::ids::UploadId;
use crate::domain::jobs::JobItem;
use crate::domain::legacy::{admit, decide, Decision, Owner, Recorded, Skip};
use crate::domain::reconcile::BucketKey;
use crate::domain::records::{self, HandleStatus, Upload, UploadMethod, UploadState};
use crate::error::AppError;
use crate::services::commit::{commit, CommitCommand};
use crate::state::AppState;

use super::{ImportOptions, ImportSummary};

/// The commit deadline an imported upload is recorded with. The commit of a legacy key does
/// not hold to it (the object is already in place, no URL and no tmp lifecycle apply), so a
/// `--no-commit` import is committed by a rerun however late; it only dates the record.
const COMMIT_WINDOW_DAYS: i64 = 30;

/// What happened to one key, for the totals and the report.
pub(super) struct Verdict {
    /// This run wrote (or, dry, would write) the key's upload row.
    imported: bool,
    outcome: Outcome,
    pub(super) item: Option<JobItem>,
}

enum Outcome {
    /// Imported, not committed (`--no-commit`).
    Pending,
    Committed,
    Skipped,
    Outside,
    Refused(String),
    Failed,
    /// Another call's commit of it holds a live lease (`commit_in_progress`).
    RetryLater,
}

impl Verdict {
    pub(super) fn count(&self, s: &mut ImportSummary) {
        s.imported += u64::from(self.imported);
        match &self.outcome {
            Outcome::Pending => {}
            Outcome::Committed => s.committed += 1,
            Outcome::Skipped => s.skipped += 1,
            Outcome::Outside => s.outside_legacy_prefixes += 1,
            Outcome::Refused(code) => {
                s.refused += 1;
                *s.refusals.entry(code.clone()).or_default() += 1;
            }
            Outcome::Failed => s.failed += 1,
            Outcome::RetryLater => s.retry_later += 1,
        }
    }
}

fn item(action: &str, key: &BucketKey, reason: String) -> Option<JobItem> {
    Some(JobItem {
        action: action.to_owned(),
        key: key.key.clone(),
        version_id: None,
        bytes: key.size,
        reason,
    })
}

fn refused(key: &BucketKey, code: &str, detail: &str) -> Verdict {
    Verdict {
        imported: false,
        outcome: Outcome::Refused(code.to_owned()),
        item: item("refused", key, format!("{code}: {detail}")),
    }
}

fn failed(key: &BucketKey, what: &str, e: &dyn std::fmt::Display) -> Verdict {
    tracing::warn!(key = %key.key, error = %e, "legacy import: {what} failed");
    Verdict {
        imported: false,
        outcome: Outcome::Failed,
        item: item("failed", key, format!("{what}: {e}")),
    }
}

/// What the catalog holds for `key`: an upload of it (imported and waiting, or settled), an
/// upload whose final key it is, or a file handle of it. An imported upload without its handle
/// — `issued`, or `promoting` because a run was killed mid-commit — waits for its commit: it is
/// not "recorded" until the commit settles it.
async fn recorded(state: &AppState, key: &str) -> Result<Recorded, AppError> {
    let catalog = &state.catalog;
    if let Some(u) = catalog.upload_by_key(key).await? {
        let waiting = matches!(u.state, UploadState::Issued | UploadState::Promoting);
        return Ok(if waiting && u.method == UploadMethod::Put.as_str() {
            Recorded::Imported
        } else {
            Recorded::Settled
        });
    }
    let all = [
        HandleStatus::Available,
        HandleStatus::Unlinked,
        HandleStatus::Archived,
        HandleStatus::Deleted,
    ];
    if catalog.upload_names_key(key).await? || catalog.key_has_status(key, &all).await? {
        return Ok(Recorded::Settled);
    }
    Ok(Recorded::Nothing)
}

pub(super) async fn judge(state: &AppState, options: &ImportOptions, key: BucketKey) -> Verdict {
    let legacy = &state.settings.uploads.legacy_prefixes;
    let known = match recorded(state, &key.key).await {
        Ok(r) => r,
        Err(e) => return failed(&key, "catalog lookup", &e),
    };
    let decision = decide(
        &key.key,
        legacy,
        known,
        options.commit,
        &options.owners,
        |p| state.settings.profile(p).is_some(),
    );
    match decision {
        Decision::Skip(Skip::OutsideLegacyPrefixes) => Verdict {
            imported: false,
            outcome: Outcome::Outside,
            item: None,
        },
        Decision::Skip(why) => Verdict {
            imported: false,
            outcome: Outcome::Skipped,
            item: item("skipped", &key, why.reason().to_owned()),
        },
        Decision::Refuse(r) => Verdict {
            imported: false,
            outcome: Outcome::Refused(r.code().to_owned()),
            item: item("refused", &key, r.reason()),
        },
        Decision::CommitImported => {
            if options.dry_run {
                return Verdict {
                    imported: false,
                    outcome: Outcome::Committed,
                    item: item(
                        "would_commit",
                        &key,
                        "imported by an earlier run, not committed yet".into(),
                    ),
                };
            }
            let owner = match state.catalog.upload_by_key(&key.key).await {
                Ok(Some(u)) => u.owner,
                Ok(None) => return failed(&key, "catalog lookup", &"the upload row is gone"),
                Err(e) => return failed(&key, "catalog lookup", &e),
            };
            match commit_in_place(state, &owner, &key.key).await {
                Ok(()) => Verdict {
                    imported: false,
                    outcome: Outcome::Committed,
                    item: item(
                        "committed",
                        &key,
                        format!("imported earlier for {owner}, committed in place"),
                    ),
                },
                Err(e) => commit_refused(&key, &e),
            }
        }
        Decision::Import { owner, profile } => import(state, options, key, owner, &profile).await,
    }
}

async fn import(
    state: &AppState,
    options: &ImportOptions,
    key: BucketKey,
    owner: Owner,
    profile_name: &str,
) -> Verdict {
    let Some(profile) = state.settings.profile(profile_name) else {
        return refused(&key, "profile_unknown", profile_name);
    };
    // A temporary profile's files live only under `temp/<N>d/`, where its lifecycle rule ends
    // them; a legacy key committed in place would be neither expired nor looked after.
    if profile.temporary_ttl.is_some() {
        return refused(
            &key,
            "profile_temporary",
            &format!("{profile_name} is temporary: its files cannot be imported in place"),
        );
    }
    let head = match state.store.head(&key.key).await {
        Ok(Some(h)) => h,
        Ok(None) => return refused(&key, "object_not_uploaded", "the object is gone"),
        Err(e) => return failed(&key, "HEAD", &e),
    };
    let content_type = match admit(profile, head.content_type.as_deref(), head.size) {
        Ok(ct) => ct,
        Err(r) => {
            let e = AppError::from(r);
            return refused(&key, e.code(), &e.to_string());
        }
    };
    let who = owner.as_str();
    if options.dry_run {
        return Verdict {
            imported: true,
            outcome: if options.commit {
                Outcome::Committed
            } else {
                Outcome::Pending
            },
            item: item(
                "would_import",
                &key,
                format!("for {who} as {profile_name} ({content_type})"),
            ),
        };
    }
    let now = records::now();
    let upload = Upload {
        id: UploadId::generate(),
        owner: who.to_owned(),
        profile: profile_name.to_owned(),
        content_type: content_type.as_str().to_owned(),
        declared_size: head.size,
        key: key.key.clone(),
        method: UploadMethod::Put.as_str().to_owned(),
        state: UploadState::Issued,
        final_key: None,
        reject_code: None,
        lease_token: None,
        lease_until: None,
        created_at: now,
        // No URL was handed out for it.
        expires_at: now,
        commit_deadline: now + Duration::days(COMMIT_WINDOW_DAYS),
        original_filename: OriginalName::clean(&key.key).map(|n| n.as_str().to_owned()),
        checksum: None,
    };
    if let Err(e) = state.catalog.import_upload(&upload).await {
        return failed(&key, "recording the upload", &e);
    }
    if !options.commit {
        return Verdict {
            imported: true,
            outcome: Outcome::Pending,
            item: item(
                "imported",
                &key,
                format!("for {who} as {profile_name}, not committed (--no-commit)"),
            ),
        };
    }
    match commit_in_place(state, who, &key.key).await {
        Ok(()) => Verdict {
            imported: true,
            outcome: Outcome::Committed,
            item: item(
                "committed",
                &key,
                format!("for {who} as {profile_name}, committed in place"),
            ),
        },
        Err(e) => {
            // The row was written: the key counts as imported, and as refused or failed.
            let mut v = commit_refused(&key, &e);
            v.imported = true;
            if let Some(i) = v.item.as_mut() {
                i.reason = format!("{} (recorded for {who})", i.reason);
            }
            v
        }
    }
}

/// The commit of `POST /v1/files`, as the owner: type sniff, size, stored checksum; in place.
async fn commit_in_place(state: &AppState, owner: &str, key: &str) -> Result<(), AppError> {
    let who = Identity {
        user_id: owner.to_owned(),
        admin: false,
    };
    commit(
        state,
        &who,
        CommitCommand {
            key: key.to_owned(),
            final_key: None,
        },
    )
    .await
    .map(|_| ())
}

/// A commit's refusal (a client error: the object is not what its record says) or failure; a
/// commit another call holds right now is neither: a rerun commits it.
fn commit_refused(key: &BucketKey, e: &AppError) -> Verdict {
    if matches!(e, AppError::CommitInProgress) {
        return Verdict {
            imported: false,
            outcome: Outcome::RetryLater,
            item: item("retry_later", key, format!("{}: {e}", e.code())),
        };
    }
    if e.status().is_server_error() {
        failed(key, "commit", e)
    } else {
        refused(key, e.code(), &e.to_string())
    }
}
