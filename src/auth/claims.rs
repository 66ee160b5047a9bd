//! The pure rules of provider tokens: which key family a token's `alg` may use, and what its
//! claims must say (issuer, audience, times with a leeway, the user id claim, the admin rule).
//! No I/O; the clock is a parameter.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Deserialize;
use serde_json::Value;

use super::{valid_user_id, AuthError, Identity, Refusal, MAX_TOKEN_BYTES};

/// The asymmetric algorithms a provider's tokens may use.
pub const PROVIDER_ALGORITHMS: [&str; 3] = ["RS256", "ES256", "EdDSA"];

/// A token's header and issuer as written, before anything is verified: read only to pick the
/// verification path, never trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unverified {
    pub alg: String,
    pub kid: Option<String>,
    pub iss: Option<String>,
    /// The header has a `crit` member, whatever its value (RFC 7515 §4.1.11: the extensions
    /// it names must be understood, and this service understands none; an empty `crit`, or
    /// one that is not an array of strings, is refused by the RFC itself). Such a token is
    /// refused: [`refuse_critical`].
    pub crit: bool,
}

#[derive(Deserialize)]
struct RawHeader {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    /// As written: absent is `None`, `"crit": null` is `Some(Null)`.
    #[serde(default, deserialize_with = "present")]
    crit: Option<Value>,
}

/// A member that is there, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct RawIssuer {
    #[serde(default)]
    iss: Option<Value>,
}

/// Reads the header and `iss` of a compact token (three base64url parts).
pub fn peek(token: &str) -> Result<Unverified, AuthError> {
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
        return Err(AuthError::Malformed);
    }
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed);
    };
    let decode = |part: &str| {
        URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|_| AuthError::Malformed)
    };
    let header: RawHeader =
        serde_json::from_slice(&decode(h)?).map_err(|_| AuthError::Malformed)?;
    let payload: RawIssuer =
        serde_json::from_slice(&decode(p)?).map_err(|_| AuthError::Malformed)?;
    Ok(Unverified {
        alg: header.alg,
        kid: header.kid,
        iss: payload.iss.and_then(|v| v.as_str().map(str::to_owned)),
        crit: header.crit.is_some(),
    })
}

/// RFC 7515 §4.1.11: a token whose header has `crit` is refused — this service implements no
/// JWS extension, so whatever `crit` lists is not understood. `refusal`: what the token's kind
/// answers (a provider token its own code, a development token the plain `unauthorized`).
pub fn refuse_critical(token: &Unverified, refusal: AuthError) -> Result<(), AuthError> {
    if token.crit {
        Err(refusal)
    } else {
        Ok(())
    }
}

/// Which key verifies a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// HS256 with the development secret.
    Secret,
    /// The provider's JWKS, with this algorithm only.
    Provider(jsonwebtoken::Algorithm),
}

/// The algorithm policy. HS256 goes to the development secret, and only when one is configured
/// and no identity provider is: beside a provider, whoever held the secret could mint a token
/// for any provider user (user ids share one namespace) and for an admin, whatever `iss` it
/// names — and a provider's public key must never serve as an HMAC secret.
/// RS256/ES256/EdDSA go to a provider (the one the token's `iss` names: [`Verifier`]), when
/// there is one. Anything else (`none`, HS384, PS256, …) is refused.
///
/// [`Verifier`]: super::Verifier
pub fn route(token: &Unverified, has_secret: bool, has_provider: bool) -> Result<Route, AuthError> {
    use jsonwebtoken::Algorithm;
    let refused = Err(AuthError::Refused(Refusal::AlgorithmNotAllowed));
    match token.alg.as_str() {
        "HS256" if has_secret && !has_provider => Ok(Route::Secret),
        "RS256" | "ES256" | "EdDSA" if has_provider => {
            Ok(Route::Provider(match token.alg.as_str() {
                "RS256" => Algorithm::RS256,
                "ES256" => Algorithm::ES256,
                _ => Algorithm::EdDSA,
            }))
        }
        _ => refused,
    }
}

/// What a provider token's claims must say.
#[derive(Debug, Clone)]
pub struct ClaimRules {
    pub issuer: String,
    pub audience: String,
    pub user_claim: String,
    /// Put before the user claim's value to make the user id (empty: the value as is).
    pub user_prefix: String,
    /// The other issuers' user prefixes, when this one has none: a user id starting with one
    /// of them could be that issuer's user, and is refused.
    pub reserved_prefixes: Vec<String>,
    /// `(claim, value)`: admin when the claim equals the value, is an array holding it, or is a
    /// space-separated list (an OAuth `scope`) holding it. `None`: never admin.
    pub admin: Option<(String, String)>,
    pub leeway_secs: i64,
}

/// The identity a verified provider token proves, or why it proves none. Checked in this
/// order: issuer, audience, expiry (required), not-before, user id (the claim's value, with
/// this issuer's prefix before it).
pub fn identity(claims: &Value, rules: &ClaimRules, now_unix: i64) -> Result<Identity, AuthError> {
    let refused = |r| Err(AuthError::Refused(r));
    if claims.get("iss").and_then(Value::as_str) != Some(rules.issuer.as_str()) {
        return refused(Refusal::IssuerInvalid);
    }
    let audience_ok = match claims.get("aud") {
        Some(Value::String(a)) => a == &rules.audience,
        Some(Value::Array(list)) => list
            .iter()
            .any(|a| a.as_str() == Some(rules.audience.as_str())),
        _ => false,
    };
    if !audience_ok {
        return refused(Refusal::AudienceInvalid);
    }
    let Some(exp) = claims.get("exp").and_then(numeric_date) else {
        return Err(AuthError::Malformed);
    };
    if now_unix >= exp.saturating_add(rules.leeway_secs) {
        return refused(Refusal::Expired);
    }
    match claims.get("nbf") {
        None => {}
        Some(v) => match numeric_date(v) {
            Some(nbf) if nbf.saturating_sub(rules.leeway_secs) > now_unix => {
                return refused(Refusal::NotYetValid)
            }
            Some(_) => {}
            None => return Err(AuthError::Malformed),
        },
    }
    let user_id = match claims.get(&rules.user_claim).and_then(Value::as_str) {
        Some(u) if valid_user_id(u) => u,
        _ => return Err(AuthError::Malformed),
    };
    if rules.user_prefix.is_empty()
        && rules
            .reserved_prefixes
            .iter()
            .any(|p| user_id.starts_with(p.as_str()))
    {
        return refused(Refusal::UserIdReserved);
    }
    let user_id = format!("{}{user_id}", rules.user_prefix);
    if !valid_user_id(&user_id) {
        return Err(AuthError::Malformed);
    }
    let admin = rules
        .admin
        .as_ref()
        .is_some_and(|(claim, value)| claims.get(claim).is_some_and(|v| holds(v, value)));
    Ok(Identity { user_id, admin })
}

/// A JWT NumericDate: seconds, possibly with a fraction (kept whole, rounded down).
fn numeric_date(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite())
            .map(|f| f.floor() as i64)
    })
}

fn holds(claim: &Value, value: &str) -> bool {
    match claim {
        Value::String(s) => s == value || s.split(' ').any(|w| w == value),
        Value::Array(list) => list.iter().any(|v| v.as_str() == Some(value)),
        Value::Bool(b) => *b && value == "true",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_800_000_000;

    fn rules() -> ClaimRules {
        ClaimRules {
            issuer: "https://idp.example/".into(),
            audience: "upcommit".into(),
            user_claim: "sub".into(),
            user_prefix: String::new(),
            reserved_prefixes: Vec::new(),
            admin: Some(("roles".into(), "upcommit-admin".into())),
            leeway_secs: 30,
        }
    }

    fn good() -> Value {
        json!({"iss": "https://idp.example/", "aud": "upcommit", "sub": "alice", "exp": NOW + 60})
    }

    fn with(key: &str, v: Value) -> Value {
        let mut c = good();
        c[key] = v;
        c
    }

    fn refused(r: Refusal) -> Result<Identity, AuthError> {
        Err(AuthError::Refused(r))
    }

    #[test]
    fn a_good_token_proves_its_subject_and_is_not_admin() {
        assert_eq!(
            identity(&good(), &rules(), NOW),
            Ok(Identity {
                user_id: "alice".into(),
                admin: false
            })
        );
    }

    #[test]
    fn issuer_and_audience_are_required_and_exact() {
        let r = rules();
        assert_eq!(
            identity(&with("iss", json!("https://evil.example/")), &r, NOW),
            refused(Refusal::IssuerInvalid)
        );
        let mut no_iss = good();
        no_iss.as_object_mut().map(|o| o.remove("iss"));
        assert_eq!(identity(&no_iss, &r, NOW), refused(Refusal::IssuerInvalid));
        assert_eq!(
            identity(&with("iss", json!("https://idp.example")), &r, NOW),
            refused(Refusal::IssuerInvalid),
            "no trailing-slash forgiveness"
        );
        assert_eq!(
            identity(&with("aud", json!("other")), &r, NOW),
            refused(Refusal::AudienceInvalid)
        );
        assert_eq!(
            identity(&with("aud", json!(["a", "b"])), &r, NOW),
            refused(Refusal::AudienceInvalid)
        );
        assert!(identity(&with("aud", json!(["a", "upcommit"])), &r, NOW).is_ok());
        let mut no_aud = good();
        no_aud.as_object_mut().map(|o| o.remove("aud"));
        assert_eq!(
            identity(&no_aud, &r, NOW),
            refused(Refusal::AudienceInvalid)
        );
    }

    #[test]
    fn times_have_a_leeway_and_exp_is_required() {
        let r = rules();
        // exp 10 s ago: inside the 30 s leeway.
        assert!(identity(&with("exp", json!(NOW - 10)), &r, NOW).is_ok());
        assert_eq!(
            identity(&with("exp", json!(NOW - 30)), &r, NOW),
            refused(Refusal::Expired)
        );
        assert!(identity(&with("nbf", json!(NOW + 30)), &r, NOW).is_ok());
        assert_eq!(
            identity(&with("nbf", json!(NOW + 31)), &r, NOW),
            refused(Refusal::NotYetValid)
        );
        assert_eq!(
            identity(&with("exp", json!("tomorrow")), &r, NOW),
            Err(AuthError::Malformed)
        );
        let mut no_exp = good();
        no_exp.as_object_mut().map(|o| o.remove("exp"));
        assert_eq!(identity(&no_exp, &r, NOW), Err(AuthError::Malformed));
    }

    #[test]
    fn the_user_claim_is_configurable_and_checked() {
        let mut r = rules();
        r.user_claim = "email".into();
        assert_eq!(identity(&good(), &r, NOW), Err(AuthError::Malformed));
        let id = identity(&with("email", json!("a@example.com")), &r, NOW).expect("ok");
        assert_eq!(id.user_id, "a@example.com");
        assert_eq!(
            identity(&with("email", json!("a\nb")), &r, NOW),
            Err(AuthError::Malformed)
        );
    }

    #[test]
    fn admin_comes_only_from_the_configured_claim_and_value() {
        let r = rules();
        let admin = |c: &Value, r: &ClaimRules| identity(c, r, NOW).map(|i| i.admin);
        assert_eq!(admin(&with("admin", json!(true)), &r), Ok(false));
        assert_eq!(
            admin(&with("roles", json!(["upcommit-admin"])), &r),
            Ok(true)
        );
        assert_eq!(
            admin(&with("roles", json!(["upcommit-admins"])), &r),
            Ok(false)
        );
        assert_eq!(admin(&with("roles", json!("upcommit-admin")), &r), Ok(true));
        let mut scope = rules();
        scope.admin = Some(("scope".into(), "upcommit:admin".into()));
        assert_eq!(
            admin(&with("scope", json!("openid upcommit:admin")), &scope),
            Ok(true)
        );
        assert_eq!(
            admin(&with("scope", json!("openid upcommit:administer")), &scope),
            Ok(false)
        );
        let mut none = rules();
        none.admin = None;
        assert_eq!(
            admin(&with("roles", json!(["upcommit-admin"])), &none),
            Ok(false)
        );
    }

    #[test]
    fn a_user_prefix_keeps_issuers_apart() {
        let mut prefixed = rules();
        prefixed.user_prefix = "b:".into();
        let id = identity(&good(), &prefixed, NOW).expect("ok");
        assert_eq!(id.user_id, "b:alice");
        // The unprefixed issuer never yields an id another issuer's prefix could make.
        let mut bare = rules();
        bare.reserved_prefixes = vec!["b:".into(), "c/".into()];
        assert_eq!(
            identity(&with("sub", json!("b:alice")), &bare, NOW),
            refused(Refusal::UserIdReserved)
        );
        assert_eq!(
            identity(&with("sub", json!("c/x")), &bare, NOW),
            refused(Refusal::UserIdReserved)
        );
        assert_eq!(
            identity(&with("sub", json!("b-alice")), &bare, NOW).map(|i| i.user_id),
            Ok("b-alice".to_owned())
        );
        // A prefixed issuer's ids may start with anything: the prefix is theirs alone.
        prefixed.reserved_prefixes = vec!["a:".into()];
        assert_eq!(
            identity(&with("sub", json!("a:alice")), &prefixed, NOW).map(|i| i.user_id),
            Ok("b:a:alice".to_owned())
        );
        // The prefix counts toward the 128-byte limit.
        assert!(identity(&with("sub", json!("x".repeat(126))), &prefixed, NOW).is_ok());
        assert_eq!(
            identity(&with("sub", json!("x".repeat(127))), &prefixed, NOW),
            Err(AuthError::Malformed)
        );
    }

    fn token(header: &str, payload: &str) -> String {
        format!(
            "{}.{}.sig",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(payload)
        )
    }

    #[test]
    fn the_algorithm_never_chooses_the_key_type() {
        let iss = true;
        let peeked = |alg: &str, payload: &str| {
            peek(&token(&format!(r#"{{"alg":"{alg}","kid":"k1"}}"#), payload)).expect("peek")
        };
        let theirs = r#"{"iss":"https://idp.example/"}"#;
        let ours = r#"{"sub":"alice"}"#;
        let not_allowed = Err(AuthError::Refused(Refusal::AlgorithmNotAllowed));
        assert_eq!(
            route(&peeked("HS256", ours), true, false),
            Ok(Route::Secret)
        );
        assert_eq!(route(&peeked("HS256", ours), false, false), not_allowed);
        // Beside a provider, no HS256 token at all, whatever issuer it names or omits.
        assert_eq!(route(&peeked("HS256", ours), true, iss), not_allowed);
        assert_eq!(route(&peeked("HS256", ours), false, iss), not_allowed);
        assert_eq!(route(&peeked("HS256", theirs), true, iss), not_allowed);
        assert_eq!(
            route(&peeked("RS256", theirs), true, iss),
            Ok(Route::Provider(jsonwebtoken::Algorithm::RS256))
        );
        assert_eq!(
            route(&peeked("EdDSA", theirs), false, iss),
            Ok(Route::Provider(jsonwebtoken::Algorithm::EdDSA))
        );
        assert_eq!(route(&peeked("RS256", theirs), true, false), not_allowed);
        for alg in [
            "none", "None", "HS384", "HS512", "PS256", "RS512", "ES384", "",
        ] {
            assert_eq!(route(&peeked(alg, theirs), true, iss), not_allowed, "{alg}");
        }
        assert_eq!(peeked("RS256", theirs).kid.as_deref(), Some("k1"));
    }

    #[test]
    fn any_crit_member_is_seen_and_refused() {
        let with = |header: &str| peek(&token(header, "{}")).expect("peek");
        assert!(!with(r#"{"alg":"RS256"}"#).crit);
        assert_eq!(
            refuse_critical(&with(r#"{"alg":"RS256"}"#), AuthError::Malformed),
            Ok(())
        );
        for crit in [
            r#"["exp"]"#,
            r#"["b64"]"#,
            "[]",
            r#""b64""#,
            "[1]",
            "null",
            "{}",
        ] {
            let peeked = with(&format!(r#"{{"alg":"RS256","crit":{crit}}}"#));
            assert!(peeked.crit, "{crit}");
            assert_eq!(
                refuse_critical(&peeked, AuthError::Malformed),
                Err(AuthError::Malformed),
                "{crit}"
            );
        }
    }

    #[test]
    fn peek_refuses_what_is_not_a_compact_token() {
        for bad in ["", "a.b", "a.b.c.d", "!!!.???.***"] {
            assert_eq!(peek(bad), Err(AuthError::Malformed), "{bad:?}");
        }
        assert_eq!(
            peek(&token(r#"{"kid":"k"}"#, "{}")),
            Err(AuthError::Malformed),
            "no alg"
        );
    }
}
