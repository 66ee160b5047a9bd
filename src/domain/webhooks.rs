//! Webhook delivery rules, pure: Standard Webhooks secrets and signatures, and the retry
//! backoff. No I/O, no clock, no randomness of its own (the caller passes the jitter's draw).
//!
//! A signature is `v1,` and the base64 of HMAC-SHA256 over `"{id}.{timestamp}.{body}"`, keyed
//! by the bytes the secret's base64 (after `whsec_`) decodes to
//! (<https://www.standardwebhooks.com/>, "Signature scheme").

use std::time::Duration;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// What every webhook secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";
/// The shortest key a secret may decode to (the specification asks for 24 to 64 bytes).
pub const MIN_SECRET_BYTES: usize = 24;
/// The longest key a secret may decode to.
pub const MAX_SECRET_BYTES: usize = 64;

/// A secret's signing key: the bytes after `whsec_`, base64-decoded (padding optional).
/// `Err` says what is wrong without echoing the secret.
pub fn secret_key(secret: &str) -> Result<Vec<u8>, String> {
    let Some(b64) = secret.strip_prefix(SECRET_PREFIX) else {
        return Err(format!("a webhook secret starts with {SECRET_PREFIX}"));
    };
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let key = engine
        .decode(b64)
        .map_err(|_| format!("a webhook secret is {SECRET_PREFIX} and standard base64"))?;
    if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&key.len()) {
        return Err(format!(
            "a webhook secret's base64 decodes to {MIN_SECRET_BYTES}..={MAX_SECRET_BYTES} bytes, this one to {}",
            key.len()
        ));
    }
    Ok(key)
}

/// An endpoint id: 1–64 of `a-z`, `0-9`, `-`, `_`.
pub fn check_endpoint_id(id: &str) -> Result<(), String> {
    if id.is_empty()
        || id.len() > 64
        || !id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    {
        return Err("an id is 1-64 of a-z, 0-9, - and _".into());
    }
    Ok(())
}

/// An endpoint URL: `http://` or `https://` and a host, no whitespace or control characters,
/// at most 2048 bytes.
pub fn check_url(url: &str) -> Result<(), String> {
    // The scheme compared as bytes: slicing the text at a fixed length could fall inside a
    // multi-byte character (`http://ü.example/` was refused, `http://bü.example/` not).
    let rest = ["http://", "https://"]
        .iter()
        .find(|scheme| {
            url.as_bytes()
                .get(..scheme.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(scheme.as_bytes()))
        })
        .and_then(|scheme| url.get(scheme.len()..));
    let ok = url.len() <= 2048
        && rest.is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
        && !url
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control());
    if !ok {
        return Err("expected http(s)://host…".into());
    }
    // Credentials in the URL would be shown wherever the endpoint is listed (the admin API,
    // `upcommit events list`): the receiver checks the signature instead.
    let authority = rest
        .unwrap_or("")
        .split(['/', '?', '#'])
        .next()
        .unwrap_or("");
    if authority.contains('@') {
        return Err("a URL without user:password@ (receivers check the signature)".into());
    }
    Ok(())
}

/// A webhook's URL: [`check_url`], and parsed as the HTTP client parses it, so that no URL is
/// stored that no request can be sent to (a port past 65535 or 0, an unclosed `[`, a host that
/// is none): each of its deliveries would fail until the retry window closed. (A queue's URL is
/// only [`check_url`]ed: it names the queue, the request goes to the SQS endpoint.)
pub fn check_webhook_url(url: &str) -> Result<(), String> {
    check_url(url)?;
    check_reachable(url)
}

/// Parsed as the HTTP client parses it, with a host and a port other than 0: a URL a request
/// can be sent to (webhooks, the validation hook).
pub fn check_reachable(url: &str) -> Result<(), String> {
    let parsed =
        reqwest::Url::parse(url).map_err(|e| format!("not a URL a request can go to: {e}"))?;
    if parsed.host_str().map_or(true, str::is_empty) || parsed.port() == Some(0) {
        return Err("not a URL a request can go to: no host, or port 0".into());
    }
    // The URL parser takes hosts the request builder then refuses (`"`, `{`, `}`, a backtick:
    // "builder error" on every request, review 26): the URL must also be a request URI.
    parsed
        .as_str()
        .parse::<axum::http::Uri>()
        .map_err(|e| format!("not a URL a request can go to: {e}"))?;
    // An https request also needs the host as a TLS server name (review 26: `-scan.internal`,
    // `a..b`, a 64-byte label failed before connecting, and a hook failed open).
    if parsed.scheme() == "https" {
        if let Some(name) = parsed.domain() {
            if !is_server_name(name) {
                return Err(format!(
                    "not a URL a request can go to: {name:?} is not a TLS server name"
                ));
            }
        }
    }
    Ok(())
}

/// A DNS name as TLS takes it: at most 253 bytes, labels of 1–63 bytes that neither start nor
/// end with `-` (a trailing dot allowed).
fn is_server_name(name: &str) -> bool {
    // The length counts a trailing dot, as TLS counts it (review 26e: 253 bytes and a dot
    // passed here and failed every request).
    if name.len() > 253 {
        return false;
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// A new secret from `key` (32 random bytes from the caller): `whsec_` and its base64.
pub fn secret_from_key(key: &[u8]) -> String {
    format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// The `webhook-signature` header's value for one message: `v1,<base64>`.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable_hmac(),
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

#[cold]
fn unreachable_hmac() -> ! {
    panic!("HMAC-SHA256 takes keys of every length")
}

/// How long retries wait: exponential from `base`, doubled per attempt, capped at `cap`,
/// with full jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Backoff {
    /// The wait before the next attempt after `attempts` failed ones (1 = the first failed):
    /// a uniform draw in `[0, min(cap, base · 2^(attempts-1))]` ("full jitter"), `draw` being
    /// the caller's uniform sample in `[0, 1)`. Never zero when `base` is not: at least a
    /// tenth of the ceiling, so a receiver that fails at once is not hammered.
    pub fn delay(&self, attempts: u32, draw: f64) -> Duration {
        let exp = attempts.saturating_sub(1).min(32);
        let ceiling = self
            .base
            .checked_mul(1u32 << exp.min(31))
            .unwrap_or(self.cap)
            .min(self.cap);
        let draw = if draw.is_finite() {
            draw.clamp(0.0, 1.0)
        } else {
            0.0
        };
        ceiling.mul_f64(0.1 + 0.9 * draw)
    }
}

/// A uniform sample in `[0, 1)` from 64 random bits.
pub fn unit_draw(bits: u64) -> f64 {
    // The top 53 bits fill an f64's mantissa exactly.
    #[allow(clippy::cast_precision_loss)]
    let v = (bits >> 11) as f64;
    v / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's published example (the reference libraries' test vector).
    #[test]
    fn signs_the_specifications_example() {
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("secret");
        assert_eq!(key.len(), 24);
        assert_eq!(
            signature(
                &key,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        // Any change to id, time or body changes it.
        assert_ne!(
            signature(
                &key,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_331,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn secrets_are_whsec_and_base64_of_24_to_64_bytes() {
        assert!(secret_key("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
        assert!(secret_key("whsec_").is_err());
        assert!(secret_key("whsec_not base64!!").is_err());
        // 16 bytes: too short.
        assert!(secret_key(&secret_from_key(&[7u8; 16])).is_err());
        assert!(secret_key(&secret_from_key(&[7u8; 65])).is_err());
        let s = secret_from_key(&[7u8; 32]);
        assert_eq!(secret_key(&s).expect("32 bytes"), vec![7u8; 32]);
        // Unpadded base64 is accepted too (the reference libraries accept it).
        let unpadded = s.trim_end_matches('=');
        assert_eq!(secret_key(unpadded).expect("unpadded"), vec![7u8; 32]);
        // The error never carries the secret.
        let err = secret_key("whsec_c2hvcnQ=").expect_err("short");
        assert!(!err.contains("c2hvcnQ"));
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_with_full_jitter() {
        let b = Backoff {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        };
        assert_eq!(
            b.delay(1, 0.999_999),
            Duration::from_secs(1).mul_f64(0.1 + 0.9 * 0.999_999)
        );
        assert_eq!(b.delay(1, 0.0), Duration::from_millis(100));
        assert_eq!(b.delay(3, 1.0), Duration::from_secs(4));
        assert_eq!(b.delay(7, 1.0), Duration::from_secs(60));
        assert_eq!(b.delay(1000, 1.0), Duration::from_secs(60));
        assert_eq!(
            b.delay(u32::MAX, 0.5),
            Duration::from_secs(60).mul_f64(0.55)
        );
        assert_eq!(b.delay(0, 1.0), Duration::from_secs(1));
        for attempts in 1..40 {
            for draw in [0.0, 0.25, 0.5, 0.75, 0.999, f64::NAN, -1.0, 2.0] {
                let d = b.delay(attempts, draw);
                assert!(
                    d <= b.cap && d >= Duration::from_millis(100),
                    "{attempts} {draw} {d:?}"
                );
            }
        }
        let tiny = Backoff {
            base: Duration::from_millis(50),
            cap: Duration::from_millis(200),
        };
        assert_eq!(tiny.delay(10, 1.0), Duration::from_millis(200));
    }

    #[test]
    fn endpoint_ids_and_urls() {
        assert!(check_endpoint_id("app-1_x").is_ok());
        for bad in ["", "App", "a b", "a/b", &"a".repeat(65)] {
            assert!(check_endpoint_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_url("https://app.example/hooks?x=1").is_ok());
        assert!(check_url("HTTPS://app.example/hooks").is_ok());
        assert!(check_url("https://app.example/p?to=a@b").is_ok());
        assert!(check_url("https://user:pw@app.example/hooks").is_err());
        assert!(check_url("http://pw@127.0.0.1/").is_err());
        assert!(check_url("http://127.0.0.1:9/h").is_ok());
        for bad in [
            "ftp://a",
            "https://",
            "https:///x",
            "http://a b",
            "http://a\n",
            "a.example",
        ] {
            assert!(check_url(bad).is_err(), "{bad:?}");
        }
        assert!(check_url(&format!("https://a.example/{}", "x".repeat(2048))).is_err());
        // Issue 26 (5): URLs that passed the prefix check but no request can reach.
        for bad in [
            "http://127.0.0.1:99999/x",
            "http://[::1",
            "http://%zz/",
            "http://:0/",
            "http://a.example:0/",
            "http://a.example:65536/",
            "http://[::1]x/",
        ] {
            assert!(check_webhook_url(bad).is_err(), "{bad:?}");
        }
        for good in [
            "http://[::1]:8080/h",
            "https://a.example:65535/",
            "http://a.example:1/",
        ] {
            assert!(check_webhook_url(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn unit_draws_stay_below_one() {
        assert_eq!(unit_draw(0), 0.0);
        assert!(unit_draw(u64::MAX) < 1.0);
        assert!((unit_draw(1 << 63) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_host_starting_with_a_multibyte_character_is_judged_like_any_other() {
        // The scheme check used to slice 8 bytes, which falls inside "ü" here.
        assert_eq!(check_url("http://ü.example/x"), Ok(()));
        assert_eq!(check_url("http://bü.example/x"), Ok(()));
        assert_eq!(check_webhook_url("http://ü.example/x"), Ok(()));
        assert_eq!(check_url("HTTPS://example.com/x"), Ok(()));
        assert!(check_url("ftp://ü.example/x").is_err());
        assert!(check_url("http:/ü.example").is_err());
    }

    #[test]
    fn hosts_the_request_builder_refuses_are_refused_here_too() {
        for url in [
            "http://a\"b.example/x",
            "http://a{b}.example/x",
            "http://a`b.example/x",
            "http://a%22b.example/x",
            "http://recv{1}.internal/hook",
        ] {
            assert!(check_reachable(url).is_err(), "{url}");
            assert!(check_webhook_url(url).is_err(), "{url}");
        }
        assert_eq!(
            check_reachable("http://recv-1.internal:8080/hook?a=b"),
            Ok(())
        );
        assert_eq!(check_reachable("http://[::1]:9000/x"), Ok(()));
        assert_eq!(check_reachable("https://bü.example/x"), Ok(()));
        // https: the host must also be a TLS server name (review 26d).
        let long = "a".repeat(64);
        for url in [
            "https://-scan.internal/check".to_owned(),
            "https://recv-.internal/x".to_owned(),
            "https://a..b.example/x".to_owned(),
            format!("https://{long}.example/x"),
        ] {
            assert!(check_reachable(&url).is_err(), "{url}");
        }
        assert_eq!(check_reachable("https://a_b.example/x"), Ok(()));
        let label = "a".repeat(63);
        let at_limit = format!("{label}.{label}.{label}.{}", "b".repeat(61));
        assert_eq!(at_limit.len(), 253);
        assert_eq!(check_reachable(&format!("https://{at_limit}/x")), Ok(()));
        assert!(
            check_reachable(&format!("https://{at_limit}./x")).is_err(),
            "253 bytes and a trailing dot"
        );
        assert_eq!(check_reachable("https://example.com./x"), Ok(()));
        assert_eq!(check_reachable("https://127.0.0.1:8443/x"), Ok(()));
        assert_eq!(
            check_reachable("http://-plain.internal/x"),
            Ok(()),
            "no TLS, no server name"
        );
    }
}
