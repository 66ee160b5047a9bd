//! `POST /v1/files/{id}/copies`: a new handle of the same object (owner or admin; `owner` for
//! admins only). 201 with the copy; each call makes a new copy.

use axum::extract::{FromRequest, Request, State};
use axum::http::{header, StatusCode};
use axum::Json;
use serde::Deserialize;
use validator::Validate;

use crate::auth::Identity;
use crate::domain::records::FileHandle;
use crate::error::AppError;
use crate::http::extract::{ApiJson, ApiPath};
use crate::services::copies::{self, CopyCommand};
use crate::state::AppState;

#[derive(Debug, Default, Deserialize, Validate)]
#[serde(deny_unknown_fields)]
pub(super) struct CopyBody {
    #[validate(length(min = 1, max = 128))]
    owner: Option<String>,
}

/// The body is optional: a request with neither a body nor a Content-Type copies for the
/// caller; anything else goes through the one JSON extractor (and its errors).
fn has_body(req: &Request) -> bool {
    req.headers().contains_key(header::CONTENT_TYPE)
        || req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0")
        || req.headers().contains_key(header::TRANSFER_ENCODING)
}

pub(super) async fn copy(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(id): ApiPath<String>,
    req: Request,
) -> Result<(StatusCode, Json<FileHandle>), AppError> {
    let body = if has_body(&req) {
        ApiJson::<CopyBody>::from_request(req, &state).await?.0
    } else {
        CopyBody::default()
    };
    let cmd = CopyCommand { owner: body.owner };
    let copy = copies::copy(&state, &who, &id, cmd).await?;
    Ok((StatusCode::CREATED, Json(copy)))
}
