//! The queue sink's sender: SQS `SendMessage` over the JSON protocol, signed with SigV4 by hand
//! (`aws-sigv4`, service `sqs`) rather than through `aws-sdk-sqs` — one small POST does not
//! need a second generated SDK in the build. Credentials, region and endpoint override are the
//! S3 client's (`UPCOMMIT_S3_ENDPOINT` reaches LocalStack's SQS as well as its S3).
//!
//! The sender makes one attempt per call: retries, backoff and giving up belong to the
//! delivery worker, which knows the event's history. Each error says whether retrying can help
//! and keeps SQS's own code.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_sdk_s3::config::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_smithy_runtime_api::client::identity::Identity;
use serde::Deserialize;
use serde_json::{json, Value};

use super::aws::{AwsContext, CredentialsCache};
use crate::config::S3Settings;
use crate::domain::queue::{
    classify, default_service, fifo_token, service_for, short_code, sqs_body, QueueService,
    QueueUrl, QueueUrlError, Retry, UnsendableBody,
};

/// One SendMessage's time limit, answer included.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// A failed SQS call: whether sending it again can help, and what SQS said.
#[derive(Debug, Clone, thiserror::Error)]
#[error("SQS {}{}: {message}", code.as_deref().unwrap_or("error"), status.map(|s| format!(" ({s})")).unwrap_or_default())]
pub struct SqsError {
    pub retry: Retry,
    /// SQS's error code (`QueueDoesNotExist`, `AccessDenied`, `RequestThrottled`, …); ours for
    /// a queue URL refused before any call (`InvalidQueueUrl`); `None` for network failures.
    pub code: Option<String>,
    /// The HTTP status of SQS's answer; `None` when there was none.
    pub status: Option<u16>,
    pub message: String,
}

impl SqsError {
    pub fn is_retryable(&self) -> bool {
        self.retry == Retry::Retryable
    }

    fn local(retry: Retry, code: Option<&str>, message: String) -> Self {
        Self {
            retry,
            code: code.map(str::to_owned),
            status: None,
            message,
        }
    }
}

impl From<UnsendableBody> for SqsError {
    fn from(e: UnsendableBody) -> Self {
        Self::local(
            Retry::Permanent,
            Some("InvalidMessageContents"),
            e.to_string(),
        )
    }
}

impl From<QueueUrlError> for SqsError {
    fn from(e: QueueUrlError) -> Self {
        Self::local(Retry::Permanent, Some("InvalidQueueUrl"), e.to_string())
    }
}

/// Sends events to SQS queues. Cheap to share (`Arc`); signs with the process's credentials
/// cache and sends through its one HTTP client (`AwsContext`).
pub struct SqsSender {
    http: reqwest::Client,
    credentials: Arc<CredentialsCache>,
    region: String,
    endpoint: Option<String>,
}

impl std::fmt::Debug for SqsSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsSender")
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl SqsSender {
    /// On a context of its own, from the standard AWS credential and region chain, with the S3
    /// client's region and endpoint override (tests, tools).
    pub async fn connect(settings: &S3Settings) -> Result<Self, SqsError> {
        let local = |e: String| SqsError::local(Retry::Permanent, None, e);
        let http = crate::outbound::client().map_err(|e| local(format!("HTTP client: {e}")))?;
        let aws = AwsContext::load(settings, http)
            .await
            .map_err(|e| local(e.to_string()))?;
        Ok(Self::new(&aws, settings.endpoint.as_deref()))
    }

    /// On the process's shared context: the S3 facade's credentials cache and HTTP client.
    pub fn new(aws: &AwsContext, endpoint: Option<&str>) -> Self {
        Self {
            http: aws.http().clone(),
            credentials: aws.credentials().clone(),
            region: aws.region(),
            endpoint: endpoint.map(str::to_owned),
        }
    }

    /// Sends one event. `body` is delivered byte for byte (a JSON body holding characters SQS
    /// refuses, U+FFFE or U+FFFF in a filename, has them escaped: see
    /// [`crate::domain::queue::sqs_body`]); message attributes `event_id` and
    /// `type` (the body's own top-level `"type"`, when it has one) let consumers route without
    /// parsing it. On a FIFO queue (`.fifo`) the message group is `group` (the event's subject:
    /// a file's events stay in order) and the deduplication id is `event_id` (SQS drops a resend
    /// within its five-minute window).
    #[tracing::instrument(skip_all, fields(sqs.queue_url = %queue_url, event.id = %event_id))]
    pub async fn send(
        &self,
        queue_url: &str,
        body: &str,
        event_id: &str,
        group: &str,
    ) -> Result<(), SqsError> {
        let queue = QueueUrl::parse(queue_url)?;
        let payload = send_message_payload(&queue, body, event_id, group)?;
        let answer = self
            .call(&self.service(Some(&queue))?, "SendMessage", &payload)
            .await?;
        tracing::debug!(
            sqs.message_id = answer
                .get("MessageId")
                .and_then(serde_json::Value::as_str)
                .unwrap_or(""),
            "sent to SQS"
        );
        Ok(())
    }

    /// Any SQS JSON action (`CreateQueue`, `ReceiveMessage`, `GetQueueAttributes`, …), signed
    /// the same way: sent to the queue's service when `queue_url` is given, else to the
    /// override or the region's endpoint. Answers SQS's JSON.
    pub async fn request(
        &self,
        queue_url: Option<&str>,
        action: &str,
        payload: &Value,
    ) -> Result<Value, SqsError> {
        let queue = queue_url.map(QueueUrl::parse).transpose()?;
        let service = self.service(queue.as_ref())?;
        self.call(&service, action, payload).await
    }

    fn service(&self, queue: Option<&QueueUrl>) -> Result<QueueService, SqsError> {
        Ok(match queue {
            Some(q) => service_for(q, self.endpoint.as_deref(), &self.region)?,
            None => default_service(self.endpoint.as_deref(), &self.region),
        })
    }

    async fn call(
        &self,
        service: &QueueService,
        action: &str,
        payload: &Value,
    ) -> Result<Value, SqsError> {
        let body = serde_json::to_vec(payload)
            .map_err(|e| SqsError::local(Retry::Permanent, None, format!("request body: {e}")))?;
        let url = format!("{}/", service.endpoint);
        let host = authority(&service.endpoint);
        let target = format!("AmazonSQS.{action}");
        let headers = [
            ("host", host.as_str()),
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", target.as_str()),
        ];
        let creds = self.credentials().await?;
        let signed = sign_headers(&creds, &service.region, &url, &headers, &body)?;

        let mut req = self.http.post(&url).timeout(SEND_TIMEOUT).body(body);
        for (k, v) in headers.iter().copied() {
            req = req.header(k, v);
        }
        for (k, v) in &signed {
            req = req.header(*k, v.as_str());
        }
        let resp = req.send().await.map_err(|e| {
            SqsError::local(
                Retry::Retryable,
                None,
                format!("SQS unreachable: {}", chain(&e)),
            )
        })?;
        let status = resp.status().as_u16();
        let query_code = resp
            .headers()
            .get("x-amzn-query-error")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(str::to_owned);
        let bytes = resp.bytes().await.map_err(|e| {
            SqsError::local(
                Retry::Retryable,
                None,
                format!("SQS answer cut: {}", chain(&e)),
            )
        })?;
        if (200..300).contains(&status) {
            return Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null));
        }
        let err = answer_error(status, &bytes, query_code);
        if matches!(
            err.code.as_deref(),
            Some("ExpiredToken" | "ExpiredTokenException")
        ) {
            self.credentials.forget();
        }
        Err(err)
    }

    async fn credentials(&self) -> Result<Credentials, SqsError> {
        self.credentials
            .get()
            .await
            .map_err(|e| SqsError::local(Retry::Retryable, None, e))
    }
}

/// SendMessage's JSON: the body, attributes, and on a FIFO queue the group and deduplication ids.
fn send_message_payload(
    queue: &QueueUrl,
    body: &str,
    event_id: &str,
    group: &str,
) -> Result<Value, SqsError> {
    let sent = sqs_body(body)?;
    let mut attributes = serde_json::Map::new();
    let mut attribute = |name: &str, value: &str| {
        // SQS refuses an empty string attribute.
        if !value.is_empty() {
            attributes.insert(
                name.to_owned(),
                json!({"DataType": "String", "StringValue": value}),
            );
        }
    };
    attribute("event_id", event_id);
    if let Some(t) = body_type(body) {
        attribute("type", &t);
    }
    let mut payload = json!({
        "QueueUrl": queue.as_str(),
        "MessageBody": sent,
        "MessageAttributes": attributes,
    });
    if queue.is_fifo() {
        payload["MessageGroupId"] = Value::String(fifo_token(group));
        payload["MessageDeduplicationId"] = Value::String(fifo_token(event_id));
    }
    Ok(payload)
}

/// The body's top-level `"type"` string, if it is a JSON object with one (an event payload).
fn body_type(body: &str) -> Option<Cow<'_, str>> {
    #[derive(Deserialize)]
    struct Typed<'a> {
        #[serde(borrow, rename = "type")]
        kind: Option<Cow<'a, str>>,
    }
    serde_json::from_str::<Typed<'_>>(body)
        .ok()?
        .kind
        .filter(|t| t.len() <= 256 && !t.chars().any(char::is_control))
}

/// An error answer: `{"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": …}`, the
/// query-compatible code in `x-amzn-query-error` as a fallback.
fn answer_error(status: u16, body: &[u8], query_code: Option<String>) -> SqsError {
    #[derive(Deserialize, Default)]
    struct ErrorBody {
        #[serde(rename = "__type")]
        kind: Option<String>,
        #[serde(alias = "Message")]
        message: Option<String>,
    }
    let parsed: ErrorBody = serde_json::from_slice(body).unwrap_or_default();
    let code = parsed
        .kind
        .as_deref()
        .map(short_code)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .or(query_code);
    let retry = classify(status, code.as_deref());
    SqsError {
        retry,
        code,
        status: Some(status),
        message: parsed
            .message
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned()),
    }
}

/// The SigV4 headers (`authorization`, `x-amz-date`, `x-amz-security-token`) for one POST.
fn sign_headers(
    creds: &Credentials,
    region: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<(&'static str, String)>, SqsError> {
    let failed = |e: &dyn std::fmt::Display| {
        SqsError::local(Retry::Permanent, None, format!("signing: {e}"))
    };
    let identity: Identity = creds.clone().into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sqs")
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| failed(&e))?
        .into();
    let request = SignableRequest::new(
        "POST",
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| failed(&e))?;
    let (instructions, _signature) = sign(request, &params).map_err(|e| failed(&e))?.into_parts();
    let (signed, _) = instructions.into_parts();
    Ok(signed
        .into_iter()
        .map(|h| (h.name(), h.value().to_owned()))
        .collect())
}

/// `host[:port]` of `scheme://host[:port]`, without the scheme's default port (what reqwest
/// sends as `Host`, and so what must be signed).
fn authority(endpoint: &str) -> String {
    let (scheme, rest) = endpoint.split_once("://").unwrap_or(("https", endpoint));
    let authority = rest.split('/').next().unwrap_or(rest);
    let default_port = if scheme.eq_ignore_ascii_case("http") {
        ":80"
    } else {
        ":443"
    };
    authority
        .strip_suffix(default_port)
        .unwrap_or(authority)
        .to_owned()
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(s: &str) -> QueueUrl {
        QueueUrl::parse(s).expect("queue URL")
    }

    #[test]
    fn fifo_messages_carry_group_and_deduplication_ids_standard_ones_do_not() {
        let body = r#"{"type":"file.committed","data":{}}"#;
        let fifo = send_message_payload(
            &queue("http://localhost:4566/000000000000/e.fifo"),
            body,
            "evt_1",
            "file_1",
        )
        .expect("sendable");
        assert_eq!(fifo["MessageGroupId"], "file_1");
        assert_eq!(fifo["MessageDeduplicationId"], "evt_1");
        assert_eq!(fifo["MessageBody"], body);
        assert_eq!(
            fifo["MessageAttributes"]["type"]["StringValue"],
            "file.committed"
        );
        assert_eq!(
            fifo["MessageAttributes"]["event_id"]["StringValue"],
            "evt_1"
        );

        let standard = send_message_payload(
            &queue("http://localhost:4566/000000000000/e"),
            "not json",
            "evt_1",
            "file_1",
        )
        .expect("sendable");
        assert!(standard.get("MessageGroupId").is_none());
        assert!(standard.get("MessageDeduplicationId").is_none());
        assert!(standard["MessageAttributes"].get("type").is_none());
    }

    #[test]
    fn error_answers_keep_the_sqs_code() {
        let e = answer_error(
            400,
            br#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"gone"}"#,
            Some("AWS.SimpleQueueService.NonExistentQueue".into()),
        );
        assert_eq!(e.code.as_deref(), Some("QueueDoesNotExist"));
        assert!(!e.is_retryable());
        assert_eq!(e.message, "gone");

        let e = answer_error(
            400,
            b"<html>",
            Some("AWS.SimpleQueueService.NonExistentQueue".into()),
        );
        assert_eq!(
            e.code.as_deref(),
            Some("AWS.SimpleQueueService.NonExistentQueue")
        );
        assert!(!e.is_retryable());

        let e = answer_error(503, b"", None);
        assert_eq!(e.code, None);
        assert!(e.is_retryable());
    }

    #[test]
    fn requests_are_signed_for_sqs_with_the_session_token_and_every_header_sent() {
        let creds = Credentials::new("AKIDEXAMPLE", "secret", Some("token".into()), None, "test");
        let headers = [
            ("host", "sqs.eu-west-1.amazonaws.com"),
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", "AmazonSQS.SendMessage"),
        ];
        let signed = sign_headers(
            &creds,
            "eu-west-1",
            "https://sqs.eu-west-1.amazonaws.com/",
            &headers,
            b"{}",
        )
        .expect("signed");
        let get = |k: &str| {
            signed
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.as_str())
                .unwrap_or_else(|| panic!("{k} in {signed:?}"))
        };
        assert_eq!(get("x-amz-security-token"), "token");
        let auth = get("authorization");
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"),
            "{auth}"
        );
        assert!(auth.contains("/eu-west-1/sqs/aws4_request"), "{auth}");
        assert!(
            auth.contains(
                "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target,"
            ),
            "{auth}"
        );
        assert!(!auth.contains("secret"));
    }

    #[test]
    fn the_signed_host_is_the_one_sent() {
        assert_eq!(authority("http://127.0.0.1:4567"), "127.0.0.1:4567");
        assert_eq!(
            authority("https://sqs.eu-west-1.amazonaws.com"),
            "sqs.eu-west-1.amazonaws.com"
        );
        assert_eq!(authority("https://h.test:443"), "h.test");
        assert_eq!(authority("http://h.test:80/"), "h.test");
    }
}
