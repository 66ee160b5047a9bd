//! The pull feed: positioned events in feed order, a page at a time, for consumers that poll
//! or rebuild their state. The cursor is the last position read, written as text so that it can
//! change form without breaking clients that treat it as opaque.

use std::sync::Arc;

use serde::Serialize;

use crate::catalog::{Catalog, CatalogError};

/// Events per page at most (and by default).
pub const MAX_PAGE: i64 = 1000;
pub const DEFAULT_PAGE: i64 = 100;

/// One event on the feed: its cursor, id (the webhooks' `webhook-id`), and the payload's
/// fields (`type`, `timestamp`, `data`) flattened in.
#[derive(Debug, Serialize)]
pub struct FeedEvent {
    pub cursor: String,
    pub id: String,
    #[serde(flatten)]
    pub payload: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Serialize)]
pub struct FeedPage {
    pub events: Vec<FeedEvent>,
    /// Pass as `after` for the next page; the same cursor when the page was empty.
    pub next_cursor: String,
}

/// Parses a cursor: empty or absent means the start.
pub fn parse_cursor(s: Option<&str>) -> Option<i64> {
    match s {
        None | Some("") => Some(0),
        Some(s) if s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit()) => s.parse::<i64>().ok(),
        Some(_) => None,
    }
}

pub async fn page(
    catalog: &Arc<dyn Catalog>,
    after: i64,
    limit: i64,
) -> Result<FeedPage, CatalogError> {
    let rows = catalog.events_after(after, limit).await?;
    let next = rows.last().map_or(after, |e| e.position);
    let events = rows
        .into_iter()
        .map(|e| {
            let payload = serde_json::from_str(&e.payload)
                .map_err(|err| CatalogError::Corrupt(format!("event {} payload: {err}", e.id)))?;
            Ok(FeedEvent {
                cursor: e.position.to_string(),
                id: e.id,
                payload,
            })
        })
        .collect::<Result<Vec<_>, CatalogError>>()?;
    Ok(FeedPage {
        events,
        next_cursor: next.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_plain_positions() {
        assert_eq!(parse_cursor(None), Some(0));
        assert_eq!(parse_cursor(Some("")), Some(0));
        assert_eq!(parse_cursor(Some("42")), Some(42));
        assert_eq!(parse_cursor(Some("-1")), None);
        assert_eq!(parse_cursor(Some("1e3")), None);
        assert_eq!(parse_cursor(Some(" 1")), None);
        assert_eq!(parse_cursor(Some("99999999999999999999")), None);
        assert_eq!(parse_cursor(Some("9223372036854775808")), None);
    }
}
