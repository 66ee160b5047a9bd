//! The settings file's shape, whole: every table and key the TOML may hold, with `serde`
//! refusing any other. One place because `deny_unknown_fields` does not reach through
//! `#[serde(flatten)]`, so the top-level keys cannot be split among the concerns; each
//! concern's loader reads its own keys and tables from here (`events.rs` the `[events]`
//! tables, `identity.rs` the `[[issuers]]`, `profiles.rs` the `[[profiles]]`), and this file
//! imports none of them.

use serde::Deserialize;

/// `[events]`: the endpoints.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileEvents {
    #[serde(default)]
    pub(super) webhooks: Vec<FileWebhook>,
    #[serde(default)]
    pub(super) queues: Vec<FileQueue>,
}

/// `[[events.queues]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileQueue {
    pub(super) id: String,
    pub(super) queue_url: String,
    pub(super) types: Vec<String>,
}

/// `[[events.webhooks]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileWebhook {
    pub(super) id: String,
    pub(super) url: String,
    pub(super) secret: String,
    pub(super) types: Vec<String>,
}

/// One `[[issuers]]` table: an identity provider beside others.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileIssuer {
    pub(super) issuer: String,
    pub(super) jwks_url: String,
    pub(super) audience: String,
    #[serde(default)]
    pub(super) user_claim: Option<String>,
    #[serde(default)]
    pub(super) admin_claim: Option<String>,
    #[serde(default)]
    pub(super) admin_value: Option<String>,
    #[serde(default)]
    pub(super) user_prefix: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileProfile {
    pub(super) name: String,
    pub(super) content_types: Vec<String>,
    pub(super) max_size: u64,
    pub(super) final_prefix: String,
    #[serde(default)]
    pub(super) tracks_links: bool,
    #[serde(default)]
    pub(super) require_checksum: bool,
    /// `"7d"`: the profile is temporary (see `domain::temporary`).
    #[serde(default)]
    pub(super) temporary_ttl: Option<String>,
    /// `{ url, timeout_ms, on_error, secret }` (see `domain::validation_hook`).
    #[serde(default)]
    pub(super) validation_hook: Option<FileValidationHook>,
    /// Bounds on an image's size (see `domain::image::ImageBounds`).
    #[serde(default)]
    pub(super) max_pixels: Option<u64>,
    #[serde(default)]
    pub(super) min_width: Option<u32>,
    #[serde(default)]
    pub(super) max_width: Option<u32>,
    #[serde(default)]
    pub(super) min_height: Option<u32>,
    #[serde(default)]
    pub(super) max_height: Option<u32>,
    /// `[[profiles.variants]]`: named renditions (see `domain::variants::Variant`).
    #[serde(default)]
    pub(super) variants: Vec<FileVariant>,
}

/// One `[[profiles.variants]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileVariant {
    pub(super) name: String,
    pub(super) width: u32,
    pub(super) height: u32,
    #[serde(default)]
    pub(super) fit: Option<String>,
    #[serde(default)]
    pub(super) format: Option<String>,
    #[serde(default)]
    pub(super) quality: Option<u8>,
    #[serde(default)]
    pub(super) eager: bool,
}

/// A profile's `validation_hook` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileValidationHook {
    pub(super) url: String,
    #[serde(default)]
    pub(super) timeout_ms: Option<u64>,
    #[serde(default)]
    pub(super) on_error: Option<String>,
    #[serde(default)]
    pub(super) secret: Option<String>,
}

/// The TOML file's shape: every field optional, names as in the environment without prefix.
/// One flat struct for every concern: `deny_unknown_fields` does not work through
/// `#[serde(flatten)]`, and a misspelt key must stop the start.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSettings {
    pub(super) listen: Option<String>,
    pub(super) database_url: Option<String>,
    pub(super) db_max_connections: Option<u32>,
    pub(super) bucket: Option<String>,
    pub(super) s3_endpoint: Option<String>,
    pub(super) region: Option<String>,
    pub(super) jwt_secret: Option<String>,
    pub(super) jwks_url: Option<String>,
    pub(super) jwt_issuer: Option<String>,
    pub(super) jwt_audience: Option<String>,
    pub(super) jwt_user_claim: Option<String>,
    pub(super) jwt_admin_claim: Option<String>,
    pub(super) jwt_admin_value: Option<String>,
    pub(super) jwt_leeway_secs: Option<u64>,
    pub(super) jwks_refresh_secs: Option<u64>,
    pub(super) jwks_max_age_secs: Option<u64>,
    pub(super) jwks_min_refetch_secs: Option<u64>,
    pub(super) issuers: Option<Vec<FileIssuer>>,
    pub(super) quota_daily_uploads: Option<u64>,
    pub(super) quota_daily_bytes: Option<u64>,
    pub(super) presign_expiry_secs: Option<u64>,
    pub(super) commit_window_secs: Option<u64>,
    pub(super) commit_lease_secs: Option<u64>,
    pub(super) download_expiry_secs: Option<u64>,
    pub(super) render_concurrency: Option<u64>,
    pub(super) render_memory_mib: Option<u64>,
    pub(super) render_timeout_secs: Option<u64>,
    pub(super) render_worker_renders: Option<u32>,
    pub(super) render_accept_gaps: Option<Vec<String>>,
    pub(super) render_worker_bin: Option<String>,
    pub(super) max_single_copy_bytes: Option<u64>,
    pub(super) copy_part_size_bytes: Option<u64>,
    pub(super) copy_concurrency: Option<usize>,
    pub(super) multipart_threshold_bytes: Option<u64>,
    pub(super) multipart_part_size_bytes: Option<u64>,
    pub(super) multipart_session_secs: Option<u64>,
    pub(super) presign_rate_per_sec: Option<f64>,
    pub(super) presign_burst: Option<u32>,
    pub(super) legacy_prefixes: Option<Vec<String>>,
    pub(super) request_timeout_secs: Option<u64>,
    pub(super) body_limit_bytes: Option<usize>,
    pub(super) header_read_timeout_secs: Option<u64>,
    pub(super) max_connections: Option<usize>,
    pub(super) cors_origins: Option<Vec<String>>,
    pub(super) accept_store_gaps: Option<Vec<String>>,
    pub(super) bucket_check_interval_secs: Option<u64>,
    pub(super) bucket_check_fails_readiness: Option<bool>,
    pub(super) demo: Option<bool>,
    pub(super) demo_mint_tokens: Option<bool>,
    pub(super) admin_console: Option<bool>,
    pub(super) admin_console_client_id: Option<String>,
    pub(super) admin_console_scope: Option<String>,
    pub(super) sweep_grace_secs: Option<u64>,
    pub(super) sweep_skew_tolerance_secs: Option<u64>,
    pub(super) sweep_interval_secs: Option<u64>,
    pub(super) sweep_concurrency: Option<usize>,
    pub(super) job_lease_secs: Option<u64>,
    pub(super) price_per_gib: Option<Vec<String>>,
    pub(super) unlinked_grace_secs: Option<u64>,
    pub(super) archive_after_secs: Option<SecsOrNever>,
    pub(super) delete_after_secs: Option<SecsOrNever>,
    pub(super) archive_min_bytes: Option<u64>,
    pub(super) max_copies_per_file: Option<u64>,
    pub(super) archive_storage_class: Option<String>,
    pub(super) hygiene_interval_secs: Option<u64>,
    pub(super) upload_retention: Option<String>,
    pub(super) job_history_retention: Option<String>,
    pub(super) reconcile_workers: Option<usize>,
    pub(super) log_format: Option<String>,
    pub(super) profiles: Option<Vec<FileProfile>>,
    pub(super) event_retry_window: Option<String>,
    pub(super) webhook_timeout_secs: Option<u64>,
    pub(super) webhook_concurrency: Option<usize>,
    pub(super) webhook_retry_base_ms: Option<u64>,
    pub(super) webhook_retry_cap_secs: Option<u64>,
    pub(super) events: Option<FileEvents>,
}

/// A number of seconds, or the word `never`, as a file writes it (`delete_after_secs = "never"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "a whole number of seconds or \"never\"")]
pub(super) enum SecsOrNever {
    Secs(u64),
    Word(String),
}
