//! Listing and bulk deletion for the maintenance jobs: common prefixes (time partitions), every
//! version and delete marker under a prefix, objects in key order, multipart uploads, and
//! DeleteObjects in batches of at most 1,000 keys.

use aws_sdk_s3::types::{Delete, EncodingType, MetadataDirective, ObjectIdentifier};
use aws_sdk_s3::Client;
use chrono::{DateTime, Utc};

use super::errors::classify;
use super::StoreError;

/// S3's limit on keys per DeleteObjects call.
pub const DELETE_BATCH: usize = 1000;

/// One version or delete marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion {
    pub key: String,
    pub version_id: Option<String>,
    pub size: i64,
    pub delete_marker: bool,
    pub last_modified: Option<DateTime<Utc>>,
    /// As S3 lists it (with quotes); `None` for a delete marker.
    pub etag: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct VersionPage {
    pub versions: Vec<ObjectVersion>,
    /// (key marker, version marker) of the next page.
    pub next: Option<(String, Option<String>)>,
}

/// One current object, as ListObjectsV2 returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectEntry {
    pub key: String,
    pub size: i64,
    pub last_modified: Option<DateTime<Utc>>,
    pub storage_class: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct ObjectPage {
    pub objects: Vec<ObjectEntry>,
    /// Continuation token of the next page.
    pub next: Option<String>,
}

/// A key may hold any Unicode character, and some (control characters) cannot be written in
/// XML 1.0: a page holding one cannot be parsed, and reconcile, the sweep or an import would stop
/// at it. Such a page is asked for again URL-encoded (`encoding-type=url`) and its keys decoded.
/// Not every page: LocalStack 4.14 compares `start-after` with the *encoded* keys when asked to
/// encode (S3 compares the keys themselves), so encoding every page there skips and repeats keys
/// in ranged listings; the retry keeps that to pages that could not be read otherwise.
async fn send_or_encoded<T, E, F, Fut>(send: F) -> Result<(T, bool), StoreError>
where
    F: Fn(bool) -> Fut,
    Fut: std::future::Future<
        Output = Result<T, aws_sdk_s3::error::SdkError<E, aws_smithy_runtime_api::http::Response>>,
    >,
    E: aws_sdk_s3::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    use aws_sdk_s3::error::SdkError;
    match send(false).await {
        Ok(out) => Ok((out, false)),
        // A 2xx answer the SDK could not read: the SDK reports it as a response error, or as
        // an unhandled service error carrying the successful status.
        Err(SdkError::ResponseError(_)) => Ok((send(true).await.map_err(classify)?, true)),
        Err(SdkError::ServiceError(se)) if se.raw().status().is_success() => {
            Ok((send(true).await.map_err(classify)?, true))
        }
        Err(e) => Err(classify(e)),
    }
}

/// Sends a listing request (any of the four list builders, which share `encoding_type`) through
/// [`send_or_encoded`]: `(page, encoded)`.
macro_rules! send_or_encoded {
    ($req:expr) => {
        send_or_encoded(|enc| {
            let req = $req.clone();
            async move {
                if enc {
                    req.encoding_type(EncodingType::Url).send().await
                } else {
                    req.send().await
                }
            }
        })
        .await?
    };
}

/// A key from a listing page: as it is, or decoded when the page was URL-encoded. S3 encodes
/// form-style (a space as `+`, a `+` as `%2B`; LocalStack writes a space as `%20`) in `Key`,
/// `Prefix`, `CommonPrefixes` and `NextKeyMarker`; continuation tokens and version ids stay as
/// they are.
fn listed_key(raw: &str, encoded: bool) -> Result<String, StoreError> {
    if encoded {
        decode_key(raw)
    } else {
        Ok(raw.to_owned())
    }
}

/// A key of a listing asked with `encoding-type=url` (`domain::encoded_keys`: a `+` is a space).
pub(crate) fn decode_key(raw: &str) -> Result<String, StoreError> {
    crate::domain::encoded_keys::decode_form(raw).ok_or_else(|| {
        StoreError::Other(format!(
            "listing returned a key that is not UTF-8 once decoded: {raw:?}"
        ))
    })
}

fn time(t: Option<&aws_sdk_s3::primitives::DateTime>) -> Option<DateTime<Utc>> {
    t.and_then(|t| DateTime::from_timestamp(t.secs(), t.subsec_nanos()))
}

pub(super) async fn common_prefixes(
    client: &Client,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<String>, StoreError> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let req = client
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .delimiter("/")
            .set_continuation_token(token.take());
        let (page, encoded) = send_or_encoded!(req);
        for p in page.common_prefixes().iter().filter_map(|p| p.prefix()) {
            out.push(listed_key(p, encoded)?);
        }
        match page.next_continuation_token() {
            Some(t) if page.is_truncated() == Some(true) => token = Some(t.to_owned()),
            _ => return Ok(out),
        }
    }
}

pub(super) async fn versions(
    client: &Client,
    bucket: &str,
    prefix: &str,
    from: Option<(String, Option<String>)>,
) -> Result<VersionPage, StoreError> {
    let (key_marker, version_marker) = match from {
        Some((k, v)) => (Some(k), v),
        None => (None, None),
    };
    let req = client
        .list_object_versions()
        .bucket(bucket)
        .prefix(prefix)
        .set_key_marker(key_marker)
        .set_version_id_marker(version_marker);
    let (out, encoded) = send_or_encoded!(req);
    let mut versions = Vec::with_capacity(out.versions().len() + out.delete_markers().len());
    for v in out.versions() {
        let Some(key) = v.key() else { continue };
        versions.push(ObjectVersion {
            key: listed_key(key, encoded)?,
            version_id: v.version_id().map(str::to_owned),
            size: v.size().unwrap_or(0),
            delete_marker: false,
            last_modified: time(v.last_modified()),
            etag: v.e_tag().map(str::to_owned),
        });
    }
    for m in out.delete_markers() {
        let Some(key) = m.key() else { continue };
        versions.push(ObjectVersion {
            key: listed_key(key, encoded)?,
            version_id: m.version_id().map(str::to_owned),
            size: 0,
            delete_marker: true,
            last_modified: time(m.last_modified()),
            etag: None,
        });
    }
    // The next key marker comes back encoded too; the request takes the key itself.
    let next = match out.next_key_marker() {
        Some(k) if out.is_truncated() == Some(true) => Some((
            listed_key(k, encoded)?,
            out.next_version_id_marker().map(str::to_owned),
        )),
        _ => None,
    };
    Ok(VersionPage { versions, next })
}

pub(super) async fn objects(
    client: &Client,
    bucket: &str,
    prefix: &str,
    start_after: Option<String>,
    token: Option<String>,
    max: i32,
) -> Result<ObjectPage, StoreError> {
    let req = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .max_keys(max)
        .set_start_after(start_after)
        .set_continuation_token(token);
    let (out, encoded) = send_or_encoded!(req);
    let mut objects = Vec::with_capacity(out.contents().len());
    for o in out.contents() {
        let Some(key) = o.key() else { continue };
        objects.push(ObjectEntry {
            key: listed_key(key, encoded)?,
            size: o.size().unwrap_or(0),
            last_modified: time(o.last_modified()),
            storage_class: o.storage_class().map(|c| c.as_str().to_owned()),
        });
    }
    let next = match out.next_continuation_token() {
        Some(t) if out.is_truncated() == Some(true) => Some(t.to_owned()),
        _ => None,
    };
    Ok(ObjectPage { objects, next })
}

/// One version S3 refused to delete, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteFailure {
    pub key: String,
    pub version_id: Option<String>,
    pub reason: String,
}

/// Deletes up to [`DELETE_BATCH`] versions; returns the ones S3 refused.
pub(super) async fn delete_versions(
    client: &Client,
    bucket: &str,
    batch: &[(String, Option<String>)],
) -> Result<Vec<DeleteFailure>, StoreError> {
    if batch.is_empty() {
        return Ok(Vec::new());
    }
    let ids = batch
        .iter()
        .map(|(k, v)| {
            ObjectIdentifier::builder()
                .key(k)
                .set_version_id(v.clone())
                .build()
                .map_err(|e| StoreError::Other(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let delete = Delete::builder()
        .set_objects(Some(ids))
        .quiet(true)
        .build()
        .map_err(|e| StoreError::Other(e.to_string()))?;
    let out = client
        .delete_objects()
        .bucket(bucket)
        .delete(delete)
        .send()
        .await
        .map_err(classify)?;
    Ok(out
        .errors()
        .iter()
        .map(|e| DeleteFailure {
            key: e.key().unwrap_or("").to_owned(),
            version_id: e.version_id().map(str::to_owned),
            reason: format!(
                "{}: {}",
                e.code().unwrap_or("error"),
                e.message().unwrap_or("")
            ),
        })
        .collect())
}

pub(super) async fn multipart_uploads(
    client: &Client,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    let mut out = Vec::new();
    let (mut key_marker, mut id_marker): (Option<String>, Option<String>) = (None, None);
    loop {
        let req = client
            .list_multipart_uploads()
            .bucket(bucket)
            .prefix(prefix)
            .set_key_marker(key_marker.take())
            .set_upload_id_marker(id_marker.take());
        let (page, encoded) = send_or_encoded!(req);
        for u in page.uploads() {
            if let (Some(key), Some(id)) = (u.key(), u.upload_id()) {
                out.push((listed_key(key, encoded)?, id.to_owned()));
            }
        }
        if page.is_truncated() == Some(true) {
            key_marker = page
                .next_key_marker()
                .map(|k| listed_key(k, encoded))
                .transpose()?;
            id_marker = page.next_upload_id_marker().map(str::to_owned);
            if key_marker.is_none() {
                return Ok(out);
            }
        } else {
            return Ok(out);
        }
    }
}

/// The source condition of a copy: the ETag it must still have, and whether it is sent under
/// Ceph RGW's older name too (`x-amz-copy-if-match`, where the store keeps it only there).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Guard<'a> {
    pub etag: &'a str,
    pub legacy: bool,
}

/// A plain copy (metadata and type kept) of `copy_source` while it has the guard's ETag, for
/// moving an object aside.
pub(crate) async fn copy_object(
    client: &Client,
    bucket: &str,
    copy_source: String,
    guard: Guard<'_>,
    dst: &str,
) -> Result<(), StoreError> {
    let legacy = guard.legacy.then(|| guard.etag.to_owned());
    client
        .copy_object()
        .bucket(bucket)
        .key(dst)
        .copy_source(copy_source)
        .copy_source_if_match(guard.etag)
        .metadata_directive(MetadataDirective::Copy)
        .customize()
        .mutate_request(crate::storage::legacy_copy_guard(legacy))
        .send()
        .await
        .map_err(classify)?;
    Ok(())
}
