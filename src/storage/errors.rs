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
                (Some(404), _) | (_, "NoSuchKey" | "NotFound") => StoreError::NotFound,
                (Some(501), _) | (_, "NotImplemented") => {
                    StoreError::NotImplemented(describe(&err))
                }
                (_, "SlowDown" | "ServiceUnavailable" | "InternalError" | "RequestTimeout") => {
                    StoreError::Unavailable(describe(&err))
                }
                (Some(s), _) if s >= 500 => StoreError::Unavailable(describe(&err)),
                _ => StoreError::Other(describe(&err)),
            }
        }
        _ => StoreError::Other(describe(&err)),
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
