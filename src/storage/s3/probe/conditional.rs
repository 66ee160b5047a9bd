//! The conditional writes a commit relies on: a PUT with `If-Match`, CopyObject with
//! `If-None-Match: *` and with `x-amz-copy-source-if-match` (and the same guard on
//! UploadPartCopy), and CompleteMultipartUpload with `If-None-Match: *`. Each is asked with a
//! condition that must fail; only the refusal the condition means makes it present.

use super::answer::{etag_of, sdk_answer, store_error_finding, Answer, PRECONDITION};
use super::{Probe, BODY, PART_MIN, TYPE, WRONG_ETAG};
use crate::domain::capabilities::Finding;
use crate::storage::{CopySource, ObjectHead, ObjectStore, StoreError};

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

    /// UploadPartCopy guarded on an ETag its source does not have. The source must be over
    /// 5 MiB (Garage copies nothing smaller in parts): the multipart-checksum probe's object,
    /// or, where that upload did not complete, one written now.
    pub(super) async fn part_copy_source_if_match(&self) -> Finding {
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
