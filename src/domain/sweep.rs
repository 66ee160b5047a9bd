//! The tmp sweeper's rules, pure: which time partitions are old enough to sweep, which are dated
//! in the future (a clock-skew guard), and what to do with each object found in an old one.

use chrono::{DateTime, NaiveDate, Utc};

use super::prefixes::TMP_PREFIX;
use super::records::{Upload, UploadState};

/// The timing the sweeper works with, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct SweepPolicy {
    pub presign_expiry_secs: u64,
    pub commit_window_secs: u64,
    pub grace_secs: u64,
    pub skew_tolerance_secs: u64,
}

impl SweepPolicy {
    /// Objects of uploads created before this can no longer be committed: their commit window
    /// (which starts at presign) has passed, plus the grace period.
    pub fn cutoff(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        let waited = self
            .presign_expiry_secs
            .saturating_add(self.commit_window_secs)
            .saturating_add(self.grace_secs);
        super::duration::before(now, waited)
    }

    /// A partition may be swept once all of its day lies before the cutoff.
    pub fn sweepable(&self, day: NaiveDate, now: DateTime<Utc>) -> bool {
        let end = day.succ_opt().and_then(|d| d.and_hms_opt(0, 0, 0));
        end.is_some_and(|end| end.and_utc() <= self.cutoff(now))
    }

    /// A partition whose day starts after now (plus the tolerance) means a clock is wrong —
    /// ours or a writer's — so every age computed here is doubtful.
    pub fn in_the_future(&self, day: NaiveDate, now: DateTime<Utc>) -> bool {
        day.and_hms_opt(0, 0, 0).is_some_and(|start| {
            start.and_utc() > super::duration::after(now, self.skew_tolerance_secs)
        })
    }
}

/// The day of a partition prefix `tmp/YYYY/MM/DD/`.
pub fn partition_day(prefix: &str) -> Option<NaiveDate> {
    let rest = prefix.strip_prefix(TMP_PREFIX)?.strip_suffix('/')?;
    let mut parts = rest.split('/');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    NaiveDate::from_ymd_opt(y.parse().ok()?, m.parse().ok()?, d.parse().ok()?)
}

/// What the sweeper does with one tmp key of an old partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Delete(&'static str),
    Skip(&'static str),
}

/// Decides from the catalog's record, read after listing: a commit records its intent
/// (`promoting`) before it copies, so an object being committed right now is always skipped.
pub fn classify(upload: Option<&Upload>, now: DateTime<Utc>) -> Verdict {
    let Some(u) = upload else {
        return Verdict::Delete("unrecorded");
    };
    match u.state {
        UploadState::Promoting => Verdict::Skip("commit_in_progress"),
        UploadState::Issued if now <= u.commit_deadline => Verdict::Skip("commit_window_open"),
        UploadState::Issued => Verdict::Delete("abandoned"),
        // The final copy was verified and the handle recorded before the commit tried to
        // delete this; what is left is a leftover.
        UploadState::Committed => Verdict::Delete("leftover_after_commit"),
        UploadState::Rejected => Verdict::Delete("rejected"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::UploadId;

    fn policy() -> SweepPolicy {
        SweepPolicy {
            presign_expiry_secs: 900,
            commit_window_secs: 86_400,
            grace_secs: 86_400,
            skew_tolerance_secs: 300,
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .expect("time")
            .with_timezone(&Utc)
    }

    fn day(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("day")
    }

    #[test]
    fn partitions_parse_strictly() {
        assert_eq!(partition_day("tmp/2026/11/29/"), Some(day("2026-11-29")));
        for bad in [
            "tmp/2026/11/29",
            "tmp/2026/11/",
            "tmp/2026/13/01/",
            "tmp/26/11/29/",
            "media/2026/11/29/",
            "tmp/2026/11/29/x/",
        ] {
            assert_eq!(partition_day(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_days_wholly_before_the_cutoff_are_swept() {
        let now = at("2026-11-29T12:00:00Z");
        // cutoff = now − 15 min − 1 day − 1 day = 2026-11-27T11:45.
        assert!(policy().sweepable(day("2026-11-26"), now));
        assert!(!policy().sweepable(day("2026-11-27"), now));
        assert!(!policy().sweepable(day("2026-11-29"), now));
    }

    #[test]
    fn future_partitions_beyond_the_tolerance_are_flagged() {
        let now = at("2026-11-29T23:58:00Z");
        assert!(!policy().in_the_future(day("2026-11-29"), now));
        // Tomorrow starts in 2 minutes, inside the 5-minute tolerance.
        assert!(!policy().in_the_future(day("2026-11-30"), now));
        assert!(policy().in_the_future(day("2026-12-01"), now));
        let noon = at("2026-11-29T12:00:00Z");
        assert!(policy().in_the_future(day("2026-11-30"), noon));
    }

    fn upload(state: UploadState, deadline: &str) -> Upload {
        let t = at("2026-11-01T00:00:00Z");
        Upload {
            id: UploadId::generate(),
            owner: "alice".into(),
            profile: "image".into(),
            content_type: "image/png".into(),
            declared_size: 1,
            key: "tmp/2026/11/01/x/a.png".into(),
            method: "PUT".into(),
            state,
            final_key: None,
            reject_code: None,
            lease_token: None,
            lease_until: None,
            created_at: t,
            expires_at: t,
            commit_deadline: at(deadline),
            original_filename: None,
            checksum: None,
        }
    }

    #[test]
    fn objects_mid_commit_or_still_committable_are_kept() {
        let now = at("2026-11-29T00:00:00Z");
        assert_eq!(
            classify(
                Some(&upload(UploadState::Promoting, "2026-11-02T00:00:00Z")),
                now
            ),
            Verdict::Skip("commit_in_progress")
        );
        assert_eq!(
            classify(
                Some(&upload(UploadState::Issued, "2026-12-01T00:00:00Z")),
                now
            ),
            Verdict::Skip("commit_window_open")
        );
        assert_eq!(
            classify(
                Some(&upload(UploadState::Issued, "2026-11-02T00:00:00Z")),
                now
            ),
            Verdict::Delete("abandoned")
        );
        assert_eq!(
            classify(
                Some(&upload(UploadState::Committed, "2026-11-02T00:00:00Z")),
                now
            ),
            Verdict::Delete("leftover_after_commit")
        );
        assert_eq!(
            classify(
                Some(&upload(UploadState::Rejected, "2026-11-02T00:00:00Z")),
                now
            ),
            Verdict::Delete("rejected")
        );
        assert_eq!(classify(None, now), Verdict::Delete("unrecorded"));
    }
}
