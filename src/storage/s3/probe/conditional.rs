//! The conditional writes a commit relies on: a PUT with `If-Match`, CopyObject with
//! `If-None-Match: *` and with `x-amz-copy-source-if-match` (and with RGW's older name of it,
//! `x-amz-copy-if-match`), the same guard on UploadPartCopy, and CompleteMultipartUpload with
//! `If-None-Match: *`. Each is asked with a condition that must fail; only the refusal the
//! condition means makes it present. Besides, a copy in parts as a commit makes one, its bytes
//! read back.

use super::answer::{
    etag_of, sdk_answer, status, store_error_finding, transient, Answer, PRECONDITION,
};
use super::{Probe, BODY, PART_MIN, TYPE, WRONG_ETAG};
use crate::domain::capabilities::Finding;
use crate::storage::{CopySource, ObjectStore, StoreError};

/// The bytes of the copies in parts' source.
fn part_source_bytes() -> Vec<u8> {
    let mut bytes = vec![b'p'; PART_MIN];
    bytes.extend_from_slice(BODY);
    bytes
}

/// What a failed call of a copy in parts says: a refusal is the store's answer (missing), a
/// passing failure says nothing (unknown).
fn part_copy_refusal(e: StoreError, call: &str) -> Finding {
    match e {
        StoreError::Unavailable(_) => Finding::Unknown(format!("{call}: {e}")),
        e => Finding::Missing(format!("{call} was refused: {e}")),
    }
}

impl Probe<'_> {
    pub(super) async fn put_if_match(&self, seed: &str) -> Finding {
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

    pub(super) async fn conditional_copy(&self, seed: &str) -> Finding {
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

    pub(super) async fn copy_source_if_match(&self, seed: &str) -> Finding {
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

    /// CopyObject guarded under Ceph RGW's older name of the source condition,
    /// `x-amz-copy-if-match` (RGW 16.2 ignores AWS's name on CopyObject and keeps this one):
    /// present only when another ETag is refused (412) and the source's own ETag copies, so a
    /// commit may send it beside AWS's name. LocalStack and Garage ignore it (issue 36).
    pub(super) async fn copy_if_match_legacy(&self, seed: &str) -> Finding {
        let guarded = |etag: String| {
            self.copy(seed, &self.key("copy-legacy-guarded"))
                .customize()
                .mutate_request(crate::storage::legacy_copy_guard(Some(etag)))
                .send()
        };
        let refused = sdk_answer(guarded(WRONG_ETAG.to_owned()).await).refused_as(
            PRECONDITION,
            "CopyObject copied a source whose ETag is not the one x-amz-copy-if-match named",
        );
        if refused != Finding::Present {
            return refused;
        }
        let etag = match self.store.head(seed).await {
            Ok(Some(h)) => h.etag,
            Ok(None) => return Finding::Unknown("the probe object is not there".into()),
            Err(e) => return Finding::Unknown(format!("HEAD: {e}")),
        };
        match sdk_answer(guarded(etag).await) {
            Answer::Stored => Finding::Present,
            Answer::Refused(s, code) if transient(s, &code) => {
                Finding::Unknown(format!("answered {}", status(s, &code)))
            }
            Answer::Refused(s, code) => Finding::Missing(format!(
                "CopyObject with x-amz-copy-if-match naming the source's own ETag was refused ({})",
                status(s, &code)
            )),
            Answer::Silent(why) => Finding::Unknown(why),
        }
    }

    /// A source over 5 MiB for the copies in parts (Garage copies nothing smaller in parts):
    /// 5 MiB of `p` then the probe's body, so that a part copied from the wrong range shows.
    /// Its key and ETag.
    pub(super) async fn part_source(&self) -> Result<(String, String), String> {
        let src = self.key("part-source");
        if let Ok(Some(h)) = self.store.head(&src).await {
            return Ok((src, h.etag));
        }
        let put = self
            .store
            .client()
            .put_object()
            .bucket(self.store.bucket())
            .key(&src)
            .content_type(TYPE)
            .body(part_source_bytes().into())
            .send()
            .await;
        match sdk_answer(put) {
            Answer::Stored => {}
            other => return Err(format!("writing a part copy's source: {other}")),
        }
        match self.store.head(&src).await {
            Ok(Some(h)) => Ok((src, h.etag)),
            Ok(None) => Err("the part copy's source just written is not there".into()),
            Err(e) => Err(format!("HEAD of the part copy's source: {e}")),
        }
    }

    /// UploadPartCopy guarded on an ETag its source does not have.
    pub(super) async fn part_copy_source_if_match(&self) -> Finding {
        let src = match self.part_source().await {
            Ok((src, _)) => src,
            Err(why) => return Finding::Unknown(why),
        };
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
            .copy_part(&wrong, &dst, &id, 1, (0, PART_MIN as u64 - 1))
            .await
        {
            Err(StoreError::PreconditionFailed) => Finding::Present,
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

    /// A copy in parts as a commit makes one: two UploadPartCopy calls with ranges (5 MiB, then
    /// the rest), guarded on the source's own ETag, and the completion; then the object is read
    /// back and must be the source's bytes (issue 36: RGW refused every part copy the SDK sent,
    /// 411 MissingContentLength, and each such commit answered 500).
    pub(super) async fn copy_in_parts(&self) -> Finding {
        let (src, etag) = match self.part_source().await {
            Ok(s) => s,
            Err(why) => return Finding::Unknown(why),
        };
        let dst = self.key("copy-in-parts");
        let id = match self.new_multipart(&dst, None).await {
            Ok(id) => id,
            Err(e) => return Finding::Unknown(format!("CreateMultipartUpload: {e}")),
        };
        let source = CopySource {
            key: &src,
            etag: &etag,
            version_id: None,
        };
        let want = part_source_bytes();
        let last = want.len() as u64 - 1;
        let finding = async {
            let mut parts = Vec::new();
            for (n, range) in [(1, (0, PART_MIN as u64 - 1)), (2, (PART_MIN as u64, last))] {
                match self.store.copy_part(&source, &dst, &id, n, range).await {
                    Ok(etag) => parts.push((n, etag)),
                    Err(e) => return part_copy_refusal(e, "UploadPartCopy"),
                }
            }
            if let Err(e) = self
                .store
                .complete_multipart(&dst, &id, &parts, None, false)
                .await
            {
                return part_copy_refusal(e, "the completion of a copy in parts");
            }
            let read = self
                .store
                .client()
                .get_object()
                .bucket(self.store.bucket())
                .key(&dst)
                .send()
                .await;
            let got = match read {
                Ok(out) => match out.body.collect().await {
                    Ok(b) => b.to_vec(),
                    Err(e) => return Finding::Unknown(format!("reading the copy: {e}")),
                },
                Err(e) => return Finding::Unknown(format!("GET of the copy: {e}")),
            };
            if got == want {
                Finding::Present
            } else {
                Finding::Missing(format!(
                    "a copy in parts of {} bytes was completed with {} bytes that are not the source's",
                    want.len(),
                    got.len()
                ))
            }
        }
        .await;
        let _ = self.store.abort_multipart(&dst, &id).await;
        finding
    }

    pub(super) async fn conditional_complete(&self) -> Finding {
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
                    Err(StoreError::PreconditionFailed) => Finding::Present,
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
}
