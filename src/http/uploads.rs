//! `POST /v1/uploads`: presign (single PUT, POST form, or a multipart session).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::value::RawValue;
use validator::Validate;

use super::extract::ApiJson;
use crate::auth::Identity;
use crate::domain::profile::RawSize;
use crate::domain::records::UploadMethod;
use crate::error::AppError;
use crate::services::presign::{self, PresignCommand, PresignedUpload};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/uploads", post(create))
}

#[derive(Debug, Deserialize, Validate)]
struct PresignBody {
    #[validate(length(min = 1, max = 64))]
    profile: String,
    content_type: Option<String>,
    /// Kept as its source text: a float parse would turn `1e3` into 1000 and round
    /// `20971520.0000000001` down to the maximum.
    size: Option<Box<RawValue>>,
    filename: Option<String>,
    method: Option<String>,
    multipart: Option<bool>,
    checksum: Option<ChecksumBody>,
}

/// `{"algorithm": "SHA256" | "CRC32C" | "CRC64NVME", "value": "<base64>"}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChecksumBody {
    algorithm: String,
    value: String,
}

/// JSON numbers arrive as whatever the client sent: negative, fractional or beyond 2^64; only
/// an integer literal is a size. A size that is not a number is malformed JSON for this body.
fn raw_size(n: Option<&RawValue>) -> Result<RawSize, AppError> {
    match n {
        None => Ok(RawSize::NotInteger),
        Some(raw) => RawSize::parse_literal(raw.get())
            .map_err(|_| AppError::InvalidJson("size: expected a number".into())),
    }
}

async fn create(
    State(state): State<AppState>,
    who: Identity,
    ApiJson(body): ApiJson<PresignBody>,
) -> Result<(StatusCode, Json<PresignedUpload>), AppError> {
    let method = match body.method.as_deref() {
        None => None,
        Some("PUT") => Some(UploadMethod::Put),
        Some("POST") => Some(UploadMethod::Post),
        Some(_) => return Err(AppError::MethodInvalid),
    };
    let cmd = PresignCommand {
        profile: body.profile,
        content_type: body.content_type,
        size: raw_size(body.size.as_deref())?,
        filename: body.filename,
        method,
        multipart: body.multipart,
        checksum: body.checksum.map(|c| (c.algorithm, c.value)),
    };
    let presigned = presign::presign(&state, &who, cmd).await?;
    Ok((StatusCode::CREATED, Json(presigned)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> Box<RawValue> {
        serde_json::from_str(s).expect("number")
    }

    #[test]
    fn sizes_from_json_keep_their_sign_and_magnitude() {
        let size = |s: &str| raw_size(Some(&num(s))).ok();
        assert_eq!(size("10"), Some(RawSize::Integer(10)));
        assert_eq!(size("-1"), Some(RawSize::Integer(-1)));
        assert_eq!(
            size("18446744073709551615"),
            Some(RawSize::Integer(u64::MAX.into()))
        );
        assert!(
            matches!(size("18446744073709551616"), Some(RawSize::Integer(n)) if n > u64::MAX.into())
        );
        assert_eq!(size("1.5"), Some(RawSize::NotInteger));
        assert_eq!(size("1e3"), Some(RawSize::NotInteger));
        assert_eq!(size("1.0"), Some(RawSize::NotInteger));
        assert_eq!(size("20971520.0000000001"), Some(RawSize::NotInteger));
        assert_eq!(size("\"10\""), None, "a string is not a size");
        assert_eq!(raw_size(None).ok(), Some(RawSize::NotInteger));
    }

    use proptest::prelude::*;

    /// JSON-shaped input: objects with the request's fields holding any JSON value, plus raw
    /// strings around them.
    fn body() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            Just("null".to_owned()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| format!("{f:e}")),
            "[0-9]{1,40}",
            "-?[0-9]{1,30}\\.[0-9]{1,5}",
            any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap_or_default()),
            Just("[]".to_owned()),
            Just("{}".to_owned()),
            Just("true".to_owned()),
        ];
        let field = prop_oneof![
            Just("profile"),
            Just("content_type"),
            Just("size"),
            Just("filename"),
            Just("method"),
            Just("multipart"),
            Just("extra"),
        ];
        prop_oneof![
            prop::collection::vec((field, value), 0..8).prop_map(|kv| {
                let inner: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", inner.join(","))
            }),
            any::<String>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Whatever arrives, parsing and validation answer (an error or a body); they never panic,
        /// and a size that parses keeps its sign and magnitude class.
        #[test]
        fn request_bodies_never_panic_the_parser(text in body()) {
            if let Ok(b) = serde_json::from_str::<PresignBody>(&text) {
                let _ = b.validate();
                let src = b.size.as_deref().map(RawValue::get).unwrap_or_default().to_owned();
                match raw_size(b.size.as_deref()) {
                    Ok(RawSize::Integer(n)) => {
                        prop_assert_eq!(n < 0, src.starts_with('-') && n != 0, "{}", src);
                        prop_assert!(!src.contains(['.', 'e', 'E']), "{}", src);
                    }
                    Ok(RawSize::NotInteger) | Err(_) => {}
                }
            }
        }
    }
}
