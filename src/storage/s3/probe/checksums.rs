//! Checksums: a presigned PUT signed with each algorithm's checksum must refuse other bytes and
//! keep the right ones' checksum (HEAD returns it); a multipart upload with a full-object
//! checksum must keep the whole object's checksum and refuse a completion declaring another,
//! for each algorithm a multipart upload may declare (CRC64NVME and CRC32C: a store may check
//! one and not the other).

use super::answer::{etag_of, status, transient, Answer, CHECKSUM_REFUSED};
use super::{Probe, BODY, PART_MIN};
use crate::domain::capabilities::Finding;
use crate::domain::checksum::{Checksum, ChecksumAlgorithm};
use crate::storage::{ObjectStore, StoreError};

/// What HEAD returned of a checksum, in words (issue 36: doctor printed "HEAD returns None").
fn returned(checksum: Option<&Checksum>) -> String {
    match checksum {
        Some(c) => format!("{} {}", c.algorithm, c.value),
        None => "no checksum".to_owned(),
    }
}

impl Probe<'_> {
    pub(super) async fn checksum(&self, alg: ChecksumAlgorithm) -> Finding {
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
                return Finding::Unknown(format!("answered {}", status(s, &code)))
            }
            other => {
                return Finding::Missing(format!(
                    "bytes with the right {} checksum were {other}",
                    alg.as_str()
                ))
            }
        }
        match self.store.head(&key).await {
            Ok(Some(h)) if h.checksum.as_ref() == Some(&right) => Finding::Present,
            Ok(Some(h)) => Finding::Missing(format!(
                "the bytes with the right {} checksum were stored, and HEAD returns {}",
                alg.as_str(),
                returned(h.checksum.as_ref())
            )),
            Ok(None) => Finding::Unknown("the object just stored is not there".into()),
            Err(e) => Finding::Unknown(format!("HEAD: {e}")),
        }
    }

    /// A multipart upload of two parts (5 MiB and a few bytes: S3's smallest) created with a
    /// full-object `alg`, completed with the whole object's checksum: HEAD must return it.
    pub(super) async fn multipart_checksum(&self, alg: ChecksumAlgorithm) -> Finding {
        let key = self.key(&format!(
            "multipart-checksum-{}",
            alg.as_str().to_ascii_lowercase()
        ));
        let first = vec![b'u'; PART_MIN];
        let whole: Vec<u8> = first.iter().chain(BODY).copied().collect();
        let id = match self.new_multipart(&key, Some(alg)).await {
            Ok(id) => id,
            Err(e @ StoreError::Unavailable(_)) => {
                return Finding::Unknown(format!(
                    "CreateMultipartUpload with a full-object {alg}: {e}"
                ))
            }
            Err(e) => {
                return Finding::Missing(format!(
                    "CreateMultipartUpload with a full-object {alg}: {e}"
                ))
            }
        };
        let finding = async {
            let mut etags = Vec::new();
            for (n, bytes) in [(1u32, &first[..]), (2, BODY)] {
                let part = Checksum::of(alg, bytes);
                let resp = self.send_part(&key, &id, n, bytes, Some(&part)).await?;
                if transient(resp.status().as_u16(), "") {
                    return Ok(Finding::Unknown(format!(
                        "a part upload answered {}",
                        resp.status()
                    )));
                }
                if !resp.status().is_success() {
                    return Ok(Finding::Missing(format!(
                        "a part with its {alg} was refused ({})",
                        resp.status()
                    )));
                }
                etags.push((n, etag_of(&resp).unwrap_or_default()));
            }
            let expect = Checksum::of(alg, &whole);
            Ok::<_, String>(
                match self
                    .store
                    .complete_multipart(&key, &id, &etags, Some(&expect), false)
                    .await
                {
                    Ok(()) => match self.store.head(&key).await {
                        Ok(Some(h)) if h.checksum.as_ref() == Some(&expect) => Finding::Present,
                        Ok(Some(h)) => Finding::Missing(format!(
                            "the upload completed with the whole object's {alg}, and HEAD returns {}",
                            returned(h.checksum.as_ref())
                        )),
                        Ok(None) => Finding::Unknown("the completed object is not there".into()),
                        Err(e) => Finding::Unknown(format!("HEAD: {e}")),
                    },
                    Err(StoreError::ChecksumMismatch(e)) => Finding::Missing(format!(
                        "the right whole-object checksum was refused: {e}"
                    )),
                    Err(e) => Finding::Unknown(format!("CompleteMultipartUpload: {e}")),
                },
            )
        }
        .await
        .unwrap_or_else(Finding::Unknown);
        let _ = self.store.abort_multipart(&key, &id).await;
        finding
    }

    /// A one-part multipart upload completed with another whole-object `alg` must be refused: a
    /// store that kept whatever whole checksum it is told would pass the check above (review 27).
    pub(super) async fn multipart_checksum_refused(&self, alg: ChecksumAlgorithm) -> Finding {
        let key = self.key(&format!(
            "multipart-checksum-{}-wrong",
            alg.as_str().to_ascii_lowercase()
        ));
        let id = match self.new_multipart(&key, Some(alg)).await {
            Ok(id) => id,
            Err(e) => return Finding::Unknown(format!("CreateMultipartUpload: {e}")),
        };
        let finding = async {
            let part = Checksum::of(alg, BODY);
            let resp = self.send_part(&key, &id, 1, BODY, Some(&part)).await?;
            if !resp.status().is_success() {
                return Err(format!("a part with its {alg} answered {}", resp.status()));
            }
            let etag = etag_of(&resp).unwrap_or_default();
            let wrong = Checksum::of(alg, b"not the bytes sent");
            Ok::<_, String>(
                match self
                    .store
                    .complete_multipart(&key, &id, &[(1, etag)], Some(&wrong), false)
                    .await
                {
                    Err(StoreError::ChecksumMismatch(_)) => Finding::Present,
                    Ok(()) => Finding::Missing(format!(
                        "a completion declaring another whole-object {alg} was accepted"
                    )),
                    Err(e) => Finding::Unknown(format!("CompleteMultipartUpload: {e}")),
                },
            )
        }
        .await
        .unwrap_or_else(Finding::Unknown);
        let _ = self.store.abort_multipart(&key, &id).await;
        finding
    }
}
