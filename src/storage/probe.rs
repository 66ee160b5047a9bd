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

use std::time::Duration;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use chrono::{Datelike, Utc};

use super::{
    CopySource, NewMultipart, ObjectHead, ObjectStore, PartInput, PresignInput, PresignedPut,
    S3Store,
};
use crate::domain::capabilities::{Capability, Finding, Findings};
use crate::domain::checksum::{Checksum, ChecksumAlgorithm};
use crate::domain::keys::TMP_PREFIX;
use crate::signing::post_policy::PostForm;

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
}

/// Runs every probe under a fresh prefix, then removes what it wrote.
pub async fn run(store: &S3Store, archive_class: &str) -> Findings {
    run_scoped(store, archive_class, Scope::All).await
}

/// Runs the probes of `scope` under a fresh prefix, then removes what it wrote.
pub async fn run_scoped(store: &S3Store, archive_class: &str, scope: Scope) -> Findings {
    let probe = Probe {
        store,
        http: match reqwest::Client::builder().timeout(CALL).build() {
            Ok(c) => c,
            Err(e) => return all_unknown(&format!("no HTTP client: {e}")),
        },
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

/// How a call the probe made ended: a 2xx, or the status and code of a refusal, or no answer.
#[derive(Debug)]
enum Answer {
    Stored,
    Refused(u16, String),
    Silent(String),
}

impl Answer {
    /// The finding for a call the capability needs refused, `want` saying which refusals
    /// (status and error code) mean that. A refusal for a passing reason (throttled, timed
    /// out, failing: [`transient`]) says nothing and leaves it unknown, asked again in the next
    /// round; so does any refusal `want` does not name.
    fn refused_as(self, want: impl Fn(u16, &str) -> bool, stored: &str) -> Finding {
        match self {
            Answer::Refused(s, code) if transient(s, &code) => {
                Finding::Unknown(format!("answered {s} {code}"))
            }
            Answer::Refused(s, code) if want(s, &code) => Finding::Present,
            Answer::Stored => Finding::Missing(stored.to_owned()),
            Answer::Refused(s, code) if s == 501 || code == "NotImplemented" => {
                Finding::Missing(format!("not implemented ({s} {code})"))
            }
            Answer::Refused(s, code) => Finding::Unknown(format!("answered {s} {code}")),
            Answer::Silent(why) => Finding::Unknown(why),
        }
    }
}

/// A refusal that says nothing of the capability: the store was busy, slow or failing (5xx
/// other than 501 NotImplemented, 408, 429, or a throttling or timeout code on any status,
/// such as S3's `400 RequestTimeout`), after the SDK's own retries. The probe asks again in its
/// next round (review 27: one 429 on the oversize form made `post_size_range` present).
fn transient(status: u16, code: &str) -> bool {
    (status >= 500 && status != 501)
        || status == 408
        || status == 429
        || matches!(
            code,
            "RequestTimeout"
                | "SlowDown"
                | "Throttling"
                | "ThrottlingException"
                | "TooManyRequests"
                | "RequestTimeTooSkewed"
                | "ServiceUnavailable"
                | "InternalError"
                | "OperationAborted"
        )
}

/// The ETag a part upload answered with.
fn etag_of(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The finding for a store call the capability needed refused, when it failed otherwise.
fn store_error_finding(e: super::StoreError, call: &str) -> Finding {
    match e {
        super::StoreError::NotImplemented(_) => Finding::Missing(format!("not implemented: {e}")),
        e => Finding::Unknown(format!("{call}: {e}")),
    }
}

/// One capability found by two calls: missing if either call shows it missing, unknown if
/// either could not tell, present only when both refused.
fn both(a: Finding, b: Finding) -> Finding {
    match (a, b) {
        (m @ Finding::Missing(_), _) | (_, m @ Finding::Missing(_)) => m,
        (u @ Finding::Unknown(_), _) | (_, u @ Finding::Unknown(_)) => u,
        (Finding::Present, Finding::Present) => Finding::Present,
    }
}

fn sdk_answer<T, E>(r: Result<T, SdkError<E, HttpResponse>>) -> Answer
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match r {
        Ok(_) => Answer::Stored,
        Err(SdkError::ServiceError(se)) => Answer::Refused(
            se.raw().status().as_u16(),
            se.err().code().unwrap_or("").to_owned(),
        ),
        Err(e) => Answer::Silent(format!("{e}")),
    }
}

async fn http_answer(r: Result<reqwest::Response, reqwest::Error>) -> Answer {
    match r {
        Ok(resp) if resp.status().is_success() => Answer::Stored,
        Ok(resp) => {
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap_or_default();
            let code = body
                .split_once("<Code>")
                .and_then(|(_, rest)| rest.split_once("</Code>"))
                .map(|(c, _)| c.to_owned())
                .unwrap_or_default();
            Answer::Refused(status, code)
        }
        Err(e) => Answer::Silent(format!("{e}")),
    }
}

/// A condition refused the request: 412 (PreconditionFailed).
const PRECONDITION: fn(u16, &str) -> bool = |s, _| s == 412;
/// Bytes refused for their checksum: S3 and LocalStack answer 400 BadDigest, Garage 400
/// InvalidDigest.
const CHECKSUM_REFUSED: fn(u16, &str) -> bool = |s, code| {
    s == 400
        && matches!(
            code,
            "BadDigest" | "InvalidDigest" | "XAmzContentChecksumMismatch"
        )
};
/// A POST body refused for the policy's size range: S3 and LocalStack answer 400
/// EntityTooLarge, Garage 400 InvalidRequest.
const SIZE_REFUSED: fn(u16, &str) -> bool =
    |s, code| s == 400 && matches!(code, "EntityTooLarge" | "EntityTooSmall" | "InvalidRequest");
/// A form refused for its signature: 403 AccessDenied (Garage) or SignatureDoesNotMatch (S3).
const SIGNATURE_REFUSED: fn(u16, &str) -> bool =
    |s, code| (s == 403 || s == 400) && matches!(code, "AccessDenied" | "SignatureDoesNotMatch");

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
            other => {
                return all_unknown(&format!("a probe object could not be written: {other:?}"))
            }
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
        let copy_guard = self.copy_source_if_match(&seed).await;
        out.push((
            Capability::ConditionalComplete,
            self.conditional_complete().await,
        ));
        for alg in ChecksumAlgorithm::ALL {
            out.push((Capability::checksum(alg), self.checksum(alg).await));
        }
        let right_whole = self.multipart_checksum().await;
        let wrong_whole = self.multipart_checksum_refused().await;
        out.push((
            Capability::MultipartChecksum,
            both(right_whole, wrong_whole),
        ));
        // Copies in parts rely on the same guard on UploadPartCopy (R2 is documented to
        // ignore it there while honouring it on CopyObject): both must refuse.
        let part_guard = self.part_copy_source_if_match().await;
        out.push((Capability::CopySourceIfMatch, both(copy_guard, part_guard)));
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
        let mut req = self.http.put(&url.url).body(body.to_vec());
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

    async fn put_if_match(&self, seed: &str) -> Finding {
        let r = self.put(seed).if_match(WRONG_ETAG).send().await;
        sdk_answer(r).refused_as(
            PRECONDITION,
            "a PUT with If-Match naming another ETag was stored",
        )
    }

    fn copy(
        &self,
        src: &str,
        dst: &str,
    ) -> aws_sdk_s3::operation::copy_object::builders::CopyObjectFluentBuilder {
        self.store
            .client()
            .copy_object()
            .bucket(self.store.bucket())
            .key(dst)
            .copy_source(self.store.copy_source(&CopySource {
                key: src,
                etag: "",
                version_id: None,
            }))
    }

    async fn conditional_copy(&self, seed: &str) -> Finding {
        let dst = self.key("copy-target");
        if let Answer::Silent(why) | Answer::Refused(_, why) =
            sdk_answer(self.put(&dst).send().await)
        {
            return Finding::Unknown(format!("writing the copy target: {why}"));
        }
        let r = self.copy(seed, &dst).if_none_match("*").send().await;
        sdk_answer(r).refused_as(
            PRECONDITION,
            "CopyObject with If-None-Match: * overwrote the object at its destination",
        )
    }

    async fn copy_source_if_match(&self, seed: &str) -> Finding {
        let r = self
            .copy(seed, &self.key("copy-guarded"))
            .copy_source_if_match(WRONG_ETAG)
            .send()
            .await;
        sdk_answer(r).refused_as(
            PRECONDITION,
            "CopyObject copied a source whose ETag is not the one x-amz-copy-source-if-match named",
        )
    }

    /// A multipart upload at `key`, with a full-object checksum of `checksum` if any.
    async fn new_multipart(
        &self,
        key: &str,
        checksum: Option<ChecksumAlgorithm>,
    ) -> Result<String, super::StoreError> {
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
            .map_err(|e| format!("uploading a part: {e}"))
    }

    /// UploadPartCopy guarded on an ETag its source does not have. The source must be over
    /// 5 MiB (Garage copies nothing smaller in parts): the multipart-checksum probe's object,
    /// or, where that upload did not complete, one written now.
    async fn part_copy_source_if_match(&self) -> Finding {
        let mut src = self.key("multipart-checksum");
        let big = |h: Option<ObjectHead>| h.is_some_and(|h| h.size > PART_MIN as i64);
        if !big(self.store.head(&src).await.ok().flatten()) {
            src = self.key("part-source");
            let put = self
                .store
                .client()
                .put_object()
                .bucket(self.store.bucket())
                .key(&src)
                .content_type(TYPE)
                .body(vec![b'p'; PART_MIN + BODY.len()].into())
                .send()
                .await;
            if let Answer::Silent(why) | Answer::Refused(_, why) = sdk_answer(put) {
                return Finding::Unknown(format!("writing a part copy's source: {why}"));
            }
        }
        let dst = self.key("part-copy-guarded");
        let id = match self.new_multipart(&dst, None).await {
            Ok(id) => id,
            Err(e) => return Finding::Unknown(format!("CreateMultipartUpload: {e}")),
        };
        let wrong = CopySource {
            key: &src,
            etag: WRONG_ETAG,
            version_id: None,
        };
        let finding = match self
            .store
            .copy_part(
                &wrong,
                &dst,
                &id,
                1,
                (0, (PART_MIN + BODY.len() - 1) as u64),
            )
            .await
        {
            Err(super::StoreError::PreconditionFailed) => Finding::Present,
            Ok(_) => Finding::Missing(
                "UploadPartCopy copied a part of a source whose ETag is not the one \
                 x-amz-copy-source-if-match named"
                    .into(),
            ),
            Err(e) => store_error_finding(e, "UploadPartCopy"),
        };
        let _ = self.store.abort_multipart(&dst, &id).await;
        finding
    }

    async fn conditional_complete(&self) -> Finding {
        // The copy target exists (written by the conditional copy probe, or now).
        let dst = self.key("copy-target");
        let _ = self.put(&dst).send().await;
        let id = match self.new_multipart(&dst, None).await {
            Ok(id) => id,
            Err(e) => return Finding::Unknown(format!("CreateMultipartUpload: {e}")),
        };
        let finding = async {
            let resp = self.send_part(&dst, &id, 1, BODY, None).await?;
            let etag = etag_of(&resp).ok_or_else(|| {
                format!("the part upload answered {} with no ETag", resp.status())
            })?;
            Ok::<_, String>(
                match self
                    .store
                    .complete_multipart(&dst, &id, &[(1, etag)], None, true)
                    .await
                {
                    Err(super::StoreError::PreconditionFailed) => Finding::Present,
                    Ok(()) => Finding::Missing(
                        "CompleteMultipartUpload with If-None-Match: * overwrote the object at its key".into(),
                    ),
                    Err(e) => Finding::Unknown(format!("CompleteMultipartUpload: {e}")),
                },
            )
        }
        .await
        .unwrap_or_else(Finding::Unknown);
        let _ = self.store.abort_multipart(&dst, &id).await;
        finding
    }

    async fn checksum(&self, alg: ChecksumAlgorithm) -> Finding {
        let right = Checksum::of(alg, BODY);
        let wrong = Checksum::of(alg, b"not the bytes sent");
        let key = self.key(&format!("checksum-{}", alg.as_str().to_ascii_lowercase()));
        let url = match self.presign_put(&key, Some(&wrong)).await {
            Ok(u) => u,
            Err(why) => return Finding::Unknown(why),
        };
        let refused = self.send_put(&url, BODY).await.refused_as(
            CHECKSUM_REFUSED,
            &format!(
                "bytes whose {} checksum differs from the signed header were stored",
                alg.as_str()
            ),
        );
        if refused != Finding::Present {
            return refused;
        }
        let url = match self.presign_put(&key, Some(&right)).await {
            Ok(u) => u,
            Err(why) => return Finding::Unknown(why),
        };
        match self.send_put(&url, BODY).await {
            Answer::Stored => {}
            Answer::Silent(why) => return Finding::Unknown(why),
            Answer::Refused(s, code) if transient(s, &code) => {
                return Finding::Unknown(format!("answered {s} {code}"))
            }
            other => {
                return Finding::Missing(format!(
                    "bytes with the right {} checksum were refused: {other:?}",
                    alg.as_str()
                ))
            }
        }
        match self.store.head(&key).await {
            Ok(Some(h)) if h.checksum.as_ref() == Some(&right) => Finding::Present,
            Ok(Some(h)) => Finding::Missing(format!(
                "HEAD does not return the stored {} checksum (it returned {:?})",
                alg.as_str(),
                h.checksum.map(|c| c.value)
            )),
            Ok(None) => Finding::Unknown("the object just stored is not there".into()),
            Err(e) => Finding::Unknown(format!("HEAD: {e}")),
        }
    }

    /// A multipart upload of two parts (5 MiB and a few bytes: S3's smallest) created with a
    /// full-object CRC64NVME, completed with the whole object's checksum: HEAD must return it.
    async fn multipart_checksum(&self) -> Finding {
        let alg = ChecksumAlgorithm::Crc64Nvme;
        let key = self.key("multipart-checksum");
        let first = vec![b'u'; PART_MIN];
        let whole: Vec<u8> = first.iter().chain(BODY).copied().collect();
        let id = match self.new_multipart(&key, Some(alg)).await {
            Ok(id) => id,
            Err(e @ super::StoreError::Unavailable(_)) => {
                return Finding::Unknown(format!(
                    "CreateMultipartUpload with a full-object CRC64NVME: {e}"
                ))
            }
            Err(e) => {
                return Finding::Missing(format!(
                    "CreateMultipartUpload with a full-object CRC64NVME: {e}"
                ))
            }
        };
        let finding = async {
            let mut etags = Vec::new();
            for (n, bytes) in [(1u32, &first[..]), (2, BODY)] {
                let part = Checksum::of(alg, bytes);
                let resp = self.send_part(&key, &id, n, bytes, Some(&part)).await?;
                if transient(resp.status().as_u16(), "") {
                    return Ok(Finding::Unknown(format!("a part upload answered {}", resp.status())));
                }
                if !resp.status().is_success() {
                    return Ok(Finding::Missing(format!("a part with its CRC64NVME was refused ({})", resp.status())));
                }
                etags.push((n, etag_of(&resp).unwrap_or_default()));
            }
            let expect = Checksum::of(alg, &whole);
            Ok::<_, String>(match self.store.complete_multipart(&key, &id, &etags, Some(&expect), false).await {
                Ok(()) => match self.store.head(&key).await {
                    Ok(Some(h)) if h.checksum.as_ref() == Some(&expect) => Finding::Present,
                    Ok(Some(h)) => Finding::Missing(format!(
                        "the completed object's HEAD returns {:?}, not the whole object's CRC64NVME",
                        h.checksum.map(|c| c.value)
                    )),
                    Ok(None) => Finding::Unknown("the completed object is not there".into()),
                    Err(e) => Finding::Unknown(format!("HEAD: {e}")),
                },
                Err(super::StoreError::ChecksumMismatch(e)) => Finding::Missing(format!("the right whole-object checksum was refused: {e}")),
                Err(e) => Finding::Unknown(format!("CompleteMultipartUpload: {e}")),
            })
        }
        .await
        .unwrap_or_else(Finding::Unknown);
        let _ = self.store.abort_multipart(&key, &id).await;
        finding
    }

    /// A one-part multipart upload completed with another whole-object CRC64NVME must be
    /// refused: a store that kept whatever whole checksum it is told would pass the check above
    /// (review 27).
    async fn multipart_checksum_refused(&self) -> Finding {
        let alg = ChecksumAlgorithm::Crc64Nvme;
        let key = self.key("multipart-checksum-wrong");
        let id = match self.new_multipart(&key, Some(alg)).await {
            Ok(id) => id,
            Err(e) => return Finding::Unknown(format!("CreateMultipartUpload: {e}")),
        };
        let finding = async {
            let part = Checksum::of(alg, BODY);
            let resp = self.send_part(&key, &id, 1, BODY, Some(&part)).await?;
            if !resp.status().is_success() {
                return Err(format!(
                    "a part with its CRC64NVME answered {}",
                    resp.status()
                ));
            }
            let etag = etag_of(&resp).unwrap_or_default();
            let wrong = Checksum::of(alg, b"not the bytes sent");
            Ok::<_, String>(
                match self
                    .store
                    .complete_multipart(&key, &id, &[(1, etag)], Some(&wrong), false)
                    .await
                {
                    Err(super::StoreError::ChecksumMismatch(_)) => Finding::Present,
                    Ok(()) => Finding::Missing(
                        "a completion declaring another whole-object CRC64NVME was accepted".into(),
                    ),
                    Err(e) => Finding::Unknown(format!("CompleteMultipartUpload: {e}")),
                },
            )
        }
        .await
        .unwrap_or_else(Finding::Unknown);
        let _ = self.store.abort_multipart(&key, &id).await;
        finding
    }

    async fn form(&self, name: &str) -> Result<PostForm, String> {
        let now = Utc::now();
        self.store
            .presign_post(&PresignInput {
                key: &self.key(name),
                content_type: TYPE,
                size: BODY.len() as u64,
                now,
                expires_at: now + chrono::Duration::minutes(5),
                checksum: None,
            })
            .await
            .map_err(|e| format!("signing a probe form: {e}"))
    }

    async fn send_form(&self, form: &PostForm, body: &[u8]) -> Answer {
        let mut multipart = reqwest::multipart::Form::new();
        for (k, v) in &form.fields {
            multipart = multipart.text(k.clone(), v.clone());
        }
        multipart = multipart.part(
            "file",
            reqwest::multipart::Part::bytes(body.to_vec()).file_name("probe"),
        );
        http_answer(self.http.post(&form.url).multipart(multipart).send().await).await
    }

    /// `(post_size_range, post_signature)`.
    async fn post_forms(&self) -> (Finding, Finding) {
        let both = |why: String| (Finding::Unknown(why.clone()), Finding::Unknown(why));
        // A form as signed, with the bytes it was signed for, must work first.
        let ok = match self.form("post-ok").await {
            Ok(f) => f,
            Err(why) => return both(why),
        };
        match self.send_form(&ok, BODY).await {
            Answer::Stored => {}
            other => return both(format!("a form as signed was refused: {other:?}")),
        }
        let size = match self.form("post-size").await {
            Ok(f) => {
                let mut more = BODY.to_vec();
                more.extend_from_slice(BODY);
                self.send_form(&f, &more).await.refused_as(
                    SIZE_REFUSED,
                    "a form bound to one size stored a body of twice that size",
                )
            }
            Err(why) => Finding::Unknown(why),
        };
        let signature = match self.form("post-signature").await {
            Ok(mut f) => match widen_policy(&mut f) {
                // The same bytes pass the signed policy and the altered one: only the
                // signature can refuse them.
                Some(()) => self.send_form(&f, BODY).await.refused_as(
                    SIGNATURE_REFUSED,
                    "a form whose policy was altered after signing was stored",
                ),
                None => Finding::Unknown("the form has no policy to alter".into()),
            },
            Err(why) => Finding::Unknown(why),
        };
        (size, signature)
    }

    async fn versioning(&self, seed: &str) -> Finding {
        let status = match self
            .store
            .client()
            .get_bucket_versioning()
            .bucket(self.store.bucket())
            .send()
            .await
        {
            Ok(out) => out.status().map(|s| s.as_str().to_owned()),
            Err(e) => {
                return sdk_answer::<(), _>(Err(e)).refused_as(|_, _| false, "");
            }
        };
        let version = self
            .store
            .head(seed)
            .await
            .ok()
            .flatten()
            .and_then(|h| h.version_id);
        match (status.as_deref(), version.as_deref()) {
            (Some("Enabled"), Some(v)) if v != "null" => Finding::Present,
            (Some("Enabled"), _) => {
                Finding::Missing("versioning is Enabled but HEAD returns no version id".into())
            }
            (Some(s), _) => Finding::Missing(format!("versioning is {s}")),
            (None, _) => Finding::Missing("versioning was never enabled".into()),
        }
    }

    async fn storage_class(&self, class: &str) -> Finding {
        let key = self.key("storage-class");
        let r = self.put(&key).storage_class(class.into()).send().await;
        match sdk_answer(r) {
            Answer::Stored => {}
            Answer::Refused(s, code) if transient(s, &code) => {
                return Finding::Unknown(format!("a PUT in {class} answered {s} {code}"))
            }
            Answer::Refused(s, code) => {
                return Finding::Missing(format!("a PUT in {class} was refused ({s} {code})"))
            }
            Answer::Silent(why) => return Finding::Unknown(why),
        }
        match self.store.head(&key).await {
            Ok(Some(h)) if h.storage_class.as_deref() == Some(class) => Finding::Present,
            Ok(Some(h)) => Finding::Missing(format!(
                "a PUT in {class} was stored, and HEAD reports {}",
                h.storage_class.as_deref().unwrap_or("STANDARD")
            )),
            Ok(None) => Finding::Unknown("the object just stored is not there".into()),
            Err(e) => Finding::Unknown(format!("HEAD: {e}")),
        }
    }

    async fn tags(&self) -> Finding {
        let key = self.key("tags");
        let r = self.put(&key).tagging("upcommit-probe=1").send().await;
        match sdk_answer(r) {
            Answer::Stored => {}
            Answer::Refused(s, code) if transient(s, &code) => {
                return Finding::Unknown(format!("a PUT with tags answered {s} {code}"))
            }
            Answer::Refused(s, code) => {
                return Finding::Missing(format!("a PUT with tags was refused ({s} {code})"))
            }
            Answer::Silent(why) => return Finding::Unknown(why),
        }
        match self
            .store
            .client()
            .get_object_tagging()
            .bucket(self.store.bucket())
            .key(&key)
            .send()
            .await
        {
            Ok(out)
                if out
                    .tag_set()
                    .iter()
                    .any(|t| t.key() == "upcommit-probe" && t.value() == "1") =>
            {
                Finding::Present
            }
            Ok(_) => Finding::Missing("tags written with the object are not read back".into()),
            Err(e) => sdk_answer::<(), _>(Err(e)).refused_as(|_, _| false, ""),
        }
    }

    async fn encryption(&self) -> Finding {
        match self
            .store
            .client()
            .get_bucket_encryption()
            .bucket(self.store.bucket())
            .send()
            .await
        {
            Ok(_) => Finding::Present,
            Err(e) => match sdk_answer::<(), _>(Err(e)) {
                // Implemented, with nothing configured: the encryption check says so. (Only
                // that answer: a gateway's bare 404 for a subresource it does not know is none.)
                Answer::Refused(_, code)
                    if code == "ServerSideEncryptionConfigurationNotFoundError" =>
                {
                    Finding::Present
                }
                other => other.refused_as(|_, _| false, ""),
            },
        }
    }

    /// Removes every version and multipart upload under the probe prefix.
    async fn clean(&self) -> Result<(), super::StoreError> {
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
        for batch in all.chunks(super::DELETE_BATCH) {
            let failed = self.store.delete_versions(batch).await?;
            if let Some(f) = failed.first() {
                return Err(super::StoreError::Other(format!(
                    "{} not deleted: {f:?}",
                    failed.len()
                )));
            }
        }
        Ok(())
    }
}

/// Alters a signed form's policy so that the same body still meets it: the size range is
/// widened. Only a store that checks the signature over the policy can tell.
fn widen_policy(form: &mut PostForm) -> Option<()> {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::STANDARD;
    let (_, value) = form.fields.iter_mut().find(|(k, _)| k == "policy")?;
    let mut doc: serde_json::Value =
        serde_json::from_slice(&engine.decode(value.as_bytes()).ok()?).ok()?;
    for c in doc.get_mut("conditions")?.as_array_mut()? {
        if c.get(0).and_then(|v| v.as_str()) == Some("content-length-range") {
            *c = serde_json::json!(["content-length-range", 1, 1_000_000]);
        }
    }
    *value = engine.encode(doc.to_string());
    Some(())
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

    /// Review 27, round 2: a throttled or timed-out call on the one test request made a
    /// missing capability present (any 4xx but 403 counted as the refusal). Only the refusals
    /// that mean the check count; passing failures and any other refusal leave it unknown.
    #[test]
    fn only_the_refusal_a_check_means_makes_a_capability_present() {
        let judge = |status: u16, code: &str, want: fn(u16, &str) -> bool| {
            Answer::Refused(status, code.into()).refused_as(want, "stored")
        };
        for (status, code) in [
            (429, "SlowDown"),
            (503, "SlowDown"),
            (400, "RequestTimeout"),
            (408, ""),
            (500, "InternalError"),
            (400, "RequestTimeTooSkewed"),
        ] {
            for want in [
                CHECKSUM_REFUSED,
                SIZE_REFUSED,
                SIGNATURE_REFUSED,
                PRECONDITION,
            ] {
                assert!(
                    matches!(judge(status, code, want), Finding::Unknown(_)),
                    "{status} {code}"
                );
            }
        }
        // Other refusals say nothing either.
        assert!(matches!(
            judge(400, "InvalidArgument", CHECKSUM_REFUSED),
            Finding::Unknown(_)
        ));
        assert!(matches!(
            judge(403, "AccessDenied", SIZE_REFUSED),
            Finding::Unknown(_)
        ));
        assert!(matches!(
            judge(400, "EntityTooLarge", SIGNATURE_REFUSED),
            Finding::Unknown(_)
        ));
        // The refusals each check means, as LocalStack, S3 and Garage answer them.
        for (status, code, want) in [
            (400, "BadDigest", CHECKSUM_REFUSED),
            (400, "InvalidDigest", CHECKSUM_REFUSED),
            (400, "EntityTooLarge", SIZE_REFUSED),
            (400, "InvalidRequest", SIZE_REFUSED),
            (403, "AccessDenied", SIGNATURE_REFUSED),
            (403, "SignatureDoesNotMatch", SIGNATURE_REFUSED),
            (412, "PreconditionFailed", PRECONDITION),
        ] {
            assert_eq!(
                judge(status, code, want),
                Finding::Present,
                "{status} {code}"
            );
        }
        assert_eq!(
            Answer::Stored.refused_as(SIZE_REFUSED, "stored"),
            Finding::Missing("stored".into())
        );
    }

    #[test]
    fn widening_keeps_every_condition_but_the_size() {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::STANDARD;
        let policy = serde_json::json!({"expiration": "x", "conditions": [
            {"bucket": "b"}, ["eq", "$key", "k"], ["content-length-range", 4, 4]]});
        let mut form = PostForm {
            url: "http://s3/b".into(),
            fields: vec![("policy".into(), engine.encode(policy.to_string()))],
        };
        widen_policy(&mut form).expect("widened");
        let got: serde_json::Value =
            serde_json::from_slice(&engine.decode(&form.fields[0].1).expect("base64"))
                .expect("JSON");
        assert_eq!(
            got["conditions"],
            serde_json::json!([{"bucket": "b"}, ["eq", "$key", "k"], ["content-length-range", 1, 1_000_000]])
        );
    }
}
