//! Presigning, done locally with the cached credentials (no S3 call): PUT URLs that sign the
//! exact headers the client must send, browser POST forms, and GET URLs for downloads and for
//! one version of an object.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::S3Store;
use crate::domain::checksum::Checksum;
use crate::signing::post_policy::{self, PostForm, PostPolicyRequest};
use crate::signing::query::{self, PresignRequest};
use crate::signing::SigningCredentials;
use crate::storage::{PresignInput, PresignedPut, StoreError};

impl S3Store {
    /// The cached credentials (`storage::aws`) that outlast a URL living `expires_secs`, in
    /// the signer's shape.
    pub(super) async fn signing_credentials(
        &self,
        expires_secs: u64,
    ) -> Result<SigningCredentials, StoreError> {
        let c = self
            .aws
            .credentials()
            .get_for(std::time::Duration::from_secs(expires_secs))
            .await
            .map_err(StoreError::Unavailable)?;
        Ok(SigningCredentials {
            access_key_id: c.access_key_id().to_owned(),
            secret_access_key: c.secret_access_key().to_owned(),
            session_token: c.session_token().map(str::to_owned),
        })
    }

    /// A presigned PUT (an object or an UploadPart) whose URL signs exactly the headers the
    /// client is told to send.
    pub(super) fn signed_put(
        &self,
        creds: &SigningCredentials,
        key: &str,
        must_send: Vec<(String, String)>,
        query: BTreeMap<String, String>,
        (now, expires_at): (DateTime<Utc>, DateTime<Utc>),
    ) -> PresignedPut {
        let url = query::presign(
            &PresignRequest {
                method: "PUT",
                location: &self.location,
                key,
                headers: must_send
                    .iter()
                    .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                    .collect(),
                query,
                region: &self.region,
                now,
                expires_secs: expires_secs(now, expires_at),
            },
            creds,
        );
        PresignedPut {
            url,
            headers: must_send,
        }
    }

    /// A presigned PUT of a whole object: the declared type, size and checksum signed as
    /// headers, with `If-None-Match: *`.
    pub(super) async fn put_url(
        &self,
        input: &PresignInput<'_>,
    ) -> Result<PresignedPut, StoreError> {
        let creds = self
            .signing_credentials(expires_secs(input.now, input.expires_at))
            .await?;
        // What the client must send is exactly what is signed.
        let mut must_send: Vec<(String, String)> = vec![
            ("Content-Type".into(), input.content_type.to_owned()),
            ("Content-Length".into(), input.size.to_string()),
            ("If-None-Match".into(), "*".into()),
        ];
        // Signed headers, not query parameters: S3 then refuses bytes with another checksum
        // (400 BadDigest) and a request that leaves the header out or changes it (403).
        if let Some(c) = input.checksum {
            must_send.extend(checksum_headers(c));
        }
        Ok(self.signed_put(
            &creds,
            input.key,
            must_send,
            BTreeMap::new(),
            (input.now, input.expires_at),
        ))
    }

    /// A browser POST form whose policy binds the key, type, size and checksum.
    pub(super) async fn post_form(&self, input: &PresignInput<'_>) -> Result<PostForm, StoreError> {
        let creds = self
            .signing_credentials(expires_secs(input.now, input.expires_at))
            .await?;
        Ok(post_policy::build(
            &PostPolicyRequest {
                location: &self.location,
                bucket: &self.bucket,
                key: input.key,
                content_type: input.content_type,
                size: input.size,
                region: &self.region,
                now: input.now,
                expires_at: input.expires_at,
                checksum: input.checksum,
            },
            &creds,
        ))
    }

    /// A download URL that answers with the given type and disposition.
    pub(super) async fn get_url(
        &self,
        key: &str,
        content_type: &str,
        disposition: &str,
        expires_secs: u64,
    ) -> Result<String, StoreError> {
        let creds = self.signing_credentials(expires_secs).await?;
        let mut q = BTreeMap::new();
        q.insert(
            "response-content-disposition".to_owned(),
            disposition.to_owned(),
        );
        q.insert("response-content-type".to_owned(), content_type.to_owned());
        Ok(query::presign(
            &PresignRequest {
                method: "GET",
                location: &self.location,
                key,
                headers: BTreeMap::new(),
                query: q,
                region: &self.region,
                now: chrono::Utc::now(),
                expires_secs,
            },
            &creds,
        ))
    }

    /// A URL of one version, served as an attachment of bytes.
    pub(super) async fn version_url(
        &self,
        key: &str,
        version_id: Option<&str>,
        expires_secs: u64,
    ) -> Result<String, StoreError> {
        let creds = self.signing_credentials(expires_secs).await?;
        let mut q = BTreeMap::new();
        q.insert(
            "response-content-disposition".to_owned(),
            "attachment".to_owned(),
        );
        q.insert(
            "response-content-type".to_owned(),
            "application/octet-stream".to_owned(),
        );
        if let Some(v) = version_id {
            q.insert("versionId".to_owned(), v.to_owned());
        }
        Ok(query::presign(
            &PresignRequest {
                method: "GET",
                location: &self.location,
                key,
                headers: BTreeMap::new(),
                query: q,
                region: &self.region,
                now: chrono::Utc::now(),
                expires_secs,
            },
            &creds,
        ))
    }
}

/// The headers that carry a declared checksum: the value, and the algorithm the way the AWS
/// SDKs name it (S3 and LocalStack read the algorithm from it).
pub(super) fn checksum_headers(c: &Checksum) -> [(String, String); 2] {
    [
        (c.algorithm.header().to_owned(), c.value.clone()),
        (
            "x-amz-sdk-checksum-algorithm".to_owned(),
            c.algorithm.as_str().to_owned(),
        ),
    ]
}

/// Seconds from `now` to `expires_at`, at least one.
pub(super) fn expires_secs(now: DateTime<Utc>, expires_at: DateTime<Utc>) -> u64 {
    u64::try_from((expires_at - now).num_seconds())
        .unwrap_or(1)
        .max(1)
}
