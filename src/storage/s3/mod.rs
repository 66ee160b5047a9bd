//! The S3 implementation of the facade (AWS, LocalStack, other S3-compatible stores).

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_s3::types::{LifecycleRule, MetadataDirective};
use aws_sdk_s3::Client;

mod copies;
mod presign;
pub mod probe;
mod renditions;

use crate::config::S3Settings;
use crate::domain::bucket_check::BucketView;
use crate::domain::checksum::{Checksum, ChecksumAlgorithm};
use crate::signing::post_policy::PostForm;
use crate::signing::{uri_encode, S3Location};
use crate::storage::aws::AwsContext;
use crate::storage::errors::classify;
use crate::storage::part_copy::CopyLimits;
use crate::storage::{listing, multipart};
use crate::storage::{
    Copied, CopySource, DeleteFailure, NewMultipart, ObjectHead, ObjectPage, ObjectStore,
    PartInput, PartPage, PresignInput, PresignedPut, PromoteRequest, Sniffed, StoreError,
    VersionPage, UPLOAD_ID_METADATA,
};
use presign::checksum_headers;

pub struct S3Store {
    client: Client,
    /// The same client without the timing interceptor: the capability probe's calls are a
    /// self-test, not the service's traffic, and stay out of `/metrics`.
    quiet: Client,
    bucket: String,
    region: String,
    location: S3Location,
    /// The credentials cache presigning reads, and the outgoing HTTP client (shared with the
    /// SQS sender and every other caller of the process).
    aws: AwsContext,
    /// When the facade's own copies (archival in place, quarantine) go in parts.
    copy: CopyLimits,
    /// Whether the store keeps CopyObject's source guard under RGW's older name
    /// (`copy_if_match_legacy`, `copies`): what its probe found, shared with the quiet twin.
    legacy_guard: std::sync::Arc<copies::GuardKnowledge>,
}

impl S3Store {
    /// This store on the quiet client (its calls out of the request metrics): the probe's.
    fn quiet_twin(&self) -> S3Store {
        S3Store {
            client: self.quiet.clone(),
            quiet: self.quiet.clone(),
            bucket: self.bucket.clone(),
            region: self.region.clone(),
            location: self.location.clone(),
            aws: self.aws.clone(),
            copy: self.copy,
            legacy_guard: self.legacy_guard.clone(),
        }
    }

    /// Builds the client from the standard AWS credential and region chain, with a context of
    /// its own (operator tools, tests). A custom endpoint selects path-style addressing.
    pub async fn connect(settings: &S3Settings) -> Result<Self, StoreError> {
        Self::connect_in(&Self::own_context(settings).await?, settings, None)
    }

    /// Like [`S3Store::connect`], timing every S3 call into `metrics`.
    pub async fn connect_observed(
        settings: &S3Settings,
        metrics: std::sync::Arc<crate::metrics::Metrics>,
    ) -> Result<Self, StoreError> {
        Self::connect_in(&Self::own_context(settings).await?, settings, Some(metrics))
    }

    async fn own_context(settings: &S3Settings) -> Result<AwsContext, StoreError> {
        let http = crate::outbound::client()
            .map_err(|e| StoreError::Other(format!("no HTTP client: {e}")))?;
        AwsContext::load(settings, http)
            .await
            .map_err(|e| StoreError::Other(e.to_string()))
    }

    /// On the process's shared AWS context (the server: one credentials cache and one HTTP
    /// client for this store and the SQS sender), timing every S3 call into `metrics` if given.
    pub fn connect_in(
        aws: &AwsContext,
        settings: &S3Settings,
        metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
    ) -> Result<Self, StoreError> {
        let mut config = aws_sdk_s3::config::Builder::from(aws.sdk());
        let location = match &settings.endpoint {
            Some(endpoint) => {
                config = config.endpoint_url(endpoint).force_path_style(true);
                S3Location::path_style(endpoint, &settings.bucket)
                    .ok_or_else(|| StoreError::Other(format!("bad endpoint {endpoint:?}")))?
            }
            None => S3Location::virtual_hosted(&settings.bucket, &settings.region),
        };
        let quiet = Client::from_conf(config.clone().build());
        if let Some(metrics) = metrics {
            config = config.interceptor(super::observe::TimingInterceptor::new(metrics));
        }
        Ok(Self {
            client: Client::from_conf(config.build()),
            quiet,
            bucket: settings.bucket.clone(),
            region: settings.region.clone(),
            location,
            aws: aws.clone(),
            copy: CopyLimits::default(),
            legacy_guard: Default::default(),
        })
    }

    /// When copies go in parts: the settings' single-copy limit and part size (S3's 5 GiB
    /// limit otherwise).
    pub fn with_copy_limits(mut self, limits: CopyLimits) -> Self {
        self.copy = limits;
        self
    }

    /// The lifecycle document's rules exactly as S3 holds them, foreign ones included.
    pub async fn lifecycle_rules(&self) -> Result<Vec<LifecycleRule>, StoreError> {
        super::bucket::read_lifecycle(&self.client, &self.bucket).await
    }

    /// Replaces the whole lifecycle document. Only the bucket's one lifecycle owner calls this.
    pub async fn put_lifecycle_rules(&self, rules: Vec<LifecycleRule>) -> Result<(), StoreError> {
        super::bucket::write_lifecycle(&self.client, &self.bucket, rules).await
    }

    /// The tags of one version of `key`, URL-query encoded (`None`: no tags, or a store that
    /// keeps none).
    async fn tagging_of(
        &self,
        key: &str,
        version_id: Option<&str>,
    ) -> Result<Option<String>, StoreError> {
        match self
            .client
            .get_object_tagging()
            .bucket(&self.bucket)
            .key(key)
            .set_version_id(version_id.filter(|v| *v != "null").map(str::to_owned))
            .send()
            .await
            .map_err(classify)
        {
            Ok(out) if out.tag_set().is_empty() => Ok(None),
            Ok(out) => Ok(Some(
                out.tag_set()
                    .iter()
                    .map(|t| {
                        format!(
                            "{}={}",
                            uri_encode(t.key(), true),
                            uri_encode(t.value(), true)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("&"),
            )),
            Err(StoreError::NotImplemented(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The raw client, for operator tools and tests that arrange the bucket.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// `bucket/key?versionId=…`: the version read before is copied, whatever was written to
    /// the key since — the ETag guard alone would pass other bytes with the same ETag (an MD5
    /// collision under SSE-S3). Without a version (an unversioned bucket) the key's current
    /// object is copied and the ETag guard is all there is.
    pub(super) fn copy_source(&self, src: &CopySource<'_>) -> String {
        // aws-sdk-rust sends CopySource as given: the key must be URL-encoded here.
        let base = format!("{}/{}", self.bucket, uri_encode(src.key, true));
        match src.version_id.filter(|v| *v != "null") {
            Some(v) => format!("{base}?versionId={}", uri_encode(v, true)),
            None => base,
        }
    }
}

/// The total size in a `Content-Range: bytes 0-63/5008` header.
pub fn content_range_total(header: &str) -> Option<i64> {
    let (unit, rest) = header.split_once(' ')?;
    let (_, total) = rest.split_once('/')?;
    if unit != "bytes" {
        return None;
    }
    total.parse::<i64>().ok().filter(|n| *n >= 0)
}

/// S3's name of an algorithm.
fn sdk_algorithm(a: ChecksumAlgorithm) -> aws_sdk_s3::types::ChecksumAlgorithm {
    match a {
        ChecksumAlgorithm::Sha256 => aws_sdk_s3::types::ChecksumAlgorithm::Sha256,
        ChecksumAlgorithm::Crc32c => aws_sdk_s3::types::ChecksumAlgorithm::Crc32C,
        ChecksumAlgorithm::Crc64Nvme => aws_sdk_s3::types::ChecksumAlgorithm::Crc64Nvme,
    }
}

#[async_trait]
impl ObjectStore for S3Store {
    fn http(&self) -> &reqwest::Client {
        self.aws.http()
    }

    fn bucket(&self) -> &str {
        &self.bucket
    }

    async fn presign_put(&self, input: &PresignInput<'_>) -> Result<PresignedPut, StoreError> {
        self.put_url(input).await
    }

    async fn presign_post(&self, input: &PresignInput<'_>) -> Result<PostForm, StoreError> {
        self.post_form(input).await
    }

    async fn presign_get(
        &self,
        key: &str,
        content_type: &str,
        disposition: &str,
        expires_secs: u64,
    ) -> Result<String, StoreError> {
        self.get_url(key, content_type, disposition, expires_secs)
            .await
    }

    async fn presign_get_version(
        &self,
        key: &str,
        version_id: Option<&str>,
        expires_secs: u64,
    ) -> Result<String, StoreError> {
        self.version_url(key, version_id, expires_secs).await
    }

    #[tracing::instrument(skip_all, fields(s3.op = "HeadObject"))]
    async fn head(&self, key: &str) -> Result<Option<ObjectHead>, StoreError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled)
            .send()
            .await
        {
            Ok(out) => Ok(Some(ObjectHead {
                headers: super::StoredHeaders::of(
                    out.content_encoding(),
                    out.cache_control(),
                    out.content_disposition(),
                    out.content_language(),
                ),
                size: out.content_length().unwrap_or(0),
                content_type: out.content_type().map(str::to_owned),
                etag: out.e_tag().unwrap_or_default().to_owned(),
                version_id: out.version_id().map(str::to_owned),
                metadata: out.metadata().cloned().unwrap_or_default(),
                storage_class: out.storage_class().map(|c| c.as_str().to_owned()),
                checksum: Checksum::pick(
                    None,
                    [
                        (ChecksumAlgorithm::Sha256, out.checksum_sha256()),
                        (ChecksumAlgorithm::Crc64Nvme, out.checksum_crc64_nvme()),
                        (ChecksumAlgorithm::Crc32c, out.checksum_crc32_c()),
                    ],
                ),
            })),
            Err(e) => match classify(e) {
                StoreError::NotFound => Ok(None),
                other => Err(other),
            },
        }
    }

    #[tracing::instrument(skip_all, fields(s3.op = "GetObject", size_bytes = len))]
    async fn sniff(&self, key: &str, len: u64) -> Result<Option<Sniffed>, StoreError> {
        let sent = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .range(format!("bytes=0-{}", len.saturating_sub(1)))
            .send()
            .await
            .map_err(classify);
        let out = match sent {
            Ok(out) => out,
            Err(StoreError::NotFound) => return Ok(None),
            // An empty object has no byte 0: its facts come from a HEAD, its first bytes are none.
            Err(StoreError::RangeNotSatisfiable) => {
                return Ok(self.head(key).await?.map(|head| Sniffed {
                    head,
                    first: Vec::new(),
                }))
            }
            Err(e) => return Err(e),
        };
        let size = match out.content_range() {
            Some(range) => content_range_total(range)
                .ok_or_else(|| StoreError::Other(format!("unreadable Content-Range {range:?}")))?,
            // A store that ignores Range sends the whole object: its length is the size.
            None => out.content_length().unwrap_or(0),
        };
        let head = ObjectHead {
            headers: super::StoredHeaders::of(
                out.content_encoding(),
                out.cache_control(),
                out.content_disposition(),
                out.content_language(),
            ),
            size,
            content_type: out.content_type().map(str::to_owned),
            etag: out.e_tag().unwrap_or_default().to_owned(),
            version_id: out.version_id().map(str::to_owned),
            metadata: out.metadata().cloned().unwrap_or_default(),
            storage_class: out.storage_class().map(|c| c.as_str().to_owned()),
            checksum: None,
        };
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| StoreError::Unavailable(format!("reading body: {e}")))?;
        let mut first = body.to_vec();
        first.truncate(usize::try_from(len).unwrap_or(usize::MAX));
        Ok(Some(Sniffed { head, first }))
    }

    #[tracing::instrument(skip_all, fields(s3.op = "CopyObject"))]
    async fn promote(&self, req: &PromoteRequest<'_>) -> Result<Copied, StoreError> {
        let legacy = req.legacy_guard.then(|| req.src.etag.to_owned());
        let out = self
            .client
            .copy_object()
            .bucket(&self.bucket)
            .key(req.dst.as_str())
            .copy_source(self.copy_source(&req.src))
            .copy_source_if_match(req.src.etag)
            .if_none_match("*")
            .metadata_directive(MetadataDirective::Replace)
            .metadata(UPLOAD_ID_METADATA, req.upload_id)
            .content_type(req.content_type)
            .checksum_algorithm(sdk_algorithm(req.checksum))
            .customize()
            .mutate_request(crate::storage::legacy_copy_guard(legacy))
            .send()
            .await
            .map_err(classify)?;
        let result = out.copy_object_result();
        Ok(Copied {
            etag: quoted_etag(result.and_then(|r| r.e_tag()).unwrap_or_default()),
            version_id: out.version_id().map(str::to_owned),
            checksum: result.and_then(|r| {
                Checksum::pick(
                    Some(req.checksum),
                    [
                        (ChecksumAlgorithm::Sha256, r.checksum_sha256()),
                        (ChecksumAlgorithm::Crc64Nvme, r.checksum_crc64_nvme()),
                        (ChecksumAlgorithm::Crc32c, r.checksum_crc32_c()),
                    ],
                )
            }),
        })
    }

    #[tracing::instrument(skip_all, fields(s3.op = "DeleteObject"))]
    async fn delete_version(&self, key: &str, version_id: Option<&str>) -> Result<(), StoreError> {
        let req = self.client.delete_object().bucket(&self.bucket).key(key);
        let req = match version_id.filter(|v| *v != "null") {
            Some(v) => req.version_id(v),
            None => req,
        };
        match req.send().await.map_err(classify) {
            Ok(_) | Err(StoreError::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }

    #[tracing::instrument(skip_all, fields(s3.op = "HeadBucket"))]
    async fn check_bucket(&self) -> Result<(), StoreError> {
        self.client
            .head_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn probe(&self, archive_class: &str) -> crate::domain::capabilities::Findings {
        let found = probe::run(&self.quiet_twin(), archive_class).await;
        self.learn_legacy_guard(
            found.get(crate::domain::capabilities::Capability::CopyIfMatchLegacy),
        );
        found
    }

    async fn probe_archival(&self, archive_class: &str) -> crate::domain::capabilities::Findings {
        probe::run_scoped(&self.quiet_twin(), archive_class, probe::Scope::Archival).await
    }

    async fn bucket_view(&self) -> BucketView {
        super::bucket::read_view(&self.client, &self.bucket).await
    }

    #[tracing::instrument(skip_all, fields(s3.op = "CreateMultipartUpload"))]
    async fn create_multipart(&self, spec: &NewMultipart<'_>) -> Result<String, StoreError> {
        multipart::create(
            &self.client,
            &self.bucket,
            spec,
            spec.checksum.map(sdk_algorithm),
        )
        .await
    }

    async fn presign_part(&self, input: &PartInput<'_>) -> Result<PresignedPut, StoreError> {
        let creds = self
            .signing_credentials(presign::expires_secs(input.now, input.expires_at))
            .await?;
        let mut must_send = vec![("Content-Length".to_owned(), input.size.to_string())];
        if let Some(c) = input.checksum {
            must_send.extend(checksum_headers(c));
        }
        let mut q = BTreeMap::new();
        q.insert("partNumber".to_owned(), input.part_number.to_string());
        q.insert("uploadId".to_owned(), input.multipart_id.to_owned());
        Ok(self.signed_put(
            &creds,
            input.key,
            must_send,
            q,
            (input.now, input.expires_at),
        ))
    }

    #[tracing::instrument(skip_all, fields(s3.op = "ListParts"))]
    async fn list_parts(
        &self,
        key: &str,
        multipart_id: &str,
        after: u32,
        max: u32,
    ) -> Result<PartPage, StoreError> {
        multipart::list_parts(&self.client, &self.bucket, key, multipart_id, after, max).await
    }

    #[tracing::instrument(skip_all, fields(s3.op = "CompleteMultipartUpload", parts = parts.len()))]
    async fn complete_multipart(
        &self,
        key: &str,
        multipart_id: &str,
        parts: &[(u32, String)],
        checksum: Option<&Checksum>,
        if_absent: bool,
    ) -> Result<(), StoreError> {
        multipart::complete(
            &self.client,
            &self.bucket,
            key,
            multipart_id,
            parts,
            checksum,
            if_absent,
        )
        .await
    }

    #[tracing::instrument(skip_all, fields(s3.op = "AbortMultipartUpload"))]
    async fn abort_multipart(&self, key: &str, multipart_id: &str) -> Result<(), StoreError> {
        multipart::abort(&self.client, &self.bucket, key, multipart_id).await
    }

    #[tracing::instrument(skip_all, fields(s3.op = "UploadPartCopy", part = part_number))]
    async fn copy_part(
        &self,
        src: &CopySource<'_>,
        dst: &str,
        multipart_id: &str,
        part_number: u32,
        range: (u64, u64),
    ) -> Result<String, StoreError> {
        multipart::copy_part(
            &self.client,
            &self.bucket,
            self.copy_source(src),
            src.etag,
            dst,
            multipart_id,
            part_number,
            range,
        )
        .await
    }

    #[tracing::instrument(skip_all, fields(s3.op = "ListObjectsV2"))]
    async fn list_prefixes(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        listing::common_prefixes(&self.client, &self.bucket, prefix).await
    }

    #[tracing::instrument(skip_all, fields(s3.op = "ListObjectVersions"))]
    async fn list_versions(
        &self,
        prefix: &str,
        from: Option<(String, Option<String>)>,
    ) -> Result<VersionPage, StoreError> {
        match listing::versions(&self.client, &self.bucket, prefix, from.clone()).await {
            // A store without versioning (Garage) has one object per key: listed as such,
            // each a version with no id, which every caller deletes as the object itself.
            Err(StoreError::NotImplemented(_)) => {
                let start_after = from.map(|(key, _)| key);
                let page =
                    listing::objects(&self.client, &self.bucket, prefix, start_after, None, 1000)
                        .await?;
                let next = match (&page.next, page.objects.last()) {
                    (Some(_), Some(last)) => Some((last.key.clone(), None)),
                    _ => None,
                };
                Ok(VersionPage {
                    versions: page
                        .objects
                        .into_iter()
                        .map(|o| super::ObjectVersion {
                            key: o.key,
                            version_id: None,
                            size: o.size,
                            delete_marker: false,
                            last_modified: o.last_modified,
                            etag: None,
                        })
                        .collect(),
                    next,
                })
            }
            other => other,
        }
    }

    #[tracing::instrument(skip_all, fields(s3.op = "ListObjectsV2"))]
    async fn list_objects(
        &self,
        prefix: &str,
        start_after: Option<String>,
        token: Option<String>,
        max: i32,
    ) -> Result<ObjectPage, StoreError> {
        listing::objects(&self.client, &self.bucket, prefix, start_after, token, max).await
    }

    #[tracing::instrument(skip_all, fields(s3.op = "DeleteObjects", keys = batch.len()))]
    async fn delete_versions(
        &self,
        batch: &[(String, Option<String>)],
    ) -> Result<Vec<DeleteFailure>, StoreError> {
        listing::delete_versions(&self.client, &self.bucket, batch).await
    }

    #[tracing::instrument(skip_all, fields(s3.op = "ListMultipartUploads"))]
    async fn list_multipart_uploads(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        listing::multipart_uploads(&self.client, &self.bucket, prefix).await
    }

    #[tracing::instrument(skip_all, fields(s3.op = "CopyObject"))]
    #[tracing::instrument(skip_all, fields(s3.op = "PutObject"))]
    async fn put_new_object(
        &self,
        obj: &crate::storage::NewObject<'_>,
    ) -> Result<crate::storage::PutOutcome, StoreError> {
        S3Store::put_new_object(self, obj).await
    }

    async fn copy_object(&self, src: &str, dst: &str) -> Result<ObjectHead, StoreError> {
        self.copy_aside(src, dst).await
    }

    #[tracing::instrument(skip_all, fields(s3.op = "CopyObject", class))]
    async fn change_storage_class(
        &self,
        key: &str,
        class: &str,
        tags: Option<&[(&str, &str)]>,
    ) -> Result<(), StoreError> {
        self.rewrite_in_class(key, class, tags).await
    }
}

/// An ETag as HEAD and listings give it, in double quotes. CopyObject's result carries it
/// quoted on S3, LocalStack and Garage, bare on RGW 16.2: a handle records it one way.
fn quoted_etag(etag: &str) -> String {
    let bare = crate::domain::multipart::bare(etag);
    if bare.is_empty() {
        String::new()
    } else {
        format!("\"{bare}\"")
    }
}

#[cfg(test)]
mod tests;
