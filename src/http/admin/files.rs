//! Finding files (admins): `GET /v1/admin/files` (by id, owner, key prefix, status or profile,
//! newest first, paged) and `GET /v1/admin/files/{id}` (a handle with its copies, links and
//! events). What an admin then does to a file — download, restore, copy — is the same call a
//! client makes (`/v1/files/{id}/…`).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use super::bad_query;
use crate::catalog::{Before, HandleFilter};
use crate::domain::ids::FileId;
use crate::domain::paging;
use crate::error::AppError;
use crate::http::extract::{Admin, ApiPath};
use crate::state::AppState;

/// At most this many copies, links and events on a file's page (the newest events).
const DETAIL_ROWS: i64 = 200;

/// The statuses a handle can have (openapi.yaml's `FileHandle.status`).
const STATUSES: [&str; 5] = ["available", "unlinked", "archived", "deleted", "expired"];

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/admin/files", get(find))
        .route("/v1/admin/files/{id}", get(detail))
        .route(
            "/v1/admin/files/{id}/render-failures",
            axum::routing::delete(clear_render_failures),
        )
        .route("/v1/admin/render-failures", get(render_failures))
}

/// Renders that ended their worker or ran past the time limit (issue 46), the latest first:
/// each row refuses that variant of that file until cleared.
async fn render_failures(
    _admin: Admin,
    State(state): State<AppState>,
) -> Result<Json<serde_json::Value>, AppError> {
    let rows = state.catalog.render_failures(None, DETAIL_ROWS).await?;
    Ok(Json(serde_json::json!({ "failures": rows })))
}

/// Forgets a file's failed renders (every variant's): its next request renders it again. For
/// an operator who has looked at the file (or upgraded the decoder that died on it).
async fn clear_render_failures(
    _admin: Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<serde_json::Value>, AppError> {
    let id = FileId::parse(&id).ok_or(AppError::FileNotFound)?;
    // Its bytes' rows too (another file of the same bytes recorded the failure).
    let content = state
        .catalog
        .handle_by_id(&id)
        .await?
        .map(|f| crate::services::render_failures::content_of(&f))
        .unwrap_or_default();
    let cleared = state
        .catalog
        .clear_render_failures(id.as_str(), &content, None)
        .await?;
    tracing::info!(file.id = %id, cleared, "render failures cleared by an admin");
    Ok(Json(serde_json::json!({ "cleared": cleared })))
}

#[derive(Debug, Deserialize)]
struct FindQuery {
    id: Option<String>,
    owner: Option<String>,
    key_prefix: Option<String>,
    status: Option<String>,
    profile: Option<String>,
    before: Option<String>,
    limit: Option<i64>,
}

/// An empty field is no filter (what a blank search form sends).
fn given(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

fn filter_of(q: &mut FindQuery) -> Result<HandleFilter, AppError> {
    let filter = HandleFilter {
        id: given(q.id.take()),
        owner: given(q.owner.take()),
        key_prefix: given(q.key_prefix.take()),
        status: given(q.status.take()),
        profile: given(q.profile.take()),
    };
    if let Some(id) = &filter.id {
        if FileId::parse(id).is_none() {
            return Err(AppError::InvalidRequest(
                "id: 32 lowercase hex digits".into(),
            ));
        }
    }
    if let Some(status) = &filter.status {
        if !STATUSES.contains(&status.as_str()) {
            return Err(AppError::InvalidRequest(format!(
                "status: one of {}",
                STATUSES.join(", ")
            )));
        }
    }
    for (name, value) in [
        ("owner", &filter.owner),
        ("key_prefix", &filter.key_prefix),
        ("profile", &filter.profile),
    ] {
        // No key, owner or profile holds one (and PostgreSQL refuses a NUL in text).
        if value
            .as_ref()
            .is_some_and(|v| v.chars().any(char::is_control))
        {
            return Err(AppError::InvalidRequest(format!(
                "{name}: no control characters"
            )));
        }
    }
    for (name, value, max) in [
        ("owner", &filter.owner, 256),
        ("key_prefix", &filter.key_prefix, 1024),
        ("profile", &filter.profile, 128),
    ] {
        if value.as_ref().is_some_and(|v| v.len() > max) {
            return Err(AppError::InvalidRequest(format!(
                "{name}: at most {max} bytes"
            )));
        }
    }
    Ok(filter)
}

async fn find(
    _admin: Admin,
    State(state): State<AppState>,
    query: Result<Query<FindQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, AppError> {
    let Query(mut q) = query.map_err(|e| bad_query(&e.body_text()))?;
    let filter = filter_of(&mut q)?;
    let before = match q.before {
        None => None,
        Some(c) => {
            let (at, id) = paging::parse_before(paging::List::Files, &c).ok_or_else(|| {
                AppError::InvalidRequest("before: a next_before this search returned".into())
            })?;
            Some(Before { at, id })
        }
    };
    let limit = paging::page_size(q.limit)
        .ok_or_else(|| AppError::InvalidRequest(format!("limit: 1..={}", paging::MAX_PAGE)))?;
    let files = state
        .catalog
        .find_handles(&filter, before.as_ref(), limit)
        .await?;
    let next_before = match files.last() {
        Some(h) if i64::try_from(files.len()).unwrap_or(i64::MAX) == limit => Some(
            paging::before_cursor(paging::List::Files, h.created_at, h.id.as_str()),
        ),
        _ => None,
    };
    Ok(Json(
        serde_json::json!({ "files": files, "next_before": next_before }),
    ))
}

async fn detail(
    _admin: Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<serde_json::Value>, AppError> {
    let id = FileId::parse(&id).ok_or(AppError::FileNotFound)?;
    let file = state
        .catalog
        .handle_by_id(&id)
        .await?
        .ok_or(AppError::FileNotFound)?;
    let copies: Vec<_> = state
        .catalog
        .handles_of_key(&file.key, DETAIL_ROWS + 1)
        .await?
        .into_iter()
        .filter(|h| h.id != file.id)
        .collect();
    let links = state.catalog.file_links(id.as_str(), DETAIL_ROWS).await?;
    let events: Vec<serde_json::Value> = state
        .catalog
        .events_of_subject(id.as_str(), DETAIL_ROWS)
        .await?
        .into_iter()
        .map(|e| {
            let mut v: serde_json::Value =
                serde_json::from_str(&e.payload).unwrap_or(serde_json::Value::Null);
            if let Some(o) = v.as_object_mut() {
                o.insert("id".into(), e.id.into());
                o.insert("cursor".into(), e.position.map(|p| p.to_string()).into());
            }
            v
        })
        .collect();
    let variants: Vec<&str> = state
        .settings
        .profile(&file.profile)
        .map(|p| p.variants.iter().map(|v| v.name.as_str()).collect())
        .unwrap_or_default();
    // Its own rows and its bytes' (another file of the same bytes killed a worker): all that
    // refuses it.
    let content = crate::services::render_failures::content_of(&file);
    let render_failures = state
        .catalog
        .render_failures(Some((id.as_str(), &content)), DETAIL_ROWS)
        .await?;
    Ok(Json(serde_json::json!({
        "file": file,
        "variants": variants,
        "render_failures": render_failures,
        "copies": copies,
        "links": links,
        "events": events,
    })))
}
