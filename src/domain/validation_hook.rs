//! A profile's pre-commit validation hook: an outside service (virus scanner, moderation) asked
//! before a commit copies an object to its final key, and what its answer means. Pure: the
//! settings, the answer's parsing and the request's signature; the call itself lives in
//! `services::commit::hook`.

use std::fmt;
use std::time::Duration;

/// Default time the hook has to answer.
pub const DEFAULT_TIMEOUT_MS: u64 = 2_000;
/// Longest `timeout_ms` accepted (it must also stay below the request timeout).
pub const MAX_TIMEOUT_MS: u64 = 60_000;
/// A refusal's reason is cut to this many characters before it reaches a client.
pub const MAX_REASON_CHARS: usize = 200;
/// An answer body longer than this is malformed (the hook answers a verdict, not a report).
pub const MAX_ANSWER_BYTES: usize = 16 * 1024;
/// Lifetime of the GET URL of the tmp object the hook receives.
pub const DOWNLOAD_URL_SECS: u64 = 300;

/// What a commit does when the hook cannot give an answer (timeout, connection error, non-2xx,
/// malformed body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Fail closed (the default): 503 `validation_hook_unavailable`, the upload stays
    /// committable and a retry asks the hook again.
    Reject,
    /// Fail open: the commit goes on; a warning is logged and a metric counted.
    Allow,
}

impl OnError {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "reject" => Some(Self::Reject),
            "allow" => Some(Self::Allow),
            _ => None,
        }
    }
}

/// The HMAC key of a hook's request signature (Standard Webhooks: `whsec_<base64>`), never
/// shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct HookSecret(Vec<u8>);

impl fmt::Debug for HookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl HookSecret {
    /// A Standard Webhooks secret, as an endpoint's (`whsec_` and the base64 of 24–64 bytes;
    /// `domain::webhooks::secret_key`). `Err` says what is wrong without echoing it.
    pub fn parse(raw: &str) -> Result<Self, String> {
        super::webhooks::secret_key(raw).map(Self)
    }

    /// The `webhook-signature` header value of a message (Standard Webhooks v1), signed as
    /// every webhook is (`domain::webhooks::signature`).
    pub fn signature(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        super::webhooks::signature(&self.0, id, timestamp, body)
    }
}

/// A profile's hook, as configured (`validation_hook = { url, timeout_ms, on_error, secret }`).
#[derive(Debug, Clone)]
pub struct ValidationHook {
    /// `http://` or `https://`; redirects are not followed.
    pub url: String,
    pub timeout: Duration,
    pub on_error: OnError,
    /// When set, each request carries `webhook-id`, `webhook-timestamp` and
    /// `webhook-signature` so the hook can tell it came from this service.
    pub secret: Option<HookSecret>,
}

/// The hook's answer to one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refused, with the reason cleaned for a client to read.
    Refuse(String),
}

/// Why an answer is not a verdict (the hook then counts as unavailable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerError {
    TooLarge,
    NotJson,
    /// No boolean `allow`.
    NoVerdict,
    /// An object of the answer holds a key twice (`{"allow": false, "allow": true}`): parsers
    /// disagree on which one counts, so it is no answer — and one a profile that fails open
    /// does not go on from either (`services::commit::hook`).
    RepeatedKey,
    /// A 2xx status, then the body broke off (the connection closed or the timeout passed
    /// before its end): what arrived may be a refusal (review 26).
    Cut,
}

impl AnswerError {
    /// Every 2xx answer that is not a clean verdict is ambiguous: the hook did answer, and what
    /// it meant is unknown — a refusal whose reason was built from a file's name (an unescaped
    /// quote, a second object, a repeated `allow`), a byte-order mark, an oversize reason. Never
    /// acted on as a yes, whatever the profile's `on_error` says; failing open is for a hook
    /// that gave no answer (timeout, connection error, non-2xx).
    pub fn is_ambiguous(self) -> bool {
        true
    }
}

/// Reads a 2xx answer's body: `{"allow": true}` or `{"allow": false, "reason": "…"}`. Anything
/// else — `allow` missing or not a boolean, a body that is not a JSON object, an object anywhere
/// in it that repeats a key — is malformed, never read as a yes.
pub fn parse_answer(body: &[u8]) -> Result<Verdict, AnswerError> {
    if body.len() > MAX_ANSWER_BYTES {
        return Err(AnswerError::TooLarge);
    }
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| AnswerError::NotJson)?;
    if super::json_keys::repeats_a_key(body) {
        return Err(AnswerError::RepeatedKey);
    }
    match value.get("allow").and_then(serde_json::Value::as_bool) {
        Some(true) => Ok(Verdict::Allow),
        Some(false) => Ok(Verdict::Refuse(clean_reason(
            value.get("reason").and_then(serde_json::Value::as_str),
        ))),
        None => Err(AnswerError::NoVerdict),
    }
}

/// The reason as a client sees it: control characters and the invisible ones that change how
/// text around them reads (bidi overrides and isolates, zero-width characters: the set stored
/// filenames are cleaned of, `reserved::is_invisible`) become spaces, runs of whitespace one
/// space, at most [`MAX_REASON_CHARS`] characters (cut at a character, with `…`); none given
/// (or only blanks) reads "no reason given". A hook's reason must not reorder a client's message.
pub fn clean_reason(raw: Option<&str>) -> String {
    let spaced: String = raw
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_control() || super::reserved::is_invisible(c) {
                ' '
            } else {
                c
            }
        })
        .collect();
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let joined = words.join(" ");
    if joined.is_empty() {
        return "no reason given".into();
    }
    if joined.chars().count() <= MAX_REASON_CHARS {
        return joined;
    }
    let mut cut: String = joined.chars().take(MAX_REASON_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_standard_webhooks_one() {
        // The example published with the Standard Webhooks specification.
        let secret = HookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("secret");
        assert_eq!(
            secret.signature(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn secrets_need_the_prefix_and_24_bytes_of_base64() {
        for bad in [
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_not base64!",
            "whsec_c2hvcnQ=",
        ] {
            let err = HookSecret::parse(bad).expect_err(bad);
            assert!(!err.contains("c2hvcnQ") && !err.contains("MfKQ"), "{err}");
        }
        assert_eq!(
            format!(
                "{:?}",
                HookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            ),
            "Ok([redacted])"
        );
    }

    #[test]
    fn only_a_boolean_allow_is_a_verdict() {
        assert_eq!(parse_answer(br#"{"allow": true}"#), Ok(Verdict::Allow));
        assert_eq!(
            parse_answer(br#"{"allow": false, "reason": "EICAR test file"}"#),
            Ok(Verdict::Refuse("EICAR test file".into()))
        );
        assert_eq!(
            parse_answer(br#"{"allow": false}"#),
            Ok(Verdict::Refuse("no reason given".into()))
        );
        for bad in [
            &br#"{"allow": "true"}"#[..],
            br#"{"allow": 1}"#,
            br#"{"allowed": true}"#,
            br#"{}"#,
            br#"[true]"#,
            br#"true"#,
            br#"null"#,
        ] {
            assert_eq!(parse_answer(bad), Err(AnswerError::NoVerdict), "{bad:?}");
        }
        for bad in [&b""[..], b"ok", b"{\"allow\": true", b"\xff\xfe"] {
            assert_eq!(parse_answer(bad), Err(AnswerError::NotJson), "{bad:?}");
        }
        for repeated in [
            &br#"{"allow": false, "allow": true}"#[..],
            br#"{"allow": true, "allow": true}"#,
            br#"{"allow": false, "reason": "x", "allow": true}"#,
            br#"{"allow": true, "reason": "a", "reason": "b"}"#,
            br#"{"allow": true, "details": {"engine": "a", "engine": "b"}}"#,
        ] {
            let got = parse_answer(repeated);
            assert_eq!(got, Err(AnswerError::RepeatedKey), "{repeated:?}");
            assert!(got.is_err_and(AnswerError::is_ambiguous));
        }
        assert!(AnswerError::NotJson.is_ambiguous());
        assert!(AnswerError::Cut.is_ambiguous());
        let huge = format!(
            r#"{{"allow": true, "pad": "{}"}}"#,
            "x".repeat(MAX_ANSWER_BYTES)
        );
        assert_eq!(parse_answer(huge.as_bytes()), Err(AnswerError::TooLarge));
    }

    #[test]
    fn reasons_are_cleaned_and_cut_at_a_character() {
        assert_eq!(
            clean_reason(Some("bad\r\nX-Injected: 1\u{0}\u{1b}[31m")),
            "bad X-Injected: 1 [31m"
        );
        assert_eq!(clean_reason(Some("   \t ")), "no reason given");
        assert_eq!(
            clean_reason(Some("virus\u{202E}exe.gnp\u{200B}\u{FEFF} found")),
            "virus exe.gnp found"
        );
        assert_eq!(clean_reason(None), "no reason given");
        let long = "é".repeat(500);
        let cut = clean_reason(Some(&long));
        assert_eq!(cut.chars().count(), MAX_REASON_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(
            clean_reason(Some(&"a".repeat(MAX_REASON_CHARS))).len(),
            MAX_REASON_CHARS
        );
    }

    #[test]
    fn on_error_takes_the_two_documented_words() {
        assert_eq!(OnError::parse("reject"), Some(OnError::Reject));
        assert_eq!(OnError::parse("allow"), Some(OnError::Allow));
        assert_eq!(OnError::parse("Allow"), None);
        assert_eq!(OnError::parse(""), None);
    }
}
