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
use std::time::{Duration, Instant, SystemTime};

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

/// The chain's credentials, kept while they last longer than what is signed with them must:
/// five minutes for a request, a presigned URL's whole lifetime for the URL (AWS refuses a URL
/// once the keys that signed it expire, whatever its `X-Amz-Expires` says). Static keys are
/// kept for ever. One refresh at a time: callers arriving during it take its answer. Keys the
/// chain gave less than [`REASK_AFTER`] ago are its newest answer and are used even when they
/// do not last long enough (a chain whose keys live shorter than a URL): asking again at once
/// would give the same keys, one caller after another.
pub struct CredentialsCache {
    provider: SharedCredentialsProvider,
    latest: RwLock<Option<Kept>>,
    refreshing: tokio::sync::Mutex<()>,
    reask_after: Duration,
}

/// How long the chain's newest answer stands even when it does not last long enough.
pub const REASK_AFTER: Duration = Duration::from_secs(10);

#[derive(Clone)]
struct Kept {
    credentials: Credentials,
    fetched_at: Instant,
}

impl CredentialsCache {
    pub fn new(provider: SharedCredentialsProvider) -> Self {
        Self::reasking_after(provider, REASK_AFTER)
    }

    fn reasking_after(provider: SharedCredentialsProvider, reask_after: Duration) -> Self {
        Self {
            provider,
            latest: RwLock::new(None),
            refreshing: tokio::sync::Mutex::new(()),
            reask_after,
        }
    }

    /// The kept keys when they last `need` more, or when the chain gave them just now.
    fn usable(&self, need: Duration) -> Option<Credentials> {
        let latest = match self.latest.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        latest
            .filter(|k| {
                lasts(k.credentials.expiry(), SystemTime::now(), need)
                    || k.fetched_at.elapsed() < self.reask_after
            })
            .map(|k| k.credentials)
    }

    /// Credentials to sign a request with now.
    pub async fn get(&self) -> Result<Credentials, String> {
        self.get_for(Duration::ZERO).await
    }

    /// Credentials that stay valid `lasting` from now (a presigned URL's lifetime), and at
    /// least five minutes, where the chain has such.
    pub async fn get_for(&self, lasting: Duration) -> Result<Credentials, String> {
        let need = lasting.max(REFRESH_BEFORE_EXPIRY);
        if let Some(c) = self.usable(need) {
            return Ok(c);
        }
        let _one_at_a_time = self.refreshing.lock().await;
        if let Some(c) = self.usable(need) {
            return Ok(c);
        }
        let c = self
            .provider
            .provide_credentials()
            .await
            .map_err(|e| format!("credentials: {e}"))?;
        self.store(Some(Kept {
            credentials: c.clone(),
            fetched_at: Instant::now(),
        }));
        Ok(c)
    }

    /// Drops what is kept: the next call asks the chain (a service said the token expired).
    pub fn forget(&self) {
        self.store(None);
    }

    fn store(&self, value: Option<Kept>) {
        match self.latest.write() {
            Ok(mut guard) => *guard = value,
            Err(poisoned) => *poisoned.into_inner() = value,
        }
    }
}

/// Keys without an expiry (static keys) last for ever; others while more than `need` is left.
fn lasts(expiry: Option<SystemTime>, now: SystemTime, need: Duration) -> bool {
    match expiry {
        Some(at) => at > now + need,
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
        cache_reasking(lifetime, REASK_AFTER)
    }

    fn cache_reasking(
        lifetime: Option<Duration>,
        reask_after: Duration,
    ) -> (CredentialsCache, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let provider = SharedCredentialsProvider::new(Counting {
            calls: calls.clone(),
            lifetime,
        });
        (
            CredentialsCache::reasking_after(provider, reask_after),
            calls,
        )
    }

    #[test]
    fn credentials_are_fetched_again_five_minutes_before_they_expire() {
        let now = SystemTime::now();
        let five = REFRESH_BEFORE_EXPIRY;
        assert!(lasts(None, now, five));
        assert!(lasts(Some(now + Duration::from_secs(301)), now, five));
        assert!(!lasts(Some(now + Duration::from_secs(300)), now, five));
        assert!(!lasts(Some(now - Duration::from_secs(1)), now, five));
        let url = Duration::from_secs(900);
        assert!(!lasts(Some(now + Duration::from_secs(899)), now, url));
        assert!(lasts(Some(now + Duration::from_secs(901)), now, url));
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
    async fn keys_about_to_expire_are_asked_for_again_once_the_chains_last_answer_is_old() {
        let (asking, calls) = cache_reasking(Some(Duration::from_secs(60)), Duration::ZERO);
        asking.get().await.expect("keys");
        asking.get().await.expect("keys");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // Within REASK_AFTER the chain's newest answer stands: the same keys again.
        let (standing, calls) = cache(Some(Duration::from_secs(60)));
        assert_eq!(standing.get().await.expect("keys").access_key_id(), "AKID1");
        assert_eq!(standing.get().await.expect("keys").access_key_id(), "AKID1");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    /// Review 34: a 900 s URL was signed with kept keys that had 799 s left, and AWS refuses
    /// the URL once they expire. Keys that do not outlast the URL are replaced first.
    #[tokio::test]
    async fn a_url_is_signed_with_keys_that_outlast_it() {
        let (cache, calls) = cache_reasking(Some(Duration::from_secs(600)), Duration::ZERO);
        assert_eq!(cache.get().await.expect("keys").access_key_id(), "AKID1");
        let for_url = cache.get_for(Duration::from_secs(900)).await.expect("keys");
        assert_eq!(
            for_url.access_key_id(),
            "AKID2",
            "600 s left do not cover 900 s"
        );
        assert_eq!(
            cache
                .get_for(Duration::from_secs(500))
                .await
                .expect("keys")
                .access_key_id(),
            "AKID2",
            "600 s cover 500 s"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    /// Review 34: in the last minutes of the chain's keys every presign asked the chain again,
    /// one after another (20 presigns took 6 s behind a 0.3 s helper). The first caller's
    /// answer serves the others.
    #[tokio::test]
    async fn callers_in_the_keys_last_minutes_share_one_answer() {
        let (cache, calls) = cache(Some(Duration::from_secs(60)));
        let cache = Arc::new(cache);
        let callers: Vec<_> = (0..32)
            .map(|_| {
                let cache = cache.clone();
                tokio::spawn(async move { cache.get_for(Duration::from_secs(900)).await })
            })
            .collect();
        for caller in callers {
            assert_eq!(
                caller.await.expect("joined").expect("keys").access_key_id(),
                "AKID1"
            );
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
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
