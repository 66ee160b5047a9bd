//! The object store facade: owns the S3 client and bucket and speaks the domain's language
//! (`head`, `read_head_bytes`, `promote`, `delete_version`, presigning). Tests wrap it to inject
//! faults; the rest of the service never knows which implementation it holds.

pub mod aws;
mod bucket;
mod errors;
mod listing;
mod multipart;
mod observe;
mod part_copy;
mod s3;
pub mod sqs;

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::bucket_check::BucketView;
use crate::domain::checksum::{Checksum, ChecksumAlgorithm};
use crate::domain::keys::FinalKey;
use crate::domain::multipart::PartRecord;
use crate::signing::post_policy::PostForm;

pub use bucket::{lifecycle_configuration, rule_view, sdk_rule};
pub use errors::StoreError;
pub use listing::{
    DeleteFailure, ObjectEntry, ObjectPage, ObjectVersion, VersionPage, DELETE_BATCH,
};
pub use part_copy::{copy_in_parts, CopyLimits, PartCopy};
pub use s3::content_range_total;
pub use s3::S3Store;

/// Metadata key naming the upload an object was promoted from. A retried commit recognizes its
/// own final object by it (and nothing else's).
pub const UPLOAD_ID_METADATA: &str = "upcommit-upload-id";

/// Ceph RGW's older name of `x-amz-copy-source-if-match` on CopyObject: RGW 16.2 keeps the
/// condition only under this name. Sent only where the probe found it kept
/// (`copy_if_match_legacy`); AWS documents no such header, LocalStack and Garage ignore it.
pub(crate) const LEGACY_COPY_IF_MATCH: &str = "x-amz-copy-if-match";

/// For a CopyObject's `customize().mutate_request(…)`: adds [`LEGACY_COPY_IF_MATCH`] with
/// `etag` when there is one (the store keeps the condition only under that name).
pub(crate) fn legacy_copy_guard(
    etag: Option<String>,
) -> impl Fn(&mut aws_sdk_s3::config::http::HttpRequest) + Send + Sync + 'static {
    move |request| {
        if let Some(etag) = &etag {
            request
                .headers_mut()
                .insert(LEGACY_COPY_IF_MATCH, etag.clone());
        }
    }
}

/// The headers an object is served with, besides its type: a copy in parts writes them again
/// (CopyObject keeps them on its own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredHeaders {
    pub content_encoding: Option<String>,
    pub cache_control: Option<String>,
    pub content_disposition: Option<String>,
    pub content_language: Option<String>,
}

impl StoredHeaders {
    /// From a HEAD's or a GET's answer.
    pub fn of(
        content_encoding: Option<&str>,
        cache_control: Option<&str>,
        content_disposition: Option<&str>,
        content_language: Option<&str>,
    ) -> Self {
        Self {
            content_encoding: content_encoding.map(str::to_owned),
            cache_control: cache_control.map(str::to_owned),
            content_disposition: content_disposition.map(str::to_owned),
            content_language: content_language.map(str::to_owned),
        }
    }
}

/// An ETag that can tell objects apart, so an equal one is evidence of equal bytes: a store
/// (or a gateway before it) that answers none gives "", which any two objects share (review
/// 27: two objects of the same size and no ETag were taken for the same).
pub fn known_etag(etag: &str) -> bool {
    !etag.is_empty() && etag != "\"\""
}

/// What a HEAD tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectHead {
    pub size: i64,
    pub content_type: Option<String>,
    /// As S3 returns it, with quotes.
    pub etag: String,
    pub version_id: Option<String>,
    pub metadata: HashMap<String, String>,
    /// As S3 reports it: `None` for STANDARD.
    pub storage_class: Option<String>,
    /// The full-object checksum S3 holds, when it reports one (HEAD with checksum mode; a
    /// ranged GET reports none).
    pub checksum: Option<Checksum>,
    /// Content-Encoding, Cache-Control, Content-Disposition, Content-Language.
    pub headers: StoredHeaders,
}

/// What one ranged GET of an object's first bytes tells: the object's facts from the same
/// response (type, total size from Content-Range, ETag, version, metadata) and the bytes.
#[derive(Debug, Clone)]
pub struct Sniffed {
    pub head: ObjectHead,
    pub first: Vec<u8>,
}

/// Exactly one version of an object, as a copy's source: `versionId` in the copy source when
/// the bucket gave one (the copy is of that version even if the key was written since), and
/// `x-amz-copy-source-if-match` on its ETag (the only guard an unversioned bucket has).
#[derive(Debug, Clone, Copy)]
pub struct CopySource<'a> {
    pub key: &'a str,
    pub etag: &'a str,
    /// `None` (or `"null"`): the key's current object, guarded by the ETag alone.
    pub version_id: Option<&'a str>,
}

impl<'a> CopySource<'a> {
    /// The version of `key` that `head` read.
    pub fn of(key: &'a str, head: &'a ObjectHead) -> Self {
        Self {
            key,
            etag: &head.etag,
            version_id: head.version_id.as_deref(),
        }
    }
}

/// The object a multipart upload (or multipart copy) will make.
#[derive(Debug, Clone, Copy)]
pub struct NewMultipart<'a> {
    pub key: &'a str,
    pub content_type: &'a str,
    pub metadata: &'a [(&'a str, &'a str)],
    /// A full-object checksum of this algorithm, named again at completion.
    pub checksum: Option<ChecksumAlgorithm>,
    /// Archival in parts: the class the object is written in.
    pub storage_class: Option<&'a str>,
    /// Archival in parts: the object's tags, URL-query encoded (`None`: no tags).
    pub tagging: Option<&'a str>,
    /// A copy in parts: the source's serving headers, written again.
    pub headers: Option<&'a StoredHeaders>,
}

/// A guarded CopyObject of a validated tmp object to its final key.
#[derive(Debug, Clone)]
pub struct PromoteRequest<'a> {
    /// The version the validation read (and the hook was given), guarded on its ETag.
    pub src: CopySource<'a>,
    /// Written only if nothing is there (`If-None-Match: *` on the destination).
    pub dst: &'a FinalKey,
    pub upload_id: &'a str,
    pub content_type: &'a str,
    /// The algorithm S3 computes the copy's checksum with over the copied bytes (the declared
    /// one's), reported in the copy's answer.
    pub checksum: ChecksumAlgorithm,
    /// Also guard the source under Ceph RGW's older name, `x-amz-copy-if-match`: set where the
    /// store keeps the condition only there (the capability `copy_if_match_legacy`).
    pub legacy_guard: bool,
}

/// What CopyObject reports about the object it wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub etag: String,
    pub version_id: Option<String>,
    pub checksum: Option<Checksum>,
}

/// A presigned single-request upload.
#[derive(Debug, Clone)]
pub struct PresignedPut {
    pub url: String,
    /// Headers the client must send exactly as given.
    pub headers: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct PresignInput<'a> {
    pub key: &'a str,
    pub content_type: &'a str,
    /// The declared size: PUT URLs sign it as Content-Length, POST forms bind it exactly.
    pub size: u64,
    pub now: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// Signed as `x-amz-checksum-<alg>` (PUT) or bound by the policy (POST): S3 refuses other
    /// bytes.
    pub checksum: Option<&'a Checksum>,
}

/// One page of ListParts.
#[derive(Debug, Clone, Default)]
pub struct PartPage {
    pub parts: Vec<PartRecord>,
    /// The marker of the next page, when there is one.
    pub next: Option<u32>,
}

/// One part URL to presign.
#[derive(Debug, Clone)]
pub struct PartInput<'a> {
    pub key: &'a str,
    pub multipart_id: &'a str,
    pub part_number: u32,
    /// Signed as Content-Length: S3 refuses a part of any other length.
    pub size: u64,
    pub now: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The part's checksum, signed as `x-amz-checksum-<alg>`.
    pub checksum: Option<&'a Checksum>,
}

/// A new object to write whole.
#[derive(Debug, Clone, Copy)]
pub struct NewObject<'a> {
    pub key: &'a str,
    pub body: &'a [u8],
    pub content_type: &'a str,
    /// `x-amz-meta-*` pairs.
    pub metadata: &'a [(&'a str, String)],
}

/// What a conditional PUT did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutOutcome {
    Created {
        etag: String,
    },
    /// Another writer's object is at the key (412): it stays.
    AlreadyThere,
}

#[async_trait]
pub trait ObjectStore: Send + Sync + 'static {
    fn bucket(&self) -> &str;

    /// The process's outgoing HTTP client (`crate::outbound`), for reading the store through
    /// presigned URLs as a browser would (reconcile's side-by-side comparison).
    fn http(&self) -> &reqwest::Client;

    /// PUT URL with Content-Type, Content-Length, `If-None-Match: *` and the checksum (if any)
    /// signed.
    async fn presign_put(&self, input: &PresignInput<'_>) -> Result<PresignedPut, StoreError>;

    /// Browser POST form with exact key and Content-Type and `content-length-range` [1, max].
    async fn presign_post(&self, input: &PresignInput<'_>) -> Result<PostForm, StoreError>;

    /// Short-lived GET URL served with the given type and `Content-Disposition` (S3 answers
    /// with them: `response-content-type`, `response-content-disposition`).
    async fn presign_get(
        &self,
        key: &str,
        content_type: &str,
        disposition: &str,
        expires_secs: u64,
    ) -> Result<String, StoreError>;

    /// A short-lived GET URL of exactly one version of an object (`versionId` signed; `None`
    /// for an unversioned object), served as `application/octet-stream` attachment: what a
    /// validation hook reads, so it sees the bytes it is asked about even if the key is
    /// written again.
    async fn presign_get_version(
        &self,
        key: &str,
        version_id: Option<&str>,
        expires_secs: u64,
    ) -> Result<String, StoreError>;

    /// `Ok(None)` when there is no such object.
    async fn head(&self, key: &str) -> Result<Option<ObjectHead>, StoreError>;

    /// PutObject of a new object with `If-None-Match: *` (a rendition under `cache/`): an
    /// object already at the key is never replaced where the store keeps the condition.
    async fn put_new_object(&self, obj: &NewObject<'_>) -> Result<PutOutcome, StoreError>;

    /// One ranged GET of the first `len` bytes and the object's facts; `Ok(None)` when there
    /// is no such object. An empty object (no first bytes) is told by a HEAD.
    async fn sniff(&self, key: &str, len: u64) -> Result<Option<Sniffed>, StoreError>;

    /// CopyObject of the version `src` names → `dst` guarded by `x-amz-copy-source-if-match`
    /// on its ETag and, on the destination, `If-None-Match: *`, writing the upload id into the
    /// copy's metadata and
    /// the declared Content-Type. Either guard failing is [`StoreError::PreconditionFailed`]
    /// (S3 answers 412 for both; the caller tells them apart).
    async fn promote(&self, req: &PromoteRequest<'_>) -> Result<Copied, StoreError>;

    /// Deletes one version (or, unversioned, the object). Missing is not an error.
    async fn delete_version(&self, key: &str, version_id: Option<&str>) -> Result<(), StoreError>;

    /// Bucket reachable (readiness).
    async fn check_bucket(&self) -> Result<(), StoreError>;

    /// CreateMultipartUpload of `spec` (Content-Type bound, metadata, a full-object checksum
    /// when it names one, class and tags when given); returns S3's upload id.
    async fn create_multipart(&self, spec: &NewMultipart<'_>) -> Result<String, StoreError>;

    /// An UploadPart URL with Content-Length signed.
    async fn presign_part(&self, input: &PartInput<'_>) -> Result<PresignedPut, StoreError>;

    /// One page of the parts S3 holds, after part number `after` (0: from the start).
    /// [`StoreError::NotFound`] when S3 has no such multipart upload.
    async fn list_parts(
        &self,
        key: &str,
        multipart_id: &str,
        after: u32,
        max: u32,
    ) -> Result<PartPage, StoreError>;

    /// CompleteMultipartUpload with `(part number, ETag)` in ascending order and, when the
    /// upload was created with one, the full-object checksum S3 must find
    /// ([`StoreError::ChecksumMismatch`] otherwise). `if_absent`: only if nothing is at `key`
    /// (`If-None-Match: *`; [`StoreError::PreconditionFailed`] otherwise).
    async fn complete_multipart(
        &self,
        key: &str,
        multipart_id: &str,
        parts: &[(u32, String)],
        checksum: Option<&Checksum>,
        if_absent: bool,
    ) -> Result<(), StoreError>;

    /// AbortMultipartUpload; an upload S3 no longer has is not an error.
    async fn abort_multipart(&self, key: &str, multipart_id: &str) -> Result<(), StoreError>;

    /// UploadPartCopy of bytes `range` (inclusive) of the version `src` names into part
    /// `part_number` of the multipart upload `multipart_id` at `dst`, only while it has
    /// `src.etag`. Returns the part's ETag.
    async fn copy_part(
        &self,
        src: &CopySource<'_>,
        dst: &str,
        multipart_id: &str,
        part_number: u32,
        range: (u64, u64),
    ) -> Result<String, StoreError>;

    /// The live bucket's configuration (versioning, lifecycle, CORS, encryption) as the
    /// bucket checks need it; each part may fail on its own.
    async fn bucket_view(&self) -> BucketView;
    /// The common prefixes one level below `prefix` (delimiter `/`).
    async fn list_prefixes(&self, prefix: &str) -> Result<Vec<String>, StoreError>;

    /// One page of every version and delete marker under `prefix`.
    async fn list_versions(
        &self,
        prefix: &str,
        from: Option<(String, Option<String>)>,
    ) -> Result<VersionPage, StoreError>;

    /// One page of current objects under `prefix`, in S3's key order, after `start_after`.
    async fn list_objects(
        &self,
        prefix: &str,
        start_after: Option<String>,
        token: Option<String>,
        max: i32,
    ) -> Result<ObjectPage, StoreError>;

    /// DeleteObjects of at most [`DELETE_BATCH`] versions; returns the ones S3 refused.
    async fn delete_versions(
        &self,
        batch: &[(String, Option<String>)],
    ) -> Result<Vec<DeleteFailure>, StoreError>;

    /// (key, upload id) of every multipart upload in progress under `prefix`.
    async fn list_multipart_uploads(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, StoreError>;

    /// A copy of `src`'s current version (read by a HEAD, then copied by version and guarded
    /// by its ETag) to `dst`, keeping metadata and type — in parts above the single-copy
    /// limit. Returns the HEAD of the version copied.
    async fn copy_object(&self, src: &str, dst: &str) -> Result<ObjectHead, StoreError>;

    /// What the store really does, by real calls under a fresh probe prefix
    /// ([`probe`]), `archive_class` being the class archival writes.
    async fn probe(&self, archive_class: &str) -> crate::domain::capabilities::Findings;

    /// Only what archival uses (`storage_class`, `object_tags`), as [`Self::probe`] finds them:
    /// each hygiene run that archives asks, so it costs two writes, not the whole probe (whose
    /// multipart checks upload 5 MiB per CRC). By default, the whole probe.
    async fn probe_archival(&self, archive_class: &str) -> crate::domain::capabilities::Findings {
        self.probe(archive_class).await
    }

    /// Rewrites `key` in place with `class` and exactly the given tags (none clears them; `None`
    /// on a store that keeps no tags, `object_tags`: no tagging header is sent at all, since such
    /// a store may refuse one), verifies the new version, then removes the version it replaced, so the bytes are held
    /// once, in the new class. The copy is of the version a HEAD just read, guarded by its
    /// ETag; above the single-copy limit it is a multipart copy in place.
    async fn change_storage_class(
        &self,
        key: &str,
        class: &str,
        tags: Option<&[(&str, &str)]>,
    ) -> Result<(), StoreError>;
}

/// (key, version id) of every version and delete marker of exactly `key`.
pub async fn every_version_of(
    store: &dyn ObjectStore,
    key: &str,
) -> Result<Vec<(String, Option<String>)>, StoreError> {
    Ok(versions_of(store, key)
        .await?
        .into_iter()
        .map(|v| (v.key, v.version_id))
        .collect())
}

/// Every version and delete marker of exactly `key`, as listed (versions newest first, then
/// delete markers) — a prefix listing also returns longer keys, which are left out.
pub async fn versions_of(
    store: &(impl ObjectStore + ?Sized),
    key: &str,
) -> Result<Vec<ObjectVersion>, StoreError> {
    let mut out = Vec::new();
    let mut from = None;
    loop {
        let page = store.list_versions(key, from.take()).await?;
        out.extend(page.versions.into_iter().filter(|v| v.key == key));
        match page.next {
            Some(next) => from = Some(next),
            None => return Ok(out),
        }
    }
}
