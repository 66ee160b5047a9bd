//! How the probe reads an answer: a call stored, refused (with its status and S3 error code) or
//! unanswered, and which refusals mean a capability is present. A refusal for a passing reason
//! (throttled, timed out, failing) says nothing: the capability is asked again next round.

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

use crate::domain::capabilities::Finding;
use crate::storage::StoreError;

/// How a call the probe made ended: a 2xx, or the status and code of a refusal, or no answer.
#[derive(Debug)]
pub(super) enum Answer {
    Stored,
    Refused(u16, String),
    Silent(String),
}

/// A refusal's status and S3 error code as a finding says them: `503 SlowDown`, or `200 with
/// no error code` (issue 36: "answered 200 " for RGW's GetBucketEncryption).
pub(super) fn status(status: u16, code: &str) -> String {
    if code.is_empty() {
        format!("{status} with no error code")
    } else {
        format!("{status} {code}")
    }
}

/// What the store did, as a finding's detail says it.
impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Stored => f.write_str("stored (2xx)"),
            Answer::Refused(s, code) => write!(f, "refused ({})", status(*s, code)),
            Answer::Silent(why) => write!(f, "not answered ({why})"),
        }
    }
}

impl Answer {
    /// The finding for a call the capability needs refused, `want` saying which refusals
    /// (status and error code) mean that. A refusal for a passing reason (throttled, timed
    /// out, failing: [`transient`]) says nothing and leaves it unknown, asked again in the next
    /// round; so does any refusal `want` does not name.
    pub(super) fn refused_as(self, want: impl Fn(u16, &str) -> bool, stored: &str) -> Finding {
        match self {
            Answer::Refused(s, code) if transient(s, &code) => {
                Finding::Unknown(format!("answered {}", status(s, &code)))
            }
            Answer::Refused(s, code) if want(s, &code) => Finding::Present,
            Answer::Stored => Finding::Missing(stored.to_owned()),
            Answer::Refused(s, code) if s == 501 || code == "NotImplemented" => {
                Finding::Missing(format!("not implemented ({})", status(s, &code)))
            }
            Answer::Refused(s, code) => Finding::Unknown(format!("answered {}", status(s, &code))),
            Answer::Silent(why) => Finding::Unknown(why),
        }
    }
}

/// A refusal that says nothing of the capability: the store was busy, slow or failing (5xx
/// other than 501 NotImplemented, 408, 429, or a throttling or timeout code on any status,
/// such as S3's `400 RequestTimeout`), after the SDK's own retries. The probe asks again in its
/// next round (review 27: one 429 on the oversize form made `post_size_range` present).
pub(super) fn transient(status: u16, code: &str) -> bool {
    (status >= 500 && status != 501)
        || status == 408
        || status == 429
        || matches!(
            code,
            "RequestTimeout"
                | "SlowDown"
                | "Throttling"
                | "ThrottlingException"
                | "TooManyRequests"
                | "RequestTimeTooSkewed"
                | "ServiceUnavailable"
                | "InternalError"
                | "OperationAborted"
        )
}

/// The ETag a part upload answered with.
pub(super) fn etag_of(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The finding for a store call the capability needed refused, when it failed otherwise.
pub(super) fn store_error_finding(e: StoreError, call: &str) -> Finding {
    match e {
        StoreError::NotImplemented(_) => Finding::Missing(format!("{call}: {e}")),
        e => Finding::Unknown(format!("{call}: {e}")),
    }
}

/// One capability found by two calls: missing if either call shows it missing, unknown if
/// either could not tell, present only when both refused.
pub(super) fn both(a: Finding, b: Finding) -> Finding {
    match (a, b) {
        (m @ Finding::Missing(_), _) | (_, m @ Finding::Missing(_)) => m,
        (u @ Finding::Unknown(_), _) | (_, u @ Finding::Unknown(_)) => u,
        (Finding::Present, Finding::Present) => Finding::Present,
    }
}

pub(super) fn sdk_answer<T, E>(r: Result<T, SdkError<E, HttpResponse>>) -> Answer
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match r {
        Ok(_) => Answer::Stored,
        Err(SdkError::ServiceError(se)) => Answer::Refused(
            se.raw().status().as_u16(),
            se.err().code().unwrap_or("").to_owned(),
        ),
        Err(e) => Answer::Silent(format!("{e}")),
    }
}

pub(super) async fn http_answer(r: Result<reqwest::Response, reqwest::Error>) -> Answer {
    match r {
        Ok(resp) if resp.status().is_success() => Answer::Stored,
        Ok(resp) => {
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap_or_default();
            let code = body
                .split_once("<Code>")
                .and_then(|(_, rest)| rest.split_once("</Code>"))
                .map(|(c, _)| c.to_owned())
                .unwrap_or_default();
            Answer::Refused(status, code)
        }
        // Without the URL: a presigned one is a credential (its signature), and this text
        // reaches doctor's output, the startup log and the admin API (review of issue 36).
        Err(e) => Answer::Silent(format!("{}", e.without_url())),
    }
}

/// A condition refused the request: 412 (PreconditionFailed).
pub(super) const PRECONDITION: fn(u16, &str) -> bool = |s, _| s == 412;
/// Bytes refused for their checksum: S3 and LocalStack answer 400 BadDigest, Garage 400
/// InvalidDigest.
pub(super) const CHECKSUM_REFUSED: fn(u16, &str) -> bool = |s, code| {
    s == 400
        && matches!(
            code,
            "BadDigest" | "InvalidDigest" | "XAmzContentChecksumMismatch"
        )
};
/// A POST body refused for the policy's size range: S3 and LocalStack answer 400
/// EntityTooLarge, Garage 400 InvalidRequest.
pub(super) const SIZE_REFUSED: fn(u16, &str) -> bool =
    |s, code| s == 400 && matches!(code, "EntityTooLarge" | "EntityTooSmall" | "InvalidRequest");
/// A form refused for its signature: 403 AccessDenied (Garage) or SignatureDoesNotMatch (S3).
pub(super) const SIGNATURE_REFUSED: fn(u16, &str) -> bool =
    |s, code| (s == 403 || s == 400) && matches!(code, "AccessDenied" | "SignatureDoesNotMatch");

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36: doctor said "not probed: answered 200 " of a 200 with no error code. Every
    /// finding says what the store did, in words.
    #[test]
    fn a_finding_says_what_the_store_answered_in_words() {
        assert_eq!(
            Answer::Refused(200, String::new()).refused_as(PRECONDITION, "stored"),
            Finding::Unknown("answered 200 with no error code".into())
        );
        assert_eq!(
            Answer::Refused(400, "InvalidArgument".into()).refused_as(PRECONDITION, "stored"),
            Finding::Unknown("answered 400 InvalidArgument".into())
        );
        assert_eq!(
            Answer::Refused(403, "AccessDenied".into()).to_string(),
            "refused (403 AccessDenied)"
        );
        assert_eq!(Answer::Stored.to_string(), "stored (2xx)");
        assert_eq!(
            Answer::Silent("connection reset".into()).to_string(),
            "not answered (connection reset)"
        );
    }

    /// Review 27, round 2: a throttled or timed-out call on the one test request made a
    /// missing capability present (any 4xx but 403 counted as the refusal). Only the refusals
    /// that mean the check count; passing failures and any other refusal leave it unknown.
    #[test]
    fn only_the_refusal_a_check_means_makes_a_capability_present() {
        let judge = |status: u16, code: &str, want: fn(u16, &str) -> bool| {
            Answer::Refused(status, code.into()).refused_as(want, "stored")
        };
        for (status, code) in [
            (429, "SlowDown"),
            (503, "SlowDown"),
            (400, "RequestTimeout"),
            (408, ""),
            (500, "InternalError"),
            (400, "RequestTimeTooSkewed"),
        ] {
            for want in [
                CHECKSUM_REFUSED,
                SIZE_REFUSED,
                SIGNATURE_REFUSED,
                PRECONDITION,
            ] {
                assert!(
                    matches!(judge(status, code, want), Finding::Unknown(_)),
                    "{status} {code}"
                );
            }
        }
        // Other refusals say nothing either.
        assert!(matches!(
            judge(400, "InvalidArgument", CHECKSUM_REFUSED),
            Finding::Unknown(_)
        ));
        assert!(matches!(
            judge(403, "AccessDenied", SIZE_REFUSED),
            Finding::Unknown(_)
        ));
        assert!(matches!(
            judge(400, "EntityTooLarge", SIGNATURE_REFUSED),
            Finding::Unknown(_)
        ));
        // The refusals each check means, as LocalStack, S3 and Garage answer them.
        for (status, code, want) in [
            (400, "BadDigest", CHECKSUM_REFUSED),
            (400, "InvalidDigest", CHECKSUM_REFUSED),
            (400, "EntityTooLarge", SIZE_REFUSED),
            (400, "InvalidRequest", SIZE_REFUSED),
            (403, "AccessDenied", SIGNATURE_REFUSED),
            (403, "SignatureDoesNotMatch", SIGNATURE_REFUSED),
            (412, "PreconditionFailed", PRECONDITION),
        ] {
            assert_eq!(
                judge(status, code, want),
                Finding::Present,
                "{status} {code}"
            );
        }
        assert_eq!(
            Answer::Stored.refused_as(SIZE_REFUSED, "stored"),
            Finding::Missing("stored".into())
        );
    }
}
