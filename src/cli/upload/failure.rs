//! How a failed upload reads: the exit code and the sentence a person reads, for a refusal by
//! its stable error code, a storage failure, or a local problem.

use reqwest::StatusCode;

use super::{UploadArgs, EXIT_AUTH, EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_UPLOAD, EXIT_USAGE};
use crate::cli::api_client::ApiError;

/// A failure with the exit code it maps to and the sentence a person reads.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) exit: i32,
    pub(super) message: String,
}

impl Failure {
    pub(super) fn usage(message: impl Into<String>) -> Self {
        Self {
            exit: EXIT_USAGE,
            message: message.into(),
        }
    }
}

/// The sentence and exit code for a refusal, by its stable error code.
pub(super) fn explain(e: ApiError, args: &UploadArgs) -> Failure {
    let (status, code, message, retry_after) = match e {
        ApiError::Unreachable(detail) => {
            return Failure {
                exit: EXIT_UNAVAILABLE,
                message: format!("cannot reach the service at {}: {detail}", args.server),
            }
        }
        ApiError::Refused {
            status,
            code,
            message,
            retry_after,
        } => (status, code, message, retry_after),
    };
    let profile = &args.profile;
    let text = match code.as_str() {
        "unauthorized" => "the token was refused (expired, malformed or not signed by this service): get a new one".to_owned(),
        "admin_required" | "final_key_forbidden" => "only an admin may choose the final key".to_owned(),
        "profile_unknown" => format!("the service has no upload profile named {profile:?}"),
        "content_type_not_allowed" | "content_type_invalid" | "content_type_required" => format!(
            "the {profile} profile does not accept this file's type{}",
            args.content_type.as_deref().map_or_else(String::new, |c| format!(" ({c})"))
        ),
        "size_invalid" => "the file is empty".to_owned(),
        "size_too_large" | "object_too_large" => format!("the file is larger than the {profile} profile allows"),
        "filename_too_long" | "filename_invalid" => "the file name is too long or has control characters: rename it".to_owned(),
        "quota_exceeded" => format!(
            "your daily upload quota is used up{}",
            retry_after.map_or_else(String::new, |s| format!("; it renews in {}", human_secs(s)))
        ),
        "rate_limited" => "too many uploads at once; try again in a moment".to_owned(),
        "upload_expired" | "multipart_session_expired" => "the upload took too long and expired: run the command again".to_owned(),
        "content_mismatch" | "content_type_mismatch" | "size_mismatch" => {
            "the service checked the uploaded bytes and they do not match what was declared".to_owned()
        }
        "final_key_conflict" => "another file already holds that final key".to_owned(),
        "checksum_mismatch" => {
            "the bytes in storage do not have the checksum computed from the file: did it change during the upload? Run the command again".to_owned()
        }
        "checksum_required" => format!("the {profile} profile requires a checksum: run without --no-checksum"),
        "final_key_invalid" | "final_key_reserved" => "that final key is not allowed".to_owned(),
        _ if message.is_empty() => format!("the service refused the request ({})", status.as_u16()),
        _ => message.clone(),
    };
    let exit = if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        EXIT_AUTH
    } else if status.is_server_error() {
        EXIT_UNAVAILABLE
    } else {
        EXIT_REFUSED
    };
    Failure {
        exit,
        message: format!("{text} [{code}]"),
    }
}

fn human_secs(s: u64) -> String {
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ => format!("{} h", s / 3600),
    }
}

pub(super) fn upload_failed(what: &str, detail: impl std::fmt::Display) -> Failure {
    Failure {
        exit: EXIT_UPLOAD,
        message: format!("the upload to storage failed ({what}): {detail}"),
    }
}

pub(super) fn describe(e: &ApiError) -> String {
    match e {
        ApiError::Unreachable(d) => d.clone(),
        ApiError::Refused { code, message, .. } => format!("{code}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_map_to_exit_codes_and_readable_sentences() {
        let args = UploadArgs {
            file: "x.png".into(),
            profile: "image".into(),
            server: "http://s".into(),
            token: None,
            content_type: None,
            final_key: None,
            json: false,
            retries: 0,
            no_checksum: false,
        };
        let refused = |status: u16, code: &str, retry_after| ApiError::Refused {
            status: StatusCode::from_u16(status).expect("status"),
            code: code.into(),
            message: "m".into(),
            retry_after,
        };
        let f = explain(refused(429, "quota_exceeded", Some(7200)), &args);
        assert_eq!(f.exit, EXIT_REFUSED);
        assert!(
            f.message.contains("quota") && f.message.contains("2 h"),
            "{}",
            f.message
        );
        assert_eq!(
            explain(refused(401, "unauthorized", None), &args).exit,
            EXIT_AUTH
        );
        assert_eq!(
            explain(refused(503, "service_unavailable", None), &args).exit,
            EXIT_UNAVAILABLE
        );
        assert_eq!(
            explain(ApiError::Unreachable("refused".into()), &args).exit,
            EXIT_UNAVAILABLE
        );
        let f = explain(refused(400, "size_too_large", None), &args);
        assert!(
            f.message.contains("larger than the image profile"),
            "{}",
            f.message
        );
        assert!(f.message.ends_with("[size_too_large]"));
        assert!(refused(409, "commit_in_progress", None).transient());
        assert!(!refused(429, "quota_exceeded", None).transient());
    }
}
