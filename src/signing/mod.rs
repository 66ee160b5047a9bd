//! SigV4 signing for what the SDK cannot express, computed directly with the `aws-sigv4`
//! primitives: presigned query URLs whose signed headers we choose (Content-Type,
//! Content-Length, `If-None-Match: *`), and browser POST policies. Pure functions of their
//! inputs and the clock value passed in, so they are tested against AWS's published vectors.

pub mod location;
pub mod post_policy;
pub mod query;

use std::time::SystemTime;

use chrono::{DateTime, Utc};

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

/// `20130524T000000Z`
pub(crate) fn amz_date(t: DateTime<Utc>) -> String {
    t.format("%Y%m%dT%H%M%SZ").to_string()
}

/// `AKID/20130524/us-east-1/s3/aws4_request`
pub(crate) fn credential_scope(t: DateTime<Utc>, region: &str) -> String {
    format!("{}/{region}/s3/aws4_request", t.format("%Y%m%d"))
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
    out
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
