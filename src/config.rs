//! Typed settings, loaded once: built-in defaults, then an optional TOML file named by
//! `UPCOMMIT_CONFIG`, then environment variables. A bad value fails at start with a message
//! that names the setting.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;

use crate::domain::bucket_check::Expectations;
use crate::domain::content::ContentType;
use crate::domain::keys::FinalPrefix;
use crate::domain::lifecycle::{missing_required, required_rules, Rule};
use crate::domain::profile::{builtin_profiles, Profile};
use crate::domain::quota::QuotaLimits;
use crate::domain::temporary::{is_temporary_key, TtlDays, TEMP_PREFIX};
use crate::domain::validation_hook::{
    HookSecret, OnError, ValidationHook, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS,
};

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// A secret that never shows in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[derive(Debug, thiserror::Error)]
#[error("configuration error: {0}")]
pub struct ConfigError(pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// All settings of the service.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Address the HTTP server binds (`UPCOMMIT_LISTEN`, default `127.0.0.1:8080`; port 0 picks one).
    pub listen: String,
    pub database: DatabaseSettings,
    pub s3: S3Settings,
    pub auth: AuthSettings,
    pub uploads: UploadSettings,
    /// Per-user daily limits (`UPCOMMIT_QUOTA_DAILY_UPLOADS`, `UPCOMMIT_QUOTA_DAILY_BYTES`; 0 = unlimited).
    pub quota: QuotaLimits,
    pub http: HttpSettings,
    pub bucket_check: BucketCheckSettings,
    pub jobs: JobSettings,
    pub demo: DemoSettings,
    pub events: EventSettings,
    /// `text` or `json` (`UPCOMMIT_LOG_FORMAT`).
    pub log_format: LogFormat,
}

#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    /// `sqlite://…` (default `sqlite://data/upcommit.db`) or `postgres://…` (`DATABASE_URL`).
    pub url: SecretString,
    /// Pool size (`UPCOMMIT_DB_MAX_CONNECTIONS`, default 16).
    pub max_connections: u32,
}

#[derive(Debug, Clone)]
pub struct S3Settings {
    /// The upload bucket (`UPCOMMIT_BUCKET`, default `upcommit-local`).
    pub bucket: String,
    /// A custom endpoint such as LocalStack's; setting it selects path-style addressing
    /// (`UPCOMMIT_S3_ENDPOINT`).
    pub endpoint: Option<String>,
    /// Region (`AWS_REGION`, then `AWS_DEFAULT_REGION`, default `us-east-1`).
    pub region: String,
    /// Browser origins that upload straight to the bucket; the bucket checks verify its CORS
    /// lets each of them (`UPCOMMIT_CORS_ORIGINS`, comma-separated, default none).
    pub cors_origins: Vec<String>,
    /// Store capabilities the operator accepts running without, by name
    /// (`UPCOMMIT_ACCEPT_STORE_GAPS`, comma-separated, default none): `serve` refuses to start
    /// while the store lacks a capability a promise needs that is not named here.
    pub accept_gaps: std::collections::BTreeSet<crate::domain::capabilities::Capability>,
}

#[derive(Debug, Clone)]
pub struct JobSettings {
    /// Extra time past presign expiry + commit window before the sweeper touches a tmp
    /// partition (`UPCOMMIT_SWEEP_GRACE_SECS`, default 86400).
    pub sweep_grace_secs: u64,
    /// Partitions dated further in the future than this make the sweeper refuse to delete
    /// anything (`UPCOMMIT_SWEEP_SKEW_TOLERANCE_SECS`, default 300).
    pub sweep_skew_tolerance_secs: u64,
    /// Seconds between sweeps run by the server; 0 turns it off
    /// (`UPCOMMIT_SWEEP_INTERVAL_SECS`, default 3600).
    pub sweep_interval_secs: u64,
    /// Partitions swept at once (`UPCOMMIT_SWEEP_CONCURRENCY`, default 4).
    pub sweep_concurrency: usize,
    /// How long one replica holds a job before another may take it over; renewed while the job
    /// runs (`UPCOMMIT_JOB_LEASE_SECS`, default 300).
    pub lease_secs: u64,
    /// Monthly price per GiB by storage class, for the storage report's cost estimate
    /// (`UPCOMMIT_PRICE_PER_GIB`, `CLASS=price` comma-separated; default S3 us-east-1 list
    /// prices for STANDARD, STANDARD_IA, GLACIER_IR, GLACIER, DEEP_ARCHIVE).
    pub price_per_gib: Vec<(String, f64)>,
    /// A handle nothing uses becomes `unlinked` once older than this, in seconds
    /// (`UPCOMMIT_UNLINKED_GRACE_SECS`, default 30 days); a restored one is not flagged again
    /// within it.
    pub unlinked_grace_secs: u64,
    /// An unlinked handle is archived this long after it became unlinked
    /// (`UPCOMMIT_ARCHIVE_AFTER_SECS`, default 30 days).
    pub archive_after_secs: u64,
    /// An archived handle's object is deleted this long after archival
    /// (`UPCOMMIT_DELETE_AFTER_SECS`, default 365 days).
    pub delete_after_secs: u64,
    /// Objects smaller than this keep their storage class when archived
    /// (`UPCOMMIT_ARCHIVE_MIN_BYTES`, default 131072).
    pub archive_min_bytes: u64,
    /// How many handles one object may have (the file and its copies,
    /// `UPCOMMIT_MAX_COPIES_PER_FILE`, default 100, at least 1): hygiene's work on a key grows
    /// with the square of its handles, so an unbounded number would let one user stall it.
    pub max_copies_per_file: u64,
    /// The storage class archived objects move to (`UPCOMMIT_ARCHIVE_STORAGE_CLASS`, default
    /// GLACIER_IR, which stays instantly downloadable). Classes that need a RestoreObject before
    /// a read (GLACIER, DEEP_ARCHIVE) and unknown names are refused at load.
    pub archive_storage_class: String,
    /// Seconds between runs of unlinked detection, archival and deletion in the server; 0 turns
    /// them off (`UPCOMMIT_HYGIENE_INTERVAL_SECS`, default 86400).
    pub hygiene_interval_secs: u64,
    /// A finished upload's row (and its multipart parts) is pruned once everything about it
    /// is this old, in seconds (`UPCOMMIT_UPLOAD_RETENTION`, a duration such as `90d`; default
    /// 90 days, at least 1 day). Quota rows go with the days before it.
    pub upload_retention_secs: u64,
    /// Key ranges reconcile lists at once (`UPCOMMIT_RECONCILE_WORKERS`, default 1, 1 to 64).
    pub reconcile_workers: usize,
}

/// Event delivery: where events go and how hard they are pushed.
#[derive(Debug, Clone)]
pub struct EventSettings {
    /// Webhook endpoints (TOML `[[events.webhooks]]`: `id`, `url`, `secret`, `types`; or one
    /// from the environment, `UPCOMMIT_WEBHOOK_URL` with `UPCOMMIT_WEBHOOK_SECRET`,
    /// `UPCOMMIT_WEBHOOK_TYPES` and `UPCOMMIT_WEBHOOK_ID`, which replaces the file's list).
    /// Written into the catalog at start; endpoints of the settings no longer listed are
    /// disabled.
    pub webhooks: Vec<WebhookSettings>,
    /// SQS queue endpoints (TOML `[[events.queues]]`: `id`, `queue_url`, `types`; or one from
    /// the environment, `UPCOMMIT_EVENT_QUEUE_URL` with `UPCOMMIT_EVENT_QUEUE_TYPES` and
    /// `UPCOMMIT_EVENT_QUEUE_ID`, which replaces the file's list). Sent with the S3 client's
    /// credentials, region and endpoint override.
    pub queues: Vec<QueueSettings>,
    /// How long a delivery is retried before it is marked failed and kept
    /// (`UPCOMMIT_EVENT_RETRY_WINDOW`, a duration, default `24h`, at least `1s`).
    pub retry_window_secs: u64,
    /// One webhook request's timeout (`UPCOMMIT_WEBHOOK_TIMEOUT_SECS`, default 10, 1..=300).
    pub webhook_timeout_secs: u64,
    /// Requests in flight at once per endpoint on this replica, also the deliveries one claim
    /// takes (`UPCOMMIT_WEBHOOK_CONCURRENCY`, default 8, at most 256; 0 = this replica
    /// delivers nothing, the others do).
    pub webhook_concurrency: usize,
    /// The first retry waits up to this many milliseconds, doubled per failed attempt
    /// (`UPCOMMIT_WEBHOOK_RETRY_BASE_MS`, default 5000, at least 1) …
    pub retry_base_ms: u64,
    /// … up to this many seconds (`UPCOMMIT_WEBHOOK_RETRY_CAP_SECS`, default 3600, at least 1).
    pub retry_cap_secs: u64,
}

impl EventSettings {
    pub fn backoff(&self) -> crate::domain::webhooks::Backoff {
        crate::domain::webhooks::Backoff {
            base: std::time::Duration::from_millis(self.retry_base_ms),
            cap: std::time::Duration::from_secs(self.retry_cap_secs)
                .max(std::time::Duration::from_millis(self.retry_base_ms)),
        }
    }
}

/// One webhook endpoint of the settings.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Its name: 1–64 of `a-z`, `0-9`, `-`, `_`; unique.
    pub id: String,
    /// `http://` or `https://`.
    pub url: String,
    /// `whsec_` and the base64 of 24–64 bytes.
    pub secret: SecretString,
    /// The event types it receives (`["*"]`: all).
    pub types: Vec<crate::domain::events::EventType>,
}

/// One SQS queue receiving events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSettings {
    /// Its name, as a webhook's (unique among every endpoint).
    pub id: String,
    /// `https://sqs.<region>.amazonaws.com/<account>/<name>` (a `.fifo` name keeps each file's
    /// order), or a queue under the endpoint override.
    pub queue_url: String,
    pub types: Vec<crate::domain::events::EventType>,
}

/// The browser upload page, for trying the service and for the browser test.
#[derive(Debug, Clone, Default)]
pub struct DemoSettings {
    /// Serve the upload page at `/demo` (`UPCOMMIT_DEMO`, default false).
    pub enabled: bool,
    /// Dev mode only: let the page mint short-lived tokens for any user id
    /// (`UPCOMMIT_DEMO_MINT_TOKENS`, default false; needs `UPCOMMIT_DEMO`).
    pub mint_tokens: bool,
}

#[derive(Debug, Clone)]
pub struct BucketCheckSettings {
    /// Seconds between checks of the live bucket's configuration; 0 turns the watch off
    /// (`UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS`, default 300).
    pub interval_secs: u64,
    /// Whether a failed bucket check makes `/readyz` answer 503
    /// (`UPCOMMIT_BUCKET_CHECK_FAILS_READINESS`, default false: report only).
    pub fails_readiness: bool,
}

#[derive(Debug, Clone)]
pub struct AuthSettings {
    /// HS256 key for bearer tokens (`UPCOMMIT_JWT_SECRET`, at least 16 bytes; required unless an
    /// identity provider is configured, empty = HS256 tokens refused).
    pub jwt_secret: SecretString,
    /// The identity providers whose asymmetric tokens are accepted: the one of
    /// `UPCOMMIT_JWKS_URL`, or the `[[issuers]]` tables of the settings file (never both).
    /// Empty: none. Their `iss` are distinct and their user ids cannot coincide
    /// ([`ProviderSettings::user_prefix`]).
    pub issuers: Vec<ProviderSettings>,
}

/// One identity provider (Auth0, Cognito, Keycloak, …): its keys come from a JWKS.
#[derive(Debug, Clone)]
pub struct ProviderSettings {
    /// Where the provider publishes its keys (`UPCOMMIT_JWKS_URL`).
    pub jwks_url: String,
    /// The exact `iss` its tokens carry (`UPCOMMIT_JWT_ISSUER`, required with a JWKS URL).
    pub issuer: String,
    /// The `aud` tokens must name (`UPCOMMIT_JWT_AUDIENCE`, required with a JWKS URL).
    pub audience: String,
    /// The claim holding the user id (`UPCOMMIT_JWT_USER_CLAIM`, default `sub`).
    pub user_claim: String,
    /// Put before every user id of this issuer (`user_prefix` of an `[[issuers]]` table,
    /// default empty), so two issuers' users never share an id. With several issuers at most
    /// one has none, no prefix starts another, and the unprefixed issuer's user ids that start
    /// with another's prefix are refused.
    pub user_prefix: String,
    /// The claim and value that make a caller admin (`UPCOMMIT_JWT_ADMIN_CLAIM`,
    /// `UPCOMMIT_JWT_ADMIN_VALUE`); unset = no provider token is admin.
    pub admin: Option<(String, String)>,
    /// Clock leeway on `exp` and `nbf` in seconds (`UPCOMMIT_JWT_LEEWAY_SECS`, default 30, ≤ 300).
    pub leeway_secs: u64,
    /// Seconds between scheduled key refreshes (`UPCOMMIT_JWKS_REFRESH_SECS`, default 300).
    pub refresh_secs: u64,
    /// Seconds fetched keys are trusted without a successful refresh; past it, a failed fetch
    /// answers 503 (`UPCOMMIT_JWKS_MAX_AGE_SECS`, default 3600, ≥ the refresh interval).
    pub max_age_secs: u64,
    /// At most one fetch per this many seconds, whatever asks (unknown `kid`s, stale keys)
    /// (`UPCOMMIT_JWKS_MIN_REFETCH_SECS`, default 30).
    pub min_refetch_secs: u64,
}

#[derive(Debug, Clone)]
pub struct UploadSettings {
    /// Lifetime of presigned upload URLs in seconds (`UPCOMMIT_PRESIGN_EXPIRY_SECS`, default 900).
    pub presign_expiry_secs: u64,
    /// How long after presign a commit is accepted, in seconds (`UPCOMMIT_COMMIT_WINDOW_SECS`,
    /// default 86400). Must stay well under the 7-day tmp expiry.
    pub commit_window_secs: u64,
    /// How long one commit holds an upload before another may take over, in seconds
    /// (`UPCOMMIT_COMMIT_LEASE_SECS`, default 30).
    pub commit_lease_secs: u64,
    /// Lifetime of download URLs in seconds (`UPCOMMIT_DOWNLOAD_EXPIRY_SECS`, default 300).
    pub download_expiry_secs: u64,
    /// Largest object a single CopyObject promotes; larger ones are promoted by a multipart copy
    /// (`UPCOMMIT_MAX_SINGLE_COPY_BYTES`, default and at most 5 GiB, S3's limit).
    pub max_single_copy_bytes: u64,
    /// Part size of the multipart copy that promotes large objects
    /// (`UPCOMMIT_COPY_PART_SIZE_BYTES`, default 512 MiB, 5 MiB..=5 GiB).
    pub copy_part_size_bytes: u64,
    /// Part copies in flight at once for one promotion (`UPCOMMIT_COPY_CONCURRENCY`, default 4).
    pub copy_concurrency: usize,
    /// Presigns above this size are multipart unless the client says otherwise
    /// (`UPCOMMIT_MULTIPART_THRESHOLD_BYTES`, default 100 MiB).
    pub multipart_threshold_bytes: u64,
    /// Part size the server recommends (`UPCOMMIT_MULTIPART_PART_SIZE_BYTES`, default 16 MiB;
    /// raised as needed to stay within 10,000 parts).
    pub multipart_part_size_bytes: u64,
    /// How long a multipart session accepts parts, in seconds: shorter than the bucket's
    /// abort-incomplete rule, so the service never offers to resume an upload S3 may have
    /// aborted (`UPCOMMIT_MULTIPART_SESSION_SECS`, default 43200).
    pub multipart_session_secs: u64,
    /// Key prefixes of the layout that predates `tmp/`, committed in place
    /// (`UPCOMMIT_LEGACY_PREFIXES`, comma-separated, default none).
    pub legacy_prefixes: Vec<FinalPrefix>,
    /// Presigns per second one user may sustain on one replica (`UPCOMMIT_PRESIGN_RATE_PER_SEC`,
    /// default 10; 0 = unlimited), with bursts up to `UPCOMMIT_PRESIGN_BURST` (default 30).
    pub presign_rate_per_sec: f64,
    pub presign_burst: u32,
    /// Upload profiles (TOML `[[profiles]]`; default `image` and `recording`). Hygiene acts on
    /// a profile's files only when it sets `tracks_links` (TOML, default false), or when
    /// `UPCOMMIT_TRACKS_LINKS` (comma-separated profile names) names it; that list, when set,
    /// replaces the profiles' own setting. Presigns of a profile must declare a checksum when
    /// it sets `require_checksum` (TOML, default false) or `UPCOMMIT_REQUIRE_CHECKSUM` names it
    /// (the same rule). A profile with `temporary_ttl` (TOML, e.g. `"7d"`: whole days, and a
    /// tier `infra/lifecycle-rules.json` expires under `temp/<N>d/`) is temporary: its files
    /// are committed under that prefix, expire after the TTL and are never hygiene's.
    pub profiles: Vec<Profile>,
}

#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Request timeout in seconds (`UPCOMMIT_REQUEST_TIMEOUT_SECS`, default 30).
    pub request_timeout_secs: u64,
    /// Largest request body in bytes (`UPCOMMIT_BODY_LIMIT_BYTES`, default 65536).
    pub body_limit_bytes: usize,
    /// Seconds a connection has to send a complete request head, counted from when it opens or
    /// from its last response (so it is also the keep-alive idle timeout); then it is closed
    /// (`UPCOMMIT_HEADER_READ_TIMEOUT_SECS`, default 30, at least 1).
    pub header_read_timeout_secs: u64,
    /// Connections served at once; further ones wait in the listen backlog until one closes
    /// (`UPCOMMIT_MAX_CONNECTIONS`, default 4096, at least 1).
    pub max_connections: usize,
}

/// The TOML file's shape: every field optional, names as in the environment without prefix.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    listen: Option<String>,
    database_url: Option<String>,
    db_max_connections: Option<u32>,
    bucket: Option<String>,
    s3_endpoint: Option<String>,
    region: Option<String>,
    jwt_secret: Option<String>,
    jwks_url: Option<String>,
    jwt_issuer: Option<String>,
    jwt_audience: Option<String>,
    jwt_user_claim: Option<String>,
    jwt_admin_claim: Option<String>,
    jwt_admin_value: Option<String>,
    jwt_leeway_secs: Option<u64>,
    jwks_refresh_secs: Option<u64>,
    jwks_max_age_secs: Option<u64>,
    jwks_min_refetch_secs: Option<u64>,
    issuers: Option<Vec<FileIssuer>>,
    quota_daily_uploads: Option<u64>,
    quota_daily_bytes: Option<u64>,
    presign_expiry_secs: Option<u64>,
    commit_window_secs: Option<u64>,
    commit_lease_secs: Option<u64>,
    download_expiry_secs: Option<u64>,
    max_single_copy_bytes: Option<u64>,
    copy_part_size_bytes: Option<u64>,
    copy_concurrency: Option<usize>,
    multipart_threshold_bytes: Option<u64>,
    multipart_part_size_bytes: Option<u64>,
    multipart_session_secs: Option<u64>,
    presign_rate_per_sec: Option<f64>,
    presign_burst: Option<u32>,
    legacy_prefixes: Option<Vec<String>>,
    request_timeout_secs: Option<u64>,
    body_limit_bytes: Option<usize>,
    header_read_timeout_secs: Option<u64>,
    max_connections: Option<usize>,
    cors_origins: Option<Vec<String>>,
    accept_store_gaps: Option<Vec<String>>,
    bucket_check_interval_secs: Option<u64>,
    bucket_check_fails_readiness: Option<bool>,
    demo: Option<bool>,
    demo_mint_tokens: Option<bool>,
    sweep_grace_secs: Option<u64>,
    sweep_skew_tolerance_secs: Option<u64>,
    sweep_interval_secs: Option<u64>,
    sweep_concurrency: Option<usize>,
    job_lease_secs: Option<u64>,
    price_per_gib: Option<Vec<String>>,
    unlinked_grace_secs: Option<u64>,
    archive_after_secs: Option<u64>,
    delete_after_secs: Option<u64>,
    archive_min_bytes: Option<u64>,
    max_copies_per_file: Option<u64>,
    archive_storage_class: Option<String>,
    hygiene_interval_secs: Option<u64>,
    upload_retention: Option<String>,
    reconcile_workers: Option<usize>,
    log_format: Option<String>,
    profiles: Option<Vec<FileProfile>>,
    event_retry_window: Option<String>,
    webhook_timeout_secs: Option<u64>,
    webhook_concurrency: Option<usize>,
    webhook_retry_base_ms: Option<u64>,
    webhook_retry_cap_secs: Option<u64>,
    events: Option<FileEvents>,
}

/// `[events]`: the endpoints.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEvents {
    #[serde(default)]
    webhooks: Vec<FileWebhook>,
    #[serde(default)]
    queues: Vec<FileQueue>,
}

/// `value` when it lies in `lo..=hi`; otherwise a start-stopping error naming the setting (a
/// silent clamp would run with a value nobody wrote).
fn in_range<T>(name: &str, value: T, lo: T, hi: T) -> Result<T, ConfigError>
where
    T: PartialOrd + std::fmt::Display + Copy,
{
    if value < lo || value > hi {
        return Err(ConfigError(format!("{name}: {lo}..={hi}, got {value}")));
    }
    Ok(value)
}

/// `[[events.queues]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileQueue {
    id: String,
    queue_url: String,
    types: Vec<String>,
}

/// The queue endpoints: the environment's one (`UPCOMMIT_EVENT_QUEUE_URL` set) or the file's
/// list, each checked: a name not taken by a webhook, a queue URL, known types.
fn queues(
    src: &Source<'_>,
    file: Vec<FileQueue>,
    webhooks: &[WebhookSettings],
) -> Result<Vec<QueueSettings>, ConfigError> {
    let raw: Vec<FileQueue> = match (src.env)("UPCOMMIT_EVENT_QUEUE_URL").filter(|v| !v.is_empty())
    {
        Some(queue_url) => {
            let types = src.list("UPCOMMIT_EVENT_QUEUE_TYPES", None);
            vec![FileQueue {
                id: src.string("UPCOMMIT_EVENT_QUEUE_ID", None, "queue"),
                queue_url,
                types: if types.is_empty() {
                    vec!["*".into()]
                } else {
                    types
                },
            }]
        }
        None => file,
    };
    let mut out: Vec<QueueSettings> = Vec::with_capacity(raw.len());
    for q in raw {
        let name = format!("queue {:?}", q.id);
        crate::domain::webhooks::check_endpoint_id(&q.id)
            .map_err(|e| ConfigError(format!("{name}: {e}")))?;
        if out.iter().any(|o| o.id == q.id) || webhooks.iter().any(|w| w.id == q.id) {
            return Err(ConfigError(format!(
                "{name}: an endpoint id is listed twice"
            )));
        }
        crate::domain::webhooks::check_url(&q.queue_url)
            .ok()
            .and_then(|()| crate::domain::queue::QueueUrl::parse(&q.queue_url).ok())
            .ok_or_else(|| {
                ConfigError(format!(
                    "{name}: queue_url: expected https://sqs.<region>.amazonaws.com/<account>/<name> or a queue under UPCOMMIT_S3_ENDPOINT, got {:?}",
                    q.queue_url
                ))
            })?;
        let types = crate::domain::events::parse_subscription(&q.types)
            .map_err(|e| ConfigError(format!("{name}: types: {e}")))?;
        out.push(QueueSettings {
            id: q.id,
            queue_url: q.queue_url,
            types,
        });
    }
    Ok(out)
}

/// `[[events.webhooks]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileWebhook {
    id: String,
    url: String,
    secret: String,
    types: Vec<String>,
}

/// The webhook endpoints: the environment's one (`UPCOMMIT_WEBHOOK_URL` set) or the file's
/// list, each checked: a name, an http(s) URL, a `whsec_` secret of 24–64 bytes, known types.
fn webhooks(src: &Source<'_>, file: Vec<FileWebhook>) -> Result<Vec<WebhookSettings>, ConfigError> {
    let raw: Vec<FileWebhook> = match (src.env)("UPCOMMIT_WEBHOOK_URL").filter(|v| !v.is_empty()) {
        Some(url) => {
            let types = src.list("UPCOMMIT_WEBHOOK_TYPES", None);
            vec![FileWebhook {
                id: src.string("UPCOMMIT_WEBHOOK_ID", None, "default"),
                url,
                secret: src.string("UPCOMMIT_WEBHOOK_SECRET", None, ""),
                types: if types.is_empty() {
                    vec!["*".into()]
                } else {
                    types
                },
            }]
        }
        None => file,
    };
    let mut out: Vec<WebhookSettings> = Vec::with_capacity(raw.len());
    for w in raw {
        let name = format!("webhook {:?}", w.id);
        crate::domain::webhooks::check_endpoint_id(&w.id)
            .map_err(|e| ConfigError(format!("{name}: {e}")))?;
        if out.iter().any(|o| o.id == w.id) {
            return Err(ConfigError(format!("{name}: listed twice")));
        }
        crate::domain::webhooks::check_webhook_url(&w.url)
            .map_err(|e| ConfigError(format!("{name}: url: {e}, got {:?}", w.url)))?;
        crate::domain::webhooks::secret_key(&w.secret)
            .map_err(|e| ConfigError(format!("{name}: secret: {e}")))?;
        let types = crate::domain::events::parse_subscription(&w.types)
            .map_err(|e| ConfigError(format!("{name}: types: {e}")))?;
        out.push(WebhookSettings {
            id: w.id,
            url: w.url,
            secret: SecretString::new(w.secret),
            types,
        });
    }
    Ok(out)
}

/// One `[[issuers]]` table: an identity provider beside others.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileIssuer {
    issuer: String,
    jwks_url: String,
    audience: String,
    #[serde(default)]
    user_claim: Option<String>,
    #[serde(default)]
    admin_claim: Option<String>,
    #[serde(default)]
    admin_value: Option<String>,
    #[serde(default)]
    user_prefix: Option<String>,
}

/// The longest `user_prefix`: user ids stay at most 128 bytes, prefix included.
const MAX_USER_PREFIX_BYTES: usize = 32;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileProfile {
    name: String,
    content_types: Vec<String>,
    max_size: u64,
    final_prefix: String,
    #[serde(default)]
    tracks_links: bool,
    #[serde(default)]
    require_checksum: bool,
    /// `"7d"`: the profile is temporary (see `domain::temporary`).
    #[serde(default)]
    temporary_ttl: Option<String>,
    /// `{ url, timeout_ms, on_error, secret }` (see `domain::validation_hook`).
    #[serde(default)]
    validation_hook: Option<FileValidationHook>,
}

/// A profile's `validation_hook` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileValidationHook {
    url: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    on_error: Option<String>,
    #[serde(default)]
    secret: Option<String>,
}

/// A comma-separated list of profile names from the environment (`None` when unset); every
/// name must be a configured profile.
fn profile_list(
    src: &Source<'_>,
    var: &str,
    profiles: &[Profile],
) -> Result<Option<Vec<String>>, ConfigError> {
    if (src.env)(var).is_none() {
        return Ok(None);
    }
    let names = src.list(var, None);
    if let Some(bad) = names
        .iter()
        .find(|n| !profiles.iter().any(|p| &p.name == *n))
    {
        return Err(ConfigError(format!("{var}: no profile is named {bad:?}")));
    }
    Ok(Some(names))
}

/// Reads one setting: environment first, then file, then default.
struct Source<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Source<'_> {
    fn string(&self, env: &str, file: Option<String>, default: &str) -> String {
        (self.env)(env)
            .filter(|v| !v.is_empty())
            .or(file)
            .unwrap_or_else(|| default.to_owned())
    }

    fn number<T: std::str::FromStr + Copy>(
        &self,
        env: &str,
        file: Option<T>,
        default: T,
    ) -> Result<T, ConfigError> {
        match (self.env)(env).filter(|v| !v.is_empty()) {
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| ConfigError(format!("{env}: expected a whole number, got {v:?}"))),
            None => Ok(file.unwrap_or(default)),
        }
    }

    fn flag(&self, env: &str, file: Option<bool>, default: bool) -> Result<bool, ConfigError> {
        match (self.env)(env).filter(|v| !v.is_empty()) {
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => Ok(true),
                "false" | "0" | "no" => Ok(false),
                _ => Err(ConfigError(format!(
                    "{env}: expected true or false, got {v:?}"
                ))),
            },
            None => Ok(file.unwrap_or(default)),
        }
    }

    fn list(&self, env: &str, file: Option<Vec<String>>) -> Vec<String> {
        match (self.env)(env) {
            Some(v) => v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            None => file.unwrap_or_default(),
        }
    }
}

/// The JWKS timings and leeway, shared by every issuer (each keeps its own cache with them).
struct ProviderTimings {
    leeway_secs: u64,
    refresh_secs: u64,
    max_age_secs: u64,
    min_refetch_secs: u64,
}

fn provider_timings(
    src: &Source<'_>,
    f: &mut FileSettings,
) -> Result<ProviderTimings, ConfigError> {
    let leeway_secs = src.number("UPCOMMIT_JWT_LEEWAY_SECS", f.jwt_leeway_secs, 30)?;
    if leeway_secs > 300 {
        return Err(ConfigError("UPCOMMIT_JWT_LEEWAY_SECS: at most 300".into()));
    }
    let refresh_secs = src
        .number("UPCOMMIT_JWKS_REFRESH_SECS", f.jwks_refresh_secs, 300)?
        .max(1);
    let max_age_secs = src.number("UPCOMMIT_JWKS_MAX_AGE_SECS", f.jwks_max_age_secs, 3600)?;
    if max_age_secs < refresh_secs {
        return Err(ConfigError(
            "UPCOMMIT_JWKS_MAX_AGE_SECS: at least UPCOMMIT_JWKS_REFRESH_SECS".into(),
        ));
    }
    Ok(ProviderTimings {
        leeway_secs,
        refresh_secs,
        max_age_secs,
        min_refetch_secs: src
            .number(
                "UPCOMMIT_JWKS_MIN_REFETCH_SECS",
                f.jwks_min_refetch_secs,
                30,
            )?
            .max(1),
    })
}

/// The identity providers: the single one of `UPCOMMIT_JWKS_URL` (and its issuer, audience,
/// claims), or the `[[issuers]]` tables of the settings file. Both at once is an error rather
/// than a merge: the environment overrides the file everywhere else, and a list has no
/// obvious override, so an operator must say which one is meant.
fn issuers(src: &Source<'_>, f: &mut FileSettings) -> Result<Vec<ProviderSettings>, ConfigError> {
    let timings = provider_timings(src, f)?;
    let single = provider(src, f, &timings)?;
    let Some(tables) = f.issuers.take() else {
        return Ok(single.into_iter().collect());
    };
    if single.is_some() {
        return Err(ConfigError(
            "issuers: the settings file's [[issuers]] and UPCOMMIT_JWKS_URL (jwks_url) are both set; configure every provider as an [[issuers]] table, or only the one of UPCOMMIT_JWKS_URL".into(),
        ));
    }
    if tables.is_empty() {
        return Err(ConfigError(
            "issuers: an empty list; leave [[issuers]] out for none".into(),
        ));
    }
    let list = tables
        .into_iter()
        .map(|t| file_issuer(t, &timings))
        .collect::<Result<Vec<_>, _>>()?;
    distinct_issuers(&list)?;
    Ok(list)
}

fn file_issuer(t: FileIssuer, timings: &ProviderTimings) -> Result<ProviderSettings, ConfigError> {
    let name = t.issuer.clone();
    let bad = |what: &str| ConfigError(format!("issuers: issuer {name:?}: {what}"));
    if t.issuer.is_empty() {
        return Err(bad(
            "issuer: required (the exact iss of the provider's tokens)",
        ));
    }
    if !(t.jwks_url.starts_with("https://") || t.jwks_url.starts_with("http://")) {
        return Err(bad(&format!(
            "jwks_url: expected an http(s) URL, got {:?}",
            t.jwks_url
        )));
    }
    // Parsed as the fetch will be (review 26): a URL no request can reach stops the start
    // instead of answering 503 to every token of the provider.
    crate::domain::webhooks::check_reachable(&t.jwks_url)
        .map_err(|e| bad(&format!("jwks_url: {e}")))?;
    if t.audience.is_empty() {
        return Err(bad(
            "audience: required (the aud this service's tokens carry)",
        ));
    }
    let admin = match (
        t.admin_claim.filter(|c| !c.is_empty()),
        t.admin_value.filter(|v| !v.is_empty()),
    ) {
        (None, None) => None,
        (Some(claim), Some(value)) => Some((claim, value)),
        _ => return Err(bad("admin_claim and admin_value: set both or neither")),
    };
    let user_prefix = t.user_prefix.unwrap_or_default();
    if user_prefix.len() > MAX_USER_PREFIX_BYTES || user_prefix.chars().any(char::is_control) {
        return Err(bad(&format!(
            "user_prefix: at most {MAX_USER_PREFIX_BYTES} bytes, no control characters"
        )));
    }
    Ok(ProviderSettings {
        jwks_url: t.jwks_url,
        issuer: t.issuer,
        audience: t.audience,
        user_claim: t
            .user_claim
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| "sub".into()),
        user_prefix,
        admin,
        leeway_secs: timings.leeway_secs,
        refresh_secs: timings.refresh_secs,
        max_age_secs: timings.max_age_secs,
        min_refetch_secs: timings.min_refetch_secs,
    })
}

/// Several issuers: distinct `iss`, and user ids that cannot coincide. Issuer A's user `u`
/// is `prefix(A) + u`; when no prefix starts another, no two issuers can make the same id.
/// One issuer may keep no prefix (the provider a deployment had before it added others, so
/// its users keep their ids); its user ids that start with another issuer's prefix are refused
/// when tokens are checked (`token_user_id_reserved`).
fn distinct_issuers(list: &[ProviderSettings]) -> Result<(), ConfigError> {
    for (i, a) in list.iter().enumerate() {
        for b in &list[i + 1..] {
            if a.issuer == b.issuer {
                return Err(ConfigError(format!(
                    "issuers: issuer {:?} is listed twice",
                    a.issuer
                )));
            }
            let (pa, pb) = (a.user_prefix.as_str(), b.user_prefix.as_str());
            let clash = if pa.is_empty() && pb.is_empty() {
                true
            } else if pa.is_empty() || pb.is_empty() {
                false
            } else {
                pa.starts_with(pb) || pb.starts_with(pa)
            };
            if clash {
                return Err(ConfigError(format!(
                    "issuers: issuers {:?} and {:?} could give the same user id (user_prefix {pa:?} and {pb:?}); give each a user_prefix that does not start another's (e.g. \"idp-a:\" and \"idp-b:\"); at most one issuer may have none",
                    a.issuer, b.issuer
                )));
            }
        }
    }
    Ok(())
}

/// The single identity provider of the environment (or the file's top-level keys): all of
/// them unset, or a JWKS URL with its issuer and audience.
fn provider(
    src: &Source<'_>,
    f: &mut FileSettings,
    timings: &ProviderTimings,
) -> Result<Option<ProviderSettings>, ConfigError> {
    let jwks_url = src.string("UPCOMMIT_JWKS_URL", f.jwks_url.take(), "");
    let issuer = src.string("UPCOMMIT_JWT_ISSUER", f.jwt_issuer.take(), "");
    let audience = src.string("UPCOMMIT_JWT_AUDIENCE", f.jwt_audience.take(), "");
    let admin_claim = src.string("UPCOMMIT_JWT_ADMIN_CLAIM", f.jwt_admin_claim.take(), "");
    let admin_value = src.string("UPCOMMIT_JWT_ADMIN_VALUE", f.jwt_admin_value.take(), "");
    let user_claim = src.string("UPCOMMIT_JWT_USER_CLAIM", f.jwt_user_claim.take(), "");
    if jwks_url.is_empty() {
        if !(issuer.is_empty() && audience.is_empty() && admin_claim.is_empty()) {
            return Err(ConfigError(
                "UPCOMMIT_JWKS_URL: required when UPCOMMIT_JWT_ISSUER, UPCOMMIT_JWT_AUDIENCE or UPCOMMIT_JWT_ADMIN_CLAIM is set".into(),
            ));
        }
        if f.issuers.is_some() && !(admin_value.is_empty() && user_claim.is_empty()) {
            return Err(ConfigError(
                "issuers: UPCOMMIT_JWT_USER_CLAIM and UPCOMMIT_JWT_ADMIN_VALUE are the single provider's; with [[issuers]], set user_claim and admin_value in each table".into(),
            ));
        }
        return Ok(None);
    }
    if !(jwks_url.starts_with("https://") || jwks_url.starts_with("http://")) {
        return Err(ConfigError(format!(
            "UPCOMMIT_JWKS_URL: expected an http(s) URL, got {jwks_url:?}"
        )));
    }
    crate::domain::webhooks::check_reachable(&jwks_url)
        .map_err(|e| ConfigError(format!("UPCOMMIT_JWKS_URL: {e}")))?;
    if issuer.is_empty() {
        return Err(ConfigError(
            "UPCOMMIT_JWT_ISSUER: required with UPCOMMIT_JWKS_URL (the exact iss of the provider's tokens)".into(),
        ));
    }
    if audience.is_empty() {
        return Err(ConfigError(
            "UPCOMMIT_JWT_AUDIENCE: required with UPCOMMIT_JWKS_URL (the aud this service's tokens carry)".into(),
        ));
    }
    let admin = match (admin_claim.is_empty(), admin_value.is_empty()) {
        (true, true) => None,
        (false, false) => Some((admin_claim, admin_value)),
        _ => {
            return Err(ConfigError(
                "UPCOMMIT_JWT_ADMIN_CLAIM and UPCOMMIT_JWT_ADMIN_VALUE: set both or neither".into(),
            ))
        }
    };
    Ok(Some(ProviderSettings {
        jwks_url,
        issuer,
        audience,
        user_claim: if user_claim.is_empty() {
            "sub".into()
        } else {
            user_claim
        },
        user_prefix: String::new(),
        admin,
        leeway_secs: timings.leeway_secs,
        refresh_secs: timings.refresh_secs,
        max_age_secs: timings.max_age_secs,
        min_refetch_secs: timings.min_refetch_secs,
    }))
}

/// `UPCOMMIT_UPLOAD_RETENTION`: a duration of at least a day, so that quota days still being
/// charged (today, and yesterday on a replica whose clock lags) are never pruned.
fn retention(raw: &str) -> Result<u64, ConfigError> {
    match crate::domain::duration::parse_secs(raw) {
        Some(secs) if secs >= 86_400 => Ok(secs),
        Some(_) => Err(ConfigError(format!(
            "UPCOMMIT_UPLOAD_RETENTION: at least 1d, got {raw:?}"
        ))),
        None => Err(ConfigError(format!(
            "UPCOMMIT_UPLOAD_RETENTION: {}, got {raw:?}",
            crate::domain::duration::EXPECTED
        ))),
    }
}

impl Settings {
    /// Loads from the process environment and the file named by `UPCOMMIT_CONFIG`.
    pub fn load() -> Result<Self, ConfigError> {
        Self::load_from_process(true)
    }

    /// As [`Settings::load`], for the operator commands that never see a token (`doctor`,
    /// `bucket`): the JWT secret may be absent, so they run with only the S3 settings.
    pub fn load_for_tools() -> Result<Self, ConfigError> {
        Self::load_from_process(false)
    }

    fn load_from_process(require_secret: bool) -> Result<Self, ConfigError> {
        let env = |k: &str| std::env::var(k).ok();
        let file =
            match env("UPCOMMIT_CONFIG").filter(|p| !p.is_empty()) {
                Some(path) => Some(std::fs::read_to_string(&path).map_err(|e| {
                    ConfigError(format!("UPCOMMIT_CONFIG: cannot read {path}: {e}"))
                })?),
                None => None,
            };
        Self::parse(file.as_deref(), &env, require_secret)
    }

    /// Loads from the given environment only (no process environment): for tests and tools.
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Self, ConfigError> {
        Self::from_sources(None, &|k| vars.get(k).cloned())
    }

    pub fn from_sources(
        file: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::parse(file, env, true)
    }

    fn parse(
        file: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
        require_secret: bool,
    ) -> Result<Self, ConfigError> {
        let mut f: FileSettings = match file {
            Some(text) => {
                toml::from_str(text).map_err(|e| ConfigError(format!("UPCOMMIT_CONFIG: {e}")))?
            }
            None => FileSettings::default(),
        };
        let src = Source { env };

        let issuers = issuers(&src, &mut f)?;
        let jwt_secret = src.string("UPCOMMIT_JWT_SECRET", f.jwt_secret.take(), "");
        let secret_required = require_secret && issuers.is_empty();
        if jwt_secret.len() < 16 && (secret_required || !jwt_secret.is_empty()) {
            return Err(ConfigError(
                "UPCOMMIT_JWT_SECRET: required (unless UPCOMMIT_JWKS_URL or [[issuers]] is set), at least 16 bytes"
                    .into(),
            ));
        }
        let database_url = src.string("DATABASE_URL", f.database_url, "sqlite://data/upcommit.db");
        if !(database_url.starts_with("sqlite:")
            || database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://"))
        {
            return Err(ConfigError(
                "DATABASE_URL: expected sqlite://… or postgres://…".into(),
            ));
        }
        let bucket = src.string("UPCOMMIT_BUCKET", f.bucket, "upcommit-local");
        if !valid_bucket_name(&bucket) {
            return Err(ConfigError(format!(
                "UPCOMMIT_BUCKET: {bucket:?} is not a valid bucket name"
            )));
        }
        let endpoint = (env)("UPCOMMIT_S3_ENDPOINT")
            .filter(|v| !v.is_empty())
            .or(f.s3_endpoint);
        if let Some(e) = &endpoint {
            if crate::signing::S3Location::path_style(e, &bucket).is_none() {
                return Err(ConfigError(format!(
                    "UPCOMMIT_S3_ENDPOINT: expected http(s)://host[:port], got {e:?}"
                )));
            }
        }
        let region = (env)("AWS_REGION")
            .or_else(|| (env)("AWS_DEFAULT_REGION"))
            .filter(|v| !v.is_empty())
            .or(f.region)
            .unwrap_or_else(|| "us-east-1".into());

        let legacy_raw = src.list("UPCOMMIT_LEGACY_PREFIXES", f.legacy_prefixes);
        let cors_origins = src.list("UPCOMMIT_CORS_ORIGINS", f.cors_origins);
        let accept_gaps = crate::domain::capabilities::parse_accepted(
            &src.list("UPCOMMIT_ACCEPT_STORE_GAPS", f.accept_store_gaps)
                .join(","),
        )
        .map_err(|e| ConfigError(format!("UPCOMMIT_ACCEPT_STORE_GAPS: {e}")))?;
        if let Some(bad) = cors_origins
            .iter()
            .find(|o| !(o.starts_with("https://") || o.starts_with("http://") || *o == "*"))
        {
            return Err(ConfigError(format!(
                "UPCOMMIT_CORS_ORIGINS: expected origins like https://app.example.com, got {bad:?}"
            )));
        }
        let legacy_prefixes = legacy_raw
            .iter()
            .map(|p| {
                FinalPrefix::parse(p)
                    .map_err(|e| ConfigError(format!("UPCOMMIT_LEGACY_PREFIXES: {p:?}: {e:?}")))
            })
            .collect::<Result<Vec<_>, _>>()?;

        let profiles = match f.profiles {
            Some(list) => list
                .into_iter()
                .map(parse_profile)
                .collect::<Result<Vec<_>, _>>()?,
            None => builtin_profiles(),
        };
        if profiles.is_empty() {
            return Err(ConfigError(
                "profiles: at least one profile is required".into(),
            ));
        }
        // Which profiles' files hygiene may act on, and which require a checksum: each
        // environment list, when set, replaces the profiles' own setting.
        let mut profiles = profiles;
        if let Some(names) = profile_list(&src, "UPCOMMIT_TRACKS_LINKS", &profiles)? {
            for p in &mut profiles {
                p.tracks_links = names.contains(&p.name);
            }
        }
        if let Some(names) = profile_list(&src, "UPCOMMIT_REQUIRE_CHECKSUM", &profiles)? {
            for p in &mut profiles {
                p.require_checksum = names.contains(&p.name);
            }
        }

        let log_format = match src
            .string("UPCOMMIT_LOG_FORMAT", f.log_format, "text")
            .as_str()
        {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => {
                return Err(ConfigError(format!(
                    "UPCOMMIT_LOG_FORMAT: expected text or json, got {other:?}"
                )))
            }
        };

        let uploads = UploadSettings {
            presign_expiry_secs: src.number(
                "UPCOMMIT_PRESIGN_EXPIRY_SECS",
                f.presign_expiry_secs,
                900,
            )?,
            commit_window_secs: src.number(
                "UPCOMMIT_COMMIT_WINDOW_SECS",
                f.commit_window_secs,
                86_400,
            )?,
            commit_lease_secs: src.number("UPCOMMIT_COMMIT_LEASE_SECS", f.commit_lease_secs, 30)?,
            download_expiry_secs: src.number(
                "UPCOMMIT_DOWNLOAD_EXPIRY_SECS",
                f.download_expiry_secs,
                300,
            )?,
            max_single_copy_bytes: src.number(
                "UPCOMMIT_MAX_SINGLE_COPY_BYTES",
                f.max_single_copy_bytes,
                5 * GIB,
            )?,
            copy_part_size_bytes: src.number(
                "UPCOMMIT_COPY_PART_SIZE_BYTES",
                f.copy_part_size_bytes,
                512 * MIB,
            )?,
            copy_concurrency: src.number("UPCOMMIT_COPY_CONCURRENCY", f.copy_concurrency, 4)?,
            multipart_threshold_bytes: src.number(
                "UPCOMMIT_MULTIPART_THRESHOLD_BYTES",
                f.multipart_threshold_bytes,
                100 * MIB,
            )?,
            multipart_part_size_bytes: src.number(
                "UPCOMMIT_MULTIPART_PART_SIZE_BYTES",
                f.multipart_part_size_bytes,
                16 * MIB,
            )?,
            multipart_session_secs: src.number(
                "UPCOMMIT_MULTIPART_SESSION_SECS",
                f.multipart_session_secs,
                43_200,
            )?,
            presign_rate_per_sec: src.number(
                "UPCOMMIT_PRESIGN_RATE_PER_SEC",
                f.presign_rate_per_sec,
                10.0,
            )?,
            presign_burst: src.number("UPCOMMIT_PRESIGN_BURST", f.presign_burst, 30)?,
            legacy_prefixes,
            profiles,
        };
        if !(uploads.presign_rate_per_sec.is_finite() && uploads.presign_rate_per_sec >= 0.0) {
            return Err(ConfigError(
                "UPCOMMIT_PRESIGN_RATE_PER_SEC: must be a number ≥ 0".into(),
            ));
        }
        if !(1..=604_800).contains(&uploads.presign_expiry_secs) {
            return Err(ConfigError(
                "UPCOMMIT_PRESIGN_EXPIRY_SECS: must be 1..=604800 (S3's limit)".into(),
            ));
        }
        if uploads.commit_window_secs < uploads.presign_expiry_secs
            || uploads.commit_window_secs > 6 * 86_400
        {
            return Err(ConfigError(
                "UPCOMMIT_COMMIT_WINDOW_SECS: must be at least the presign expiry and at most 6 days (the tmp rule expires objects after 7)".into(),
            ));
        }
        if !(1..=3600).contains(&uploads.commit_lease_secs) {
            return Err(ConfigError(
                "UPCOMMIT_COMMIT_LEASE_SECS: must be 1..=3600".into(),
            ));
        }
        if !(1..=604_800).contains(&uploads.download_expiry_secs) {
            return Err(ConfigError(
                "UPCOMMIT_DOWNLOAD_EXPIRY_SECS: must be 1..=604800".into(),
            ));
        }
        validate_multipart(&uploads)?;
        let demo = DemoSettings {
            enabled: src.flag("UPCOMMIT_DEMO", f.demo, false)?,
            mint_tokens: src.flag("UPCOMMIT_DEMO_MINT_TOKENS", f.demo_mint_tokens, false)?,
        };
        if demo.mint_tokens && !demo.enabled {
            return Err(ConfigError(
                "UPCOMMIT_DEMO_MINT_TOKENS needs UPCOMMIT_DEMO=true (it mints tokens for the demo page)"
                    .into(),
            ));
        }
        if demo.mint_tokens && jwt_secret.is_empty() {
            return Err(ConfigError(
                "UPCOMMIT_DEMO_MINT_TOKENS needs UPCOMMIT_JWT_SECRET (it mints HS256 tokens)"
                    .into(),
            ));
        }
        let archive_storage_class = src
            .string(
                "UPCOMMIT_ARCHIVE_STORAGE_CLASS",
                f.archive_storage_class,
                "GLACIER_IR",
            )
            .to_ascii_uppercase();
        // Refused rather than half-supported: see `domain::storage_class`.
        if let Some(why) = crate::domain::storage_class::refusal(&archive_storage_class) {
            return Err(ConfigError(format!(
                "UPCOMMIT_ARCHIVE_STORAGE_CLASS: {why}"
            )));
        }

        let retry_window_raw =
            src.string("UPCOMMIT_EVENT_RETRY_WINDOW", f.event_retry_window, "24h");
        let (file_webhooks, file_queues) =
            f.events.map(|e| (e.webhooks, e.queues)).unwrap_or_default();
        let webhooks = webhooks(&src, file_webhooks)?;
        let events = EventSettings {
            queues: queues(&src, file_queues, &webhooks)?,
            webhooks,
            retry_window_secs: match crate::domain::duration::parse_secs(&retry_window_raw) {
                Some(s) if s >= 1 => s,
                _ => {
                    return Err(ConfigError(format!(
                        "UPCOMMIT_EVENT_RETRY_WINDOW: at least 1s; {}, got {retry_window_raw:?}",
                        crate::domain::duration::EXPECTED
                    )))
                }
            },
            webhook_timeout_secs: in_range(
                "UPCOMMIT_WEBHOOK_TIMEOUT_SECS",
                src.number("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", f.webhook_timeout_secs, 10)?,
                1,
                300,
            )?,
            webhook_concurrency: in_range(
                "UPCOMMIT_WEBHOOK_CONCURRENCY",
                src.number("UPCOMMIT_WEBHOOK_CONCURRENCY", f.webhook_concurrency, 8)?,
                0,
                256,
            )?,
            retry_base_ms: in_range(
                "UPCOMMIT_WEBHOOK_RETRY_BASE_MS",
                src.number(
                    "UPCOMMIT_WEBHOOK_RETRY_BASE_MS",
                    f.webhook_retry_base_ms,
                    5000,
                )?,
                1,
                u64::MAX,
            )?,
            retry_cap_secs: in_range(
                "UPCOMMIT_WEBHOOK_RETRY_CAP_SECS",
                src.number(
                    "UPCOMMIT_WEBHOOK_RETRY_CAP_SECS",
                    f.webhook_retry_cap_secs,
                    3600,
                )?,
                1,
                u64::MAX,
            )?,
        };

        let settings = Self {
            events,
            listen: src.string("UPCOMMIT_LISTEN", f.listen, "127.0.0.1:8080"),
            database: DatabaseSettings {
                url: SecretString::new(database_url),
                max_connections: src
                    .number("UPCOMMIT_DB_MAX_CONNECTIONS", f.db_max_connections, 16)?
                    .max(1),
            },
            s3: S3Settings {
                bucket,
                endpoint,
                region,
                cors_origins,
                accept_gaps,
            },
            jobs: JobSettings {
                sweep_grace_secs: src.number(
                    "UPCOMMIT_SWEEP_GRACE_SECS",
                    f.sweep_grace_secs,
                    86_400,
                )?,
                sweep_skew_tolerance_secs: src.number(
                    "UPCOMMIT_SWEEP_SKEW_TOLERANCE_SECS",
                    f.sweep_skew_tolerance_secs,
                    300,
                )?,
                sweep_interval_secs: src.number(
                    "UPCOMMIT_SWEEP_INTERVAL_SECS",
                    f.sweep_interval_secs,
                    3600,
                )?,
                sweep_concurrency: src
                    .number("UPCOMMIT_SWEEP_CONCURRENCY", f.sweep_concurrency, 4)?
                    .clamp(1, 64),
                lease_secs: src
                    .number("UPCOMMIT_JOB_LEASE_SECS", f.job_lease_secs, 300)?
                    .max(3),
                price_per_gib: parse_prices(&src.list("UPCOMMIT_PRICE_PER_GIB", f.price_per_gib))?,
                unlinked_grace_secs: src.number(
                    "UPCOMMIT_UNLINKED_GRACE_SECS",
                    f.unlinked_grace_secs,
                    30 * 86_400,
                )?,
                archive_after_secs: src.number(
                    "UPCOMMIT_ARCHIVE_AFTER_SECS",
                    f.archive_after_secs,
                    30 * 86_400,
                )?,
                delete_after_secs: src.number(
                    "UPCOMMIT_DELETE_AFTER_SECS",
                    f.delete_after_secs,
                    365 * 86_400,
                )?,
                archive_min_bytes: src.number(
                    "UPCOMMIT_ARCHIVE_MIN_BYTES",
                    f.archive_min_bytes,
                    128 * 1024,
                )?,
                max_copies_per_file: match src.number(
                    "UPCOMMIT_MAX_COPIES_PER_FILE",
                    f.max_copies_per_file,
                    100,
                )? {
                    0 => {
                        return Err(ConfigError(
                            "UPCOMMIT_MAX_COPIES_PER_FILE: must be at least 1".into(),
                        ))
                    }
                    n => n,
                },
                archive_storage_class,
                hygiene_interval_secs: src.number(
                    "UPCOMMIT_HYGIENE_INTERVAL_SECS",
                    f.hygiene_interval_secs,
                    86_400,
                )?,
                upload_retention_secs: retention(&src.string(
                    "UPCOMMIT_UPLOAD_RETENTION",
                    f.upload_retention,
                    "90d",
                ))?,
                reconcile_workers: src
                    .number("UPCOMMIT_RECONCILE_WORKERS", f.reconcile_workers, 1)?
                    .clamp(1, 64),
            },
            demo,
            bucket_check: BucketCheckSettings {
                interval_secs: src.number(
                    "UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS",
                    f.bucket_check_interval_secs,
                    300,
                )?,
                fails_readiness: src.flag(
                    "UPCOMMIT_BUCKET_CHECK_FAILS_READINESS",
                    f.bucket_check_fails_readiness,
                    false,
                )?,
            },
            auth: AuthSettings {
                jwt_secret: SecretString::new(jwt_secret),
                issuers,
            },
            uploads,
            quota: QuotaLimits {
                daily_uploads: src.number(
                    "UPCOMMIT_QUOTA_DAILY_UPLOADS",
                    f.quota_daily_uploads,
                    500,
                )?,
                daily_bytes: src.number(
                    "UPCOMMIT_QUOTA_DAILY_BYTES",
                    f.quota_daily_bytes,
                    5 * GIB,
                )?,
            },
            http: HttpSettings {
                request_timeout_secs: src
                    .number("UPCOMMIT_REQUEST_TIMEOUT_SECS", f.request_timeout_secs, 30)?
                    .max(1),
                body_limit_bytes: src.number(
                    "UPCOMMIT_BODY_LIMIT_BYTES",
                    f.body_limit_bytes,
                    64 * 1024,
                )?,
                header_read_timeout_secs: src
                    .number(
                        "UPCOMMIT_HEADER_READ_TIMEOUT_SECS",
                        f.header_read_timeout_secs,
                        30,
                    )?
                    .max(1),
                max_connections: src
                    .number("UPCOMMIT_MAX_CONNECTIONS", f.max_connections, 4096)?
                    .max(1),
            },
            log_format,
        };
        // A hook that may take longer than the request would make the client's retry race
        // the commit still waiting for its answer.
        let request_ms = settings.http.request_timeout_secs.saturating_mul(1000);
        if let Some(p) = settings.uploads.profiles.iter().find(|p| {
            p.validation_hook
                .as_ref()
                .is_some_and(|h| h.timeout.as_millis() >= u128::from(request_ms))
        }) {
            return Err(ConfigError(format!(
                "profiles.{}: validation_hook: timeout_ms must be below UPCOMMIT_REQUEST_TIMEOUT_SECS ({request_ms} ms)",
                p.name
            )));
        }
        Ok(settings)
    }

    /// What the bucket checks expect of the live bucket: the embedded lifecycle rules, no
    /// expiry over any profile's final prefix or a legacy prefix, CORS for the browser origins.
    pub fn bucket_expectations(&self) -> Expectations {
        let mut final_prefixes: Vec<String> = self
            .uploads
            .profiles
            .iter()
            .map(|p| p.final_prefix.as_str().to_owned())
            .chain(
                self.uploads
                    .legacy_prefixes
                    .iter()
                    .map(|p| p.as_str().to_owned()),
            )
            .collect();
        final_prefixes.sort();
        final_prefixes.dedup();
        let mut temporary_tiers: Vec<(String, u32)> = self
            .uploads
            .profiles
            .iter()
            .filter_map(|p| p.temporary_ttl)
            .map(|ttl| (ttl.prefix(), ttl.days()))
            .collect();
        temporary_tiers.sort();
        temporary_tiers.dedup();
        Expectations {
            required_rules: self.lifecycle_rules_needed(),
            final_prefixes,
            temporary_tiers,
            cors_origins: self.s3.cors_origins.clone(),
            accepted_gaps: std::collections::BTreeSet::new(),
        }
    }

    /// [`Settings::bucket_expectations`] for a store judged `verdict`: the gaps the server
    /// runs without are judged by what the store is.
    pub fn bucket_expectations_for(
        &self,
        verdict: &crate::domain::capabilities::Verdict,
    ) -> Expectations {
        Expectations {
            accepted_gaps: verdict.accepted().into_iter().collect(),
            ..self.bucket_expectations()
        }
    }

    /// The lifecycle rules this deployment needs of its bucket: every rule of the rules file
    /// outside `temp/`, and, for each TTL a temporary profile uses, that tier's rule and the
    /// `temp/` delete-marker cleanup. With no temporary profile, no `temp/` rule is needed.
    pub fn lifecycle_rules_needed(&self) -> Vec<Rule> {
        let mut ttls: Vec<TtlDays> = self
            .uploads
            .profiles
            .iter()
            .filter_map(|p| p.temporary_ttl)
            .collect();
        ttls.sort();
        ttls.dedup();
        let mut rules: Vec<Rule> = required_rules()
            .iter()
            .filter(|r| !is_temporary_key(&r.prefix))
            .cloned()
            .collect();
        if !ttls.is_empty() {
            rules.extend(
                required_rules()
                    .iter()
                    .filter(|r| r.prefix == TEMP_PREFIX)
                    .cloned(),
            );
        }
        rules.extend(ttls.into_iter().map(TtlDays::lifecycle_rule));
        rules
    }

    /// The reserved key space known from the settings alone: the compiled lifecycle rules'
    /// expiring prefixes and the paired layout under every profile's final prefix.
    pub fn reserved_keys(&self) -> crate::domain::reserved::ReservedKeys {
        crate::domain::reserved::ReservedKeys::new(
            [],
            self.uploads.profiles.iter().map(|p| &p.final_prefix),
        )
        .with_rules(required_rules())
    }

    /// The profiles whose files hygiene may unlink, archive and delete: those that track links.
    pub fn hygiene_profiles(&self) -> Vec<String> {
        self.uploads
            .profiles
            .iter()
            // A temporary profile's files are the lifecycle rule's, whatever it tracks.
            .filter(|p| p.tracks_links && p.temporary_ttl.is_none())
            .map(|p| p.name.clone())
            .collect()
    }

    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.uploads.profiles.iter().find(|p| p.name == name)
    }
}

fn parse_prices(items: &[String]) -> Result<Vec<(String, f64)>, ConfigError> {
    if items.is_empty() {
        return Ok([
            ("STANDARD", 0.023),
            ("STANDARD_IA", 0.0125),
            ("GLACIER_IR", 0.004),
            ("GLACIER", 0.0036),
            ("DEEP_ARCHIVE", 0.00099),
        ]
        .iter()
        .map(|(c, p)| ((*c).to_owned(), *p))
        .collect());
    }
    items
        .iter()
        .map(|item| {
            let (class, price) = item.split_once('=').ok_or_else(|| {
                ConfigError(format!(
                    "UPCOMMIT_PRICE_PER_GIB: expected CLASS=price, got {item:?}"
                ))
            })?;
            let price: f64 = price
                .trim()
                .parse()
                .ok()
                .filter(|p: &f64| p.is_finite() && *p >= 0.0)
                .ok_or_else(|| {
                    ConfigError(format!(
                        "UPCOMMIT_PRICE_PER_GIB: {item:?} has no valid price"
                    ))
                })?;
            Ok((class.trim().to_ascii_uppercase(), price))
        })
        .collect()
}

fn validate_multipart(u: &UploadSettings) -> Result<(), ConfigError> {
    use crate::domain::multipart::{MAX_PART_SIZE, MIN_PART_SIZE};
    if !(1..=MAX_PART_SIZE).contains(&u.max_single_copy_bytes) {
        return Err(ConfigError(
            "UPCOMMIT_MAX_SINGLE_COPY_BYTES: must be 1..=5 GiB (S3's CopyObject limit)".into(),
        ));
    }
    if !(MIN_PART_SIZE..=MAX_PART_SIZE).contains(&u.copy_part_size_bytes) {
        return Err(ConfigError(
            "UPCOMMIT_COPY_PART_SIZE_BYTES: must be 5 MiB..=5 GiB (S3's part limits)".into(),
        ));
    }
    if !(1..=32).contains(&u.copy_concurrency) {
        return Err(ConfigError(
            "UPCOMMIT_COPY_CONCURRENCY: must be 1..=32".into(),
        ));
    }
    if !(MIN_PART_SIZE..=MAX_PART_SIZE).contains(&u.multipart_part_size_bytes) {
        return Err(ConfigError(
            "UPCOMMIT_MULTIPART_PART_SIZE_BYTES: must be 5 MiB..=5 GiB (S3's part limits)".into(),
        ));
    }
    // The bucket's abort-incomplete rule (from the embedded rules file) removes parts after
    // this many seconds; a session must end well before.
    let abort_secs = required_rules()
        .iter()
        .filter_map(|r| r.abort_incomplete_multipart_days)
        .min()
        .map_or(u64::MAX, |d| u64::from(d) * 86_400);
    if u.multipart_session_secs == 0
        || u.multipart_session_secs >= abort_secs
        || u.multipart_session_secs > u.commit_window_secs
    {
        return Err(ConfigError(format!(
            "UPCOMMIT_MULTIPART_SESSION_SECS: must be above 0, below the bucket's abort-incomplete rule ({abort_secs} s) and at most the commit window"
        )));
    }
    Ok(())
}

fn parse_profile(p: FileProfile) -> Result<Profile, ConfigError> {
    let at = |what: &str| format!("profiles.{}: {what}", p.name);
    if p.name.is_empty()
        || p.name.len() > 32
        || !p
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        return Err(ConfigError(at("name must be 1-32 of [a-z0-9_-]")));
    }
    let content_types = p
        .content_types
        .iter()
        .map(|t| {
            ContentType::parse(t)
                .map_err(|_| ConfigError(at(&format!("content type {t:?} is malformed"))))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if content_types.is_empty() || p.max_size == 0 {
        return Err(ConfigError(at(
            "needs content_types and a max_size above 0",
        )));
    }
    let final_prefix = FinalPrefix::parse(&p.final_prefix).map_err(|e| {
        ConfigError(at(&format!(
            "final_prefix {:?}: {e:?} (must end with / and not be under tmp/ or another prefix a lifecycle rule expires)",
            p.final_prefix
        )))
    })?;
    let temporary_ttl = p
        .temporary_ttl
        .as_deref()
        .map(|raw| temporary_ttl(raw, required_rules()).map_err(|e| ConfigError(at(&e))))
        .transpose()?;
    let validation_hook = p
        .validation_hook
        .map(|h| validation_hook(h).map_err(|e| ConfigError(at(&format!("validation_hook: {e}")))))
        .transpose()?;
    Ok(Profile {
        name: p.name,
        content_types,
        max_size: p.max_size,
        final_prefix,
        tracks_links: p.tracks_links,
        require_checksum: p.require_checksum,
        temporary_ttl,
        validation_hook,
    })
}

/// A profile's `validation_hook`: an http(s) URL, a timeout of 1..=60000 ms (default 2000),
/// `on_error` `reject` (default) or `allow`, and an optional `whsec_` secret.
fn validation_hook(h: FileValidationHook) -> Result<ValidationHook, String> {
    let url = h.url.trim().to_owned();
    let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
    if !scheme_ok
        || url
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(format!("url: expected an http(s) URL, got {:?}", h.url));
    }
    // Parsed as the request will be, so that a URL no request can reach (a port past 65535,
    // an unclosed `[`) stops the start instead of failing every commit (open or closed).
    crate::domain::webhooks::check_reachable(&url).map_err(|e| format!("url: {e}"))?;
    let timeout_ms = h.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if !(1..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
        return Err(format!(
            "timeout_ms: must be 1..={MAX_TIMEOUT_MS}, got {timeout_ms}"
        ));
    }
    let on_error = match h.on_error.as_deref() {
        None => OnError::Reject,
        Some(raw) => OnError::parse(raw).ok_or_else(|| {
            format!(
                "on_error: expected \"reject\" (fail closed) or \"allow\" (fail open), got {raw:?}"
            )
        })?,
    };
    let secret = h
        .secret
        .as_deref()
        .map(|raw| {
            HookSecret::parse(raw).map_err(|_| {
                "secret: expected whsec_ followed by the base64 of 24 to 64 random bytes".to_owned()
            })
        })
        .transpose()?;
    Ok(ValidationHook {
        url,
        timeout: std::time::Duration::from_millis(timeout_ms),
        on_error,
        secret,
    })
}

/// A profile's `temporary_ttl`: whole days, and a tier the rules file (so terraform, the one
/// owner of the bucket's lifecycle) expires. A TTL without its rule would leave files for ever
/// while the API calls them expired, so it fails at start instead.
fn temporary_ttl(raw: &str, rules: &[Rule]) -> Result<TtlDays, String> {
    let ttl = TtlDays::parse(raw).map_err(|e| format!("temporary_ttl {raw:?} {e}"))?;
    if !missing_required(rules, &[ttl.lifecycle_rule()]).is_empty() {
        let tiers: Vec<String> = rules
            .iter()
            .filter_map(|r| {
                let days = r.prefix.strip_prefix(TEMP_PREFIX)?.strip_suffix("d/")?;
                Some(format!("{days}d"))
            })
            .collect();
        return Err(format!(
            "temporary_ttl {ttl}: infra/lifecycle-rules.json has no rule expiring {} within {} day(s) (with noncurrent versions after 1); use a tier it has ({}) or add the rule there first",
            ttl.prefix(),
            ttl.days(),
            tiers.join(", ")
        ));
    }
    Ok(ttl)
}

fn valid_bucket_name(b: &str) -> bool {
    (3..=63).contains(&b.len())
        && b.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
        && !b.starts_with(['-', '.'])
        && !b.ends_with(['-', '.'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_apply_when_only_the_secret_is_set() {
        let s = Settings::from_map(&env(&[("UPCOMMIT_JWT_SECRET", "0123456789abcdef")]))
            .expect("loads");
        assert_eq!(s.listen, "127.0.0.1:8080");
        assert_eq!(s.database.url.expose(), "sqlite://data/upcommit.db");
        assert_eq!(s.uploads.presign_expiry_secs, 900);
        assert_eq!(s.uploads.profiles.len(), 2);
        assert!(s.quota.daily_uploads > 0 && s.quota.daily_bytes > 0);
        assert!(s.s3.endpoint.is_none());
    }

    #[test]
    fn bad_values_name_their_setting() {
        let cases = [
            (vec![], "UPCOMMIT_JWT_SECRET"),
            (
                vec![("UPCOMMIT_QUOTA_DAILY_BYTES", "lots")],
                "UPCOMMIT_QUOTA_DAILY_BYTES",
            ),
            (vec![("DATABASE_URL", "mysql://x")], "DATABASE_URL"),
            (vec![("UPCOMMIT_BUCKET", "Bad_Bucket")], "UPCOMMIT_BUCKET"),
            (
                vec![("UPCOMMIT_S3_ENDPOINT", "localhost:4566")],
                "UPCOMMIT_S3_ENDPOINT",
            ),
            (
                vec![("UPCOMMIT_LEGACY_PREFIXES", "tmp/")],
                "UPCOMMIT_LEGACY_PREFIXES",
            ),
            (
                vec![("UPCOMMIT_COMMIT_WINDOW_SECS", "10")],
                "UPCOMMIT_COMMIT_WINDOW_SECS",
            ),
            (vec![("UPCOMMIT_LOG_FORMAT", "xml")], "UPCOMMIT_LOG_FORMAT"),
            (
                vec![("UPCOMMIT_CORS_ORIGINS", "app.example.com")],
                "UPCOMMIT_CORS_ORIGINS",
            ),
            (
                vec![("UPCOMMIT_BUCKET_CHECK_FAILS_READINESS", "sometimes")],
                "UPCOMMIT_BUCKET_CHECK_FAILS_READINESS",
            ),
            (
                vec![("UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS", "-1")],
                "UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS",
            ),
            (
                vec![("UPCOMMIT_MULTIPART_SESSION_SECS", "86400")],
                "UPCOMMIT_MULTIPART_SESSION_SECS",
            ),
            (
                vec![("UPCOMMIT_MULTIPART_PART_SIZE_BYTES", "1048576")],
                "UPCOMMIT_MULTIPART_PART_SIZE_BYTES",
            ),
            (
                vec![("UPCOMMIT_COPY_PART_SIZE_BYTES", "1")],
                "UPCOMMIT_COPY_PART_SIZE_BYTES",
            ),
            (
                vec![("UPCOMMIT_MAX_SINGLE_COPY_BYTES", "6000000000")],
                "UPCOMMIT_MAX_SINGLE_COPY_BYTES",
            ),
            (
                vec![("UPCOMMIT_COPY_CONCURRENCY", "0")],
                "UPCOMMIT_COPY_CONCURRENCY",
            ),
        ];
        for (extra, name) in cases {
            let mut vars = env(&extra);
            if name != "UPCOMMIT_JWT_SECRET" {
                vars.insert("UPCOMMIT_JWT_SECRET".into(), "0123456789abcdef".into());
            }
            let err = Settings::from_map(&vars).expect_err(name).0;
            assert!(err.starts_with(name), "{err}");
        }
    }

    #[test]
    fn file_profiles_replace_the_builtins_and_env_wins_over_file() {
        let file = r#"
            listen = "0.0.0.0:9000"
            jwt_secret = "file-secret-0123456789"
            [[profiles]]
            name = "doc"
            content_types = ["application/pdf"]
            max_size = 1000
            final_prefix = "docs/"
        "#;
        let vars = env(&[("UPCOMMIT_LISTEN", "127.0.0.1:1")]);
        let s = Settings::from_sources(Some(file), &|k| vars.get(k).cloned()).expect("loads");
        assert_eq!(s.listen, "127.0.0.1:1");
        assert_eq!(s.auth.jwt_secret.expose(), "file-secret-0123456789");
        assert_eq!(s.uploads.profiles.len(), 1);
        assert!(s.profile("doc").is_some() && s.profile("image").is_none());

        let bad = file.replace("docs/", "TMP/docs/");
        let err = Settings::from_sources(Some(&bad), &|_| None)
            .expect_err("reserved prefix")
            .0;
        assert!(err.contains("profiles.doc"), "{err}");
    }

    #[test]
    fn a_temporary_profile_needs_whole_days_and_a_tier_of_the_rules_file() {
        let file = |ttl: &str| {
            format!(
                r#"
                jwt_secret = "file-secret-0123456789"
                [[profiles]]
                name = "export"
                content_types = ["text/csv"]
                max_size = 1000
                final_prefix = "exports/"
                tracks_links = true
                temporary_ttl = "{ttl}"
                "#
            )
        };
        let s = Settings::from_sources(Some(&file("7d")), &|_| None).expect("7d loads");
        let p = s.profile("export").expect("export");
        assert_eq!(p.temporary_ttl.map(TtlDays::days), Some(7));
        assert!(
            s.hygiene_profiles().is_empty(),
            "a temporary profile is never hygiene's, even when it tracks links"
        );
        for (ttl, says) in [
            ("36h", "whole number of days"),
            ("0d", "whole number of days"),
            ("later", "not a duration"),
            ("14d", "temp/14d/"),
        ] {
            let err = Settings::from_sources(Some(&file(ttl)), &|_| None)
                .expect_err(ttl)
                .0;
            assert!(
                err.starts_with("profiles.export: temporary_ttl") && err.contains(says),
                "{ttl}: {err}"
            );
        }
        let err = Settings::from_sources(Some(&file("14d")), &|_| None)
            .expect_err("14d")
            .0;
        assert!(err.contains("1d, 7d, 30d"), "names the tiers: {err}");
    }

    #[test]
    fn a_validation_hook_is_an_http_url_with_a_bounded_timeout_and_a_known_policy() {
        let file = |hook: &str| {
            format!(
                r#"
                jwt_secret = "file-secret-0123456789"
                [[profiles]]
                name = "scan"
                content_types = ["image/png"]
                max_size = 1000
                final_prefix = "scanned/"
                validation_hook = {hook}
                "#
            )
        };
        let s = Settings::from_sources(
            Some(&file(r#"{ url = "http://scanner:9000/check" }"#)),
            &|_| None,
        )
        .expect("defaults load");
        let h = s
            .profile("scan")
            .and_then(|p| p.validation_hook.clone())
            .expect("hook");
        assert_eq!(h.url, "http://scanner:9000/check");
        assert_eq!(h.timeout, std::time::Duration::from_millis(2000));
        assert_eq!(h.on_error, OnError::Reject);
        assert!(h.secret.is_none());
        let s = Settings::from_sources(
            Some(&file(
                r#"{ url = "https://mod.example/v", timeout_ms = 500, on_error = "allow", secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }"#,
            )),
            &|_| None,
        )
        .expect("full table loads");
        let h = s
            .profile("scan")
            .and_then(|p| p.validation_hook.clone())
            .expect("hook");
        assert_eq!((h.timeout.as_millis(), h.on_error), (500, OnError::Allow));
        assert!(h.secret.is_some());
        assert!(
            !format!("{s:?}").contains("MfKQ9r8G"),
            "the secret never shows"
        );
        assert!(s
            .profile("image")
            .is_none_or(|p| p.validation_hook.is_none()));

        for (hook, says) in [
            (r#"{ url = "ftp://x/" }"#, "url"),
            (r#"{ url = "scanner:9000" }"#, "url"),
            // Review 26: a URL no request can reach stops the start (it used to pass a prefix
            // check and fail every commit, open or closed).
            (r#"{ url = "http://127.0.0.1:99999/check" }"#, "url"),
            (r#"{ url = "http://[::1/check" }"#, "url"),
            (r#"{ url = "http://%zz/" }"#, "url"),
            (r#"{ url = "http://:0/" }"#, "url"),
            (r#"{ url = "http://x/", timeout_ms = 0 }"#, "timeout_ms"),
            (r#"{ url = "http://x/", timeout_ms = 60001 }"#, "timeout_ms"),
            (
                r#"{ url = "http://x/", timeout_ms = 30000 }"#,
                "UPCOMMIT_REQUEST_TIMEOUT_SECS",
            ),
            (r#"{ url = "http://x/", on_error = "ignore" }"#, "on_error"),
            (r#"{ url = "http://x/", secret = "hunter2" }"#, "secret"),
            (
                r#"{ url = "http://x/", secret = "whsec_c2hvcnQ=" }"#,
                "secret",
            ),
        ] {
            let err = Settings::from_sources(Some(&file(hook)), &|_| None)
                .expect_err(hook)
                .0;
            assert!(
                err.starts_with("profiles.scan: validation_hook") && err.contains(says),
                "{hook}: {err}"
            );
        }
        let err = Settings::from_sources(
            Some(&file(r#"{ url = "http://x/", retries = 3 }"#)),
            &|_| None,
        )
        .expect_err("unknown key")
        .0;
        assert!(err.contains("retries"), "{err}");
    }

    #[test]
    fn the_bucket_needs_a_temp_rule_only_for_the_ttls_in_use() {
        let secret = ("UPCOMMIT_JWT_SECRET", "0123456789abcdef");
        let plain = Settings::from_map(&env(&[secret])).expect("loads");
        let needed = plain.lifecycle_rules_needed();
        assert!(needed.iter().all(|r| !r.prefix.starts_with(TEMP_PREFIX)));
        assert!(needed.iter().any(|r| r.prefix == "tmp/"));
        assert_eq!(plain.bucket_expectations().required_rules, needed);

        let file = r#"
            [[profiles]]
            name = "preview"
            content_types = ["image/png"]
            max_size = 1000
            final_prefix = "previews/"
            temporary_ttl = "1d"
            [[profiles]]
            name = "export"
            content_types = ["text/csv"]
            max_size = 1000
            final_prefix = "exports/"
            temporary_ttl = "168h"
        "#;
        let vars = env(&[secret]);
        let s = Settings::from_sources(Some(file), &|k| vars.get(k).cloned()).expect("loads");
        let temp: Vec<String> = s
            .lifecycle_rules_needed()
            .into_iter()
            .filter(|r| r.prefix.starts_with(TEMP_PREFIX))
            .map(|r| r.prefix)
            .collect();
        assert_eq!(temp, vec!["temp/", "temp/1d/", "temp/7d/"]);
        assert!(crate::domain::lifecycle::missing_required(
            required_rules(),
            &s.lifecycle_rules_needed()
        )
        .is_empty());
    }

    #[test]
    fn an_archive_class_that_is_not_instantly_readable_is_refused() {
        let secret = ("UPCOMMIT_JWT_SECRET", "0123456789abcdef");
        for class in ["glacier_ir", "STANDARD_IA"] {
            let s = Settings::from_map(&env(&[secret, ("UPCOMMIT_ARCHIVE_STORAGE_CLASS", class)]))
                .expect(class);
            assert_eq!(s.jobs.archive_storage_class, class.to_ascii_uppercase());
        }
        for class in ["GLACIER", "deep_archive", "GLACIER-IR"] {
            let err =
                Settings::from_map(&env(&[secret, ("UPCOMMIT_ARCHIVE_STORAGE_CLASS", class)]))
                    .expect_err(class)
                    .0;
            assert!(err.starts_with("UPCOMMIT_ARCHIVE_STORAGE_CLASS: "), "{err}");
            assert!(err.contains("GLACIER_IR"), "{err}");
        }
    }

    #[test]
    fn hygiene_acts_on_no_profile_unless_one_tracks_links() {
        let secret = ("UPCOMMIT_JWT_SECRET", "0123456789abcdef");
        let s = Settings::from_map(&env(&[secret])).expect("loads");
        assert!(s.hygiene_profiles().is_empty(), "off by default");
        let s =
            Settings::from_map(&env(&[secret, ("UPCOMMIT_TRACKS_LINKS", "image")])).expect("loads");
        assert_eq!(s.hygiene_profiles(), vec!["image"]);
        let err = Settings::from_map(&env(&[secret, ("UPCOMMIT_TRACKS_LINKS", "imgae")]))
            .expect_err("unknown profile")
            .0;
        assert!(err.contains("imgae"), "{err}");
        let file = r#"
            jwt_secret = "file-secret-0123456789"
            [[profiles]]
            name = "doc"
            content_types = ["application/pdf"]
            max_size = 1000
            final_prefix = "docs/"
            tracks_links = true
            [[profiles]]
            name = "raw"
            content_types = ["application/pdf"]
            max_size = 1000
            final_prefix = "raw/"
        "#;
        let s = Settings::from_sources(Some(file), &|_| None).expect("loads");
        assert_eq!(s.hygiene_profiles(), vec!["doc"]);
        let none = |k: &str| (k == "UPCOMMIT_TRACKS_LINKS").then(String::new);
        let s = Settings::from_sources(Some(file), &none).expect("loads");
        assert!(
            s.hygiene_profiles().is_empty(),
            "the environment's list wins"
        );
    }

    #[test]
    fn bucket_expectations_cover_every_final_and_legacy_prefix() {
        let s = Settings::from_map(&env(&[
            ("UPCOMMIT_JWT_SECRET", "0123456789abcdef"),
            ("UPCOMMIT_LEGACY_PREFIXES", "uploads/, media/images/"),
            (
                "UPCOMMIT_CORS_ORIGINS",
                "https://a.example.com,https://b.example.com",
            ),
            ("UPCOMMIT_BUCKET_CHECK_FAILS_READINESS", "true"),
        ]))
        .expect("loads");
        let want = s.bucket_expectations();
        assert_eq!(
            want.final_prefixes,
            vec!["media/images/", "media/recordings/", "uploads/"]
        );
        assert_eq!(want.cors_origins.len(), 2);
        // Every rule of the rules file but the temporary profiles' tiers (none is configured).
        let file_rules: Vec<Rule> = required_rules()
            .iter()
            .filter(|r| !r.prefix.starts_with(TEMP_PREFIX))
            .cloned()
            .collect();
        assert_eq!(want.required_rules, file_rules);
        assert!(s.bucket_check.fails_readiness);
        assert_eq!(s.bucket_check.interval_secs, 300);
    }

    #[test]
    fn operator_tools_load_without_a_secret_but_never_with_a_short_one() {
        assert!(Settings::parse(None, &|_| None, false).is_ok());
        assert!(Settings::parse(None, &|_| None, true).is_err());
        let short = |k: &str| (k == "UPCOMMIT_JWT_SECRET").then(|| "short".to_owned());
        assert!(Settings::parse(None, &short, false).is_err());
    }

    /// docs/configuration.md lists exactly the environment variables and TOML keys this module
    /// reads.
    #[test]
    fn the_configuration_doc_lists_every_setting() {
        let doc = include_str!("../docs/configuration.md");
        let source = include_str!("config.rs");
        // The settings code, not this test module.
        let code = &source[..source.find("#[cfg(test)]").unwrap_or(source.len())];
        let names = |text: &str, quote: char| -> std::collections::BTreeSet<String> {
            text.split(quote)
                .filter(|w| {
                    (w.starts_with("UPCOMMIT_") || w.starts_with("AWS_") || *w == "DATABASE_URL")
                        && w.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
                })
                .map(str::to_owned)
                .collect()
        };
        let mut in_code = names(code, '"');
        in_code.retain(|n| n != "UPCOMMIT_");
        let in_doc = names(doc, '`');
        let test_only: std::collections::BTreeSet<String> = [
            "UPCOMMIT_CRASH_AT".to_owned(),
            "UPCOMMIT_PAUSE_AT".to_owned(),
        ]
        .into_iter()
        .collect();
        let missing: Vec<_> = in_code.difference(&in_doc).collect();
        let stale: Vec<_> = in_doc
            .difference(&in_code)
            .filter(|n| !test_only.contains(*n))
            .collect();
        assert!(
            missing.is_empty(),
            "not in docs/configuration.md: {missing:?}"
        );
        assert!(stale.is_empty(), "documented but not read: {stale:?}");
        let struct_start = code.find("struct FileSettings {").expect("FileSettings");
        let struct_end = code[struct_start..].find("\n}").expect("end") + struct_start;
        for line in code[struct_start..struct_end].lines().skip(1) {
            let key = line.trim().split(':').next().unwrap_or("").trim();
            if !key.is_empty() && !key.starts_with("//") {
                assert!(
                    doc.contains(&format!("`{key}`")),
                    "TOML key {key} not documented"
                );
            }
        }
    }

    #[test]
    fn webhook_delivery_numbers_out_of_range_stop_the_start() {
        for (name, value) in [
            ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "0"),
            ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "301"),
            ("UPCOMMIT_WEBHOOK_CONCURRENCY", "257"),
            ("UPCOMMIT_WEBHOOK_RETRY_BASE_MS", "0"),
            ("UPCOMMIT_WEBHOOK_RETRY_CAP_SECS", "0"),
        ] {
            let vars = env(&[("UPCOMMIT_JWT_SECRET", "0123456789abcdef"), (name, value)]);
            let err = Settings::from_sources(None, &|k| vars.get(k).cloned())
                .expect_err("refused, not clamped");
            assert!(err.to_string().contains(name), "{name}={value}: {err}");
        }
        let vars = env(&[
            ("UPCOMMIT_JWT_SECRET", "0123456789abcdef"),
            ("UPCOMMIT_WEBHOOK_CONCURRENCY", "0"),
            ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "300"),
        ]);
        let s = Settings::from_sources(None, &|k| vars.get(k).cloned()).expect("in range");
        assert_eq!(s.events.webhook_concurrency, 0);
        assert_eq!(s.events.webhook_timeout_secs, 300);
    }

    #[test]
    fn webhooks_are_refused_at_start_unless_every_field_is_sound() {
        let good = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let file = |id: &str, url: &str, secret: &str, types: &str| {
            format!(
                "[[events.webhooks]]\nid = {id:?}\nurl = {url:?}\nsecret = {secret:?}\ntypes = {types}\n"
            )
        };
        let load = |text: &str| {
            let vars = env(&[("UPCOMMIT_JWT_SECRET", "0123456789abcdef")]);
            Settings::from_sources(Some(text), &|k| vars.get(k).cloned()).map(|s| s.events)
        };
        let ok = load(&file(
            "app",
            "https://app.example/hooks",
            good,
            r#"["file.committed", "file.deleted"]"#,
        ))
        .expect("sound");
        assert_eq!(ok.webhooks.len(), 1);
        assert_eq!(ok.webhooks[0].types.len(), 2);
        assert_eq!(ok.retry_window_secs, 86_400);
        assert_eq!(ok.webhook_timeout_secs, 10);
        let all = load(&file("app", "http://127.0.0.1:9/x", good, r#"["*"]"#)).expect("all");
        assert_eq!(
            all.webhooks[0].types.len(),
            crate::domain::events::EventType::ALL.len()
        );
        for (text, what) in [
            (file("app", "ftp://app.example/", good, r#"["*"]"#), "url"),
            (file("app", "https:///x", good, r#"["*"]"#), "url"),
            (
                file(
                    "app",
                    "https://a.example/",
                    "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                    r#"["*"]"#,
                ),
                "secret",
            ),
            (
                file("app", "https://a.example/", "whsec_c2hvcnQ=", r#"["*"]"#),
                "secret",
            ),
            (
                file("app", "https://a.example/", "whsec_%%%", r#"["*"]"#),
                "secret",
            ),
            (
                file("app", "https://a.example/", good, r#"["file.nope"]"#),
                "types",
            ),
            (file("app", "https://a.example/", good, "[]"), "types"),
            (file("App!", "https://a.example/", good, r#"["*"]"#), "id"),
            (
                format!(
                    "{}{}",
                    file("app", "https://a.example/", good, r#"["*"]"#),
                    file("app", "https://b.example/", good, r#"["*"]"#)
                ),
                "twice",
            ),
        ] {
            let err = load(&text).expect_err(what).0;
            assert!(err.contains(what), "{what}: {err}");
            assert!(
                !err.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
                "no secret in {err}"
            );
        }
        // The environment's one endpoint replaces the file's.
        let vars = env(&[
            ("UPCOMMIT_JWT_SECRET", "0123456789abcdef"),
            ("UPCOMMIT_WEBHOOK_URL", "http://127.0.0.1:1/hook"),
            ("UPCOMMIT_WEBHOOK_SECRET", good),
            ("UPCOMMIT_WEBHOOK_TYPES", "file.committed, upload.rejected"),
            ("UPCOMMIT_EVENT_RETRY_WINDOW", "90s"),
        ]);
        let from_env = Settings::from_sources(
            Some(&file("app", "https://a.example/", good, r#"["*"]"#)),
            &|k| vars.get(k).cloned(),
        )
        .expect("env")
        .events;
        assert_eq!(from_env.webhooks.len(), 1);
        assert_eq!(from_env.webhooks[0].id, "default");
        assert_eq!(from_env.webhooks[0].types.len(), 2);
        assert_eq!(from_env.retry_window_secs, 90);
        assert!(format!("{:?}", from_env.webhooks[0]).contains("[redacted]"));
    }

    #[test]
    fn upload_retention_is_a_duration_of_at_least_a_day() {
        let at = |v: &str| {
            Settings::from_map(&env(&[
                ("UPCOMMIT_JWT_SECRET", "0123456789abcdef"),
                ("UPCOMMIT_UPLOAD_RETENTION", v),
            ]))
            .map(|s| s.jobs.upload_retention_secs)
        };
        assert_eq!(
            Settings::from_map(&env(&[("UPCOMMIT_JWT_SECRET", "0123456789abcdef")]))
                .expect("defaults")
                .jobs
                .upload_retention_secs,
            90 * 86_400
        );
        assert_eq!(at("2d").expect("2d"), 2 * 86_400);
        assert_eq!(at("86400").expect("seconds"), 86_400);
        assert!(at("23h").is_err(), "below a day");
        assert!(at("soon").is_err());
    }

    #[test]
    fn an_identity_provider_needs_its_issuer_and_audience_and_makes_the_secret_optional() {
        let provider = [
            (
                "UPCOMMIT_JWKS_URL",
                "https://idp.example/.well-known/jwks.json",
            ),
            ("UPCOMMIT_JWT_ISSUER", "https://idp.example/"),
            ("UPCOMMIT_JWT_AUDIENCE", "upcommit"),
        ];
        let s = Settings::from_map(&env(&provider)).expect("no secret needed with a provider");
        assert_eq!(s.auth.jwt_secret.expose(), "");
        assert_eq!(s.auth.issuers.len(), 1);
        let p = s.auth.issuers[0].clone();
        assert_eq!(p.user_claim, "sub");
        assert_eq!(
            p.user_prefix, "",
            "the single provider's user ids are the claim's value"
        );
        assert_eq!(p.admin, None);
        assert_eq!(
            (
                p.leeway_secs,
                p.refresh_secs,
                p.max_age_secs,
                p.min_refetch_secs
            ),
            (30, 300, 3600, 30)
        );
        assert!(
            Settings::from_map(&env(&[])).is_err(),
            "neither secret nor provider"
        );
        let without = |skip: &str| {
            let pairs: Vec<_> = provider
                .iter()
                .copied()
                .filter(|(k, _)| *k != skip)
                .collect();
            Settings::from_map(&env(&pairs)).map(|_| ())
        };
        assert!(without("UPCOMMIT_JWT_ISSUER").is_err());
        assert!(without("UPCOMMIT_JWT_AUDIENCE").is_err());
        assert!(
            without("UPCOMMIT_JWKS_URL").is_err(),
            "an issuer without a JWKS URL is a mistake, not a no-op"
        );
        let with = |extra: &[(&str, &str)]| {
            let mut pairs = provider.to_vec();
            pairs.extend_from_slice(extra);
            Settings::from_map(&env(&pairs))
        };
        assert!(
            with(&[("UPCOMMIT_JWT_ADMIN_CLAIM", "roles")]).is_err(),
            "claim without value"
        );
        let admin = with(&[
            ("UPCOMMIT_JWT_ADMIN_CLAIM", "roles"),
            ("UPCOMMIT_JWT_ADMIN_VALUE", "upcommit-admin"),
        ])
        .expect("admin rule");
        assert_eq!(
            admin.auth.issuers.first().and_then(|p| p.admin.clone()),
            Some(("roles".to_owned(), "upcommit-admin".to_owned()))
        );
        assert!(with(&[("UPCOMMIT_JWKS_URL", "file:///etc/jwks.json")]).is_err());
        // Review 26b: URLs no fetch can reach stop the start (they passed a prefix check).
        for unreachable in [
            "http://127.0.0.1:99999/jwks",
            "http://[::1/jwks",
            "http://:0/jwks",
        ] {
            let err = with(&[("UPCOMMIT_JWKS_URL", unreachable)]).expect_err(unreachable);
            assert!(err.to_string().contains("UPCOMMIT_JWKS_URL"), "{err}");
        }
        assert!(with(&[("UPCOMMIT_JWT_LEEWAY_SECS", "3600")]).is_err());
        assert!(
            with(&[("UPCOMMIT_JWKS_MAX_AGE_SECS", "10")]).is_err(),
            "below the refresh"
        );
        assert!(with(&[("UPCOMMIT_JWT_SECRET", "short")]).is_err());
        assert!(
            with(&[
                ("UPCOMMIT_DEMO", "true"),
                ("UPCOMMIT_DEMO_MINT_TOKENS", "true")
            ])
            .is_err(),
            "minting HS256 tokens needs the secret"
        );
    }

    const TWO_ISSUERS: &str = r#"
        [[issuers]]
        issuer = "https://a.example/"
        jwks_url = "https://a.example/jwks.json"
        audience = "api-a"
        admin_claim = "roles"
        admin_value = "upcommit-admin"

        [[issuers]]
        issuer = "https://b.example/"
        jwks_url = "https://b.example/jwks.json"
        audience = "api-b"
        user_claim = "email"
        user_prefix = "b:"
    "#;

    #[test]
    fn several_issuers_come_from_the_file_with_their_own_rules() {
        let none = |_: &str| None;
        let s = Settings::from_sources(Some(TWO_ISSUERS), &none).expect("two issuers");
        let list = &s.auth.issuers;
        assert_eq!(list.len(), 2);
        assert_eq!(
            (list[0].issuer.as_str(), list[0].user_claim.as_str()),
            ("https://a.example/", "sub")
        );
        assert_eq!(list[0].user_prefix, "");
        assert_eq!(
            list[0].admin,
            Some(("roles".to_owned(), "upcommit-admin".to_owned()))
        );
        assert_eq!(
            (
                list[1].audience.as_str(),
                list[1].user_claim.as_str(),
                list[1].user_prefix.as_str()
            ),
            ("api-b", "email", "b:")
        );
        assert_eq!(list[1].admin, None, "admin is per issuer");
        // The shared timings apply to each.
        let env_refresh = |k: &str| (k == "UPCOMMIT_JWKS_REFRESH_SECS").then(|| "60".to_owned());
        let s = Settings::from_sources(Some(TWO_ISSUERS), &env_refresh).expect("loads");
        assert!(s.auth.issuers.iter().all(|p| p.refresh_secs == 60));
        assert!(s.auth.jwt_secret.expose().is_empty(), "no secret needed");
    }

    #[test]
    fn issuers_that_could_share_a_user_id_or_an_iss_are_refused() {
        let none = |_: &str| None;
        let load = |text: &str| Settings::from_sources(Some(text), &none).map(|_| ());
        let err = |text: &str| load(text).expect_err("refused").0;
        let table = |iss: &str, prefix: Option<&str>| {
            format!(
                "[[issuers]]\nissuer = \"{iss}\"\njwks_url = \"https://x.example/jwks\"\naudience = \"api\"\n{}\n",
                prefix.map(|p| format!("user_prefix = \"{p}\"")).unwrap_or_default()
            )
        };
        let two = |a: Option<&str>, b: Option<&str>| {
            format!("{}{}", table("https://a/", a), table("https://b/", b))
        };
        assert!(err(&two(None, None)).contains("could give the same user id"));
        assert!(err(&two(Some("x:"), Some("x:"))).contains("could give the same user id"));
        assert!(
            err(&two(Some("a"), Some("ab:"))).contains("could give the same user id"),
            "\"a\" + \"b:u\" = \"ab:\" + \"u\""
        );
        assert!(
            load(&two(None, Some("b:"))).is_ok(),
            "one issuer may keep bare ids"
        );
        assert!(load(&two(Some("a:"), Some("b:"))).is_ok());
        let three = format!("{}{}", two(None, Some("b:")), table("https://c/", None));
        assert!(err(&three).contains("could give the same user id"));
        let dup = format!(
            "{}{}",
            table("https://a/", Some("a:")),
            table("https://a/", Some("b:"))
        );
        assert!(err(&dup).contains("listed twice"));
        assert!(err(&table("https://a/", Some("bad\\u0001"))).contains("user_prefix"));
        assert!(err(&table("https://a/", Some(&"p".repeat(33)))).contains("user_prefix"));
        assert!(err("issuers = []").contains("empty list"));
        let unreachable = table("https://a/", None)
            .replace("https://x.example/jwks", "http://127.0.0.1:99999/jwks");
        assert!(
            err(&unreachable).contains("jwks_url: not a URL a request can go to"),
            "{}",
            err(&unreachable)
        );
        assert!(
            err(&table("", None)).contains("issuer: required"),
            "an issuer with no iss"
        );
        assert!(
            err(&table("https://a/", None).replace("https://x.example/jwks", "file:///j"))
                .contains("jwks_url")
        );
        assert!(err(&format!(
            "{}admin_claim = \"roles\"\n",
            table("https://a/", None)
        ))
        .contains("set both or neither"));
        assert!(
            load(&format!("{}surprise = 1\n", table("https://a/", None))).is_err(),
            "unknown keys in a table are refused"
        );
        // Never both the single provider's settings and [[issuers]]: no silent merge.
        let jwks = |k: &str| {
            match k {
                "UPCOMMIT_JWKS_URL" => Some("https://idp.example/jwks.json"),
                "UPCOMMIT_JWT_ISSUER" => Some("https://idp.example/"),
                "UPCOMMIT_JWT_AUDIENCE" => Some("api"),
                _ => None,
            }
            .map(str::to_owned)
        };
        let both = Settings::from_sources(Some(TWO_ISSUERS), &jwks).expect_err("both");
        assert!(both.0.contains("both set"), "{both}");
        let user_claim = |k: &str| (k == "UPCOMMIT_JWT_USER_CLAIM").then(|| "email".to_owned());
        assert!(Settings::from_sources(Some(TWO_ISSUERS), &user_claim).is_err());
    }

    #[test]
    fn secrets_are_redacted_in_debug() {
        let s = Settings::from_map(&env(&[("UPCOMMIT_JWT_SECRET", "super-secret-value-1")]))
            .expect("loads");
        assert!(!format!("{s:?}").contains("super-secret-value-1"));
    }
}
