//! The one JSON error envelope: `{"error": {"code", "message"}}`. Internal errors are logged
//! here, once, with their detail; the client sees only the code and a generic message.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::error::AppError;

/// The error code of a response, for the metrics middleware (which never parses bodies).
#[derive(Debug, Clone)]
pub(crate) struct ErrorCode(pub String);

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        match &self {
            AppError::Internal(detail) => {
                tracing::error!(error.code = self.code(), error.detail = %detail, "request failed")
            }
            AppError::StoreRefused(detail) => {
                tracing::error!(error.code = self.code(), error.detail = %detail, "the object store refused a request")
            }
            AppError::Unavailable(detail) => {
                tracing::warn!(error.code = self.code(), error.detail = %detail, "dependency unavailable")
            }
            _ => tracing::info!(
                error.code = self.code(),
                status = status.as_u16(),
                "request refused"
            ),
        }
        let mut error = json!({ "code": self.code(), "message": self.public_message() });
        // The one error that points at a resource: the file the upload already became.
        if let AppError::UploadAlreadyCommitted { file_id } = &self {
            error["file_id"] = json!(file_id);
        }
        let body = Json(json!({ "error": error }));
        let mut response = (status, body).into_response();
        response
            .extensions_mut()
            .insert(ErrorCode(self.code().to_owned()));
        if let Some(secs) = self.retry_after() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if matches!(self, AppError::Unauthorized(_)) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
