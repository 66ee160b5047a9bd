//! Webhook endpoints through the API (admins): `POST /v1/admin/webhooks` (the secret is made
//! here and shown once, in the 201), `GET /v1/admin/webhooks` (no secrets),
//! `DELETE /v1/admin/webhooks/{id}` (disables; the deliveries are kept),
//! `GET /v1/admin/webhooks/{id}/deliveries` (a page of its deliveries, by state),
//! `POST /v1/admin/webhooks/{id}/retry` and `POST /v1/admin/webhooks/{id}/replay` (what
//! `upcommit events retry|replay --yes` do). Endpoints of the settings file are listed too but
//! changed only there.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use validator::Validate;

use super::extract::{Admin, ApiJson, ApiPath};
use crate::catalog::EndpointSpec;
use crate::domain::events::{parse_subscription, subscription_text, EventType};
use crate::domain::{records, webhooks};
use crate::error::AppError;
use crate::services::events::redeliver::{self, RedeliverError};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/admin/webhooks", get(list).post(create))
        .route("/v1/admin/webhooks/{id}", delete(disable))
        .route("/v1/admin/webhooks/{id}/deliveries", get(deliveries))
        .route("/v1/admin/webhooks/{id}/retry", post(retry))
        .route("/v1/admin/webhooks/{id}/replay", post(replay))
}

#[derive(Debug, Deserialize, Validate)]
#[serde(deny_unknown_fields)]
struct NewWebhook {
    id: String,
    url: String,
    /// Event type names, or `["*"]`.
    #[validate(length(min = 1, max = 32))]
    types: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Created {
    id: String,
    kind: &'static str,
    url: String,
    types: Vec<&'static str>,
    source: &'static str,
    /// Shown here only: the receiver verifies signatures with it.
    secret: String,
}

#[derive(Debug, Serialize)]
struct Listed {
    id: String,
    kind: String,
    url: String,
    types: Vec<String>,
    source: String,
    enabled: bool,
    pending: i64,
    failed: i64,
    delivered: i64,
    oldest_undelivered_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// 32 bytes from two v4 UUIDs (the `uuid` crate's thread-local CSPRNG): 244 random bits.
fn new_key() -> Vec<u8> {
    let mut key = Vec::with_capacity(32);
    key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    key
}

fn type_names(stored: &str) -> Vec<String> {
    if stored == "*" {
        return vec!["*".into()];
    }
    stored
        .split(',')
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect()
}

async fn create(
    _admin: Admin,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<NewWebhook>,
) -> Result<(StatusCode, Json<Created>), AppError> {
    webhooks::check_endpoint_id(&body.id).map_err(AppError::InvalidRequest)?;
    webhooks::check_webhook_url(&body.url)
        .map_err(|e| AppError::InvalidRequest(format!("url: {e}")))?;
    let types = parse_subscription(&body.types)
        .map_err(|e| AppError::InvalidRequest(format!("types: {e}")))?;
    let secret = webhooks::secret_from_key(&new_key());
    let spec = EndpointSpec {
        id: body.id.clone(),
        kind: "webhook".into(),
        url: body.url.clone(),
        secret: Some(secret.clone()),
        event_types: subscription_text(&types),
    };
    if !state
        .catalog
        .create_api_endpoint(&spec, records::now())
        .await?
    {
        return Err(AppError::WebhookExists);
    }
    tracing::info!(endpoint = %spec.id, "webhook endpoint created through the API");
    let all = types.len() == EventType::ALL.len();
    Ok((
        StatusCode::CREATED,
        Json(Created {
            id: spec.id,
            kind: "webhook",
            url: spec.url,
            types: if all {
                vec!["*"]
            } else {
                types.iter().map(|t| t.as_str()).collect()
            },
            source: "api",
            secret,
        }),
    ))
}

async fn list(
    _admin: Admin,
    State(state): State<AppState>,
) -> Result<Json<serde_json::Value>, AppError> {
    let listed: Vec<Listed> = state
        .catalog
        .endpoint_counts()
        .await?
        .into_iter()
        .map(|c| Listed {
            types: type_names(&c.event_types),
            id: c.id,
            kind: c.kind,
            url: c.url,
            source: c.source,
            enabled: c.enabled,
            pending: c.pending,
            failed: c.failed,
            delivered: c.delivered,
            oldest_undelivered_at: c.oldest_undelivered_at,
        })
        .collect();
    Ok(Json(serde_json::json!({ "webhooks": listed })))
}

async fn disable(
    _admin: Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, AppError> {
    plausible(&id)?;
    match state
        .catalog
        .disable_api_endpoint(&id, records::now())
        .await?
        .as_deref()
    {
        None => Err(AppError::WebhookNotFound),
        Some("api") => Ok(StatusCode::NO_CONTENT),
        Some(_) => Err(AppError::WebhookFromSettings),
    }
}

#[derive(Debug, Deserialize)]
struct DeliveriesQuery {
    state: Option<String>,
    after: Option<String>,
    limit: Option<i64>,
}

#[derive(Serialize)]
struct DeliveryView {
    /// The event's feed position: `after` continues from it, and `replay` takes it.
    cursor: String,
    event_id: String,
    #[serde(rename = "type")]
    event_type: String,
    subject: String,
    state: String,
    attempts: i64,
    last_status: Option<i64>,
    last_error: Option<String>,
    created_at: chrono::DateTime<chrono::Utc>,
    next_attempt_at: chrono::DateTime<chrono::Utc>,
    delivered_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// An id no endpoint can have (not `[a-z0-9_-]{1,64}`: a NUL byte, say, which PostgreSQL
/// refuses in text) is no endpoint: 404 without a query.
fn plausible(id: &str) -> Result<(), AppError> {
    webhooks::check_endpoint_id(id).map_err(|_| AppError::WebhookNotFound)
}

/// The endpoint, or 404 `webhook_not_found`: one key lookup, not the deliveries' counts.
async fn known(state: &AppState, id: &str) -> Result<(), AppError> {
    plausible(id)?;
    if state.catalog.endpoint_exists(id).await? {
        Ok(())
    } else {
        Err(AppError::WebhookNotFound)
    }
}

async fn deliveries(
    _admin: Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<DeliveriesQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, AppError> {
    let Query(q) =
        query.map_err(|e| AppError::InvalidRequest(format!("query: {}", e.body_text())))?;
    let wanted = q.state;
    if let Some(s) = &wanted {
        if !["pending", "failed", "delivered"].contains(&s.as_str()) {
            return Err(AppError::InvalidRequest(
                "state: one of pending, failed, delivered".into(),
            ));
        }
    }
    let after =
        crate::services::events::feed::parse_cursor(q.after.as_deref()).ok_or_else(|| {
            AppError::InvalidRequest("after: a cursor of this list or of GET /v1/events".into())
        })?;
    let limit = crate::domain::paging::page_size(q.limit).ok_or_else(|| {
        AppError::InvalidRequest(format!("limit: 1..={}", crate::domain::paging::MAX_PAGE))
    })?;
    known(&state, &id).await?;
    let rows = state
        .catalog
        .deliveries_page(&id, wanted.as_deref(), after, limit)
        .await?;
    let next_after = match rows.last() {
        Some(d) if i64::try_from(rows.len()).unwrap_or(i64::MAX) == limit => {
            Some(d.position.to_string())
        }
        _ => None,
    };
    let deliveries: Vec<DeliveryView> = rows
        .into_iter()
        .map(|d| DeliveryView {
            cursor: d.position.to_string(),
            event_id: d.event_id,
            event_type: d.event_type,
            subject: d.subject,
            state: d.state,
            attempts: d.attempts,
            last_status: d.last_status,
            last_error: d.last_error,
            created_at: d.created_at,
            next_attempt_at: d.next_attempt_at,
            delivered_at: d.delivered_at,
        })
        .collect();
    Ok(Json(
        serde_json::json!({ "deliveries": deliveries, "next_after": next_after }),
    ))
}

fn redeliver_error(e: RedeliverError) -> AppError {
    match e {
        RedeliverError::NotFound => AppError::WebhookNotFound,
        RedeliverError::Disabled(_) => AppError::WebhookDisabled,
        RedeliverError::Catalog(e) => e.into(),
    }
}

async fn retry(
    _admin: Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<serde_json::Value>, AppError> {
    plausible(&id)?;
    let n = redeliver::retry(&state.catalog, &state.settings, &id, false)
        .await
        .map_err(redeliver_error)?;
    Ok(Json(serde_json::json!({ "endpoint": id, "due_again": n })))
}

#[derive(Debug, Deserialize, Validate)]
#[serde(deny_unknown_fields)]
struct ReplayRequest {
    /// A feed cursor (`GET /v1/events`, or a delivery's); the events after it are sent again.
    after: String,
}

async fn replay(
    _admin: Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ReplayRequest>,
) -> Result<Json<serde_json::Value>, AppError> {
    plausible(&id)?;
    let after =
        crate::services::events::feed::parse_cursor(Some(&body.after)).ok_or_else(|| {
            AppError::InvalidRequest("after: a cursor of GET /v1/events (digits)".into())
        })?;
    let r = redeliver::replay(&state.catalog, &state.settings, &id, after, false)
        .await
        .map_err(redeliver_error)?;
    Ok(Json(serde_json::json!({
        "endpoint": id,
        "after": after.to_string(),
        "due_again": r.due_again,
        "pruned_through": r.pruned_through.map(|p| p.to_string()),
    })))
}
