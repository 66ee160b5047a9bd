//! `AppError`: every way a request can fail, each with its HTTP status and stable snake_case
//! `code`. Foreign errors (database, S3) are mapped here and nowhere else; internal detail is
//! logged once at the boundary and never sent to the client.

use axum::http::StatusCode;

use crate::auth::AuthError;
use crate::catalog::CatalogError;
use crate::domain::keys::FinalKeyError;
use crate::domain::profile::PresignRejection;
use crate::storage::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    Unauthorized(AuthError),
    #[error("only admins may choose a final key")]
    FinalKeyForbidden,
    #[error("this route is for admins")]
    AdminRequired,
    #[error("only admins may give a copy another owner")]
    OwnerForbidden,
    #[error("only an available file can be copied; restore it first")]
    FileNotAvailable,
    #[error("this file already has as many copies as one object may have")]
    TooManyCopies,
    #[error("this file was deleted after its retention period")]
    FileDeleted,
    #[error("this temporary file has expired")]
    FileExpired,
    #[error("events after this cursor were pruned (retention); the oldest cursor that reads on without a gap is {0}: rebuild from your own state, then read from there")]
    CursorExpired(i64),
    #[error("a temporary profile's files are committed only under their paired key (temp/<ttl>/…); final_key is not accepted")]
    FinalKeyTemporary,
    #[error("this file is being archived or deleted by hygiene; retry shortly")]
    FileBusy,
    #[error("this file's profile has no such variant")]
    VariantNotFound,
    #[error("this file is archived; restore it first")]
    FileArchived,
    #[error("{0} is not rendered")]
    ImageNotRendered(&'static str),
    #[error("the image cannot be rendered: {0}")]
    ImageUnrenderable(String),
    #[error("{0}; retry shortly")]
    RenderBusy(&'static str),
    #[error("the rendition was not ready within {0} s (UPCOMMIT_RENDER_TIMEOUT_SECS): its render was stopped; a file whose render is stopped twice in a row is refused from then on")]
    RenderTimedOut(u64),
    #[error("no such link scan")]
    LinkScanNotFound,
    #[error("no webhook endpoint with this id")]
    WebhookNotFound,
    #[error("an event endpoint already has this id (enabled or not); choose another")]
    WebhookExists,
    #[error("this endpoint comes from the settings file; remove it there")]
    WebhookFromSettings,
    #[error("this endpoint is disabled, so nothing would send these; one removed from the settings comes back when it is listed there again; one removed through the API cannot be enabled again: create an endpoint with another id and replay into it")]
    WebhookDisabled,
    #[error("no job run with this id")]
    JobRunNotFound,
    #[error("this link scan is completed; start a new one")]
    LinkScanCompleted,
    #[error("no such route")]
    RouteNotFound,
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    #[error("no upload with this key")]
    UploadNotFound,
    #[error("no file with this id")]
    FileNotFound,
    #[error("the object has not been uploaded yet (or the upload did not complete)")]
    ObjectNotUploaded,
    #[error("the commit window of this upload has passed")]
    UploadExpired,
    #[error("{}", presign_message(*.0))]
    Presign(PresignRejection),
    #[error("{}", final_key_message(*.0))]
    FinalKey(FinalKeyError),
    #[error("invalid JSON body: {0}")]
    InvalidJson(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("method must be PUT or POST")]
    MethodInvalid,
    #[error("expected Content-Type: application/json")]
    UnsupportedMediaType,
    #[error("request body too large")]
    PayloadTooLarge,
    #[error("the final key is already taken by another file")]
    FinalKeyConflict,
    /// A commit naming a `final_key` other than the one the upload was committed to: the
    /// upload has its file already (this id), no other file is in the way.
    #[error("this upload is already committed, as file {file_id}; its key does not change")]
    UploadAlreadyCommitted { file_id: String },
    #[error("the object changed after it was validated; nothing was promoted")]
    ObjectChanged,
    #[error("the uploaded object's Content-Type differs from the declared one")]
    ContentTypeMismatch,
    #[error("the uploaded object's size differs from the declared one")]
    SizeMismatch,
    #[error("the uploaded bytes are not of the declared type")]
    ContentMismatch,
    #[error("the image's header cannot be read (its width and height)")]
    ImageUnreadable,
    #[error("{0}")]
    ImageOutOfBounds(crate::domain::image::OutOfBounds),
    #[error("the stored object's checksum is not the declared one")]
    ChecksumMismatch,
    #[error("checksum: {0}")]
    ChecksumInvalid(String),
    #[error("{0}")]
    ChecksumRequired(String),
    #[error("{0}")]
    ChecksumAlgorithmUnsupported(String),
    /// The object store lacks what this request needs (found by the capability probe at start;
    /// the gap was accepted with this fallback).
    #[error("this deployment's object store cannot keep the promise this request needs ({}): {}", .0.name(), .0.without())]
    StoreLacks(crate::domain::capabilities::Capability),
    #[error("this upload is not a multipart upload")]
    UploadNotMultipart,
    #[error("this multipart session has expired; start a new upload")]
    MultipartSessionExpired,
    #[error("this upload was aborted")]
    UploadAborted,
    #[error("this multipart upload is already completed")]
    MultipartCompleted,
    #[error("this multipart upload is not completed yet: complete it before committing")]
    MultipartIncomplete,
    #[error("uploads over 5 GiB must be multipart")]
    MultipartRequired,
    #[error("{0}")]
    PartNumberInvalid(String),
    #[error("{0}")]
    PartsInvalid(String),
    #[error("part {0} has not been uploaded")]
    PartNotUploaded(u32),
    #[error("the ETag given for part {0} is not the one S3 holds")]
    PartEtagMismatch(u32),
    #[error("a part was uploaded again while the upload was being completed; list the parts and complete again")]
    PartChanged,
    #[error("part {part} is {actual} bytes; this upload's plan says {expected}")]
    PartSizeMismatch {
        part: u32,
        expected: u64,
        actual: u64,
    },
    #[error("the parts add up to {total} bytes, over the profile's maximum of {max}")]
    ObjectTooLarge { total: u64, max: u64 },
    #[error("this upload was rejected earlier ({0})")]
    UploadRejected(String),
    /// The profile's validation hook refused the upload; the reason is the hook's, cleaned
    /// (`domain::validation_hook::clean_reason`).
    #[error("the upload was refused by the validation hook: {0}")]
    RejectedByHook(String),
    #[error("the validation hook could not be asked; the upload is unchanged: retry shortly")]
    ValidationHookUnavailable,
    #[error("daily upload quota reached")]
    QuotaExceeded { retry_after_secs: u64 },
    #[error("too many presigns in a short time; retry after the delay")]
    RateLimited { retry_after_secs: u64 },
    #[error("another commit of this upload is in progress; retry shortly")]
    CommitInProgress,
    #[error("another completion or abort of this multipart upload is in progress; retry shortly")]
    CompletionInProgress,
    #[error("request timed out")]
    Timeout,
    #[error("the identity provider's keys cannot be fetched; retry shortly")]
    IdentityProviderUnavailable { retry_after_secs: u64 },
    #[error("a dependency is unavailable; retry shortly")]
    Unavailable(String),
    /// The object store refused what upcommit asked of it (a 4xx no domain error names): a
    /// fault of the store or its configuration, which retrying does not mend.
    #[error("the object store refused a request this operation needs; retrying will not help until the operator fixes the store (upcommit doctor)")]
    StoreRefused(String),
    #[error("internal error")]
    Internal(String),
}

fn presign_message(r: PresignRejection) -> String {
    match r {
        PresignRejection::UnknownProfile => "unknown upload profile".into(),
        PresignRejection::ContentTypeMissing => "content_type is required".into(),
        PresignRejection::ContentTypeMalformed => "content_type is not a valid media type".into(),
        PresignRejection::ContentTypeNotAllowed => {
            "content_type is not allowed for this profile".into()
        }
        PresignRejection::SizeInvalid => {
            "size must be a whole number of bytes above 0, written as an integer (not 1e3 or 1.0)"
                .into()
        }
        PresignRejection::SizeTooLarge { max } => {
            format!("size exceeds this profile's maximum of {max} bytes")
        }
        PresignRejection::FilenameTooLong => "filename is longer than 255 bytes".into(),
        PresignRejection::FilenameControlCharacter => "filename contains control characters".into(),
    }
}

fn final_key_message(e: FinalKeyError) -> String {
    match e {
        FinalKeyError::Reserved => {
            "final_key resolves under a prefix a lifecycle rule expires (tmp/, quarantine/, …)".into()
        }
        FinalKeyError::PairedLayout => {
            "final_key has the layout of an upload's paired key (<profile final prefix><upload id>/…), which only that upload's own commit may take".into()
        }
        FinalKeyError::Empty => "final_key is empty".into(),
        FinalKeyError::TooLong => "final_key is longer than 1024 bytes".into(),
        FinalKeyError::InvalidCharacter => {
            "final_key may hold only A-Z a-z 0-9 and - _ . / + = @ , !".into()
        }
        FinalKeyError::InvalidSegment => {
            "final_key has an empty, '.' or '..' segment, or a leading or trailing '/'".into()
        }
    }
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        use AppError::*;
        match self {
            Unauthorized(_) => StatusCode::UNAUTHORIZED,
            FinalKeyForbidden | AdminRequired | OwnerForbidden => StatusCode::FORBIDDEN,
            RouteNotFound | UploadNotFound | FileNotFound | ObjectNotUploaded
            | LinkScanNotFound | WebhookNotFound | JobRunNotFound | VariantNotFound => {
                StatusCode::NOT_FOUND
            }
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            UploadExpired
            | MultipartSessionExpired
            | UploadAborted
            | FileDeleted
            | FileExpired
            | CursorExpired(_) => StatusCode::GONE,
            Presign(_)
            | FinalKey(_)
            | FinalKeyTemporary
            | InvalidJson(_)
            | InvalidRequest(_)
            | MethodInvalid
            | MultipartRequired
            | PartNumberInvalid(_)
            | PartsInvalid(_)
            | ChecksumInvalid(_)
            | ChecksumRequired(_)
            | ChecksumAlgorithmUnsupported(_)
            | StoreLacks(_) => StatusCode::BAD_REQUEST,
            UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            WebhookExists | WebhookFromSettings | WebhookDisabled => StatusCode::CONFLICT,
            FinalKeyConflict
            | UploadAlreadyCommitted { .. }
            | ObjectChanged
            | UploadNotMultipart
            | MultipartCompleted
            | MultipartIncomplete
            | LinkScanCompleted
            | FileNotAvailable
            | FileArchived
            | TooManyCopies => StatusCode::CONFLICT,
            ContentTypeMismatch
            | SizeMismatch
            | ContentMismatch
            | ImageUnreadable
            | ImageOutOfBounds(_)
            | ImageNotRendered(_)
            | ImageUnrenderable(_)
            | ChecksumMismatch
            | PartNotUploaded(_)
            | PartEtagMismatch(_)
            | PartChanged
            | PartSizeMismatch { .. }
            | ObjectTooLarge { .. }
            | UploadRejected(_)
            | RejectedByHook(_) => StatusCode::UNPROCESSABLE_ENTITY,
            QuotaExceeded { .. } | RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            CommitInProgress
            | CompletionInProgress
            | FileBusy
            | RenderBusy(_)
            | RenderTimedOut(_)
            | Unavailable(_)
            | Timeout
            | ValidationHookUnavailable
            | IdentityProviderUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            StoreRefused(_) => StatusCode::BAD_GATEWAY,
            Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable code clients switch on. Never rename one; add new ones.
    pub fn code(&self) -> &str {
        use AppError::*;
        match self {
            Unauthorized(AuthError::Refused(r)) => r.code(),
            Unauthorized(_) => "unauthorized",
            FinalKeyForbidden => "final_key_forbidden",
            AdminRequired => "admin_required",
            OwnerForbidden => "owner_forbidden",
            FileNotAvailable => "file_not_available",
            TooManyCopies => "too_many_copies",
            FileDeleted => "file_deleted",
            FileExpired => "file_expired",
            CursorExpired(_) => "cursor_expired",
            FinalKeyTemporary => "final_key_temporary",
            FileBusy => "file_busy",
            VariantNotFound => "variant_not_found",
            FileArchived => "file_archived",
            ImageNotRendered(_) => "image_format_not_rendered",
            ImageUnrenderable(_) => "image_unrenderable",
            RenderBusy(_) => "render_busy",
            RenderTimedOut(_) => "render_timeout",
            LinkScanNotFound => "link_scan_not_found",
            WebhookNotFound => "webhook_not_found",
            WebhookExists => "webhook_exists",
            WebhookFromSettings => "webhook_from_settings",
            WebhookDisabled => "webhook_disabled",
            JobRunNotFound => "job_run_not_found",
            LinkScanCompleted => "link_scan_completed",
            RouteNotFound => "not_found",
            MethodNotAllowed => "method_not_allowed",
            UploadNotFound => "upload_not_found",
            FileNotFound => "file_not_found",
            ObjectNotUploaded => "object_not_uploaded",
            UploadExpired => "upload_expired",
            Presign(r) => match r {
                PresignRejection::UnknownProfile => "profile_unknown",
                PresignRejection::ContentTypeMissing => "content_type_required",
                PresignRejection::ContentTypeMalformed => "content_type_invalid",
                PresignRejection::ContentTypeNotAllowed => "content_type_not_allowed",
                PresignRejection::SizeInvalid => "size_invalid",
                PresignRejection::SizeTooLarge { .. } => "size_too_large",
                PresignRejection::FilenameTooLong => "filename_too_long",
                PresignRejection::FilenameControlCharacter => "filename_invalid",
            },
            FinalKey(FinalKeyError::Reserved | FinalKeyError::PairedLayout) => "final_key_reserved",
            FinalKey(_) => "final_key_invalid",
            InvalidJson(_) => "invalid_json",
            InvalidRequest(_) => "invalid_request",
            MethodInvalid => "method_invalid",
            UnsupportedMediaType => "unsupported_media_type",
            PayloadTooLarge => "payload_too_large",
            FinalKeyConflict => "final_key_conflict",
            UploadAlreadyCommitted { .. } => "upload_already_committed",
            ObjectChanged => "object_changed",
            ContentTypeMismatch => "content_type_mismatch",
            SizeMismatch => "size_mismatch",
            ContentMismatch => "content_mismatch",
            ImageUnreadable => "image_unreadable",
            ImageOutOfBounds(crate::domain::image::OutOfBounds::Pixels { .. }) => {
                "image_too_many_pixels"
            }
            ImageOutOfBounds(crate::domain::image::OutOfBounds::Dimensions { .. }) => {
                "image_dimensions_out_of_range"
            }
            ChecksumMismatch => "checksum_mismatch",
            ChecksumInvalid(_) => "checksum_invalid",
            ChecksumRequired(_) => "checksum_required",
            ChecksumAlgorithmUnsupported(_) => "checksum_algorithm_unsupported",
            StoreLacks(crate::domain::capabilities::Capability::PostSizeRange) => {
                "post_upload_unavailable"
            }
            StoreLacks(crate::domain::capabilities::Capability::CopyInParts) => {
                "copy_in_parts_unavailable"
            }
            StoreLacks(_) => "checksum_algorithm_unavailable",
            UploadNotMultipart => "upload_not_multipart",
            MultipartSessionExpired => "multipart_session_expired",
            UploadAborted => "upload_aborted",
            MultipartCompleted => "multipart_already_completed",
            MultipartIncomplete => "multipart_incomplete",
            MultipartRequired => "multipart_required",
            PartNumberInvalid(_) => "part_number_invalid",
            PartsInvalid(_) => "parts_invalid",
            PartNotUploaded(_) => "part_not_uploaded",
            PartEtagMismatch(_) | PartChanged => "part_etag_mismatch",
            PartSizeMismatch { .. } => "part_size_mismatch",
            ObjectTooLarge { .. } => "object_too_large",
            UploadRejected(code) => code,
            RejectedByHook(_) => "rejected_by_hook",
            ValidationHookUnavailable => "validation_hook_unavailable",
            QuotaExceeded { .. } => "quota_exceeded",
            RateLimited { .. } => "rate_limited",
            CommitInProgress => "commit_in_progress",
            CompletionInProgress => "completion_in_progress",
            Timeout => "request_timeout",
            Unavailable(_) => "service_unavailable",
            IdentityProviderUnavailable { .. } => "identity_provider_unavailable",
            StoreRefused(_) => "store_refused",
            Internal(_) => "internal_error",
        }
    }

    /// Seconds a client should wait before retrying, where a retry can succeed.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            AppError::QuotaExceeded { retry_after_secs }
            | AppError::RateLimited { retry_after_secs }
            | AppError::IdentityProviderUnavailable { retry_after_secs } => Some(*retry_after_secs),
            AppError::CommitInProgress
            | AppError::CompletionInProgress
            | AppError::FileBusy
            | AppError::RenderBusy(_)
            | AppError::Unavailable(_)
            | AppError::Timeout => Some(1),
            AppError::ValidationHookUnavailable | AppError::RenderTimedOut(_) => Some(5),
            _ => None,
        }
    }

    /// The message sent to the client: internal detail stays in the logs.
    pub fn public_message(&self) -> String {
        match self {
            AppError::Unauthorized(AuthError::Refused(r)) => r.message().into(),
            AppError::Unauthorized(_) => {
                "missing, malformed, expired or wrongly signed bearer token".into()
            }
            AppError::UploadRejected(code) if code == "rejected_by_hook" => {
                "this upload was refused by the validation hook earlier".into()
            }
            AppError::UploadRejected(code) => format!("this upload was rejected earlier: {code}"),
            other => other.to_string(),
        }
    }
}

impl From<CatalogError> for AppError {
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::Unavailable(m) => AppError::Unavailable(format!("database: {m}")),
            CatalogError::QuotaExceeded => AppError::QuotaExceeded {
                retry_after_secs: 60,
            },
            CatalogError::FinalKeyTaken => AppError::FinalKeyConflict,
            other => AppError::Internal(format!("database: {other}")),
        }
    }
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(m) => AppError::Unavailable(format!("object store: {m}")),
            StoreError::PreconditionFailed => AppError::ObjectChanged,
            StoreError::ChecksumMismatch(_) => AppError::ChecksumMismatch,
            StoreError::Refused(m) => AppError::StoreRefused(m),
            // An operation the store does not implement is its refusal too (Garage's 501).
            StoreError::NotImplemented(m) => {
                AppError::StoreRefused(format!("not implemented: {m}"))
            }
            // Only the service's own copies in parts reach here (a client's multipart
            // completion answers `part_changed`): the store did not hold a part the copy had
            // just written. The copy was aborted; a retry makes it afresh.
            StoreError::InvalidPart => AppError::Unavailable(
                "object store: a part of the copy's completion list was not the one it held".into(),
            ),
            other => AppError::Internal(format!("object store: {other}")),
        }
    }
}

impl From<PresignRejection> for AppError {
    fn from(r: PresignRejection) -> Self {
        AppError::Presign(r)
    }
}

impl From<FinalKeyError> for AppError {
    fn from(e: FinalKeyError) -> Self {
        AppError::FinalKey(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36: RGW refused the commit's part copies (411 MissingContentLength) and the client
    /// got 500 `internal_error`. A store's refusal has its own code and status, says retrying
    /// will not help, and keeps the store's detail out of the answer.
    #[test]
    fn a_store_refusal_is_store_refused_not_an_internal_error() {
        let e = AppError::from(StoreError::Refused(
            "411 MissingContentLength: no message".into(),
        ));
        assert_eq!(e.code(), "store_refused");
        assert_eq!(e.status(), StatusCode::BAD_GATEWAY);
        assert_eq!(e.retry_after(), None);
        let message = e.public_message();
        assert!(!message.contains("411"), "{message}");
        assert!(message.contains("retrying will not help"), "{message}");
        // Garage's 501: the store's refusal, not a defect of the service.
        let e = AppError::from(StoreError::NotImplemented("GetObjectTagging".into()));
        assert_eq!(
            (e.code(), e.status()),
            ("store_refused", StatusCode::BAD_GATEWAY)
        );
        // A copy in parts whose completion the store refused for a part it had just taken
        // (a 400 InvalidPart once answered 500): aborted, made afresh on retry.
        let e = AppError::from(StoreError::InvalidPart);
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(e.retry_after().is_some());
        // What the client can do something about keeps its own code.
        assert_eq!(
            AppError::from(StoreError::PreconditionFailed).code(),
            "object_changed"
        );
        assert_eq!(
            AppError::from(StoreError::Other("no ETag".into())).code(),
            "internal_error"
        );
    }

    #[test]
    fn a_file_too_large_for_a_store_without_copies_in_parts_has_its_own_code() {
        let e = AppError::StoreLacks(crate::domain::capabilities::Capability::CopyInParts);
        assert_eq!(e.code(), "copy_in_parts_unavailable");
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    }
}
