//! What the bucket does with what it holds: versioning (and a version id on HEAD), storage
//! classes and object tags (what archival uses: `Scope::Archival` probes these two), and the
//! default encryption configuration.

use super::answer::{sdk_answer, status, transient, Answer};
use super::Probe;
use crate::domain::capabilities::Finding;
use crate::storage::errors::classify;
use crate::storage::{ObjectStore, StoreError};

impl Probe<'_> {
    pub(super) async fn versioning(&self, seed: &str) -> Finding {
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

    pub(super) async fn storage_class(&self, class: &str) -> Finding {
        let key = self.key("storage-class");
        let r = self.put(&key).storage_class(class.into()).send().await;
        if let Some(finding) = not_stored(sdk_answer(r), &format!("a PUT in {class}")) {
            return finding;
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

    pub(super) async fn tags(&self) -> Finding {
        let key = self.key("tags");
        let r = self.put(&key).tagging("upcommit-probe=1").send().await;
        if let Some(finding) = not_stored(sdk_answer(r), "a PUT with tags") {
            return finding;
        }
        match self.tags_of(&key).await {
            Ok(tags) if tags.iter().any(|(k, v)| k == "upcommit-probe" && v == "1") => {}
            Ok(_) => {
                return Finding::Missing("tags written with the object are not read back".into())
            }
            Err(finding) => return finding,
        }
        self.copied_tags(&key).await
    }

    /// What archival does: a CopyObject that replaces the tags (`x-amz-tagging-directive:
    /// REPLACE`), read back on the copy. RGW 16.2 answers 200 and keeps the source's.
    async fn copied_tags(&self, src: &str) -> Finding {
        let dst = self.key("tags-copied");
        let r = self
            .store
            .client()
            .copy_object()
            .bucket(self.store.bucket())
            .key(&dst)
            .copy_source(self.store.copy_source(&crate::storage::CopySource {
                key: src,
                etag: "",
                version_id: None,
            }))
            .tagging_directive(aws_sdk_s3::types::TaggingDirective::Replace)
            .tagging("upcommit-probe=2")
            .send()
            .await;
        if let Some(finding) = not_stored(sdk_answer(r), "a copy replacing the tags") {
            return finding;
        }
        match self.tags_of(&dst).await {
            Ok(tags) if tags == [("upcommit-probe".to_owned(), "2".to_owned())] => Finding::Present,
            Ok(tags) if tags.is_empty() => Finding::Missing(
                "a copy that replaces the tags (as archival writes them) answered 200 and kept none"
                    .into(),
            ),
            Ok(_) => Finding::Missing(
                "a copy that replaces the tags (as archival writes them) kept the source's tags \
                 instead"
                    .into(),
            ),
            Err(finding) => finding,
        }
    }

    /// The tags GetObjectTagging reads back for `key` (a finding where it cannot).
    async fn tags_of(&self, key: &str) -> Result<Vec<(String, String)>, Finding> {
        match self
            .store
            .client()
            .get_object_tagging()
            .bucket(self.store.bucket())
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(out
                .tag_set()
                .iter()
                .map(|t| (t.key().to_owned(), t.value().to_owned()))
                .collect()),
            Err(e) => Err(sdk_answer::<(), _>(Err(e)).refused_as(|_, _| false, "")),
        }
    }

    pub(super) async fn encryption(&self) -> Finding {
        match self
            .store
            .client()
            .get_bucket_encryption()
            .bucket(self.store.bucket())
            .send()
            .await
        {
            Ok(_) => Finding::Present,
            // Implemented, with nothing configured: the encryption check says so. (Only that
            // answer: a gateway's bare 404 for a subresource it does not know is none.)
            Err(e)
                if e.as_service_error().and_then(|se| se.meta().code())
                    == Some("ServerSideEncryptionConfigurationNotFoundError") =>
            {
                Finding::Present
            }
            Err(e) => match classify(e) {
                // Garage's 501; RGW 16.2's 200 with the bucket listing for a body (issue 36).
                StoreError::NotImplemented(what) => {
                    Finding::Missing(format!("GetBucketEncryption is not implemented: {what}"))
                }
                other => Finding::Unknown(format!("GetBucketEncryption: {other}")),
            },
        }
    }
}

/// The finding for a probe write `what` that was not stored (`None`: it was): unknown when the
/// store was busy or did not answer, missing when it refused.
fn not_stored(answer: Answer, what: &str) -> Option<Finding> {
    match answer {
        Answer::Stored => None,
        Answer::Refused(s, code) if transient(s, &code) => Some(Finding::Unknown(format!(
            "{what} answered {}",
            status(s, &code)
        ))),
        Answer::Refused(s, code) => Some(Finding::Missing(format!(
            "{what} was refused ({})",
            status(s, &code)
        ))),
        Answer::Silent(why) => Some(Finding::Unknown(why)),
    }
}
