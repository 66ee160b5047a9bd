//! The admin API's page cursors: newest-first lists (files, job runs) continue strictly before
//! a (time, id) pair, written as `<microseconds since the epoch>-<id>`. The text is opaque to
//! clients; anything that does not parse back is refused, never read as "from the start".

use chrono::{DateTime, Utc};

/// How many rows a page holds when the caller does not say, and at most.
pub const DEFAULT_PAGE: i64 = 50;
pub const MAX_PAGE: i64 = 200;

/// The cursor after a row of (time, id).
pub fn before_cursor(at: DateTime<Utc>, id: &str) -> String {
    format!("{}-{id}", at.timestamp_micros())
}

/// The (time, id) a cursor names; `None` for anything [`before_cursor`] did not write (ids are
/// 1-64 of `[0-9a-z_]`).
pub fn parse_before(cursor: &str) -> Option<(DateTime<Utc>, String)> {
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
    let at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
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
        let c = before_cursor(at, "0f3a9c");
        assert_eq!(c, "1764820000123456-0f3a9c");
        assert_eq!(parse_before(&c), Some((at, "0f3a9c".to_owned())));
        let epoch = DateTime::from_timestamp_micros(0).expect("in range");
        assert_eq!(
            parse_before(&before_cursor(epoch, "a_1")),
            Some((epoch, "a_1".into()))
        );
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "-",
            "123",
            "123-",
            "-abc",
            "12a-abc",
            "+12-abc",
            "-12-abc",
            "12-ABC",
            "12-a b",
            "12-a'--",
            "12-a%",
            "99999999999999999999-a",
            "9223372036854775807-a",
        ] {
            assert_eq!(parse_before(bad), None, "{bad:?}");
        }
        let long = format!("1-{}", "a".repeat(65));
        assert_eq!(parse_before(&long), None);
        assert!(parse_before(&format!("1-{}", "a".repeat(64))).is_some());
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
