//! `GET /v1/events`: the pull feed (admin).

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use crate::auth::Identity;
use crate::error::AppError;
use crate::services::events::feed::{self, FeedPage, DEFAULT_PAGE, MAX_PAGE};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/events", get(list))
}

#[derive(Debug, Deserialize)]
struct FeedQuery {
    after: Option<String>,
    limit: Option<i64>,
}

async fn list(
    State(state): State<AppState>,
    who: Identity,
    query: Result<Query<FeedQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<FeedPage>, AppError> {
    if !who.admin {
        return Err(AppError::AdminRequired);
    }
    let bad = || {
        AppError::InvalidRequest(format!(
            "after must be a cursor this feed returned and limit 1..={MAX_PAGE}"
        ))
    };
    let Query(q) = query.map_err(|_| bad())?;
    let after = feed::parse_cursor(q.after.as_deref()).ok_or_else(bad)?;
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(bad());
    }
    // The page is read first, the positions held after it: a prune only ever removes a leading
    // run, so if the oldest position still held then is at most one past the cursor, nothing
    // after the cursor was gone when the page was read (review 26: read the other way round, a
    // prune committing between the two reads gave a page that skipped what it removed).
    // Positions are contiguous: a cursor more than one before the oldest position held means
    // events after it were pruned, and one past the newest was never given; reading on from
    // either would skip events without a word.
    let page = feed::page(&state.catalog, after, limit).await?;
    crate::pause::point("feed_between_reads").await;
    let (first, last) = state.catalog.event_positions().await?.unwrap_or((1, 0));
    if after > last {
        return Err(bad());
    }
    if after < first - 1 {
        return Err(AppError::CursorExpired(first - 1));
    }
    Ok(Json(page))
}
