//! The queue sink's rules (SQS): what a queue URL is and which service endpoint and region a
//! request for it goes to, FIFO queues, the ids a FIFO queue orders and deduplicates by, and
//! which SQS errors are worth retrying. Pure: the signed requests live in `storage::sqs`.

use std::borrow::Cow;
use std::fmt;

use sha2::{Digest, Sha256};

/// A queue URL, parsed once: `https://sqs.<region>.amazonaws.com/<account>/<name>` on AWS,
/// whatever an emulator answered to CreateQueue otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueUrl {
    url: String,
    /// `scheme://host[:port]`, lowercase.
    origin: String,
    name: String,
    /// The region an AWS SQS host names; `None` for any other host.
    aws_region: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueUrlError {
    #[error("a queue URL is http(s)://host/account/name without user, query or fragment")]
    Malformed,
    #[error("a queue name is 1-80 letters, digits, '-' or '_' (a FIFO queue's ends in .fifo)")]
    BadName,
    #[error("an AWS queue URL must use https")]
    NotHttps,
    /// Without an endpoint override only AWS's SQS hosts are called: a signed request is never
    /// sent to a host a queue URL merely names.
    #[error("{0} is not an AWS SQS host and no endpoint override is configured")]
    UnknownHost(String),
}

impl QueueUrl {
    pub fn parse(s: &str) -> Result<Self, QueueUrlError> {
        let (scheme, rest) = s.split_once("://").ok_or(QueueUrlError::Malformed)?;
        let scheme = scheme.to_ascii_lowercase();
        if !matches!(scheme.as_str(), "http" | "https") {
            return Err(QueueUrlError::Malformed);
        }
        if rest.contains(['?', '#', '@', '\\']) || rest.chars().any(|c| c.is_ascii_control()) {
            return Err(QueueUrlError::Malformed);
        }
        let (authority, path) = rest.split_once('/').ok_or(QueueUrlError::Malformed)?;
        let authority = authority.to_ascii_lowercase();
        let host = match authority.rsplit_once(':') {
            Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
                host
            }
            Some(_) => return Err(QueueUrlError::Malformed),
            None => authority.as_str(),
        };
        if host.is_empty()
            || !host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        {
            return Err(QueueUrlError::Malformed);
        }
        // `<account>/<name>` at the end (emulators may put more in front).
        let mut segments = path.rsplit('/');
        let name = segments.next().unwrap_or_default();
        let account = segments.next().unwrap_or_default();
        if account.is_empty() || !account.bytes().all(|b| b.is_ascii_digit()) {
            return Err(QueueUrlError::Malformed);
        }
        if !valid_queue_name(name) {
            return Err(QueueUrlError::BadName);
        }
        let aws_region = aws_sqs_region(host);
        if aws_region.is_some() && scheme != "https" {
            return Err(QueueUrlError::NotHttps);
        }
        Ok(Self {
            url: s.to_owned(),
            origin: format!("{scheme}://{authority}"),
            name: name.to_owned(),
            aws_region,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// FIFO queues keep the order of each message group and drop a repeated deduplication id
    /// (within five minutes); standard queues do neither.
    pub fn is_fifo(&self) -> bool {
        self.name.ends_with(".fifo")
    }

    /// The region of an AWS SQS host.
    pub fn aws_region(&self) -> Option<&str> {
        self.aws_region.as_deref()
    }
}

impl fmt::Display for QueueUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

/// Where an SQS request is sent and the region it is signed for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueService {
    /// `scheme://host[:port]`, no trailing slash; requests go to `{endpoint}/`.
    pub endpoint: String,
    pub region: String,
}

/// The service a queue's requests go to. A queue on AWS is called at its own host and signed
/// for the region that host names, whatever the endpoint override says (the override may point
/// at an S3-compatible store that has no SQS). Any other queue URL (an emulator's) is called
/// at the override, signed for the configured region — and without an override it is refused.
pub fn service_for(
    queue: &QueueUrl,
    endpoint_override: Option<&str>,
    configured_region: &str,
) -> Result<QueueService, QueueUrlError> {
    if let Some(region) = queue.aws_region() {
        return Ok(QueueService {
            endpoint: queue.origin.clone(),
            region: region.to_owned(),
        });
    }
    match endpoint_override {
        Some(endpoint) => Ok(QueueService {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            region: configured_region.to_owned(),
        }),
        None => Err(QueueUrlError::UnknownHost(
            queue
                .origin
                .split_once("://")
                .map_or("", |(_, h)| h)
                .to_owned(),
        )),
    }
}

/// The service for requests that name no queue yet (CreateQueue, GetQueueUrl, ListQueues):
/// the override, or the configured region's AWS endpoint.
pub fn default_service(endpoint_override: Option<&str>, region: &str) -> QueueService {
    let endpoint = match endpoint_override {
        Some(e) => e.trim_end_matches('/').to_owned(),
        None if region.starts_with("cn-") => format!("https://sqs.{region}.amazonaws.com.cn"),
        None => format!("https://sqs.{region}.amazonaws.com"),
    };
    QueueService {
        endpoint,
        region: region.to_owned(),
    }
}

/// 1–80 characters of `A-Za-z0-9-_`, `.fifo` allowed as the last five.
pub fn valid_queue_name(name: &str) -> bool {
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    !stem.is_empty()
        && name.len() <= 80
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// The region of an AWS SQS host: `sqs.<r>.amazonaws.com`, `sqs-fips.<r>.amazonaws.com`,
/// `sqs.<r>.api.aws`, `sqs.<r>.amazonaws.com.cn`, the legacy `<r>.queue.amazonaws.com` and
/// `queue.amazonaws.com` (us-east-1).
fn aws_sqs_region(host: &str) -> Option<String> {
    if host == "queue.amazonaws.com" {
        return Some("us-east-1".into());
    }
    let region = if let Some(r) = host.strip_suffix(".queue.amazonaws.com") {
        r
    } else {
        let rest = host
            .strip_prefix("sqs.")
            .or_else(|| host.strip_prefix("sqs-fips."))?;
        [".amazonaws.com", ".amazonaws.com.cn", ".api.aws"]
            .iter()
            .find_map(|suffix| rest.strip_suffix(suffix))?
    };
    let valid = !region.is_empty()
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    valid.then(|| region.to_owned())
}

/// A `MessageGroupId` or `MessageDeduplicationId`: SQS takes 1–128 characters of ASCII
/// letters, digits and punctuation. A value that is not one (an alarm's subject with spaces, a
/// long scope) is replaced by `h-` and its SHA-256 in hex: the same input always gives the same
/// token, so order and deduplication still follow the input.
pub fn fifo_token(s: &str) -> String {
    let fits = !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_graphic());
    if fits {
        s.to_owned()
    } else {
        format!("h-{}", hex::encode(Sha256::digest(s.as_bytes())))
    }
}

/// The characters SQS takes in a message body (XML 1.0's `Char`): tab, LF, CR, U+0020–U+D7FF,
/// U+E000–U+FFFD and above U+FFFF. Anything else is refused with `InvalidMessageContents`.
pub fn sqs_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// A body SQS refuses and that cannot be rewritten without changing what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the message has characters SQS refuses (U+{0:04X}) and is not JSON they could be escaped in"
)]
pub struct UnsendableBody(pub u32);

/// The body SQS is sent: the body itself, byte for byte, when SQS takes every character of it
/// (always, for JSON that escapes control characters, unless a string holds U+FFFE or U+FFFF —
/// a filename may). Otherwise, when the body is JSON, each refused character is written as its
/// `\uXXXX` escape: in valid JSON such a character can only stand inside a string, where the
/// escape means the same character, so a receiver parsing the JSON reads the same value.
/// A body that is not JSON is refused (JSON itself cannot hold a raw control character).
pub fn sqs_body(body: &str) -> Result<Cow<'_, str>, UnsendableBody> {
    let Some(bad) = body.chars().find(|c| !sqs_char(*c)) else {
        return Ok(Cow::Borrowed(body));
    };
    if serde_json::from_str::<serde::de::IgnoredAny>(body).is_err() {
        return Err(UnsendableBody(u32::from(bad)));
    }
    let mut out = String::with_capacity(body.len() + 16);
    for c in body.chars() {
        if sqs_char(c) {
            out.push(c);
        } else {
            // Every refused character is below U+10000: one escape, no surrogate pair.
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        }
    }
    Ok(Cow::Owned(out))
}

/// What a failed SQS request means for whoever sends it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Throttling, 5xx, timeouts, connection failures, expired credentials: the same request
    /// may succeed later.
    Retryable,
    /// The queue does not exist, access is denied, the message is invalid: sending it again
    /// unchanged fails the same way until someone changes the queue, its policy or the code.
    Permanent,
}

/// The short code of an SQS JSON-protocol error: `__type` without its namespace
/// (`com.amazonaws.sqs#QueueDoesNotExist` → `QueueDoesNotExist`).
pub fn short_code(type_field: &str) -> &str {
    let code = type_field.rsplit_once('#').map_or(type_field, |(_, c)| c);
    // Some services append `:http://…` to the type.
    code.split_once(':').map_or(code, |(c, _)| c)
}

/// Classifies an SQS error answer by its code (JSON `__type` short code, or the query
/// protocol's `AWS.SimpleQueueService.*` code) and status. A known code decides (SQS answers
/// throttling with 400); otherwise 429 and 5xx are retryable and the rest permanent.
pub fn classify(status: u16, code: Option<&str>) -> Retry {
    const RETRYABLE: &[&str] = &[
        "RequestThrottled",
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "KmsThrottled",
        "KMS.ThrottlingException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalError",
        "InternalFailure",
        "RequestTimeout",
        "RequestTimeoutException",
        // The request took too long to arrive, or the session token expired meanwhile: a
        // fresh signature with refreshed credentials is a different request.
        "RequestExpired",
        "ExpiredToken",
        "ExpiredTokenException",
    ];
    const PERMANENT: &[&str] = &[
        "QueueDoesNotExist",
        "AWS.SimpleQueueService.NonExistentQueue",
        "AccessDenied",
        "AccessDeniedException",
        "InvalidSecurity",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "InvalidParameterValue",
        "InvalidMessageContents",
        "InvalidAddress",
        "UnsupportedOperation",
        "AWS.SimpleQueueService.UnsupportedOperation",
        "KmsAccessDenied",
        "KmsDisabled",
        "KmsNotFound",
        "KmsInvalidState",
        "KmsInvalidKeyUsage",
        "KmsOptInRequired",
    ];
    match code {
        Some(c) if RETRYABLE.contains(&c) => Retry::Retryable,
        Some(c) if PERMANENT.contains(&c) => Retry::Permanent,
        _ if status == 429 || status >= 500 => Retry::Retryable,
        _ => Retry::Permanent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> QueueUrl {
        QueueUrl::parse(s).expect(s)
    }

    #[test]
    fn aws_queue_urls_name_their_region_and_are_called_at_their_own_host() {
        for (u, region, endpoint) in [
            (
                "https://sqs.eu-west-1.amazonaws.com/123456789012/events",
                "eu-west-1",
                "https://sqs.eu-west-1.amazonaws.com",
            ),
            (
                "https://SQS.us-east-2.amazonaws.com/123456789012/e.fifo",
                "us-east-2",
                "https://sqs.us-east-2.amazonaws.com",
            ),
            (
                "https://sqs-fips.us-gov-west-1.amazonaws.com/123456789012/q",
                "us-gov-west-1",
                "https://sqs-fips.us-gov-west-1.amazonaws.com",
            ),
            (
                "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q",
                "cn-north-1",
                "https://sqs.cn-north-1.amazonaws.com.cn",
            ),
            (
                "https://ap-south-1.queue.amazonaws.com/123456789012/q",
                "ap-south-1",
                "https://ap-south-1.queue.amazonaws.com",
            ),
            (
                "https://queue.amazonaws.com/123456789012/q",
                "us-east-1",
                "https://queue.amazonaws.com",
            ),
            (
                "https://sqs.eu-central-1.api.aws/123456789012/q",
                "eu-central-1",
                "https://sqs.eu-central-1.api.aws",
            ),
        ] {
            let q = url(u);
            assert_eq!(q.aws_region(), Some(region), "{u}");
            // The override (an S3-compatible store's endpoint) does not redirect AWS queues.
            let s = service_for(&q, Some("http://minio:9000"), "us-west-2").expect(u);
            assert_eq!(s.endpoint, endpoint, "{u}");
            assert_eq!(s.region, region, "{u}");
        }
    }

    #[test]
    fn emulator_queue_urls_go_to_the_override_and_nowhere_without_one() {
        for u in [
            "http://sqs.us-east-1.localhost.localstack.cloud:4566/000000000000/events",
            "http://localhost:4566/000000000000/events.fifo",
            "http://localhost:4566/queue/us-east-1/000000000000/events",
            // Looks like AWS, is not AWS.
            "https://sqs.us-east-1.amazonaws.com.evil.test/123456789012/q",
            "https://evil.test/sqs.us-east-1.amazonaws.com/123456789012/q",
        ] {
            let q = url(u);
            assert_eq!(q.aws_region(), None, "{u}");
            let s = service_for(&q, Some("http://127.0.0.1:4567/"), "us-east-1").expect(u);
            assert_eq!(s.endpoint, "http://127.0.0.1:4567");
            assert_eq!(s.region, "us-east-1");
            assert!(matches!(
                service_for(&q, None, "us-east-1"),
                Err(QueueUrlError::UnknownHost(_))
            ));
        }
    }

    #[test]
    fn malformed_queue_urls_are_refused() {
        for (u, want) in [
            ("sqs.us-east-1.amazonaws.com/1/q", QueueUrlError::Malformed),
            (
                "ftp://sqs.us-east-1.amazonaws.com/1/q",
                QueueUrlError::Malformed,
            ),
            (
                "https://sqs.us-east-1.amazonaws.com",
                QueueUrlError::Malformed,
            ),
            (
                "https://sqs.us-east-1.amazonaws.com/q",
                QueueUrlError::Malformed,
            ),
            (
                "https://sqs.us-east-1.amazonaws.com/abc/q",
                QueueUrlError::Malformed,
            ),
            (
                "https://sqs.us-east-1.amazonaws.com/1/q?x=1",
                QueueUrlError::Malformed,
            ),
            (
                "https://sqs.us-east-1.amazonaws.com/1/q#f",
                QueueUrlError::Malformed,
            ),
            ("https://user@evil.test/1/q", QueueUrlError::Malformed),
            ("https://evil.test:x/1/q", QueueUrlError::Malformed),
            ("https://ev il.test/1/q", QueueUrlError::Malformed),
            ("https://evil.test/1/q\n", QueueUrlError::Malformed),
            (
                "https://sqs.us-east-1.amazonaws.com/1/",
                QueueUrlError::BadName,
            ),
            (
                "https://sqs.us-east-1.amazonaws.com/1/.fifo",
                QueueUrlError::BadName,
            ),
            (
                "https://sqs.us-east-1.amazonaws.com/1/a.b",
                QueueUrlError::BadName,
            ),
            (
                "http://sqs.us-east-1.amazonaws.com/123456789012/q",
                QueueUrlError::NotHttps,
            ),
        ] {
            assert_eq!(QueueUrl::parse(u), Err(want), "{u}");
        }
        let long = format!("https://sqs.us-east-1.amazonaws.com/1/{}", "a".repeat(81));
        assert_eq!(QueueUrl::parse(&long), Err(QueueUrlError::BadName));
        let max = format!(
            "https://sqs.us-east-1.amazonaws.com/1/{}.fifo",
            "a".repeat(75)
        );
        assert!(QueueUrl::parse(&max).is_ok());
    }

    #[test]
    fn fifo_queues_are_told_by_their_name() {
        assert!(url("http://localhost:4566/000000000000/e.fifo").is_fifo());
        assert!(!url("http://localhost:4566/000000000000/e-fifo").is_fifo());
        assert!(!url("http://localhost:4566/000000000000/e").is_fifo());
        assert_eq!(
            url("http://localhost:4566/000000000000/e.fifo").name(),
            "e.fifo"
        );
    }

    #[test]
    fn requests_naming_no_queue_go_to_the_override_or_the_region() {
        assert_eq!(
            default_service(Some("http://127.0.0.1:4567/"), "eu-west-1").endpoint,
            "http://127.0.0.1:4567"
        );
        assert_eq!(
            default_service(None, "eu-west-1").endpoint,
            "https://sqs.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            default_service(None, "cn-north-1").endpoint,
            "https://sqs.cn-north-1.amazonaws.com.cn"
        );
    }

    #[test]
    fn fifo_tokens_keep_valid_ids_and_hash_the_rest_deterministically() {
        let id = "evt_0192d5e2c8a07b3c9f1e2d3c4b5a6978";
        assert_eq!(fifo_token(id), id);
        assert_eq!(
            fifo_token("file_abc!#$%&'()*+,-./:;<=>?@[]^_`{|}~"),
            "file_abc!#$%&'()*+,-./:;<=>?@[]^_`{|}~"
        );
        assert_eq!(fifo_token(&"a".repeat(128)), "a".repeat(128));
        for odd in ["", "bucket check", "ünï", &"a".repeat(129), "a\tb"] {
            let t = fifo_token(odd);
            assert!(t.starts_with("h-") && t.len() == 66, "{odd:?} → {t}");
            assert_eq!(t, fifo_token(odd), "deterministic");
        }
        assert_ne!(fifo_token("bucket check"), fifo_token("bucket  check"));
    }

    #[test]
    fn error_codes_lose_their_namespace() {
        assert_eq!(
            short_code("com.amazonaws.sqs#QueueDoesNotExist"),
            "QueueDoesNotExist"
        );
        assert_eq!(short_code("AccessDeniedException"), "AccessDeniedException");
        assert_eq!(
            short_code("com.amazon.coral.service#AccessDeniedException:http://internal"),
            "AccessDeniedException"
        );
    }

    #[test]
    fn throttling_and_server_errors_are_retryable_missing_queues_and_denials_are_not() {
        for (status, code) in [
            (400, Some("RequestThrottled")),
            (400, Some("KmsThrottled")),
            (400, Some("ThrottlingException")),
            (400, Some("ExpiredToken")),
            (429, None),
            (500, Some("InternalError")),
            (502, None),
            (503, Some("ServiceUnavailable")),
            (599, Some("SomethingNew")),
        ] {
            assert_eq!(
                classify(status, code),
                Retry::Retryable,
                "{status} {code:?}"
            );
        }
        for (status, code) in [
            (400, Some("QueueDoesNotExist")),
            (400, Some("AWS.SimpleQueueService.NonExistentQueue")),
            (403, Some("AccessDenied")),
            (400, Some("AccessDeniedException")),
            (403, Some("InvalidClientTokenId")),
            (403, Some("SignatureDoesNotMatch")),
            (400, Some("InvalidParameterValue")),
            (400, Some("InvalidMessageContents")),
            (400, Some("KmsAccessDenied")),
            (404, None),
            (400, Some("SomethingNew")),
            // A known permanent code decides even when a proxy answers 5xx with it.
            (500, Some("QueueDoesNotExist")),
        ] {
            assert_eq!(
                classify(status, code),
                Retry::Permanent,
                "{status} {code:?}"
            );
        }
    }

    #[test]
    fn bodies_sqs_takes_are_sent_byte_for_byte() {
        for body in [
            "",
            "plain",
            "{\"a\":\"\\u0001 tab\\t\"}",
            "crlf\r\nand\ttab",
            "写真 🎉 \u{D7FF} \u{E000} \u{FFFD} \u{10FFFF}",
        ] {
            assert!(
                matches!(sqs_body(body), Ok(Cow::Borrowed(b)) if b == body),
                "{body:?}"
            );
        }
    }

    #[test]
    fn refused_characters_in_json_become_escapes_with_the_same_meaning() {
        let value = serde_json::json!({"filename": "a\u{FFFF}b\u{FFFE}.jpg", "n": [1, "\u{1}"]});
        // serde_json escapes U+0001 itself but writes U+FFFE and U+FFFF raw.
        let body = serde_json::to_string(&value).expect("json");
        assert!(body.contains('\u{FFFF}'));
        let sent = sqs_body(&body).expect("escapable");
        assert!(sent.chars().all(sqs_char), "{sent}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&sent).expect("still JSON"),
            value
        );
        // JSON cannot hold a raw control character at all: such a body is not JSON, refused.
        assert_eq!(sqs_body("{\"k\":\"x\u{1}y\"}"), Err(UnsendableBody(1)));
    }

    #[test]
    fn refused_characters_outside_json_are_refused() {
        assert_eq!(sqs_body("not json \u{FFFF}"), Err(UnsendableBody(0xFFFF)));
        assert_eq!(sqs_body("\u{0}"), Err(UnsendableBody(0)));
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        /// Strings weighted towards the characters SQS refuses and JSON's specials.
        fn text() -> impl Strategy<Value = String> {
            prop::collection::vec(
                prop_oneof![
                    Just('\u{FFFE}'),
                    Just('\u{FFFF}'),
                    Just('\u{1}'),
                    Just('"'),
                    Just('\\'),
                    Just('\r'),
                    any::<char>(),
                ],
                0..24,
            )
            .prop_map(|cs| cs.into_iter().collect())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn any_json_is_sent_as_characters_sqs_takes_and_reads_back_the_same(
                a in text(), b in text(), n in any::<i64>()
            ) {
                let value = serde_json::json!({"type": "file.committed", "data": {a.clone(): [b.clone(), n]}, "b": b});
                let body = serde_json::to_string(&value).expect("json");
                let sent = sqs_body(&body).expect("JSON is always sendable");
                prop_assert!(sent.chars().all(sqs_char));
                let back: serde_json::Value = serde_json::from_str(&sent).expect("still JSON");
                prop_assert_eq!(back, value);
                if body.chars().all(sqs_char) {
                    prop_assert_eq!(sent.as_ref(), body.as_str());
                }
            }

            #[test]
            fn fifo_tokens_are_always_ids_sqs_takes(s in text()) {
                let t = fifo_token(&s);
                prop_assert!((1..=128).contains(&t.len()));
                prop_assert!(t.bytes().all(|b| b.is_ascii_graphic()));
            }

            #[test]
            fn parsing_any_url_never_panics_and_keeps_what_it_accepts(s in text(), t in "[a-z0-9.:/-]{0,60}") {
                for raw in [s.clone(), format!("https://{t}"), format!("http://{s}/1/q")] {
                    if let Ok(q) = QueueUrl::parse(&raw) {
                        prop_assert_eq!(q.as_str(), raw.as_str());
                        prop_assert!(valid_queue_name(q.name()));
                    }
                }
            }
        }
    }
}
