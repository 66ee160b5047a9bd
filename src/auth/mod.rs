//! Bearer tokens. Two kinds, never confused (the token's `alg` never chooses the key type):
//! - HS256 tokens signed with `UPCOMMIT_JWT_SECRET` (development, tests, `upcommit token`):
//!   `sub` is the user id, `exp` is required, `"admin": true` marks an admin;
//! - RS256/ES256/EdDSA tokens of an identity provider (one of several, picked by the token's
//!   exact `iss` before any key is looked up), checked against that provider's own JWKS
//!   ([`jwks`], [`verifier`]), with the claim rules of [`claims`].
//!
//! Signatures are made and checked by the `jsonwebtoken` crate; identity comes from the token
//! only.

pub mod claims;
pub mod jwks;
pub mod verifier;

pub use verifier::Verifier;

use serde::{Deserialize, Serialize};

/// Who is calling, as proven by a valid token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user_id: String,
    pub admin: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("malformed token")]
    Malformed,
    #[error("bad token signature")]
    BadSignature,
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
    /// A provider token refused for a reason the client can act on (its own code).
    #[error("{}", .0.message())]
    Refused(Refusal),
    /// The provider's keys have expired here and cannot be fetched.
    #[error("the identity provider's keys cannot be fetched")]
    ProviderUnavailable { retry_after_secs: u64 },
}

/// Why a token was refused, each with its stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    IssuerInvalid,
    AudienceInvalid,
    Expired,
    NotYetValid,
    KeyUnknown,
    AlgorithmNotAllowed,
    UserIdReserved,
    CritUnsupported,
}

impl Refusal {
    pub fn code(self) -> &'static str {
        match self {
            Refusal::IssuerInvalid => "token_issuer_invalid",
            Refusal::AudienceInvalid => "token_audience_invalid",
            Refusal::Expired => "token_expired",
            Refusal::NotYetValid => "token_not_yet_valid",
            Refusal::KeyUnknown => "token_key_unknown",
            Refusal::AlgorithmNotAllowed => "token_algorithm_not_allowed",
            Refusal::UserIdReserved => "token_user_id_reserved",
            Refusal::CritUnsupported => "token_crit_unsupported",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Refusal::IssuerInvalid => "the token's iss is not a configured issuer",
            Refusal::AudienceInvalid => "the token's aud does not name this service",
            Refusal::Expired => "the token has expired",
            Refusal::NotYetValid => "the token is not valid yet (nbf)",
            Refusal::KeyUnknown => "the token's kid is not in the identity provider's key set",
            Refusal::AlgorithmNotAllowed => {
                "the token's alg is not accepted for its issuer (RS256, ES256, EdDSA from the JWKS; HS256 only with the development secret)"
            }
            Refusal::UserIdReserved => {
                "the token's user id starts with another issuer's user prefix"
            }
            Refusal::CritUnsupported => {
                "the token's header has crit: this service implements no JWS extension (RFC 7515 4.1.11)"
            }
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    exp: i64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    admin: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iat: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nbf: Option<i64>,
}

pub(crate) const MAX_TOKEN_BYTES: usize = 8192;
const MAX_SUB_BYTES: usize = 128;

/// Mints a token (for `upcommit token` and tests).
pub fn issue(secret: &[u8], sub: &str, admin: bool, ttl_secs: i64, now_unix: i64) -> String {
    let claims = Claims {
        sub: sub.to_owned(),
        exp: now_unix + ttl_secs,
        admin,
        iat: Some(now_unix),
        nbf: None,
    };
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(secret),
    )
    // HS256 with a secret key signs any claims that serialize, and these always do.
    .unwrap_or_else(|e| unreachable!("an HS256 token could not be made: {e}"))
}

/// Verifies an HS256 token with the secret (signature by `jsonwebtoken`, which accepts only the
/// algorithms asked for: no `none`, no algorithm confusion). The time claims are checked here
/// against `now_unix`, with no leeway: `exp` is required.
pub fn verify(secret: &[u8], token: &str, now_unix: i64) -> Result<Identity, AuthError> {
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES || secret.is_empty() {
        return Err(AuthError::Malformed);
    }
    claims::refuse_critical(&claims::peek(token)?, AuthError::Malformed)?;
    let claims: Claims = signed_claims(
        token,
        &jsonwebtoken::DecodingKey::from_secret(secret),
        jsonwebtoken::Algorithm::HS256,
    )?;
    if !valid_user_id(&claims.sub) {
        return Err(AuthError::Malformed);
    }
    if claims.exp <= now_unix {
        return Err(AuthError::Expired);
    }
    if claims.nbf.is_some_and(|nbf| nbf > now_unix) {
        return Err(AuthError::NotYetValid);
    }
    Ok(Identity {
        user_id: claims.sub,
        admin: claims.admin,
    })
}

/// The claims of a token whose signature `key` verifies under `alg` (and only `alg`). No claim
/// is checked here: the callers check the times, issuer and audience against their own clock.
pub(crate) fn signed_claims<T: serde::de::DeserializeOwned>(
    token: &str,
    key: &jsonwebtoken::DecodingKey,
    alg: jsonwebtoken::Algorithm,
) -> Result<T, AuthError> {
    use jsonwebtoken::errors::ErrorKind;
    let mut validation = jsonwebtoken::Validation::new(alg);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    jsonwebtoken::decode::<T>(token, key, &validation)
        .map(|data| data.claims)
        .map_err(|e| match e.kind() {
            ErrorKind::InvalidSignature => AuthError::BadSignature,
            _ => AuthError::Malformed,
        })
}

/// A user id as tokens carry it (`sub`): 1–128 bytes, no control characters. An admin naming
/// another owner (a copy's) is held to the same rule.
pub fn valid_user_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_SUB_BYTES && !s.chars().any(char::is_control)
}

/// A token lifetime: any duration [`crate::domain::duration::parse_secs`] reads, above 0.
pub fn parse_ttl(s: &str) -> Option<i64> {
    crate::domain::duration::parse_secs(s)
        .filter(|n| *n > 0)
        .and_then(|n| i64::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
    const NOW: i64 = 1_800_000_000;

    /// A compact HS256 JWS of any `header` and `payload` (JSON, as given): the tokens an
    /// attacker or a careless issuer could send, which `issue` never makes.
    fn sign_hs256(secret: &[u8], header: &[u8], payload: &[u8]) -> String {
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(payload)
        );
        let signature = jsonwebtoken::crypto::sign(
            input.as_bytes(),
            &jsonwebtoken::EncodingKey::from_secret(secret),
            jsonwebtoken::Algorithm::HS256,
        )
        .expect("HS256 signs any message");
        format!("{input}.{signature}")
    }

    #[test]
    fn issued_tokens_verify() {
        let t = issue(SECRET, "alice", false, 3600, NOW);
        assert_eq!(
            verify(SECRET, &t, NOW),
            Ok(Identity {
                user_id: "alice".into(),
                admin: false
            })
        );
        let t = issue(SECRET, "root", true, 3600, NOW);
        assert!(verify(SECRET, &t, NOW).is_ok_and(|i| i.admin));
    }

    #[test]
    fn wrong_secret_expired_and_tampered_tokens_fail() {
        let t = issue(SECRET, "alice", false, 60, NOW);
        assert_eq!(
            verify(b"another-secret-0123456789", &t, NOW),
            Err(AuthError::BadSignature)
        );
        assert_eq!(verify(SECRET, &t, NOW + 60), Err(AuthError::Expired));
        // Flip the payload to claim admin while keeping the old signature.
        let parts: Vec<&str> = t.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(format!(
            r#"{{"sub":"alice","exp":{},"admin":true}}"#,
            NOW + 60
        ));
        assert_eq!(
            verify(SECRET, &format!("{}.{forged}.{}", parts[0], parts[2]), NOW),
            Err(AuthError::BadSignature)
        );
    }

    #[test]
    fn malformed_tokens_and_other_algorithms_fail() {
        let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let payload = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"a","exp":{}}}"#, NOW + 60));
        for bad in [
            String::new(),
            "abc".into(),
            "a.b".into(),
            "a.b.c.d".into(),
            format!("{none_header}.{payload}."),
            "!!!.???.***".into(),
            "x".repeat(9000),
        ] {
            assert_eq!(
                verify(SECRET, &bad, NOW),
                Err(AuthError::Malformed),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_crit_header_is_refused() {
        let token = sign_hs256(
            SECRET,
            br#"{"alg":"HS256","crit":["exp"],"exp":1}"#,
            format!(r#"{{"sub":"a","exp":{}}}"#, NOW + 60).as_bytes(),
        );
        assert_eq!(verify(SECRET, &token, NOW), Err(AuthError::Malformed));
    }

    #[test]
    fn exp_is_required() {
        let token = sign_hs256(
            SECRET,
            br#"{"alg":"HS256","typ":"JWT"}"#,
            br#"{"sub":"alice"}"#,
        );
        assert_eq!(verify(SECRET, &token, NOW), Err(AuthError::Malformed));
    }

    #[test]
    fn ttl_parsing() {
        assert_eq!(parse_ttl("1h"), Some(3600));
        assert_eq!(parse_ttl("30m"), Some(1800));
        assert_eq!(parse_ttl("2d"), Some(172_800));
        assert_eq!(parse_ttl("45"), Some(45));
        assert_eq!(parse_ttl("0"), None);
        assert_eq!(parse_ttl("0s"), None);
        assert_eq!(parse_ttl("1h30m"), Some(5400));
        assert_eq!(parse_ttl("soon"), None);
        assert_eq!(parse_ttl(""), None);
    }
}
