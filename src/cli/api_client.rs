//! The service's HTTP API as the CLI uploader calls it: presign, part URLs, completion, abort,
//! commit. Every refusal comes back as an [`ApiError`] carrying the stable error `code`.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

#[derive(Debug, Clone, Deserialize)]
pub struct Presigned {
    pub upload_id: String,
    pub key: String,
    pub method: String,
    pub url: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub fields: Option<BTreeMap<String, String>>,
    pub multipart: Option<MultipartPlan>,
    /// The checksum the service bound into the URL, form or multipart upload.
    pub checksum: Option<DeclaredChecksum>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeclaredChecksum {
    pub algorithm: String,
    pub value: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct MultipartPlan {
    pub part_size: u64,
    pub part_count: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PartUrl {
    pub part_number: u32,
    pub url: String,
    pub headers: BTreeMap<String, String>,
    pub size: u64,
}

#[derive(Debug, Deserialize)]
struct PartUrls {
    parts: Vec<PartUrl>,
}

/// The parts S3 holds for an upload (every page of `GET /v1/uploads/{id}/parts`).
#[derive(Debug, Clone, Deserialize)]
pub struct PartListing {
    pub state: String,
    pub part_size: u64,
    pub part_count: u32,
    pub parts: Vec<ListedPart>,
    #[serde(default)]
    pub next_after: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ListedPart {
    pub part_number: u32,
    pub etag: String,
    pub size: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CompletedPart {
    pub part_number: u32,
    pub etag: String,
}

/// What went wrong talking to the service.
#[derive(Debug)]
pub enum ApiError {
    /// The service answered with an error envelope (or at least a status).
    Refused {
        status: StatusCode,
        code: String,
        message: String,
        retry_after: Option<u64>,
    },
    /// No answer: connection refused, reset, timed out.
    Unreachable(String),
}

impl ApiError {
    /// Worth retrying the same call: the service did not answer, failed, or asked to wait.
    pub fn transient(&self) -> bool {
        match self {
            ApiError::Unreachable(_) => true,
            ApiError::Refused { status, code, .. } => {
                status.is_server_error()
                    || matches!(
                        code.as_str(),
                        "commit_in_progress" | "request_timeout" | "rate_limited"
                    )
            }
        }
    }
}

pub struct ApiClient {
    http: reqwest::Client,
    server: String,
    token: String,
}

impl ApiClient {
    pub fn new(http: reqwest::Client, server: &str, token: String) -> Self {
        Self {
            http,
            server: server.trim_end_matches('/').to_owned(),
            token,
        }
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ApiError> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.server))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(120));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| ApiError::Unreachable(e.to_string()))?;
        let status = resp.status();
        if status == StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let text = resp
            .text()
            .await
            .map_err(|e| ApiError::Unreachable(e.to_string()))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(value);
        }
        let code = value["error"]["code"]
            .as_str()
            .map_or_else(|| format!("http_{}", status.as_u16()), str::to_owned);
        let message = value["error"]["message"].as_str().unwrap_or("").to_owned();
        Err(ApiError::Refused {
            status,
            code,
            message,
            retry_after,
        })
    }

    fn parse<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ApiError> {
        serde_json::from_value(value).map_err(|e| ApiError::Refused {
            status: StatusCode::BAD_GATEWAY,
            code: "unexpected_response".into(),
            message: e.to_string(),
            retry_after: None,
        })
    }

    pub async fn presign(&self, body: Value) -> Result<Presigned, ApiError> {
        let v = self
            .call(reqwest::Method::POST, "/v1/uploads", Some(body))
            .await?;
        Self::parse(v)
    }

    /// Part URLs; `checksums` (base64, one per part number, in the upload's declared algorithm)
    /// are required when the upload declared a full-object checksum at presign.
    pub async fn part_urls(
        &self,
        upload_id: &str,
        numbers: &[u32],
        checksums: Option<&[String]>,
    ) -> Result<Vec<PartUrl>, ApiError> {
        let mut body = json!({ "part_numbers": numbers });
        if let Some(c) = checksums {
            body["checksums"] = json!(c);
        }
        let v = self
            .call(
                reqwest::Method::POST,
                &format!("/v1/uploads/{upload_id}/parts"),
                Some(body),
            )
            .await?;
        Ok(Self::parse::<PartUrls>(v)?.parts)
    }

    /// Every part S3 holds for the upload, following the pages.
    pub async fn list_parts(&self, upload_id: &str) -> Result<PartListing, ApiError> {
        let mut after = 0u32;
        let mut all: Option<PartListing> = None;
        loop {
            let v = self
                .call(
                    reqwest::Method::GET,
                    &format!("/v1/uploads/{upload_id}/parts?after={after}&limit=1000"),
                    None,
                )
                .await?;
            let page: PartListing = Self::parse(v)?;
            let next = page.next_after.filter(|n| *n > after);
            match &mut all {
                None => all = Some(page),
                Some(listing) => listing.parts.extend(page.parts),
            }
            match next {
                Some(n) => after = n,
                None => break,
            }
        }
        let mut listing = all.ok_or_else(|| ApiError::Unreachable("no listing".into()))?;
        listing.next_after = None;
        Ok(listing)
    }

    pub async fn complete(&self, upload_id: &str, parts: &[CompletedPart]) -> Result<(), ApiError> {
        self.call(
            reqwest::Method::POST,
            &format!("/v1/uploads/{upload_id}/complete"),
            Some(json!({ "parts": parts })),
        )
        .await
        .map(|_| ())
    }

    pub async fn abort(&self, upload_id: &str) -> Result<(), ApiError> {
        self.call(
            reqwest::Method::DELETE,
            &format!("/v1/uploads/{upload_id}"),
            None,
        )
        .await
        .map(|_| ())
    }

    /// `GET /v1/files/{id}/variants/{name}`: one rendition's URL (rendered first if need be).
    pub async fn variant(&self, id: &str, name: &str) -> Result<Value, ApiError> {
        let path = format!(
            "/v1/files/{}/variants/{}",
            percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC),
            percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC)
        );
        self.call(reqwest::Method::GET, &path, None).await
    }

    /// `POST /v1/files/variants/{name}`: many files' rendition URLs (1 to 100 ids).
    pub async fn variants(&self, name: &str, ids: &[String]) -> Result<Value, ApiError> {
        let path = format!(
            "/v1/files/variants/{}",
            percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC)
        );
        self.call(reqwest::Method::POST, &path, Some(json!({ "ids": ids })))
            .await
    }

    pub async fn commit(&self, key: &str, final_key: Option<&str>) -> Result<Value, ApiError> {
        let mut body = json!({ "key": key });
        if let Some(k) = final_key {
            body["final_key"] = json!(k);
        }
        self.call(reqwest::Method::POST, "/v1/files", Some(body))
            .await
    }
}
