//! Temporary profiles: files with a time to live (exports, previews, generated files).
//!
//! A temporary profile's files are committed under `temp/<N>d/<final prefix><upload id>/<name>`,
//! one prefix per TTL, which one lifecycle rule of `infra/lifecycle-rules.json` expires after
//! `N` days (noncurrent versions after 1). The bucket owns their bytes: hygiene never counts
//! them as unlinked, never archives or deletes them. Their handles carry an `expires_at`
//! (commit time + TTL), after which the API answers 410 `file_expired`.
//!
//! S3 expires an object at the first midnight UTC at least `N` days after its creation, so
//! the bytes outlive `expires_at` (the object is created by the commit's copy, just before the
//! handle), never the other way round.

use std::fmt;

use chrono::{DateTime, Duration, Utc};

use super::duration::parse_secs;
use super::lifecycle::Rule;

use super::prefixes::TEMP_PREFIX;

const DAY_SECS: u64 = 86_400;
/// S3 takes lifecycle days as a positive integer; ten years is far past any sensible TTL.
const MAX_DAYS: u32 = 3650;

/// A temporary profile's time to live: a whole number of days, 1 or more (S3 lifecycle expiry
/// is in days).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TtlDays(u32);

/// Why a `temporary_ttl` setting is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlError {
    /// Not a duration at all.
    Unreadable,
    /// A duration, but not a whole number of days from 1 to [`MAX_DAYS`].
    NotWholeDays,
}

impl fmt::Display for TtlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TtlError::Unreadable => f.write_str("is not a duration (write it as 7d)"),
            TtlError::NotWholeDays => write!(
                f,
                "must be a whole number of days from 1d to {MAX_DAYS}d (S3 lifecycle expiry is in days)"
            ),
        }
    }
}

impl TtlDays {
    /// Reads `7d` (or any duration spelling that is whole days: `168h`, `1week`).
    pub fn parse(raw: &str) -> Result<Self, TtlError> {
        let secs = parse_secs(raw).ok_or(TtlError::Unreadable)?;
        if secs == 0 || secs % DAY_SECS != 0 {
            return Err(TtlError::NotWholeDays);
        }
        u32::try_from(secs / DAY_SECS)
            .ok()
            .filter(|d| *d <= MAX_DAYS)
            .map(Self)
            .ok_or(TtlError::NotWholeDays)
    }

    pub fn days(self) -> u32 {
        self.0
    }

    /// `temp/<N>d/`: the prefix every file of this TTL lives under.
    pub fn prefix(self) -> String {
        format!("{TEMP_PREFIX}{}d/", self.0)
    }

    /// When a file committed at `committed_at` stops being served.
    pub fn expires_at(self, committed_at: DateTime<Utc>) -> DateTime<Utc> {
        committed_at + Duration::days(i64::from(self.0))
    }

    /// The lifecycle rule a bucket must have for this TTL: current versions under the prefix
    /// expire within the TTL, their noncurrent versions (the bucket is versioned) after 1 day.
    /// `infra/lifecycle-rules.json` must hold it (checked when the settings load), so terraform
    /// writes it; `doctor` requires it of the live bucket.
    pub fn lifecycle_rule(self) -> Rule {
        Rule {
            expiration_days: Some(self.0),
            noncurrent_expiration_days: Some(1),
            ..Rule::new(&format!("upcommit-temp-{}d-expire", self.0), &self.prefix())
        }
    }
}

impl fmt::Display for TtlDays {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}d", self.0)
    }
}

/// The key is a temporary file's (under `temp/`).
pub fn is_temporary_key(key: &str) -> bool {
    key.starts_with(TEMP_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::{missing_required, required_rules, unpaired_expiry};

    #[test]
    fn whole_days_parse_in_any_spelling() {
        for (raw, days) in [
            ("1d", 1),
            ("7d", 7),
            (" 30d ", 30),
            ("168h", 7),
            ("1week", 7),
            ("86400", 1),
            ("3650d", 3650),
        ] {
            assert_eq!(TtlDays::parse(raw).map(TtlDays::days), Ok(days), "{raw:?}");
        }
    }

    #[test]
    fn anything_but_whole_days_is_refused() {
        for raw in ["0d", "0", "36h", "1d1s", "90m", "3651d", "1.5d"] {
            assert!(TtlDays::parse(raw).is_err(), "{raw:?}");
        }
        for raw in ["", "soon", "-7d", "7 days later", "d"] {
            assert_eq!(TtlDays::parse(raw), Err(TtlError::Unreadable), "{raw:?}");
        }
        assert_eq!(TtlDays::parse("36h"), Err(TtlError::NotWholeDays));
    }

    #[test]
    fn the_prefix_and_expiry_follow_the_ttl() {
        let ttl = TtlDays::parse("7d").expect("7d");
        assert_eq!(ttl.prefix(), "temp/7d/");
        assert!(is_temporary_key(&format!("{}exports/x/y", ttl.prefix())));
        assert!(!is_temporary_key("exports/temp/7d/x"));
        let t = DateTime::parse_from_rfc3339("2026-01-30T10:00:00Z")
            .expect("date")
            .with_timezone(&Utc);
        assert_eq!(ttl.expires_at(t).to_rfc3339(), "2026-02-06T10:00:00+00:00");
    }

    #[test]
    fn the_lifecycle_rule_expires_within_the_ttl_and_cleans_noncurrent_versions() {
        let rule = TtlDays::parse("7d").expect("7d").lifecycle_rule();
        assert_eq!(rule.prefix, "temp/7d/");
        assert_eq!(rule.expiration_days, Some(7));
        assert_eq!(rule.noncurrent_expiration_days, Some(1));
        assert!(rule.validate().is_ok());
        assert!(unpaired_expiry(std::slice::from_ref(&rule)).is_empty());
    }

    #[test]
    fn the_rules_file_holds_the_shipped_tiers() {
        for days in ["1d", "7d", "30d"] {
            let rule = TtlDays::parse(days).expect("tier").lifecycle_rule();
            assert!(
                missing_required(required_rules(), &[rule]).is_empty(),
                "infra/lifecycle-rules.json lacks the {days} tier"
            );
        }
        let untiered = TtlDays::parse("14d").expect("14d").lifecycle_rule();
        assert!(!missing_required(required_rules(), &[untiered]).is_empty());
    }
}
