//! S3 errors mapped to domain meaning in one place.

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A conditional request (`If-Match`, `x-amz-copy-source-if-match`, `If-None-Match`) failed:
    /// the object is not the one we checked.
    #[error("precondition failed")]
    PreconditionFailed,
    #[error("object not found")]
    NotFound,
    /// CompleteMultipartUpload named a part (number and ETag) S3 does not hold (any more): the
    /// part was uploaded again meanwhile.
    #[error("a part of the completion list is not the one S3 holds")]
    InvalidPart,
    /// A ranged GET of an empty object (416 InvalidRange): there are no first bytes.
    #[error("requested range not satisfiable")]
    RangeNotSatisfiable,
    /// S3 refused bytes or a completion whose checksum is not the declared one (BadDigest,
    /// or LocalStack's 400 naming the checksum).
    #[error("checksum does not match: {0}")]
    ChecksumMismatch(String),
    /// Timeouts, throttling, 5xx, connection failures: retryable; answered 503.
    #[error("object store unavailable: {0}")]
    Unavailable(String),
    /// The store does not implement the operation (501 NotImplemented): Garage's answer to
    /// ListObjectVersions, GetObjectTagging, GetBucketEncryption.
    #[error("not implemented by the object store: {0}")]
    NotImplemented(String),
    /// The store refused the request for a reason of its own (a 4xx no other variant names:
    /// a length it requires, a permission, a request it does not support), with its status and
    /// code. Retrying the same request does not help (issue 36: RGW's 411 on UploadPartCopy).
    #[error("the object store refused the request: {0}")]
    Refused(String),
    #[error("object store error: {0}")]
    Other(String),
}

/// Classifies any SDK error. Precondition and not-found are told by status and code; a 200
/// response carrying an error body (CopyObject) arrives here as a service error too.
pub(super) fn classify<E>(err: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let status = match &err {
        SdkError::ServiceError(se) => Some(se.raw().status().as_u16()),
        _ => None,
    };
    match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            StoreError::Unavailable(describe(&err))
        }
        SdkError::ServiceError(se) => {
            let code = se.err().code().unwrap_or("");
            if let Some(s) = status.filter(|s| (200..300).contains(s) && code.is_empty()) {
                // A success whose body is not the document asked for: RGW 16.2 answers
                // GetBucketEncryption with the bucket's listing. The store does not implement
                // the call (issue 36: this read as a missing permission).
                return StoreError::NotImplemented(format!(
                    "answered {s} with {}, not the document asked for",
                    root_element(se.raw().body().bytes().unwrap_or_default())
                ));
            }
            match (status, code) {
                (Some(412), _) | (_, "PreconditionFailed") => StoreError::PreconditionFailed,
                (_, "InvalidPart" | "InvalidPartOrder") => StoreError::InvalidPart,
                (Some(416), _) | (_, "InvalidRange") => StoreError::RangeNotSatisfiable,
                // Garage answers a checksum that does not match the bytes with InvalidDigest.
                (_, "BadDigest" | "InvalidDigest") => StoreError::ChecksumMismatch(describe(&err)),
                (Some(400), "InvalidRequest")
                    if se.err().message().is_some_and(|m| m.contains("hecksum")) =>
                {
                    StoreError::ChecksumMismatch(describe(&err))
                }
                // The bucket, not the object, is missing: the store's refusal (a misconfigured
                // bucket name, a deleted bucket), never "the object changed" (review of issue 36).
                (_, "NoSuchBucket") => StoreError::Refused(describe(&err)),
                (Some(404), _) | (_, "NoSuchKey" | "NotFound") => StoreError::NotFound,
                (Some(501), _) | (_, "NotImplemented") => {
                    StoreError::NotImplemented(describe(&err))
                }
                (_, "SlowDown" | "ServiceUnavailable" | "InternalError" | "RequestTimeout") => {
                    StoreError::Unavailable(describe(&err))
                }
                (Some(s), _) if s >= 500 => StoreError::Unavailable(describe(&err)),
                (Some(s), _) if (400..500).contains(&s) => {
                    StoreError::Refused(format!("{s} {}", describe(&err)))
                }
                _ => StoreError::Other(describe(&err)),
            }
        }
        _ => StoreError::Other(describe(&err)),
    }
}

/// The root element of an XML body, as `a <ListBucketResult> document`.
fn root_element(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let root = text
        .match_indices('<')
        .map(|(i, _)| &text[i + 1..])
        .find(|rest| !rest.starts_with('?') && !rest.starts_with('!'))
        .and_then(|rest| {
            let end = rest.find(|c: char| c == '>' || c == '/' || c.is_whitespace())?;
            Some(&rest[..end])
        })
        .filter(|name| !name.is_empty());
    match root {
        Some(name) => format!("a <{name}> document"),
        None if text.trim().is_empty() => "an empty body".to_owned(),
        None => "a body that is not XML".to_owned(),
    }
}

fn describe<E>(err: &SdkError<E, HttpResponse>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match err {
        SdkError::ServiceError(se) => format!(
            "{}: {}",
            se.err().code().unwrap_or("unknown"),
            se.err().message().unwrap_or("no message")
        ),
        other => {
            let mut s = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(inner) = source {
                s.push_str(": ");
                s.push_str(&inner.to_string());
                source = inner.source();
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36: RGW 16.2 answers GetBucketEncryption with the bucket listing (200); the
    /// answer is named by what it is.
    #[test]
    fn a_body_is_named_by_its_root_element() {
        let listing = br#"<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name></ListBucketResult>"#;
        assert_eq!(root_element(listing), "a <ListBucketResult> document");
        assert_eq!(root_element(b"<Empty/>"), "a <Empty> document");
        assert_eq!(root_element(b""), "an empty body");
        assert_eq!(root_element(b"hello"), "a body that is not XML");
    }

    fn answered(status: u16, code: &str) -> StoreError {
        use aws_sdk_s3::error::ErrorMetadata;
        use aws_sdk_s3::operation::copy_object::CopyObjectError;
        let raw = HttpResponse::new(
            status.try_into().expect("status"),
            aws_smithy_types::body::SdkBody::empty(),
        );
        let err = CopyObjectError::generic(ErrorMetadata::builder().code(code).build());
        classify(SdkError::service_error(err, raw))
    }

    /// Review of issue 36: a CopyObject answered 404 NoSuchBucket told the client its object
    /// had changed (409 `object_changed`).
    #[test]
    fn a_missing_bucket_is_the_stores_refusal_and_a_missing_key_is_not_found() {
        assert!(matches!(
            answered(404, "NoSuchBucket"),
            StoreError::Refused(_)
        ));
        assert!(matches!(answered(404, "NoSuchKey"), StoreError::NotFound));
        assert!(matches!(answered(404, "NotFound"), StoreError::NotFound));
    }
}
