//! `GET /v1/files/{id}/variants/{name}`: a short-lived GET URL of the file's rendition for one
//! of its profile's variants, rendered first when it is not cached yet (issue 37). Who may ask
//! is who may download the file: its owner or an admin; anyone else gets the same 404 as for an
//! unknown id.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::Json;

use super::read::{refuse_expired, visible_handle};
use crate::auth::Identity;
use crate::error::AppError;
use crate::http::extract::ApiPath;
use crate::services::renditions::{rendition, RenditionUrl};
use crate::state::AppState;

pub(super) async fn variant_url(
    State(state): State<AppState>,
    who: Identity,
    ApiPath((id, name)): ApiPath<(String, String)>,
) -> Result<(HeaderMap, Json<RenditionUrl>), AppError> {
    let h = visible_handle(&state, &who, &id).await?;
    refuse_expired(&h)?;
    let url = rendition(&state, &h, &name).await?;
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok((headers, Json(url)))
}
