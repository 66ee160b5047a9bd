//! Webhook endpoints through the API (admins): `POST /v1/admin/webhooks` (the secret is made
//! here and shown once, in the 201), `GET /v1/admin/webhooks` (no secrets),
//! `DELETE /v1/admin/webhooks/{id}` (disables; the deliveries are kept). Endpoints of the
//! settings file are listed too but changed only there.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use validator::Validate;

use super::extract::{ApiJson, ApiPath};
use crate::auth::Identity;
use crate::catalog::EndpointSpec;
use crate::domain::events::{parse_subscription, subscription_text, EventType};
use crate::domain::{records, webhooks};
use crate::error::AppError;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/admin/webhooks", get(list).post(create))
        .route("/v1/admin/webhooks/{id}", delete(disable))
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
}

fn admin(who: &Identity) -> Result<(), AppError> {
    if who.admin {
        Ok(())
    } else {
        Err(AppError::AdminRequired)
    }
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
    State(state): State<AppState>,
    who: Identity,
    ApiJson(body): ApiJson<NewWebhook>,
) -> Result<(StatusCode, Json<Created>), AppError> {
    admin(&who)?;
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
    State(state): State<AppState>,
    who: Identity,
) -> Result<Json<serde_json::Value>, AppError> {
    admin(&who)?;
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
        })
        .collect();
    Ok(Json(serde_json::json!({ "webhooks": listed })))
}

async fn disable(
    State(state): State<AppState>,
    who: Identity,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, AppError> {
    admin(&who)?;
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
