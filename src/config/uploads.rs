//! Uploads: presign and commit timings, promotion by copy, multipart, the presign rate, the
//! legacy layout, the profiles (`profiles`), and the per-user daily quota.

use crate::domain::keys::FinalPrefix;
use crate::domain::lifecycle::required_rules;
use crate::domain::profile::Profile;
use crate::domain::quota::QuotaLimits;

use super::file::FileSettings;
use super::source::{ConfigError, Source, GIB, MIB};
use crate::domain::multipart::{MAX_PART_SIZE, MIN_PART_SIZE};

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
    /// Renders of image renditions at once on a replica (`UPCOMMIT_RENDER_CONCURRENCY`,
    /// 0..=64; default 0: one per core). A request past them answers 503 `render_busy`.
    pub render_concurrency: u64,
    /// Memory this replica's renders may hold at once, in MiB (`UPCOMMIT_RENDER_MEMORY_MIB`):
    /// a render that could never fit is refused, one that does not fit now waits its turn
    /// (503 `render_busy`).
    pub render_memory_mib: u64,
    /// How long a request waits for its rendition, in seconds (`UPCOMMIT_RENDER_TIMEOUT_SECS`,
    /// default 20, 1..=600): past it the request answers 503 `render_timeout` while the render
    /// goes on (holding its slot and memory) and keeps the rendition when done.
    pub render_timeout_secs: u64,
    /// Renders a render worker does before a fresh one replaces it
    /// (`UPCOMMIT_RENDER_WORKER_RENDERS`, default 200, 1..=100000).
    pub render_worker_renders: u32,
    /// Render in workers the kernel could not put under the seccomp filter
    /// (`UPCOMMIT_RENDER_ACCEPT_GAPS=seccomp`; default none: `serve` refuses to start without
    /// the filter).
    pub render_accept_unfiltered: bool,
    /// The binary the render workers run (`UPCOMMIT_RENDER_WORKER_BIN`; default this process's
    /// own). Tests whose process is not `upcommit` name it.
    pub render_worker_bin: Option<std::path::PathBuf>,
    /// Largest object a single CopyObject promotes; larger ones are promoted by a multipart copy
    /// (`UPCOMMIT_MAX_SINGLE_COPY_BYTES`, default and at most 5 GiB, S3's limit; at least
    /// 5 MiB, S3's minimum part size: a smaller source is refused in parts by some stores).
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

impl UploadSettings {
    /// The legacy prefixes, the profiles, then every number, then their ranges.
    pub(super) fn load(src: &Source<'_>, f: &mut FileSettings) -> Result<Self, ConfigError> {
        let legacy_raw = src.list("UPCOMMIT_LEGACY_PREFIXES", f.legacy_prefixes.take());
        let legacy_prefixes = legacy_raw
            .iter()
            .map(|p| {
                FinalPrefix::parse(p)
                    .map_err(|e| ConfigError(format!("UPCOMMIT_LEGACY_PREFIXES: {p:?}: {e:?}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let profiles = super::profiles::load(src, f)?;

        let uploads = UploadSettings {
            // S3's limit on a presigned URL's lifetime.
            presign_expiry_secs: src.number(
                "UPCOMMIT_PRESIGN_EXPIRY_SECS",
                f.presign_expiry_secs,
                900,
                1..=604_800,
            )?,
            // The tmp rule expires objects after 7 days.
            commit_window_secs: src.number(
                "UPCOMMIT_COMMIT_WINDOW_SECS",
                f.commit_window_secs,
                86_400,
                1..=6 * 86_400,
            )?,
            commit_lease_secs: src.number(
                "UPCOMMIT_COMMIT_LEASE_SECS",
                f.commit_lease_secs,
                30,
                1..=3600,
            )?,
            download_expiry_secs: src.number(
                "UPCOMMIT_DOWNLOAD_EXPIRY_SECS",
                f.download_expiry_secs,
                300,
                1..=604_800,
            )?,
            render_concurrency: src.number(
                "UPCOMMIT_RENDER_CONCURRENCY",
                f.render_concurrency,
                0,
                0..=64,
            )?,
            render_memory_mib: src.number(
                "UPCOMMIT_RENDER_MEMORY_MIB",
                f.render_memory_mib,
                192,
                16..=65_536,
            )?,
            render_timeout_secs: src.number(
                "UPCOMMIT_RENDER_TIMEOUT_SECS",
                f.render_timeout_secs,
                20,
                1..=600,
            )?,
            render_worker_renders: src.number(
                "UPCOMMIT_RENDER_WORKER_RENDERS",
                f.render_worker_renders,
                200,
                1..=100_000,
            )?,
            render_accept_unfiltered: {
                let gaps = src.list("UPCOMMIT_RENDER_ACCEPT_GAPS", f.render_accept_gaps.take());
                if let Some(g) = gaps.iter().find(|g| g.as_str() != "seccomp") {
                    return Err(ConfigError(format!(
                        "UPCOMMIT_RENDER_ACCEPT_GAPS: {g:?} is not a gap (the one known: seccomp)"
                    )));
                }
                !gaps.is_empty()
            },
            render_worker_bin: {
                let bin = src.string("UPCOMMIT_RENDER_WORKER_BIN", f.render_worker_bin.take(), "");
                (!bin.is_empty()).then(|| bin.into())
            },
            // S3's CopyObject limit; at least S3's minimum part size, since anything smaller
            // goes in one CopyObject anyway, and stores refuse a smaller source in parts
            // (Garage: "Source object is too small").
            max_single_copy_bytes: src.number(
                "UPCOMMIT_MAX_SINGLE_COPY_BYTES",
                f.max_single_copy_bytes,
                5 * GIB,
                MIN_PART_SIZE..=MAX_PART_SIZE,
            )?,
            // S3's part limits.
            copy_part_size_bytes: src.number(
                "UPCOMMIT_COPY_PART_SIZE_BYTES",
                f.copy_part_size_bytes,
                512 * MIB,
                MIN_PART_SIZE..=MAX_PART_SIZE,
            )?,
            copy_concurrency: src.number(
                "UPCOMMIT_COPY_CONCURRENCY",
                f.copy_concurrency,
                4,
                1..=32,
            )?,
            // S3's largest object.
            multipart_threshold_bytes: src.number(
                "UPCOMMIT_MULTIPART_THRESHOLD_BYTES",
                f.multipart_threshold_bytes,
                100 * MIB,
                0..=5 * 1024 * GIB,
            )?,
            multipart_part_size_bytes: src.number(
                "UPCOMMIT_MULTIPART_PART_SIZE_BYTES",
                f.multipart_part_size_bytes,
                16 * MIB,
                MIN_PART_SIZE..=MAX_PART_SIZE,
            )?,
            // Below the bucket's abort-incomplete rule (checked again with the commit window).
            multipart_session_secs: src.number(
                "UPCOMMIT_MULTIPART_SESSION_SECS",
                f.multipart_session_secs,
                43_200,
                1..=abort_incomplete_secs().saturating_sub(1).max(1),
            )?,
            presign_rate_per_sec: src.number(
                "UPCOMMIT_PRESIGN_RATE_PER_SEC",
                f.presign_rate_per_sec,
                10.0,
                0.0..=1_000_000.0,
            )?,
            presign_burst: src.number(
                "UPCOMMIT_PRESIGN_BURST",
                f.presign_burst,
                30,
                0..=1_000_000,
            )?,
            legacy_prefixes,
            profiles,
        };
        // 0 is unlimited; a rate below one presign per 1,000 s would tell a refused client to
        // come back in years (a Retry-After a browser's timer cannot even hold).
        let rate = uploads.presign_rate_per_sec;
        if !(rate.is_finite() && (rate == 0.0 || rate >= MIN_PRESIGN_RATE)) {
            return Err(ConfigError(format!(
                "UPCOMMIT_PRESIGN_RATE_PER_SEC: 0 (unlimited) or from {MIN_PRESIGN_RATE} to 1000000, got {rate}"
            )));
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
                "UPCOMMIT_COMMIT_WINDOW_SECS: must be at least the presign expiry (UPCOMMIT_PRESIGN_EXPIRY_SECS) and at most 6 days (the tmp rule expires objects after 7)".into(),
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
        Ok(uploads)
    }
}

/// The least presign rate other than 0 (unlimited): one per 1,000 s.
const MIN_PRESIGN_RATE: f64 = 0.001;

/// The bucket's abort-incomplete rule (from the embedded rules file) removes parts after this
/// many seconds; a session must end before.
fn abort_incomplete_secs() -> u64 {
    required_rules()
        .iter()
        .filter_map(|r| r.abort_incomplete_multipart_days)
        .min()
        .map_or(6 * 86_400, |d| u64::from(d) * 86_400)
}

fn validate_multipart(u: &UploadSettings) -> Result<(), ConfigError> {
    if !(MIN_PART_SIZE..=MAX_PART_SIZE).contains(&u.max_single_copy_bytes) {
        return Err(ConfigError(
            "UPCOMMIT_MAX_SINGLE_COPY_BYTES: must be 5 MiB..=5 GiB (S3's part and CopyObject limits)".into(),
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
    let abort_secs = abort_incomplete_secs();
    if u.multipart_session_secs == 0
        || u.multipart_session_secs >= abort_secs
        || u.multipart_session_secs > u.commit_window_secs
    {
        return Err(ConfigError(format!(
            "UPCOMMIT_MULTIPART_SESSION_SECS: must be above 0, below the bucket's abort-incomplete rule ({abort_secs} s) and at most the commit window (UPCOMMIT_COMMIT_WINDOW_SECS)"
        )));
    }
    Ok(())
}

/// Per-user daily limits; 0 = unlimited.
pub(super) fn quota(src: &Source<'_>, f: &FileSettings) -> Result<QuotaLimits, ConfigError> {
    Ok(QuotaLimits {
        daily_uploads: src.number(
            "UPCOMMIT_QUOTA_DAILY_UPLOADS",
            f.quota_daily_uploads,
            500,
            0..=1_000_000_000,
        )?,
        // A pebibyte a day per user: beyond it, 0 (unlimited) says it plainly.
        daily_bytes: src.number(
            "UPCOMMIT_QUOTA_DAILY_BYTES",
            f.quota_daily_bytes,
            5 * GIB,
            0..=1024 * 1024 * GIB,
        )?,
    })
}
