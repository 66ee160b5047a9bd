//! Daily quotas: per user and UTC day, a count of uploads and a sum of declared bytes.

use chrono::{DateTime, Duration, NaiveDate, Utc};

/// Limits per user per UTC day; 0 means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaLimits {
    pub daily_uploads: u64,
    pub daily_bytes: u64,
}

impl QuotaLimits {
    /// The limits as SQL bounds: unlimited becomes `i64::MAX`, which no sum reaches.
    pub fn as_sql_bounds(&self) -> (i64, i64) {
        let bound = |v: u64| {
            if v == 0 {
                i64::MAX
            } else {
                i64::try_from(v).unwrap_or(i64::MAX)
            }
        };
        (bound(self.daily_uploads), bound(self.daily_bytes))
    }
}

/// The quota day an instant falls in.
pub fn quota_day(now: DateTime<Utc>) -> NaiveDate {
    now.date_naive()
}

/// Seconds until the next quota day starts (for `Retry-After`); at least 1.
pub fn seconds_until_next_day(now: DateTime<Utc>) -> u64 {
    let next = quota_day(now) + Duration::days(1);
    let start = next
        .and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc())
        .unwrap_or(now);
    u64::try_from((start - now).num_seconds())
        .unwrap_or(0)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn zero_means_unlimited() {
        let l = QuotaLimits {
            daily_uploads: 0,
            daily_bytes: 10,
        };
        assert_eq!(l.as_sql_bounds(), (i64::MAX, 10));
    }

    #[test]
    fn retry_after_points_at_the_next_utc_midnight() {
        let t = Utc
            .with_ymd_and_hms(2026, 11, 29, 23, 59, 0)
            .single()
            .expect("valid");
        assert_eq!(seconds_until_next_day(t), 60);
        let t = Utc
            .with_ymd_and_hms(2026, 11, 29, 0, 0, 0)
            .single()
            .expect("valid");
        assert_eq!(seconds_until_next_day(t), 86_400);
        assert_eq!(quota_day(t).to_string(), "2026-11-29");
    }
}
