//! Extractors that fail through the one error envelope: JSON bodies, bearer identity.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRef, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;
use validator::Validate;

use std::sync::Arc;

use crate::auth::{AuthError, Identity, Verifier};
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

/// The token verifier (secret, JWKS cache), reachable from the state for the identity extractor.
impl FromRef<AppState> for Arc<Verifier> {
    fn from_ref(state: &AppState) -> Self {
        state.verifier.clone()
    }
}

impl<S> FromRequestParts<S> for Identity
where
    Arc<Verifier>: FromRef<S>,
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
        let verifier = Arc::<Verifier>::from_ref(state);
        let identity = verifier
            .verify(token.trim(), chrono::Utc::now().timestamp())
            .await
            .map_err(|e| match e {
                AuthError::ProviderUnavailable { retry_after_secs } => {
                    AppError::IdentityProviderUnavailable { retry_after_secs }
                }
                other => AppError::Unauthorized(other),
            })?;
        tracing::Span::current().record("user.id", tracing::field::display(&identity.user_id));
        Ok(identity)
    }
}

/// An admin's identity: the token verified, then refused with 403 `admin_required` unless it is
/// an admin's. As a handler's first argument it runs before the path, query and body are read,
/// so a user never learns more about an admin route than that it is one (review 36: a body
/// parsed first answered a user 415 or 400 with the body's expected shape).
pub struct Admin(pub Identity);

impl<S> FromRequestParts<S> for Admin
where
    Arc<Verifier>: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let who = Identity::from_request_parts(parts, state).await?;
        if who.admin {
            Ok(Self(who))
        } else {
            Err(AppError::AdminRequired)
        }
    }
}
