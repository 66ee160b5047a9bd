//! The facade's own copies — quarantine's copy aside and archival's rewrite in place — and
//! the source guard they send: AWS's `x-amz-copy-source-if-match` always, and Ceph RGW's older
//! name of it, `x-amz-copy-if-match`, where the store keeps the condition only under that name
//! (issue 36: RGW 16.2 copies whatever the key holds under AWS's name). Whether it does is what
//! the store's own probe found (`copy_if_match_legacy`), or is asked once, with a few calls
//! under a fresh tmp/ probe prefix, before the first such copy of a process that never probed
//! (a CLI job, a server whose probe was handed to it).

use aws_sdk_s3::types::MetadataDirective;

use super::probe::{self, Scope};
use super::S3Store;
use crate::domain::capabilities::{Capability, Finding};
use crate::signing::uri_encode;
use crate::storage::errors::classify;
use crate::storage::listing::{self, Guard};
use crate::storage::part_copy;
use crate::storage::{CopySource, ObjectHead, ObjectStore, StoreError};

/// After a question that got no answer (the store refused its write, or did not answer in
/// time), copies go with AWS's name only for this long before it is asked again: not before
/// every copy (review of issue 36: three rounds of probe writes per object).
const ASK_AGAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(300);

/// What this process knows of the store's older guard name: the answer, or when asking last
/// gave none. Shared by the store and its quiet twin.
#[derive(Debug, Default)]
pub(super) struct GuardKnowledge {
    known: tokio::sync::OnceCell<bool>,
    in_vain: std::sync::Mutex<Option<std::time::Instant>>,
}

impl S3Store {
    /// Remembers what a probe found of the older guard's name (an unknown finding teaches
    /// nothing: it is asked again).
    pub(super) fn learn_legacy_guard(&self, finding: Option<&Finding>) {
        let known = match finding {
            Some(Finding::Present) => true,
            Some(Finding::Missing(_)) => false,
            Some(Finding::Unknown(_)) | None => return,
        };
        let _ = self.legacy_guard.known.set(known);
    }

    /// Whether a copy also sends `x-amz-copy-if-match`: only where the store was found to keep
    /// the condition under that name. When the question gets no answer (refused, or not in
    /// time), copies go with AWS's name only, and it is asked again after [`ASK_AGAIN_AFTER`].
    pub(super) async fn legacy_guard(&self) -> bool {
        let knowledge = &self.legacy_guard;
        let recently_in_vain = || {
            knowledge
                .in_vain
                .lock()
                .map(|t| t.is_some_and(|t| t.elapsed() < ASK_AGAIN_AFTER))
                .unwrap_or(false)
        };
        if let Some(known) = knowledge.known.get() {
            return *known;
        }
        if recently_in_vain() {
            return false;
        }
        let asked = knowledge
            .known
            .get_or_try_init(|| async {
                // Copies waiting for this question behind one that got no answer take that
                // for theirs.
                if recently_in_vain() {
                    return Err(());
                }
                let found =
                    probe::run_scoped(&self.quiet_twin(), "STANDARD", Scope::CopyGuard).await;
                match found.get(Capability::CopyIfMatchLegacy) {
                    Some(Finding::Present) => Ok(true),
                    Some(Finding::Missing(_)) => Ok(false),
                    other => {
                        let why = other.map_or_else(|| "not asked".to_owned(), ToString::to_string);
                        tracing::warn!(finding = %why, ask_again_after_secs = ASK_AGAIN_AFTER.as_secs(), "could not tell whether the store keeps x-amz-copy-if-match: copies are guarded under AWS's name only until it is asked again");
                        if let Ok(mut t) = knowledge.in_vain.lock() {
                            *t = Some(std::time::Instant::now());
                        }
                        Err(())
                    }
                }
            })
            .await;
        asked.copied().unwrap_or(false)
    }

    /// [`ObjectStore::copy_object`]: a plain copy of `src` to `dst` while `src` has the ETag
    /// its HEAD read (in parts above the single-copy limit).
    pub(super) async fn copy_aside(&self, src: &str, dst: &str) -> Result<ObjectHead, StoreError> {
        let head = self.head(src).await?.ok_or(StoreError::NotFound)?;
        if self.copy.in_parts(head.size) {
            // CopyObject keeps the source's tags; a copy in parts writes them again.
            let tagging = self.tagging_of(src, head.version_id.as_deref()).await?;
            part_copy::copy_like(self, src, &head, dst, None, tagging.as_deref(), self.copy)
                .await?;
        } else {
            let source = self.copy_source(&CopySource::of(src, &head));
            let legacy = self.legacy_guard().await;
            let guard = Guard {
                etag: &head.etag,
                legacy,
            };
            listing::copy_object(&self.client, &self.bucket, source, guard, dst).await?;
        }
        Ok(head)
    }

    /// [`ObjectStore::change_storage_class`]: the object rewritten in place in `class`.
    pub(super) async fn rewrite_in_class(
        &self,
        key: &str,
        class: &str,
        tags: Option<&[(&str, &str)]>,
    ) -> Result<(), StoreError> {
        let before = self.head(key).await?.ok_or(StoreError::NotFound)?;
        // An earlier rewrite to this class that died before its cleanup (review 26: a kill -9
        // between the copy and the delete) left the object rewritten: it is not copied again,
        // only cleaned up below. (The class and the tags are set by one copy.)
        let rewritten = before.storage_class.as_deref().unwrap_or("STANDARD") == class;
        let tagging = tags.map(|tags| {
            tags.iter()
                .map(|(k, v)| format!("{}={}", uri_encode(k, true), uri_encode(v, true)))
                .collect::<Vec<_>>()
                .join("&")
        });
        if rewritten {
            tracing::info!(
                key,
                class,
                "already in the class: an earlier rewrite's copy is kept"
            );
        } else if self.copy.in_parts(before.size) {
            // A multipart upload starts untagged: no tags, or none to send, is the same there.
            let tagging = tagging.as_deref().filter(|t| !t.is_empty());
            part_copy::copy_like(self, key, &before, key, Some(class), tagging, self.copy).await?;
        } else {
            let legacy = self.legacy_guard().await.then(|| before.etag.clone());
            self.client
                .copy_object()
                .bucket(&self.bucket)
                .key(key)
                .copy_source(self.copy_source(&CopySource::of(key, &before)))
                .copy_source_if_match(&before.etag)
                .metadata_directive(MetadataDirective::Copy)
                .storage_class(aws_sdk_s3::types::StorageClass::from(class))
                .set_tagging_directive(
                    tagging
                        .is_some()
                        .then_some(aws_sdk_s3::types::TaggingDirective::Replace),
                )
                .set_tagging(tagging)
                .customize()
                .mutate_request(crate::storage::legacy_copy_guard(legacy))
                .send()
                .await
                .map_err(classify)?;
        }
        let after = self.head(key).await?.ok_or(StoreError::NotFound)?;
        if after.size != before.size {
            return Err(StoreError::Other(format!(
                "{key}: the rewritten object has {} bytes, the original {}",
                after.size, before.size
            )));
        }
        crate::pause::point("class_rewritten").await;
        let Some(current) = after.version_id.as_deref().filter(|v| *v != "null") else {
            return Ok(());
        };
        if !rewritten {
            // The version this copy replaced, and only it: older versions may be the key's own
            // history (a legacy key committed in place keeps what was written before).
            return match before.version_id.as_deref() {
                Some(old) if old != current && old != "null" => {
                    self.delete_version(key, Some(old)).await
                }
                _ => Ok(()),
            };
        }
        // Already in the class: an earlier rewrite may have died before its cleanup, leaving the
        // version it replaced right behind the current one (versions are listed newest first).
        // Only positive evidence deletes it: the same ETag, which a single CopyObject of an
        // object keeps — the very bytes the current version holds. Anything else (a version of
        // other bytes, a class the bucket's lifecycle set, a copy in parts, whose ETag is its
        // own) stays (review 26: a legacy key's older version of the same size was deleted).
        let versions = crate::storage::versions_of(self, key).await?;
        let behind = versions
            .iter()
            .skip_while(|v| v.version_id.as_deref() != Some(current))
            .nth(1);
        match behind {
            Some(v)
                if !v.delete_marker
                    && v.size == after.size
                    && crate::storage::known_etag(&after.etag)
                    && v.etag.as_deref() == Some(after.etag.as_str()) =>
            {
                self.delete_version(key, v.version_id.as_deref()).await
            }
            _ => Ok(()),
        }
    }
}
