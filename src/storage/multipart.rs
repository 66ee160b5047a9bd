//! S3 multipart calls: create, list parts, complete, abort, and UploadPartCopy for promoting
//! large objects. The orchestration (which parts, in what order, what to do on failure) lives
//! in the services; these functions are one S3 call each.

use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, StorageClass};
use aws_sdk_s3::Client;

use super::errors::classify;
use super::{NewMultipart, PartPage, StoreError};
use crate::domain::checksum::{Checksum, ChecksumAlgorithm};
use crate::domain::multipart::PartRecord;

pub(super) async fn create(
    client: &Client,
    bucket: &str,
    spec: &NewMultipart<'_>,
    checksum: Option<aws_sdk_s3::types::ChecksumAlgorithm>,
) -> Result<String, StoreError> {
    let mut req = client
        .create_multipart_upload()
        .bucket(bucket)
        .key(spec.key)
        .content_type(spec.content_type)
        .set_storage_class(spec.storage_class.map(StorageClass::from))
        .set_tagging(spec.tagging.map(str::to_owned));
    if let Some(h) = spec.headers {
        req = req
            .set_content_encoding(h.content_encoding.clone())
            .set_cache_control(h.cache_control.clone())
            .set_content_disposition(h.content_disposition.clone())
            .set_content_language(h.content_language.clone());
    }
    if let Some(a) = checksum {
        // A full-object checksum: CompleteMultipartUpload then names the whole object's CRC,
        // and S3 refuses a completion whose parts do not add up to it.
        req = req
            .checksum_algorithm(a)
            .checksum_type(aws_sdk_s3::types::ChecksumType::FullObject);
    }
    for (k, v) in spec.metadata {
        req = req.metadata(*k, *v);
    }
    let out = req.send().await.map_err(classify)?;
    out.upload_id()
        .map(str::to_owned)
        .ok_or_else(|| StoreError::Other("CreateMultipartUpload returned no upload id".into()))
}

pub(super) async fn list_parts(
    client: &Client,
    bucket: &str,
    key: &str,
    multipart_id: &str,
    after: u32,
    max: u32,
) -> Result<PartPage, StoreError> {
    let mut req = client
        .list_parts()
        .bucket(bucket)
        .key(key)
        .upload_id(multipart_id)
        .max_parts(i32::try_from(max).unwrap_or(1000));
    if after > 0 {
        req = req.part_number_marker(after.to_string());
    }
    let out = req.send().await.map_err(classify)?;
    let parts = out
        .parts()
        .iter()
        .filter_map(|p| {
            Some(PartRecord {
                part_number: u32::try_from(p.part_number()?).ok()?,
                etag: p.e_tag()?.to_owned(),
                size: u64::try_from(p.size()?).ok()?,
                checksum: p
                    .checksum_crc32()
                    .or(p.checksum_crc32_c())
                    .or(p.checksum_sha256())
                    .or(p.checksum_crc64_nvme())
                    .or(p.checksum_sha1())
                    .map(str::to_owned),
            })
        })
        .collect();
    let next = if out.is_truncated() == Some(true) {
        out.next_part_number_marker()
            .and_then(|m| m.parse::<u32>().ok())
    } else {
        None
    };
    Ok(PartPage { parts, next })
}

pub(super) async fn complete(
    client: &Client,
    bucket: &str,
    key: &str,
    multipart_id: &str,
    parts: &[(u32, String)],
    checksum: Option<&Checksum>,
    if_absent: bool,
) -> Result<(), StoreError> {
    let completed = CompletedMultipartUpload::builder()
        .set_parts(Some(
            parts
                .iter()
                .map(|(n, etag)| {
                    CompletedPart::builder()
                        .part_number(i32::try_from(*n).unwrap_or(i32::MAX))
                        .e_tag(etag)
                        .build()
                })
                .collect(),
        ))
        .build();
    let mut req = client
        .complete_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(multipart_id)
        .multipart_upload(completed);
    if if_absent {
        req = req.if_none_match("*");
    }
    if let Some(c) = checksum {
        req = req.checksum_type(aws_sdk_s3::types::ChecksumType::FullObject);
        req = match c.algorithm {
            ChecksumAlgorithm::Crc64Nvme => req.checksum_crc64_nvme(&c.value),
            ChecksumAlgorithm::Crc32c => req.checksum_crc32_c(&c.value),
            ChecksumAlgorithm::Sha256 => req.checksum_sha256(&c.value),
        };
    }
    req.send().await.map_err(classify)?;
    Ok(())
}

/// Aborting an upload S3 no longer has (already aborted or completed) is not an error.
pub(super) async fn abort(
    client: &Client,
    bucket: &str,
    key: &str,
    multipart_id: &str,
) -> Result<(), StoreError> {
    match client
        .abort_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(multipart_id)
        .send()
        .await
        .map_err(classify)
    {
        Ok(_) | Err(StoreError::NotFound) => Ok(()),
        Err(e) => Err(e),
    }
}

/// One UploadPartCopy: bytes `[first, last]` of `copy_source` (a version, when it names one),
/// only while it has `src_etag`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn copy_part(
    client: &Client,
    bucket: &str,
    copy_source: String,
    src_etag: &str,
    dst: &str,
    multipart_id: &str,
    part_number: u32,
    (first, last): (u64, u64),
) -> Result<String, StoreError> {
    let out = client
        .upload_part_copy()
        .bucket(bucket)
        .key(dst)
        .upload_id(multipart_id)
        .part_number(i32::try_from(part_number).unwrap_or(i32::MAX))
        .copy_source(copy_source)
        .copy_source_if_match(src_etag)
        .copy_source_range(format!("bytes={first}-{last}"))
        // The request has no body and the SDK sends no length for it; RGW refuses such a PUT
        // (411 MissingContentLength). S3, LocalStack and Garage take the zero length as boto3
        // sends it (issue 36).
        .customize()
        .mutate_request(|req| {
            req.headers_mut().insert("content-length", "0");
        })
        .send()
        .await
        .map_err(classify)?;
    out.copy_part_result()
        .and_then(|r| r.e_tag())
        .map(str::to_owned)
        .ok_or_else(|| StoreError::Other("UploadPartCopy returned no ETag".into()))
}
