//! The multipart routes of one upload: part URLs, the parts S3 holds, completion, abort.

use crate::http::extract::ApiPath;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::StatusCode;
use axum::routing::{delete, post};
use axum::{Json, Router};
use serde::Deserialize;
use validator::Validate;

use super::extract::ApiJson;
use crate::auth::Identity;
use crate::domain::multipart::{ClientPart, MAX_PARTS};
use crate::error::AppError;
use crate::services::multipart::{self, Completed, PartListing, PartUrls, MAX_LIST_PAGE};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/uploads/{upload_id}", delete(abort))
        .route("/v1/uploads/{upload_id}/parts", post(part_urls).get(list))
        .route(
            "/v1/uploads/{upload_id}/complete",
            // 10,000 parts with their ETags need more than the default body limit.
            post(complete).layer(DefaultBodyLimit::max(COMPLETE_BODY_LIMIT)),
        )
}

/// Room for a completion list of 10,000 parts.
const COMPLETE_BODY_LIMIT: usize = 1024 * 1024;

#[derive(Debug, Deserialize, Validate)]
struct PartUrlsBody {
    part_numbers: Vec<i64>,
    /// One base64 checksum per part number, in the upload's declared algorithm.
    checksums: Option<Vec<String>>,
}

async fn part_urls(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(upload_id): ApiPath<String>,
    ApiJson(body): ApiJson<PartUrlsBody>,
) -> Result<Json<PartUrls>, AppError> {
    Ok(Json(
        multipart::part_urls(
            &state,
            &who,
            &upload_id,
            &body.part_numbers,
            body.checksums.as_deref(),
        )
        .await?,
    ))
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    after: Option<u32>,
    limit: Option<u32>,
}

async fn list(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(upload_id): ApiPath<String>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<PartListing>, AppError> {
    let bad = || {
        AppError::InvalidRequest(format!(
            "after must be 0..={MAX_PARTS} and limit 1..={MAX_LIST_PAGE}"
        ))
    };
    let Query(q) = query.map_err(|_| bad())?;
    let after = q.after.unwrap_or(0);
    let limit = q.limit.unwrap_or(MAX_LIST_PAGE);
    if after > MAX_PARTS || !(1..=MAX_LIST_PAGE).contains(&limit) {
        return Err(bad());
    }
    Ok(Json(
        multipart::list(&state, &who, &upload_id, after, limit).await?,
    ))
}

#[derive(Debug, Deserialize)]
struct CompletePart {
    part_number: i64,
    etag: String,
}

#[derive(Debug, Deserialize, Validate)]
struct CompleteBody {
    parts: Vec<CompletePart>,
}

async fn complete(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(upload_id): ApiPath<String>,
    ApiJson(body): ApiJson<CompleteBody>,
) -> Result<Json<Completed>, AppError> {
    let parts: Vec<ClientPart> = body
        .parts
        .into_iter()
        .map(|p| ClientPart {
            part_number: p.part_number,
            etag: p.etag,
        })
        .collect();
    Ok(Json(
        multipart::complete(&state, &who, &upload_id, &parts).await?,
    ))
}

async fn abort(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(upload_id): ApiPath<String>,
) -> Result<StatusCode, AppError> {
    multipart::abort(&state, &who, &upload_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
