//! Durations as operators write them on the command line: `0s`, `90s`, `30m`, `1h30m`, `2d`,
//! `1h 30m`, or a bare number of seconds. The spellings are humantime's (a well-kept crate), not
//! a grammar of our own; a bare number is seconds, as it always was here.

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
