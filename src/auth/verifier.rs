//! The one place a bearer token becomes an [`Identity`]: the algorithm policy picks the key
//! (development secret or the provider's JWKS), `jsonwebtoken` checks the signature, the claim
//! rules check the rest.

use std::sync::Arc;

use tokio::task::JoinHandle;

use super::claims::{self, ClaimRules, Route};
use super::jwks::JwksCache;
use super::{AuthError, Identity, Refusal};
use crate::config::{AuthSettings, SecretString};

struct Provider {
    rules: ClaimRules,
    jwks: Arc<JwksCache>,
}

/// Shared by every request (one `Arc` in the state), so the JWKS cache is one per replica.
pub struct Verifier {
    /// The HS256 secret; `None` when unset (HS256 tokens are then refused).
    secret: Option<SecretString>,
    provider: Option<Provider>,
}

impl Verifier {
    pub fn new(auth: &AuthSettings) -> Self {
        Self {
            secret: Some(auth.jwt_secret.clone()).filter(|s| !s.expose().is_empty()),
            provider: auth.provider.as_ref().map(|p| Provider {
                rules: ClaimRules {
                    issuer: p.issuer.clone(),
                    audience: p.audience.clone(),
                    user_claim: p.user_claim.clone(),
                    admin: p.admin.clone(),
                    leeway_secs: i64::try_from(p.leeway_secs).unwrap_or(0),
                },
                jwks: Arc::new(JwksCache::new(p)),
            }),
        }
    }

    /// The scheduled JWKS refresh, when a provider is configured.
    pub fn spawn_refresh(&self) -> Option<JoinHandle<()>> {
        self.provider
            .as_ref()
            .map(|p| p.jwks.clone().spawn_refresh())
    }

    pub async fn verify(&self, token: &str, now_unix: i64) -> Result<Identity, AuthError> {
        let peeked = claims::peek(token)?;
        let issuer = self.provider.as_ref().map(|p| p.rules.issuer.as_str());
        match claims::route(&peeked, self.secret.is_some(), issuer)? {
            Route::Secret => match &self.secret {
                Some(secret) => super::verify(secret.expose().as_bytes(), token, now_unix),
                None => Err(AuthError::Refused(Refusal::AlgorithmNotAllowed)),
            },
            Route::Provider(alg) => {
                let Some(provider) = &self.provider else {
                    return Err(AuthError::Refused(Refusal::AlgorithmNotAllowed));
                };
                let kid = peeked.kid.ok_or(AuthError::Refused(Refusal::KeyUnknown))?;
                let key = provider.jwks.key(&kid).await?;
                if key.alg != alg {
                    return Err(AuthError::Refused(Refusal::AlgorithmNotAllowed));
                }
                let claims: serde_json::Value = super::signed_claims(token, &key.decoding, alg)?;
                claims::identity(&claims, &provider.rules, now_unix)
            }
        }
    }
}
