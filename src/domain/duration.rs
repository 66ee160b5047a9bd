//! Durations as operators write them on the command line: `0s`, `90s`, `30m`, `1h30m`, `2d`,
//! `1h 30m`, or a bare number of seconds. The spellings are humantime's (a well-kept crate), not
//! a grammar of our own; a bare number is seconds, as it always was here. Also the checked
//! arithmetic every setting goes through where it meets a clock.

use chrono::{DateTime, Utc};

/// What a refused duration is told, next to the flag's name.
pub const EXPECTED: &str =
    "expected a duration such as 0s, 90s, 30m, 1h30m, 2d or a number of seconds";

/// Whole seconds of `s`; sub-second parts are dropped (`1500ms` is 1 s).
pub fn parse_secs(s: &str) -> Option<u64> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok();
    }
    humantime::parse_duration(s).ok().map(|d| d.as_secs())
}

/// [`parse_secs`] as a time span; `None` also for one too long to be a `chrono::Duration`
/// (about 292 million years), which `chrono::Duration::seconds` would panic on.
pub fn parse_span(s: &str) -> Option<chrono::Duration> {
    parse_secs(s)
        .and_then(|secs| i64::try_from(secs).ok())
        .and_then(chrono::Duration::try_seconds)
}

/// `secs` as a time span, saturating at the longest one chrono holds (a setting is bounded at
/// load, but a clock must not panic on a number that escaped the bound).
pub fn span(secs: u64) -> chrono::Duration {
    i64::try_from(secs)
        .ok()
        .and_then(chrono::Duration::try_seconds)
        .unwrap_or(chrono::Duration::MAX)
}

/// `at` minus `secs`, saturating at the earliest time chrono holds: a cutoff that far back
/// selects nothing, which is the safe reading of "older than forever".
pub fn before(at: DateTime<Utc>, secs: u64) -> DateTime<Utc> {
    at.checked_sub_signed(span(secs))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// `at` plus `secs`, saturating at the latest time chrono holds ("not in this era").
pub fn after(at: DateTime<Utc>, secs: u64) -> DateTime<Utc> {
    at.checked_add_signed(span(secs))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_too_long_for_a_duration_is_refused_not_a_panic() {
        assert_eq!(parse_span("2d"), Some(chrono::Duration::days(2)));
        for raw in [
            "9223372036854775807",
            "18446744073709551615",
            "1000000000y",
            "x",
        ] {
            assert_eq!(parse_span(raw), None, "{raw:?}");
        }
    }

    #[test]
    fn clock_arithmetic_saturates_instead_of_panicking() {
        let now = chrono::Utc::now();
        for secs in [0, 1, 86_400, 1 << 40, i64::MAX as u64, u64::MAX] {
            assert!(before(now, secs) <= now, "{secs}");
            assert!(after(now, secs) >= now, "{secs}");
        }
        assert_eq!(before(now, u64::MAX), DateTime::<Utc>::MIN_UTC);
        assert_eq!(after(now, u64::MAX), DateTime::<Utc>::MAX_UTC);
        assert_eq!(after(now, 60), now + chrono::Duration::seconds(60));
        assert_eq!(before(now, 60), now - chrono::Duration::seconds(60));
    }

    #[test]
    fn the_usual_spellings_parse() {
        for (raw, secs) in [
            ("0s", 0),
            ("0", 0),
            ("90s", 90),
            ("45", 45),
            ("30m", 1800),
            ("1h", 3600),
            ("1h30m", 5400),
            ("1h 30m", 5400),
            ("2d", 172_800),
            ("1d12h", 129_600),
            (" 24h ", 86_400),
            ("1500ms", 1),
            ("1week", 604_800),
        ] {
            assert_eq!(parse_secs(raw), Some(secs), "{raw:?}");
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for raw in [
            "",
            " ",
            "soon",
            "-1s",
            "1x",
            "h",
            "1h30",
            "18446744073709551616",
        ] {
            assert_eq!(parse_secs(raw), None, "{raw:?}");
        }
    }
}
