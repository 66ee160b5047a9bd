//! SigV4 signing for what the SDK cannot express, computed directly with the `aws-sigv4`
//! primitives: presigned query URLs whose signed headers we choose (Content-Type,
//! Content-Length, `If-None-Match: *`), and browser POST policies. Pure functions of their
//! inputs and the clock value passed in, so they are tested against AWS's published vectors.

pub mod location;
pub mod post_policy;
pub mod query;

use std::time::SystemTime;

use chrono::{DateTime, Datelike, Timelike, Utc};

pub use location::S3Location;

/// Credentials used for signing. `Debug` never prints the secret.
#[derive(Clone)]
pub struct SigningCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for SigningCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"[redacted]")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "[redacted]"),
            )
            .finish()
    }
}

pub(crate) const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// `20130524T000000Z`. From the fields rather than a strftime pattern, which chrono parses
/// anew on every call (a presign formats twice).
pub(crate) fn amz_date(t: DateTime<Utc>) -> String {
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// `20130524/us-east-1/s3/aws4_request` (the credential is the access key id, `/`, this).
pub(crate) fn credential_scope(t: DateTime<Utc>, region: &str) -> String {
    format!(
        "{:04}{:02}{:02}/{region}/s3/aws4_request",
        t.year(),
        t.month(),
        t.day()
    )
}

pub(crate) fn sign(
    creds: &SigningCredentials,
    t: DateTime<Utc>,
    region: &str,
    string_to_sign: &str,
) -> String {
    let key = aws_sigv4::sign::v4::generate_signing_key(
        &creds.secret_access_key,
        SystemTime::from(t),
        region,
        "s3",
    );
    aws_sigv4::sign::v4::calculate_signature(key, string_to_sign.as_bytes())
}

/// RFC 3986 encoding as SigV4 wants it: everything but `A-Za-z0-9-_.~` is `%XX` (uppercase);
/// `/` is kept when `keep_slash` (object paths) and encoded otherwise (query values).
pub fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    uri_encode_into(&mut out, s, keep_slash);
    out
}

/// [`uri_encode`] appending to `out`.
pub(crate) fn uri_encode_into(out: &mut String, s: &str, keep_slash: bool) {
    out.reserve(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'.' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(b as char);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xF)]));
        }
    }
}

/// The fictitious credentials AWS's documentation uses in its signing examples.
#[cfg(test)]
pub(crate) fn aws_example_credentials() -> SigningCredentials {
    SigningCredentials {
        access_key_id: "AKIAIOSFODNN7EXAMPLE".into(),
        secret_access_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        session_token: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_encoding_follows_sigv4() {
        assert_eq!(uri_encode("a b/c+d~e", true), "a%20b/c%2Bd~e");
        assert_eq!(uri_encode("a/b", false), "a%2Fb");
        assert_eq!(uri_encode("ü", true), "%C3%BC");
    }

    #[test]
    fn dates_match_the_strftime_forms() {
        use chrono::TimeZone;
        for secs in [
            0_i64,
            1_369_353_600,
            1_800_000_000,
            4_102_444_799,
            253_402_300_799,
        ] {
            let t = Utc.timestamp_opt(secs, 0).single().expect("valid");
            assert_eq!(amz_date(t), t.format("%Y%m%dT%H%M%SZ").to_string());
            assert_eq!(
                credential_scope(t, "eu-west-1"),
                format!("{}/eu-west-1/s3/aws4_request", t.format("%Y%m%d"))
            );
        }
    }

    #[test]
    fn debug_never_prints_secrets() {
        let c = SigningCredentials {
            access_key_id: "AKID".into(),
            secret_access_key: "very-secret".into(),
            session_token: Some("tok".into()),
        };
        let s = format!("{c:?}");
        assert!(s.contains("AKID") && !s.contains("very-secret") && !s.contains("tok\""));
    }
}
