//! Background jobs: the sweeper, the job lease, the storage report's prices, hygiene
//! (unlinked, archived, deleted), upload retention and reconcile.

use super::file::FileSettings;
use super::source::{ConfigError, Source, GIB};

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
    /// Partitions swept at once (`UPCOMMIT_SWEEP_CONCURRENCY`, default 4, 1 to 64).
    pub sweep_concurrency: usize,
    /// How long one replica holds a job before another may take it over; renewed while the job
    /// runs (`UPCOMMIT_JOB_LEASE_SECS`, default 300, 2 to 86400).
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
    /// (`UPCOMMIT_ARCHIVE_AFTER_SECS`, default 30 days; `never`: `None`, nothing is archived,
    /// and so nothing deleted).
    pub archive_after_secs: Option<u64>,
    /// An archived handle's object is deleted this long after archival
    /// (`UPCOMMIT_DELETE_AFTER_SECS`, default 365 days; `never`: `None`, archived objects stay).
    pub delete_after_secs: Option<u64>,
    /// Objects smaller than this keep their storage class when archived
    /// (`UPCOMMIT_ARCHIVE_MIN_BYTES`, default 131072, at most 5 TiB).
    pub archive_min_bytes: u64,
    /// How many handles one object may have (the file and its copies,
    /// `UPCOMMIT_MAX_COPIES_PER_FILE`, default 100, 1 to 100,000): hygiene's work on a key grows
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
    /// A maintenance run's row and findings are pruned once it ended this long ago, in seconds
    /// (`UPCOMMIT_JOB_HISTORY_RETENTION`, a duration; default 90 days, at least 1 day); the
    /// newest run of each job, kind and outcome always stays.
    pub job_history_retention_secs: u64,
    /// Key ranges reconcile lists at once (`UPCOMMIT_RECONCILE_WORKERS`, default 1, 1 to 64).
    pub reconcile_workers: usize,
}

impl JobSettings {
    /// The archive class first (refused rather than half-supported), then every number.
    pub(super) fn load(src: &Source<'_>, f: &mut FileSettings) -> Result<Self, ConfigError> {
        let archive_storage_class = src
            .string(
                "UPCOMMIT_ARCHIVE_STORAGE_CLASS",
                f.archive_storage_class.take(),
                "GLACIER_IR",
            )
            .to_ascii_uppercase();
        // Refused rather than half-supported: see `domain::storage_class`.
        if let Some(why) = crate::domain::storage_class::refusal(&archive_storage_class) {
            return Err(ConfigError(format!(
                "UPCOMMIT_ARCHIVE_STORAGE_CLASS: {why}"
            )));
        }
        Ok(JobSettings {
            sweep_grace_secs: src.secs(
                "UPCOMMIT_SWEEP_GRACE_SECS",
                f.sweep_grace_secs,
                86_400,
                0,
            )?,
            // Past a week the future-partition guard guards nothing.
            sweep_skew_tolerance_secs: src.number(
                "UPCOMMIT_SWEEP_SKEW_TOLERANCE_SECS",
                f.sweep_skew_tolerance_secs,
                300,
                0..=7 * 86_400,
            )?,
            sweep_interval_secs: src.secs(
                "UPCOMMIT_SWEEP_INTERVAL_SECS",
                f.sweep_interval_secs,
                3600,
                0,
            )?,
            sweep_concurrency: src.number(
                "UPCOMMIT_SWEEP_CONCURRENCY",
                f.sweep_concurrency,
                4,
                1..=64,
            )?,
            // Renewed every third of itself, at most once a second: below 2 s a renewal could
            // come after the lease ran out; past a day a crashed replica would hold its job
            // for longer than anyone waits.
            lease_secs: src.number("UPCOMMIT_JOB_LEASE_SECS", f.job_lease_secs, 300, 2..=86_400)?,
            price_per_gib: parse_prices(
                &src.list("UPCOMMIT_PRICE_PER_GIB", f.price_per_gib.take()),
            )?,
            unlinked_grace_secs: src.secs(
                "UPCOMMIT_UNLINKED_GRACE_SECS",
                f.unlinked_grace_secs,
                30 * 86_400,
                0,
            )?,
            archive_after_secs: src.secs_or_never(
                "UPCOMMIT_ARCHIVE_AFTER_SECS",
                f.archive_after_secs.take(),
                30 * 86_400,
                0,
            )?,
            delete_after_secs: src.secs_or_never(
                "UPCOMMIT_DELETE_AFTER_SECS",
                f.delete_after_secs.take(),
                365 * 86_400,
                0,
            )?,
            archive_min_bytes: src.number(
                "UPCOMMIT_ARCHIVE_MIN_BYTES",
                f.archive_min_bytes,
                128 * 1024,
                0..=5 * 1024 * GIB,
            )?,
            max_copies_per_file: src.number(
                "UPCOMMIT_MAX_COPIES_PER_FILE",
                f.max_copies_per_file,
                100,
                1..=100_000,
            )?,
            archive_storage_class,
            hygiene_interval_secs: src.secs(
                "UPCOMMIT_HYGIENE_INTERVAL_SECS",
                f.hygiene_interval_secs,
                86_400,
                0,
            )?,
            // At least a day, so that quota days still being charged (today, and yesterday on
            // a replica whose clock lags) are never pruned.
            upload_retention_secs: src.duration(
                "UPCOMMIT_UPLOAD_RETENTION",
                f.upload_retention.take(),
                "90d",
                86_400,
            )?,
            job_history_retention_secs: src.duration(
                "UPCOMMIT_JOB_HISTORY_RETENTION",
                f.job_history_retention.take(),
                "90d",
                86_400,
            )?,
            reconcile_workers: src.number(
                "UPCOMMIT_RECONCILE_WORKERS",
                f.reconcile_workers,
                1,
                1..=64,
            )?,
        })
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

#[cfg(test)]
mod tests {
    use crate::config::source::env;
    use crate::config::Settings;

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
}
