//! One identity provider's keys (its JWKS), cached and shared by every request of a replica.
//! Each provider has its own cache: its fetches, rate limit and unavailability touch no other.
//!
//! - Served from the cache while it is younger than the max age.
//! - Fetched at start, refreshed on a schedule ([`JwksCache::refresh_loop`]) and when a token names a `kid` the
//!   cache does not hold (a provider that rotated its keys).
//! - At most one fetch in flight (concurrent askers wait for it and share its result) and at
//!   most one fetch per `min_refetch`, whatever asks: a flood of made-up `kid`s costs the
//!   provider one request per interval.
//! - Past the max age without a successful fetch, the keys are no longer trusted and requests
//!   get 503 `identity_provider_unavailable` (not 401: the token may be fine).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use tokio::time::Instant;

use super::{AuthError, Refusal};
use crate::config::ProviderSettings;

/// A JWKS larger than this is refused (providers publish a few keys, a few KiB).
const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// One fetch, redirects followed included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// A provider may move its key set (a CDN, a new path): this many redirects are followed.
const MAX_REDIRECTS: usize = 3;

/// One verification key of the provider.
pub struct ProviderKey {
    pub decoding: DecodingKey,
    /// The one algorithm this key verifies, from its type (RSA → RS256, EC P-256 → ES256,
    /// OKP Ed25519 → EdDSA) and, when the JWK names one, its `alg`.
    pub alg: Algorithm,
}

#[derive(Default)]
struct Cached {
    keys: HashMap<String, Arc<ProviderKey>>,
    fetched_at: Option<Instant>,
    last_attempt: Option<Instant>,
}

pub struct JwksCache {
    issuer: String,
    url: String,
    http: reqwest::Client,
    refresh: Duration,
    max_age: Duration,
    min_refetch: Duration,
    cached: Mutex<Cached>,
    /// Held by the one fetch in flight.
    fetching: tokio::sync::Mutex<()>,
}

impl JwksCache {
    /// `http` follows no redirect (`crate::outbound`): [`Self::fetch`] follows a few by hand.
    pub fn new(settings: &ProviderSettings, http: reqwest::Client) -> Self {
        Self {
            issuer: settings.issuer.clone(),
            url: settings.jwks_url.clone(),
            http,
            refresh: Duration::from_secs(settings.refresh_secs),
            max_age: Duration::from_secs(settings.max_age_secs),
            min_refetch: Duration::from_secs(settings.min_refetch_secs),
            cached: Mutex::new(Cached::default()),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cached> {
        self.cached.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The key named `kid`: from the cache, or after one (rate-limited) fetch.
    pub async fn key(&self, kid: &str) -> Result<Arc<ProviderKey>, AuthError> {
        if let Ok(Some(found)) = self.lookup(kid) {
            return Ok(found);
        }
        self.refresh().await;
        self.lookup(kid)?
            .ok_or(AuthError::Refused(Refusal::KeyUnknown))
    }

    /// `Ok(Some)` found among trusted keys, `Ok(None)` not among them, `Err` no trusted keys
    /// (never fetched, or older than the max age).
    fn lookup(&self, kid: &str) -> Result<Option<Arc<ProviderKey>>, AuthError> {
        let now = Instant::now();
        let cached = self.lock();
        match cached.fetched_at {
            Some(at) if now.duration_since(at) < self.max_age => Ok(cached.keys.get(kid).cloned()),
            _ => Err(AuthError::ProviderUnavailable {
                retry_after_secs: self.retry_after(&cached, now),
            }),
        }
    }

    fn retry_after(&self, cached: &Cached, now: Instant) -> u64 {
        let next = cached
            .last_attempt
            .map(|at| (at + self.min_refetch).saturating_duration_since(now))
            .unwrap_or_default();
        next.as_secs() + 1
    }

    /// Fetches the key set unless a fetch finished while this one waited for the lock, or one
    /// was attempted less than `min_refetch` ago. Failures are logged and leave the cache as is.
    pub async fn refresh(&self) {
        let asked_at = Instant::now();
        let _one_in_flight = self.fetching.lock().await;
        {
            let cached = self.lock();
            if let Some(at) = cached.last_attempt {
                if at >= asked_at || asked_at.duration_since(at) < self.min_refetch {
                    return;
                }
            }
        }
        self.lock().last_attempt = Some(Instant::now());
        match self.fetch().await {
            Ok(keys) => {
                tracing::info!(issuer = %self.issuer, url = %self.url, keys = keys.len(), "jwks: fetched the identity provider's keys");
                let mut cached = self.lock();
                cached.keys = keys;
                cached.fetched_at = Some(Instant::now());
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, url = %self.url, error = %e, "jwks: cannot fetch the identity provider's keys");
            }
        }
    }

    async fn fetch(&self) -> Result<HashMap<String, Arc<ProviderKey>>, String> {
        tokio::time::timeout(FETCH_TIMEOUT, self.fetch_following_redirects())
            .await
            .map_err(|_| format!("no key set within {} s", FETCH_TIMEOUT.as_secs()))?
    }

    /// GETs the key set, following up to [`MAX_REDIRECTS`] redirects to http(s) locations.
    async fn fetch_following_redirects(&self) -> Result<HashMap<String, Arc<ProviderKey>>, String> {
        let mut url = reqwest::Url::parse(&self.url).map_err(|e| e.to_string())?;
        let mut redirects = 0;
        let mut response = loop {
            let response = self
                .http
                .get(url.clone())
                .header(reqwest::header::ACCEPT, "application/json")
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if !response.status().is_redirection() {
                break response;
            }
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(format!("more than {MAX_REDIRECTS} redirects"));
            }
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| format!("status {} without a location", response.status()))?;
            url = url.join(location).map_err(|e| e.to_string())?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(format!("a redirect to a {} URL", url.scheme()));
            }
        };
        if !response.status().is_success() {
            return Err(format!("status {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_JWKS_BYTES {
                return Err("key set larger than 1 MiB".into());
            }
        }
        parse_key_set(&body)
    }

    /// Fetches at start (a warm cache; a provider that cannot be reached shows in the log at
    /// once), then every `refresh`; never returns (the task running it is aborted).
    pub async fn refresh_loop(self: Arc<Self>) {
        loop {
            self.refresh().await;
            // The next scheduled fetch is `refresh` after the last attempt, whoever made it:
            // a fetch an unknown `kid` triggered just before must not push the schedule a
            // whole interval further (a removed key would outlive `refresh`).
            let last = self.lock().last_attempt.unwrap_or_else(Instant::now);
            let next = (last + self.refresh).max(Instant::now() + Duration::from_secs(1));
            tokio::time::sleep_until(next).await;
        }
    }
}

/// The signing keys of a JWKS document, by `kid`. Keys this service cannot use (encryption
/// keys, other curves, no `kid`, unparsable) are skipped; a document without a `keys` array is
/// an error.
pub fn parse_key_set(body: &[u8]) -> Result<HashMap<String, Arc<ProviderKey>>, String> {
    let doc: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let list = doc
        .get("keys")
        .and_then(serde_json::Value::as_array)
        .ok_or("no \"keys\" array")?;
    let mut keys = HashMap::new();
    for raw in list {
        let Ok(jwk) = serde_json::from_value::<Jwk>(raw.clone()) else {
            continue;
        };
        if let Some((kid, key)) = usable(&jwk) {
            keys.insert(kid, Arc::new(key));
        }
    }
    Ok(keys)
}

fn usable(jwk: &Jwk) -> Option<(String, ProviderKey)> {
    if matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    ) {
        return None;
    }
    let kid = jwk.common.key_id.clone()?;
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return None,
    };
    if let Some(declared) = jwk.common.key_algorithm {
        if format!("{declared:?}") != format!("{alg:?}") {
            return None;
        }
    }
    let decoding = DecodingKey::from_jwk(jwk).ok()?;
    Some((kid, ProviderKey { decoding, alg }))
}

#[cfg(test)]
mod tests {
    use super::*;

    // An RSA public key (RFC 7517 appendix A.1), an EC P-256 key (A.1) and an Ed25519 key
    // (RFC 8037 appendix A.2).
    const RSA_N: &str = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";

    #[test]
    fn usable_signing_keys_are_kept_by_kid() {
        let doc = serde_json::json!({"keys": [
            {"kty": "RSA", "kid": "rsa", "use": "sig", "alg": "RS256", "n": RSA_N, "e": "AQAB"},
            {"kty": "EC", "kid": "ec", "crv": "P-256",
             "x": "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4",
             "y": "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"},
            {"kty": "OKP", "kid": "ed", "crv": "Ed25519",
             "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty": "RSA", "kid": "enc", "use": "enc", "n": RSA_N, "e": "AQAB"},
            {"kty": "RSA", "n": RSA_N, "e": "AQAB"},
            {"kty": "RSA", "kid": "lies", "alg": "ES256", "n": RSA_N, "e": "AQAB"},
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "weird", "kid": "w"}
        ]});
        let keys = parse_key_set(doc.to_string().as_bytes()).expect("parses");
        let mut kids: Vec<_> = keys.keys().cloned().collect();
        kids.sort();
        assert_eq!(kids, ["ec", "ed", "rsa"]);
        assert_eq!(keys["rsa"].alg, Algorithm::RS256);
        assert_eq!(keys["ec"].alg, Algorithm::ES256);
        assert_eq!(keys["ed"].alg, Algorithm::EdDSA);
    }

    #[test]
    fn a_document_without_keys_is_an_error() {
        assert!(parse_key_set(b"<html>").is_err());
        assert!(parse_key_set(b"{}").is_err());
        assert!(parse_key_set(br#"{"keys": []}"#).is_ok_and(|k| k.is_empty()));
    }
}
