//! `POST /v1/files/variants/{name}`: many files' rendition URLs for one variant in one call
//! (issue 37) — a feed of thumbnails without a request per image. Each file is answered as
//! `GET /v1/files/{id}/variants/{name}` would answer it, in the order asked: a rendition, or
//! that request's error (`status`, `code`, `message`; `retry_after` for `render_busy` and `render_timeout`). Files
//! the caller may not see are `file_not_found`, exactly as an unknown id. Renders of this call
//! run at most as many at once as the replica has render slots. The database or the store
//! unavailable answers the whole call 503, as the one-file route would.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::Json;
use futures_util::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use validator::Validate;

use super::read::{refuse_expired, visible_handle};
use crate::auth::Identity;
use crate::error::AppError;
use crate::http::extract::{ApiJson, ApiPath};
use crate::services::renditions::{rendition, RenditionUrl};
use crate::state::AppState;

/// Files one call may ask for.
pub const MAX_BATCH: usize = 100;

#[derive(Debug, Deserialize, Validate)]
#[serde(deny_unknown_fields)]
pub(super) struct BatchBody {
    // A message of its own: the validator's default repeats the whole list (outside review).
    #[validate(length(min = 1, max = 100, message = "ids holds 1 to 100 file ids"))]
    ids: Vec<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct BatchAnswer {
    variant: String,
    files: Vec<Item>,
}

#[derive(Debug, Serialize)]
struct Item {
    id: String,
    /// The status `GET /v1/files/{id}/variants/{name}` would have answered.
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    rendition: Option<RenditionUrl>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ItemError>,
}

#[derive(Debug, Serialize)]
struct ItemError {
    code: String,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<u64>,
}

pub(super) async fn variant_urls(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<BatchBody>,
) -> Result<(HeaderMap, Json<BatchAnswer>), AppError> {
    debug_assert!(body.ids.len() <= MAX_BATCH);
    // A name no profile could have is the request's mistake, not each file's.
    if !crate::domain::variants::is_name(&name) {
        return Err(AppError::InvalidRequest(
            "a variant's name is 1-32 of a-z, 0-9, _ and -".into(),
        ));
    }
    let at_once = state.renders.limit().max(1);
    // The whole call answers within the render time limit (outside review of issue 37: a batch
    // of cold renders ran past the request timeout and lost every answer): a file not answered
    // by then is `render_timeout` (its render, if it started, goes on and keeps the rendition).
    let secs = state.settings.uploads.render_timeout_secs;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    let files = stream::iter(body.ids)
        .map(|id| {
            let (state, who, name) = (&state, &who, name.as_str());
            async move {
                let answer = tokio::time::timeout_at(deadline, async {
                    let h = visible_handle(state, who, &id).await?;
                    refuse_expired(&h)?;
                    rendition(state, &h, name).await
                })
                .await
                .unwrap_or(Err(AppError::RenderTimedOut(secs)));
                item(id, answer)
            }
        })
        .buffered(at_once)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<Item>, AppError>>()?;
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok((
        headers,
        Json(BatchAnswer {
            variant: name,
            files,
        }),
    ))
}

/// One file's entry; a database or store that is unavailable (or too slow) ends the whole
/// batch with its 503 instead, so the client retries it whole after `Retry-After`.
fn item(id: String, answer: Result<RenditionUrl, AppError>) -> Result<Item, AppError> {
    Ok(match answer {
        Ok(r) => Item {
            id,
            status: 200,
            rendition: Some(r),
            error: None,
        },
        Err(e @ (AppError::Unavailable(_) | AppError::Timeout)) => return Err(e),
        Err(e) => {
            match &e {
                AppError::Internal(detail) | AppError::StoreRefused(detail) => {
                    tracing::error!(file.id = %id, error.code = e.code(), error.detail = %detail, "a file of a batch failed")
                }
                _ => {
                    tracing::info!(file.id = %id, error.code = e.code(), "a file of a batch refused")
                }
            }
            Item {
                id,
                status: e.status().as_u16(),
                rendition: None,
                error: Some(ItemError {
                    code: e.code().to_owned(),
                    message: e.public_message(),
                    retry_after: e.retry_after(),
                }),
            }
        }
    })
}
