//! What every AWS client of one process shares: the SDK configuration (region, timeouts,
//! retries, the credential chain), one cache of the chain's credentials, and the process's
//! outgoing HTTP client (`crate::outbound`). The S3 facade presigns with the cached
//! credentials and the SQS sender signs with the same ones, so neither asks the chain per call.
//!
//! The chain itself does not cache: the SDK's clients keep their own identity cache, which a
//! hand-signed request (a presigned URL, an SQS `SendMessage`) does not reach. Without this
//! cache every presign asked the chain anew: cheap for environment keys, a round trip for an
//! instance or container role.

use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::{Credentials, ProvideCredentials, SharedCredentialsProvider};

use crate::config::S3Settings;

/// Credentials this close to their expiry are fetched again before signing.
pub const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);

/// The shared parts; cheap to clone.
#[derive(Clone)]
pub struct AwsContext {
    sdk: SdkConfig,
    credentials: Arc<CredentialsCache>,
    http: reqwest::Client,
}

impl std::fmt::Debug for AwsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsContext")
            .field("region", &self.sdk.region())
            .finish_non_exhaustive()
    }
}

/// No credentials anywhere in the chain.
#[derive(Debug, thiserror::Error)]
#[error(
    "no AWS credentials found (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, profile, or instance role)"
)]
pub struct NoCredentials;

impl AwsContext {
    /// From the standard AWS credential and region chain, with the region of the settings, and
    /// the timeouts and retries the S3 client runs with.
    pub async fn load(settings: &S3Settings, http: reqwest::Client) -> Result<Self, NoCredentials> {
        let sdk = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(settings.region.clone()))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(3))
                    .operation_attempt_timeout(Duration::from_secs(10))
                    .operation_timeout(Duration::from_secs(30))
                    .build(),
            )
            .retry_config(RetryConfig::standard().with_max_attempts(3))
            .load()
            .await;
        let provider = sdk.credentials_provider().ok_or(NoCredentials)?;
        Ok(Self {
            sdk,
            credentials: Arc::new(CredentialsCache::new(provider)),
            http,
        })
    }

    pub fn sdk(&self) -> &SdkConfig {
        &self.sdk
    }

    pub fn credentials(&self) -> &Arc<CredentialsCache> {
        &self.credentials
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    pub fn region(&self) -> String {
        self.sdk
            .region()
            .map(|r| r.as_ref().to_owned())
            .unwrap_or_default()
    }
}

/// The chain's credentials, kept until five minutes before they expire (static keys for
/// ever). One refresh at a time: callers arriving during it wait for its answer.
pub struct CredentialsCache {
    provider: SharedCredentialsProvider,
    latest: RwLock<Option<Credentials>>,
    refreshing: tokio::sync::Mutex<()>,
}

impl CredentialsCache {
    pub fn new(provider: SharedCredentialsProvider) -> Self {
        Self {
            provider,
            latest: RwLock::new(None),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    fn fresh(&self) -> Option<Credentials> {
        let latest = match self.latest.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        latest.filter(|c| still_fresh(c.expiry(), SystemTime::now()))
    }

    /// Credentials to sign with now.
    pub async fn get(&self) -> Result<Credentials, String> {
        if let Some(c) = self.fresh() {
            return Ok(c);
        }
        let _one_at_a_time = self.refreshing.lock().await;
        if let Some(c) = self.fresh() {
            return Ok(c);
        }
        let c = self
            .provider
            .provide_credentials()
            .await
            .map_err(|e| format!("credentials: {e}"))?;
        self.store(Some(c.clone()));
        Ok(c)
    }

    /// Drops what is kept: the next call asks the chain (a service said the token expired).
    pub fn forget(&self) {
        self.store(None);
    }

    fn store(&self, value: Option<Credentials>) {
        match self.latest.write() {
            Ok(mut guard) => *guard = value,
            Err(poisoned) => *poisoned.into_inner() = value,
        }
    }
}

/// Credentials without an expiry (static keys) never need fetching again.
fn still_fresh(expiry: Option<SystemTime>, now: SystemTime) -> bool {
    match expiry {
        Some(at) => at > now + REFRESH_BEFORE_EXPIRY,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use aws_credential_types::provider::future::ProvideCredentials as Future;

    use super::*;

    /// A chain that counts its calls and hands out keys expiring `lifetime` from now.
    #[derive(Debug)]
    struct Counting {
        calls: Arc<AtomicU32>,
        lifetime: Option<Duration>,
    }

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(&'a self) -> Future<'a>
        where
            Self: 'a,
        {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            let expiry = self.lifetime.map(|l| SystemTime::now() + l);
            Future::ready(Ok(Credentials::new(
                format!("AKID{n}"),
                "secret",
                None,
                expiry,
                "test",
            )))
        }
    }

    fn cache(lifetime: Option<Duration>) -> (CredentialsCache, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let provider = SharedCredentialsProvider::new(Counting {
            calls: calls.clone(),
            lifetime,
        });
        (CredentialsCache::new(provider), calls)
    }

    #[test]
    fn credentials_are_fetched_again_five_minutes_before_they_expire() {
        let now = SystemTime::now();
        assert!(still_fresh(None, now));
        assert!(still_fresh(Some(now + Duration::from_secs(301)), now));
        assert!(!still_fresh(Some(now + Duration::from_secs(300)), now));
        assert!(!still_fresh(Some(now - Duration::from_secs(1)), now));
    }

    #[tokio::test]
    async fn the_chain_is_asked_once_while_the_keys_stay_fresh() {
        let (cache, calls) = cache(Some(Duration::from_secs(3600)));
        for _ in 0..100 {
            assert_eq!(cache.get().await.expect("keys").access_key_id(), "AKID1");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        cache.forget();
        assert_eq!(cache.get().await.expect("keys").access_key_id(), "AKID2");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn keys_about_to_expire_are_asked_for_on_every_call_until_fresh_ones_come() {
        let (cache, calls) = cache(Some(Duration::from_secs(60)));
        cache.get().await.expect("keys");
        cache.get().await.expect("keys");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_refresh() {
        let (cache, calls) = cache(None);
        let cache = Arc::new(cache);
        let callers: Vec<_> = (0..32)
            .map(|_| {
                let cache = cache.clone();
                tokio::spawn(async move { cache.get().await.expect("keys") })
            })
            .collect();
        for caller in callers {
            assert_eq!(caller.await.expect("joined").access_key_id(), "AKID1");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
