//! The capability probe: what the store really does, found by real calls, each made as
//! upcommit makes it (presigned PUT URLs and POST forms sent over HTTP as a client sends them,
//! CopyObject and CompleteMultipartUpload as a commit sends them).
//!
//! Every key it writes is under one fresh probe prefix, `tmp/YYYY/MM/DD/<32 hex>/`: a tmp
//! partition key of an upload id no upload holds. The probe removes every version and multipart
//! upload under it before it returns; if it cannot (a crash, an outage), what is left is an
//! unrecorded tmp object, which the bucket's tmp expiry rule and the tmp sweep both remove.
//! Nothing outside that prefix is written or read, the bucket's configuration documents
//! included: lifecycle elements are not probed by writing the one lifecycle document (its owner
//! is infra/ or `bucket apply-lifecycle`), so `doctor` judges the rules the bucket holds.
//!
//! Bounded: at most [`BUDGET`] in all; a capability whose calls did not finish is `Unknown`.
//!
//! This file holds the run, its rounds and cleanup, and the calls every check makes; how an
//! answer is judged is in `answer`, the checks in `conditional`, `checksums`, `forms` and
//! `bucket`.

mod answer;
mod bucket;
mod checksums;
mod conditional;
mod forms;

use std::time::Duration;

use chrono::{Datelike, Utc};

use crate::domain::capabilities::{
    copy_source_guard_finding, multipart_checksum_finding, Capability, Finding, Findings,
};
use crate::domain::checksum::{Checksum, ChecksumAlgorithm};
use crate::domain::prefixes::TMP_PREFIX;
use crate::storage::{NewMultipart, ObjectStore, PartInput, PresignInput, PresignedPut, S3Store};
use answer::{both, http_answer, Answer, PRECONDITION};

/// The whole probe's time limit.
pub const BUDGET: Duration = Duration::from_secs(30);
/// The cleanup's time limit, after the probe's.
const CLEAN_BUDGET: Duration = Duration::from_secs(10);
/// One HTTP call's time limit.
const CALL: Duration = Duration::from_secs(10);
const BODY: &[u8] = b"upcommit capability probe";
const TYPE: &str = "application/octet-stream";
/// An ETag no probe object has: the guard every conditional check names.
const WRONG_ETAG: &str = "\"00000000000000000000000000000000\"";
/// S3's smallest part but the last, and Garage's smallest source for UploadPartCopy.
const PART_MIN: usize = 5 * 1024 * 1024;

/// A fresh probe prefix under today's tmp partition.
pub fn probe_prefix() -> String {
    let today = Utc::now().date_naive();
    format!(
        "{TMP_PREFIX}{:04}/{:02}/{:02}/{}/",
        today.year(),
        today.month(),
        today.day(),
        uuid::Uuid::new_v4().simple()
    )
}

/// What a run probes.
#[derive(Debug, Clone, Copy)]
pub enum Scope {
    /// Every capability (`serve`, `doctor`).
    All,
    /// What archival uses: `storage_class` and `object_tags` (each hygiene run that archives).
    Archival,
    /// Whether CopyObject's source guard holds under RGW's older name
    /// (`copy_if_match_legacy`): asked before the first archival or quarantine copy of a
    /// process that has not probed.
    CopyGuard,
}

/// Runs every probe under a fresh prefix, then removes what it wrote.
pub async fn run(store: &S3Store, archive_class: &str) -> Findings {
    run_scoped(store, archive_class, Scope::All).await
}

/// Runs the probes of `scope` under a fresh prefix, then removes what it wrote.
pub async fn run_scoped(store: &S3Store, archive_class: &str, scope: Scope) -> Findings {
    let probe = Probe {
        store,
        http: store.http().clone(),
        prefix: probe_prefix(),
        round: std::sync::atomic::AtomicU32::new(0),
    };
    // A call that got no answer (a dropped connection, a store busy starting) is asked again:
    // up to three rounds within the budget, each capability keeping its first real answer.
    let rounds = async {
        let mut found = probe.findings(scope, archive_class).await;
        for _ in 0..2 {
            if !found
                .0
                .iter()
                .any(|(_, f)| matches!(f, Finding::Unknown(_)))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            probe
                .round
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let again = probe.findings(scope, archive_class).await;
            for (cap, f) in &mut found.0 {
                if matches!(f, Finding::Unknown(_)) {
                    if let Some(better) = again.get(*cap) {
                        *f = better.clone();
                    }
                }
            }
        }
        found
    };
    let findings = match tokio::time::timeout(BUDGET, rounds).await {
        Ok(f) => f,
        Err(_) => all_unknown(&format!(
            "the probe did not finish in {}s",
            BUDGET.as_secs()
        )),
    };
    // The cleanup has a budget of its own: a store that stopped answering must not hold the
    // start for the SDK's 30 s per call (review 27: a hanging store took 60 s, not 30).
    let cleaned = match tokio::time::timeout(CLEAN_BUDGET, probe.clean()).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("not done in {}s", CLEAN_BUDGET.as_secs())),
    };
    if let Err(e) = cleaned {
        tracing::warn!(prefix = %probe.prefix, error.detail = %e, "probe objects left behind; the tmp expiry rule and the sweep remove them");
    }
    findings
}

fn all_unknown(why: &str) -> Findings {
    Findings(
        Capability::ALL
            .into_iter()
            .map(|c| (c, Finding::Unknown(why.to_owned())))
            .collect(),
    )
}

struct Probe<'a> {
    store: &'a S3Store,
    http: reqwest::Client,
    prefix: String,
    /// Which round of calls this is: each round writes keys of its own.
    round: std::sync::atomic::AtomicU32,
}

impl Probe<'_> {
    fn key(&self, name: &str) -> String {
        format!(
            "{}r{}-{name}",
            self.prefix,
            self.round.load(std::sync::atomic::Ordering::Relaxed)
        )
    }

    async fn findings(&self, scope: Scope, archive_class: &str) -> Findings {
        match scope {
            Scope::All => self.everything(archive_class).await,
            Scope::Archival => Findings(vec![
                (
                    Capability::StorageClass,
                    self.storage_class(archive_class).await,
                ),
                (Capability::ObjectTags, self.tags().await),
            ]),
            Scope::CopyGuard => {
                let seed = self.key("seed");
                let found = match self.put(&seed).send().await {
                    Ok(_) => self.copy_if_match_legacy(&seed).await,
                    Err(e) => Finding::Unknown(format!(
                        "writing the probe object: {}",
                        crate::storage::errors::classify(e)
                    )),
                };
                Findings(vec![(Capability::CopyIfMatchLegacy, found)])
            }
        }
    }

    async fn everything(&self, archive_class: &str) -> Findings {
        let mut out = Vec::new();
        // Every other probe copies or overwrites this object: without it nothing can be told.
        let seed = self.key("seed");
        let url = match self.presign_put(&seed, None).await {
            Ok(u) => u,
            Err(why) => return all_unknown(&why),
        };
        match self.send_put(&url, BODY).await {
            Answer::Stored => {}
            other => return all_unknown(&format!("a probe object could not be written: {other}")),
        }
        out.push((
            Capability::ConditionalPut,
            self.send_put(&url, BODY).await.refused_as(
                PRECONDITION,
                "a second PUT of a URL signed with If-None-Match: * was stored over the first",
            ),
        ));
        out.push((
            Capability::ConditionalPutIfMatch,
            self.put_if_match(&seed).await,
        ));
        out.push((
            Capability::ConditionalCopy,
            self.conditional_copy(&seed).await,
        ));
        let aws_guard = self.copy_source_if_match(&seed).await;
        let legacy_guard = self.copy_if_match_legacy(&seed).await;
        out.push((
            Capability::CopySourceIfMatch,
            copy_source_guard_finding(aws_guard, &legacy_guard),
        ));
        out.push((Capability::CopyIfMatchLegacy, legacy_guard));
        out.push((
            Capability::ConditionalComplete,
            self.conditional_complete().await,
        ));
        for alg in ChecksumAlgorithm::ALL {
            out.push((Capability::checksum(alg), self.checksum(alg).await));
        }
        // Each algorithm presign offers on a multipart upload, each on its own (issue 35).
        let mut whole = Vec::new();
        for alg in ChecksumAlgorithm::ALL {
            if alg.full_object_multipart() {
                let right = self.multipart_checksum(alg).await;
                let wrong = self.multipart_checksum_refused(alg).await;
                whole.push((alg, both(right, wrong)));
            }
        }
        out.push((
            Capability::MultipartChecksum,
            multipart_checksum_finding(whole),
        ));
        // Copies in parts: whether the store does them at all, and whether UploadPartCopy keeps
        // the source guard, each its own capability (R2 is documented, and RGW 16.2 measured,
        // to ignore the guard there while keeping it on CopyObject: issue 36).
        out.push((Capability::CopyInParts, self.copy_in_parts().await));
        out.push((
            Capability::PartCopySourceIfMatch,
            self.part_copy_source_if_match().await,
        ));
        let (size, signature) = self.post_forms().await;
        out.push((Capability::PostSizeRange, size));
        out.push((Capability::PostSignature, signature));
        out.push((Capability::Versioning, self.versioning(&seed).await));
        out.push((
            Capability::StorageClass,
            self.storage_class(archive_class).await,
        ));
        out.push((Capability::ObjectTags, self.tags().await));
        out.push((Capability::EncryptionConfig, self.encryption().await));
        Findings(out)
    }

    async fn presign_put(
        &self,
        key: &str,
        checksum: Option<&Checksum>,
    ) -> Result<PresignedPut, String> {
        let now = Utc::now();
        self.store
            .presign_put(&PresignInput {
                key,
                content_type: TYPE,
                size: BODY.len() as u64,
                now,
                expires_at: now + chrono::Duration::minutes(5),
                checksum,
            })
            .await
            .map_err(|e| format!("presigning a probe URL: {e}"))
    }

    /// A PUT of `body` to a presigned URL with its headers, as a client sends it (the length
    /// is the body's own).
    fn presigned(&self, url: &PresignedPut, body: &[u8]) -> reqwest::RequestBuilder {
        let mut req = self.http.put(&url.url).timeout(CALL).body(body.to_vec());
        for (k, v) in &url.headers {
            if !k.eq_ignore_ascii_case("content-length") {
                req = req.header(k, v);
            }
        }
        req
    }

    async fn send_put(&self, url: &PresignedPut, body: &[u8]) -> Answer {
        http_answer(self.presigned(url, body).send().await).await
    }

    /// A PutObject of the probe's body at `key`, through the SDK.
    fn put(
        &self,
        key: &str,
    ) -> aws_sdk_s3::operation::put_object::builders::PutObjectFluentBuilder {
        self.store
            .client()
            .put_object()
            .bucket(self.store.bucket())
            .key(key)
            .body(BODY.to_vec().into())
    }

    /// A multipart upload at `key`, with a full-object checksum of `checksum` if any.
    async fn new_multipart(
        &self,
        key: &str,
        checksum: Option<ChecksumAlgorithm>,
    ) -> Result<String, crate::storage::StoreError> {
        self.store
            .create_multipart(&NewMultipart {
                key,
                content_type: TYPE,
                metadata: &[],
                checksum,
                storage_class: None,
                tagging: None,
                headers: None,
            })
            .await
    }

    /// Part `n` of the upload `id` at `key`, sent as a client sends it: a presigned PUT.
    async fn send_part(
        &self,
        key: &str,
        id: &str,
        n: u32,
        bytes: &[u8],
        checksum: Option<&Checksum>,
    ) -> Result<reqwest::Response, String> {
        let now = Utc::now();
        let url = self
            .store
            .presign_part(&PartInput {
                key,
                multipart_id: id,
                part_number: n,
                size: bytes.len() as u64,
                now,
                expires_at: now + chrono::Duration::minutes(5),
                checksum,
            })
            .await
            .map_err(|e| format!("presigning a part: {e}"))?;
        self.presigned(&url, bytes)
            .send()
            .await
            .map_err(|e| format!("uploading a part: {}", e.without_url()))
    }

    /// Removes every version and multipart upload under the probe prefix.
    async fn clean(&self) -> Result<(), crate::storage::StoreError> {
        for (key, id) in self.store.list_multipart_uploads(&self.prefix).await? {
            self.store.abort_multipart(&key, &id).await?;
        }
        let mut from = None;
        let mut all = Vec::new();
        loop {
            let page = self.store.list_versions(&self.prefix, from.take()).await?;
            all.extend(page.versions.into_iter().map(|v| (v.key, v.version_id)));
            match page.next {
                Some(next) => from = Some(next),
                None => break,
            }
        }
        for batch in all.chunks(crate::storage::DELETE_BATCH) {
            let failed = self.store.delete_versions(batch).await?;
            if let Some(f) = failed.first() {
                return Err(crate::storage::StoreError::Other(format!(
                    "{} not deleted, the first {} ({})",
                    failed.len(),
                    f.key,
                    f.reason
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_prefix_is_a_tmp_partition_key_of_a_fresh_id() {
        let a = probe_prefix();
        let b = probe_prefix();
        assert_ne!(a, b);
        let day = crate::domain::sweep::partition_day(&a[..TMP_PREFIX.len() + 11]);
        assert!(day.is_some(), "{a}");
        let id = a[TMP_PREFIX.len() + 11..].trim_end_matches('/');
        assert_eq!(id.len(), 32, "{a}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{a}");
        // A probe object is a tmp key the sweep recognizes (and, unrecorded, removes).
        assert!(
            crate::domain::keys::TmpKey::parse(&format!("{a}seed")).is_some(),
            "{a}"
        );
    }
}
