//! Extractors that fail through the one error envelope: JSON bodies, bearer identity.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRef, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;
use validator::Validate;

use crate::auth::{self, AuthError, Identity};
use crate::config::SecretString;
use crate::error::AppError;
use crate::state::AppState;

/// A JSON body that is parsed, then shape-checked with `validator`.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned + Validate,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let axum::Json(value) = axum::Json::<T>::from_request(req, state)
            .await
            .map_err(json_rejection)?;
        value
            .validate()
            .map_err(|e| AppError::InvalidRequest(e.to_string().replace('\n', "; ")))?;
        Ok(Self(value))
    }
}

fn json_rejection(r: JsonRejection) -> AppError {
    match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => AppError::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => AppError::UnsupportedMediaType,
        _ => AppError::InvalidJson(r.body_text()),
    }
}

/// Path parameters whose rejection (bad percent-encoding, a number that does not parse) is an
/// `invalid_request` in the envelope rather than axum's plain-text 400.
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| Self(v))
            .map_err(|r| AppError::InvalidRequest(format!("path: {}", r.body_text())))
    }
}

/// The JWT secret, reachable from the state for the identity extractor.
pub struct JwtSecret(pub SecretString);

impl FromRef<AppState> for JwtSecret {
    fn from_ref(state: &AppState) -> Self {
        JwtSecret(state.settings.auth.jwt_secret.clone())
    }
}

impl<S> FromRequestParts<S> for Identity
where
    JwtSecret: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or(AppError::Unauthorized(AuthError::Missing))?;
        let value = header
            .to_str()
            .map_err(|_| AppError::Unauthorized(AuthError::Malformed))?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .ok_or(AppError::Unauthorized(AuthError::Malformed))?;
        let JwtSecret(secret) = JwtSecret::from_ref(state);
        let identity = auth::verify(
            secret.expose().as_bytes(),
            token.trim(),
            chrono::Utc::now().timestamp(),
        )
        .map_err(AppError::Unauthorized)?;
        tracing::Span::current().record("user.id", tracing::field::display(&identity.user_id));
        Ok(identity)
    }
}
