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

/// One presign's charge, for [`admit`]: who, which day, how many bytes, under which limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub owner: String,
    pub day: String,
    pub bytes: i64,
    pub limits: QuotaLimits,
}

/// What a batch of presigns does to the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Admission {
    /// Per charge, in order: whether it fits.
    pub admitted: Vec<bool>,
    /// Per (owner, day) charged: (uploads, bytes) to add.
    pub deltas: std::collections::BTreeMap<(String, String), (i64, i64)>,
}

/// Admits a batch of charges in order against the current usage per (owner, day), exactly as
/// if each had been charged alone after the ones before it: a charge that would pass either
/// limit is refused and does not count; later, smaller ones may still fit. Pure: group commit
/// reads the usage, calls this, and writes the deltas.
pub fn admit(
    usage: &std::collections::BTreeMap<(String, String), (i64, i64)>,
    charges: &[Charge],
) -> Admission {
    let mut running = usage.clone();
    let mut out = Admission::default();
    for c in charges {
        let key = (c.owner.clone(), c.day.clone());
        let (max_uploads, max_bytes) = c.limits.as_sql_bounds();
        let (uploads, bytes) = running.get(&key).copied().unwrap_or((0, 0));
        let fits = c.bytes >= 0
            && uploads.checked_add(1).is_some_and(|n| n <= max_uploads)
            && bytes.checked_add(c.bytes).is_some_and(|b| b <= max_bytes);
        out.admitted.push(fits);
        if fits {
            running.insert(key.clone(), (uploads + 1, bytes + c.bytes));
            let d = out.deltas.entry(key).or_insert((0, 0));
            d.0 += 1;
            d.1 += c.bytes;
        }
    }
    out
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

    fn charge(owner: &str, bytes: i64, uploads: u64, max_bytes: u64) -> Charge {
        Charge {
            owner: owner.into(),
            day: "2026-11-30".into(),
            bytes,
            limits: QuotaLimits {
                daily_uploads: uploads,
                daily_bytes: max_bytes,
            },
        }
    }

    #[test]
    fn a_batch_is_admitted_as_if_charged_one_after_another() {
        let mut usage = std::collections::BTreeMap::new();
        usage.insert(("a".to_owned(), "2026-11-30".to_owned()), (1, 500));
        let batch = [
            charge("a", 400, 3, 1000), // 2 uploads, 900 bytes
            charge("a", 200, 3, 1000), // would be 1100 bytes: refused
            charge("b", 10, 1, 0),     // b's first
            charge("a", 100, 3, 1000), // 3 uploads, 1000 bytes: fits exactly
            charge("b", 10, 1, 0),     // b's second: over 1 upload
            charge("a", 0, 3, 1000),   // a 4th upload: refused
        ];
        let out = admit(&usage, &batch);
        assert_eq!(out.admitted, vec![true, false, true, true, false, false]);
        assert_eq!(
            out.deltas[&("a".to_owned(), "2026-11-30".to_owned())],
            (2, 500)
        );
        assert_eq!(
            out.deltas[&("b".to_owned(), "2026-11-30".to_owned())],
            (1, 10)
        );
    }

    #[test]
    fn unlimited_quotas_admit_everything_and_overflow_never_wraps() {
        let usage = std::collections::BTreeMap::new();
        let out = admit(&usage, &[charge("a", i64::MAX, 0, 0), charge("a", 1, 0, 0)]);
        assert_eq!(
            out.admitted,
            vec![true, false],
            "i64::MAX + 1 bytes does not wrap"
        );
        assert!(!admit(&usage, &[charge("a", -1, 0, 0)]).admitted[0]);
    }
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
