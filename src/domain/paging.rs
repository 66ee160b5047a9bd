//! The admin API's page cursors: newest-first lists (files, job runs) continue strictly before
//! a (time, id) pair, written as `<list letter><microseconds since the epoch>-<id>`. The text is
//! opaque to clients; anything that does not parse back — another list's cursor, a time past
//! the year 9999 (which the databases would order differently) — is refused, never read as
//! "from the start".

use chrono::{DateTime, Utc};

/// How many rows a page holds when the caller does not say, and at most.
pub const DEFAULT_PAGE: i64 = 50;
pub const MAX_PAGE: i64 = 200;

/// Which list a cursor belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Files,
    JobRuns,
}

impl List {
    fn letter(self) -> char {
        match self {
            Self::Files => 'f',
            Self::JobRuns => 'r',
        }
    }
}

/// 9999-12-31T23:59:59.999999Z: later times are no row's.
const LAST_MICROS: i64 = 253_402_300_799_999_999;

/// The cursor after a row of (time, id) of `list`.
pub fn before_cursor(list: List, at: DateTime<Utc>, id: &str) -> String {
    format!("{}{}-{id}", list.letter(), at.timestamp_micros())
}

/// The (time, id) a cursor of `list` names; `None` for anything [`before_cursor`] did not
/// write for that list (ids are 1-64 of `[0-9a-z_]`, times from 1970 to 9999).
pub fn parse_before(list: List, cursor: &str) -> Option<(DateTime<Utc>, String)> {
    let cursor = cursor.strip_prefix(list.letter())?;
    let (micros, id) = cursor.split_once('-')?;
    if micros.is_empty()
        || micros.len() > 19
        || !micros.bytes().all(|b| b.is_ascii_digit())
        || id.is_empty()
        || id.len() > 64
        || !id
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase() || b == b'_')
    {
        return None;
    }
    let micros: i64 = micros.parse().ok()?;
    if micros > LAST_MICROS {
        return None;
    }
    let at = DateTime::from_timestamp_micros(micros)?;
    Some((at, id.to_owned()))
}

/// A page size from the query: absent is the default; outside 1..=[`MAX_PAGE`] is refused.
pub fn page_size(limit: Option<i64>) -> Option<i64> {
    match limit {
        None => Some(DEFAULT_PAGE),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Some(n),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_as_what_wrote_it() {
        let at = DateTime::from_timestamp_micros(1_764_820_000_123_456).expect("in range");
        let c = before_cursor(List::Files, at, "0f3a9c");
        assert_eq!(c, "f1764820000123456-0f3a9c");
        assert_eq!(
            parse_before(List::Files, &c),
            Some((at, "0f3a9c".to_owned()))
        );
        let epoch = DateTime::from_timestamp_micros(0).expect("in range");
        let c = before_cursor(List::JobRuns, epoch, "a_1");
        assert_eq!(parse_before(List::JobRuns, &c), Some((epoch, "a_1".into())));
        let last = DateTime::from_timestamp_micros(LAST_MICROS).expect("in range");
        assert_eq!(last.to_rfc3339(), "9999-12-31T23:59:59.999999+00:00");
        let c = before_cursor(List::Files, last, "z");
        assert_eq!(parse_before(List::Files, &c), Some((last, "z".into())));
    }

    #[test]
    fn a_cursor_of_one_list_is_no_cursor_of_another() {
        let at = DateTime::from_timestamp_micros(5).expect("in range");
        let files = before_cursor(List::Files, at, "abc");
        let runs = before_cursor(List::JobRuns, at, "abc");
        assert_eq!(parse_before(List::JobRuns, &files), None);
        assert_eq!(parse_before(List::Files, &runs), None);
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "f",
            "f-",
            "123-abc",
            "F123-abc",
            "ff123-abc",
            "f253402300800000000-a",
            "f262143999999999999-a",
            "f123",
            "f123-",
            "f-abc",
            "f12a-abc",
            "f+12-abc",
            "f-12-abc",
            "f12-ABC",
            "f12-a b",
            "f12-a'--",
            "f12-a%",
            "f12-a\0",
            "f99999999999999999999-a",
            "f9223372036854775807-a",
        ] {
            assert_eq!(parse_before(List::Files, bad), None, "{bad:?}");
        }
        let long = format!("f1-{}", "a".repeat(65));
        assert_eq!(parse_before(List::Files, &long), None);
        assert!(parse_before(List::Files, &format!("f1-{}", "a".repeat(64))).is_some());
    }

    #[test]
    fn page_sizes_are_bounded() {
        assert_eq!(page_size(None), Some(DEFAULT_PAGE));
        assert_eq!(page_size(Some(1)), Some(1));
        assert_eq!(page_size(Some(MAX_PAGE)), Some(MAX_PAGE));
        for bad in [0, -1, MAX_PAGE + 1, i64::MIN, i64::MAX] {
            assert_eq!(page_size(Some(bad)), None, "{bad}");
        }
    }
}
