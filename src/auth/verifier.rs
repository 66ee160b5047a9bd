//! The one place a bearer token becomes an [`Identity`]: the algorithm policy picks the key
//! family (development secret or the providers' JWKS), the token's exact `iss` picks the
//! provider before any key is looked up, `jsonwebtoken` checks the signature with that
//! provider's key, the claim rules check the rest.

use std::sync::Arc;

use tokio::task::JoinHandle;

use super::claims::{self, ClaimRules, Route};
use super::jwks::JwksCache;
use super::{AuthError, Identity, Refusal};
use crate::config::{AuthSettings, SecretString};

/// One identity provider: its claim rules and its own key cache (its refresh, rate limit and
/// unavailability are its own: one provider down never refuses another's tokens).
struct Provider {
    rules: ClaimRules,
    jwks: Arc<JwksCache>,
}

/// Shared by every request (one `Arc` in the state), so each JWKS cache is one per replica.
pub struct Verifier {
    /// The HS256 secret; `None` when unset (HS256 tokens are then refused).
    secret: Option<SecretString>,
    /// The providers, with distinct issuers (the settings refuse a duplicate).
    providers: Vec<Provider>,
}

impl Verifier {
    /// `http`: the process's outgoing client (`crate::outbound`), which the key sets are
    /// fetched with.
    pub fn new(auth: &AuthSettings, http: reqwest::Client) -> Self {
        let providers = auth
            .issuers
            .iter()
            .map(|p| Provider {
                rules: ClaimRules {
                    issuer: p.issuer.clone(),
                    audience: p.audience.clone(),
                    user_claim: p.user_claim.clone(),
                    user_prefix: p.user_prefix.clone(),
                    reserved_prefixes: if p.user_prefix.is_empty() {
                        auth.issuers
                            .iter()
                            .map(|o| o.user_prefix.clone())
                            .filter(|o| !o.is_empty())
                            .collect()
                    } else {
                        Vec::new()
                    },
                    admin: p.admin.clone(),
                    leeway_secs: i64::try_from(p.leeway_secs).unwrap_or(0),
                },
                jwks: Arc::new(JwksCache::new(p, http.clone())),
            })
            .collect();
        Self {
            secret: Some(auth.jwt_secret.clone()).filter(|s| !s.expose().is_empty()),
            providers,
        }
    }

    /// The scheduled JWKS refreshes of every provider, in one task (aborting it stops them
    /// all); `None` without a provider.
    pub fn spawn_refresh(&self) -> Option<JoinHandle<()>> {
        if self.providers.is_empty() {
            return None;
        }
        let caches: Vec<Arc<JwksCache>> = self.providers.iter().map(|p| p.jwks.clone()).collect();
        Some(tokio::spawn(async move {
            futures_util::future::join_all(caches.into_iter().map(JwksCache::refresh_loop)).await;
        }))
    }

    pub async fn verify(&self, token: &str, now_unix: i64) -> Result<Identity, AuthError> {
        let peeked = claims::peek(token)?;
        match claims::route(&peeked, self.secret.is_some(), !self.providers.is_empty())? {
            Route::Secret => match &self.secret {
                Some(secret) => super::verify(secret.expose().as_bytes(), token, now_unix),
                None => Err(AuthError::Refused(Refusal::AlgorithmNotAllowed)),
            },
            Route::Provider(alg) => {
                claims::refuse_critical(&peeked, AuthError::Refused(Refusal::CritUnsupported))?;
                // The issuer first, by exact match: a `kid` is looked up only among the keys
                // of the provider the token names, so one provider's key never verifies a
                // token claiming another (two providers may publish the same `kid`).
                let provider = peeked
                    .iss
                    .as_deref()
                    .and_then(|iss| self.providers.iter().find(|p| p.rules.issuer == iss))
                    .ok_or(AuthError::Refused(Refusal::IssuerInvalid))?;
                let kid = peeked.kid.ok_or(AuthError::Refused(Refusal::KeyUnknown))?;
                let key = provider.jwks.key(&kid).await?;
                if key.alg != alg {
                    return Err(AuthError::Refused(Refusal::AlgorithmNotAllowed));
                }
                let claims: serde_json::Value = super::signed_claims(token, &key.decoding, alg)?;
                // The verified `iss` is checked again against this provider's rules.
                claims::identity(&claims, &provider.rules, now_unix)
            }
        }
    }
}
