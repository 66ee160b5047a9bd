//! The queue sink's sender against LocalStack's SQS: bodies arrive byte for byte, a FIFO queue
//! keeps each file's order and drops an event id sent twice, and every failure says whether a
//! retry can help, with SQS's code. Queues are created, read and deleted with the sender's own
//! signed requests; faults come from a proxy in front of LocalStack.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::response::Response;
use serde_json::{json, Value};
use upcommit::config::{S3Settings, Settings};
use upcommit::domain::queue::Retry;
use upcommit::storage::sqs::{SqsError, SqsSender};

use crate::helpers::{s3_endpoint, spawn_app, Presigned};

/// A sender configured as the test server's S3 client is (LocalStack as the endpoint override).
async fn sender_at(endpoint: Option<String>) -> SqsSender {
    SqsSender::connect(&S3Settings {
        bucket: "unused".into(),
        endpoint,
        region: "us-east-1".into(),
        cors_origins: Vec::new(),
        accept_gaps: Default::default(),
    })
    .await
    .expect("SQS sender")
}

async fn sender() -> SqsSender {
    sender_at(Some(s3_endpoint())).await
}

fn unique_name(fifo: bool) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "upcommit-test-{}{}",
        &id[..16],
        if fifo { ".fifo" } else { "" }
    )
}

/// A new queue; its URL as SQS answers it.
async fn create_queue(sqs: &SqsSender, fifo: bool) -> String {
    let attributes = if fifo {
        json!({"FifoQueue": "true"})
    } else {
        json!({})
    };
    let answer = sqs
        .request(
            None,
            "CreateQueue",
            &json!({"QueueName": unique_name(fifo), "Attributes": attributes}),
        )
        .await
        .expect("CreateQueue");
    answer["QueueUrl"].as_str().expect("QueueUrl").to_owned()
}

async fn delete_queue(sqs: &SqsSender, url: &str) {
    sqs.request(Some(url), "DeleteQueue", &json!({"QueueUrl": url}))
        .await
        .expect("DeleteQueue");
}

#[derive(Debug)]
struct Received {
    body: String,
    /// Message attributes (`event_id`, `type`).
    attributes: HashMap<String, String>,
    group: Option<String>,
}

/// Receives (and deletes) messages until `expected` have arrived and one more wait finds
/// nothing, or 20 s pass.
async fn drain(sqs: &SqsSender, url: &str, expected: usize) -> Vec<Received> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = sqs
            .request(
                Some(url),
                "ReceiveMessage",
                &json!({
                    "QueueUrl": url,
                    "MaxNumberOfMessages": 10,
                    "WaitTimeSeconds": 1,
                    "VisibilityTimeout": 60,
                    "AttributeNames": ["All"],
                    "MessageAttributeNames": ["All"],
                }),
            )
            .await
            .expect("ReceiveMessage");
        let messages = answer["Messages"].as_array().cloned().unwrap_or_default();
        if messages.is_empty() && (out.len() >= expected || Instant::now() > deadline) {
            return out;
        }
        for m in messages {
            let attributes = m["MessageAttributes"]
                .as_object()
                .map(|a| {
                    a.iter()
                        .map(|(k, v)| (k.clone(), v["StringValue"].as_str().unwrap_or("").into()))
                        .collect()
                })
                .unwrap_or_default();
            out.push(Received {
                body: m["Body"].as_str().expect("Body").to_owned(),
                attributes,
                group: m["Attributes"]["MessageGroupId"]
                    .as_str()
                    .map(str::to_owned),
            });
            let handle = m["ReceiptHandle"].as_str().expect("ReceiptHandle");
            sqs.request(
                Some(url),
                "DeleteMessage",
                &json!({"QueueUrl": url, "ReceiptHandle": handle}),
            )
            .await
            .expect("DeleteMessage");
        }
    }
}

fn event(id: &str, kind: &str, filename: &str) -> String {
    json!({
        "type": kind,
        "timestamp": "2026-12-02T00:00:00Z",
        "data": {"id": id, "filename": filename},
    })
    .to_string()
}

#[tokio::test]
async fn every_body_reaches_a_standard_queue_byte_for_byte_with_its_event_id_and_type() {
    let sqs = sender().await;
    let url = create_queue(&sqs, false).await;
    let big = event("file_big", "file.archived", &"ü".repeat(100 * 1024));
    let bodies: Vec<(String, String)> = vec![
        ("evt_a".into(), event("file_a", "file.committed", "写真 🎉.jpg")),
        // Not JSON: CR LF, tabs, quotes and backslashes (the XML protocol would turn CR
        // into LF; the JSON protocol must not).
        (
            "evt_b".into(),
            "line one\r\nline two\r\n\ttabbed \"quoted\" \\ back \u{D7FF}\u{E000}\u{FFFD}\u{10FFFF}"
                .into(),
        ),
        ("evt_c".into(), big),
        (
            "evt_d".into(),
            // Escapes stay escapes: the body is not re-encoded.
            r#"{"type":"file.deleted","data":{"filename":"a\u0001b\"c\/d"}}"#.into(),
        ),
    ];
    for (id, body) in &bodies {
        sqs.send(&url, body, id, "file_x").await.expect("sent");
    }

    let got = drain(&sqs, &url, bodies.len()).await;
    assert_eq!(got.len(), bodies.len(), "each message once");
    for (id, body) in &bodies {
        let m = got
            .iter()
            .find(|m| m.attributes.get("event_id") == Some(id))
            .unwrap_or_else(|| panic!("{id} arrived"));
        assert!(m.body == *body, "{id}: the body changed on the way");
        let kind = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| v["type"].as_str().map(str::to_owned));
        assert_eq!(m.attributes.get("type").cloned(), kind, "{id}");
        assert_eq!(m.group, None, "a standard queue has no groups");
    }
    delete_queue(&sqs, &url).await;
}

#[tokio::test]
async fn a_fifo_queue_keeps_each_files_order_and_takes_an_event_id_once() {
    let sqs = sender().await;
    let url = create_queue(&sqs, true).await;
    let sends = [
        ("evt_a1", "file_a", "file.committed"),
        ("evt_b1", "file_b", "file.committed"),
        ("evt_a2", "file_a", "file.unlinked"),
        // A redelivery of an event already sent: the same id, the same body.
        ("evt_a1", "file_a", "file.committed"),
        // The same id with another body (a bug upstream, or a replay): still one event.
        ("evt_a2", "file_a", "file.deleted"),
        ("evt_a3", "file_a", "file.archived"),
        ("evt_b2", "file_b", "file.archived"),
    ];
    for (id, file, kind) in sends {
        sqs.send(&url, &event(file, kind, "x.jpg"), id, file)
            .await
            .expect("sent");
    }

    let got = drain(&sqs, &url, 5).await;
    let ids: Vec<&str> = got
        .iter()
        .map(|m| m.attributes["event_id"].as_str())
        .collect();
    assert_eq!(got.len(), 5, "a resent event id is taken once: {ids:?}");
    let order = |file: &str| -> Vec<(String, String)> {
        got.iter()
            .filter(|m| m.group.as_deref() == Some(file))
            .map(|m| {
                let v: Value = serde_json::from_str(&m.body).expect("JSON");
                (
                    m.attributes["event_id"].clone(),
                    v["type"].as_str().expect("type").into(),
                )
            })
            .collect()
    };
    let pairs = |xs: &[(&str, &str)]| -> Vec<(String, String)> {
        xs.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        order("file_a"),
        pairs(&[
            ("evt_a1", "file.committed"),
            ("evt_a2", "file.unlinked"),
            ("evt_a3", "file.archived"),
        ]),
        "file_a's events in the order sent, the first body of each id"
    );
    assert_eq!(
        order("file_b"),
        pairs(&[("evt_b1", "file.committed"), ("evt_b2", "file.archived")])
    );
    delete_queue(&sqs, &url).await;
}

fn assert_permanent(err: &SqsError, code: &str) {
    assert_eq!(err.retry, Retry::Permanent, "{err}");
    assert!(!err.is_retryable());
    assert_eq!(err.code.as_deref(), Some(code), "{err}");
}

#[tokio::test]
async fn a_missing_or_deleted_queue_is_a_permanent_error_with_the_sqs_code() {
    let sqs = sender().await;
    let url = create_queue(&sqs, false).await;
    let missing = url.replace("upcommit-test-", "upcommit-never-");
    let err = sqs
        .send(&missing, "{}", "evt_1", "file_1")
        .await
        .expect_err("no such queue");
    assert_permanent(&err, "QueueDoesNotExist");
    assert_eq!(err.status, Some(400));

    delete_queue(&sqs, &url).await;
    let err = sqs
        .send(&url, "{}", "evt_1", "file_1")
        .await
        .expect_err("queue deleted");
    assert_permanent(&err, "QueueDoesNotExist");
}

/// Checks a request's SigV4 signature from what arrived on the wire (host, headers, body), as
/// SQS would — LocalStack's SQS checks none. The canonical request is rebuilt here, not by the
/// signer; only the key derivation and HMAC come from `aws-sigv4`.
fn signature_verifies(headers: &axum::http::HeaderMap, body: &[u8], secret: &str) -> bool {
    use sha2::{Digest, Sha256};
    let header = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).unwrap_or("");
    let auth = header("authorization");
    let Some(rest) = auth.strip_prefix("AWS4-HMAC-SHA256 ") else {
        return false;
    };
    let field = |name: &str| {
        rest.split(", ")
            .find_map(|p| p.strip_prefix(name))
            .unwrap_or("")
            .to_owned()
    };
    let (credential, signed, signature) = (
        field("Credential="),
        field("SignedHeaders="),
        field("Signature="),
    );
    let scope: Vec<&str> = credential.splitn(5, '/').collect();
    let [_, date, region, service, "aws4_request"] = scope[..] else {
        return false;
    };
    let amz_date = header("x-amz-date");
    let canonical_headers: String = signed
        .split(';')
        .map(|h| format!("{h}:{}\n", header(h).trim()))
        .collect();
    let canonical = format!(
        "POST\n/\n\n{canonical_headers}\n{signed}\n{}",
        hex::encode(Sha256::digest(body))
    );
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{date}/{region}/{service}/aws4_request\n{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let Ok(t) = chrono::NaiveDateTime::parse_from_str(amz_date, "%Y%m%dT%H%M%SZ") else {
        return false;
    };
    let key = aws_sigv4::sign::v4::generate_signing_key(
        secret,
        std::time::SystemTime::from(t.and_utc()),
        region,
        service,
    );
    service == "sqs"
        && ["content-type", "host", "x-amz-date", "x-amz-target"]
            .iter()
            .all(|h| signed.split(';').any(|s| s == *h))
        && aws_sigv4::sign::v4::calculate_signature(key, string_to_sign.as_bytes()) == signature
}

/// What the proxy saw: requests, and how many of them carried a signature that verifies.
#[derive(Default)]
struct Seen {
    requests: AtomicUsize,
    verified: AtomicUsize,
    /// The same checks with a byte of the body changed (must stay 0: the check can fail).
    tampered_verified: AtomicUsize,
}

/// A proxy in front of LocalStack answering the first requests with the given faults and
/// forwarding the rest unchanged; it checks every request's signature on the way.
async fn fault_proxy(faults: Vec<(u16, &'static str)>) -> (String, Arc<Seen>) {
    type Plan = (Arc<Mutex<VecDeque<(u16, &'static str)>>>, Arc<Seen>);
    async fn answer(State((faults, seen)): State<Plan>, req: Request) -> Response {
        let headers = req.headers().clone();
        let body = to_bytes(req.into_body(), 4 << 20).await.expect("body");
        seen.requests.fetch_add(1, Ordering::SeqCst);
        let secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or_default();
        if signature_verifies(&headers, &body, &secret) {
            seen.verified.fetch_add(1, Ordering::SeqCst);
        }
        let mut tampered = body.to_vec();
        if let Some(b) = tampered.last_mut() {
            *b ^= 1;
        }
        if signature_verifies(&headers, &tampered, &secret) {
            seen.tampered_verified.fetch_add(1, Ordering::SeqCst);
        }
        let fault = faults.lock().expect("plan").pop_front();
        if let Some((status, body)) = fault {
            return Response::builder()
                .status(status)
                .header("content-type", "application/x-amz-json-1.0")
                .body(Body::from(body))
                .expect("response");
        }
        let mut out = reqwest::Client::new()
            .post(format!("{}/", s3_endpoint()))
            .body(body);
        for (k, v) in &headers {
            out = out.header(k.as_str(), v.as_bytes());
        }
        let resp = out.send().await.expect("LocalStack answers");
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.expect("answer");
        Response::builder()
            .status(status)
            .header("content-type", "application/x-amz-json-1.0")
            .body(Body::from(bytes))
            .expect("response")
    }
    let seen = Arc::new(Seen::default());
    let plan: Plan = (Arc::new(Mutex::new(faults.into())), seen.clone());
    let router = axum::Router::new().fallback(answer).with_state(plan);
    (crate::helpers::serve(router).await, seen)
}

#[tokio::test]
async fn throttling_server_errors_and_unreachable_endpoints_are_retryable_and_enqueue_nothing() {
    let direct = sender().await;
    let url = create_queue(&direct, false).await;
    let (proxy, seen) = fault_proxy(vec![
        (
            400,
            r#"{"__type":"com.amazonaws.sqs#RequestThrottled","message":"Rate exceeded"}"#,
        ),
        (
            500,
            r#"{"__type":"com.amazonaws.sqs#InternalError","message":"oops"}"#,
        ),
        (503, ""),
    ])
    .await;
    let sqs = sender_at(Some(proxy)).await;
    let body = event("file_a", "file.committed", "a.jpg");

    let mut codes = Vec::new();
    for _ in 0..3 {
        let err = sqs
            .send(&url, &body, "evt_1", "file_a")
            .await
            .expect_err("fault");
        assert!(err.is_retryable(), "{err}");
        codes.push((err.status, err.code));
    }
    assert_eq!(
        codes,
        vec![
            (Some(400), Some("RequestThrottled".to_owned())),
            (Some(500), Some("InternalError".to_owned())),
            (Some(503), None),
        ]
    );
    sqs.send(&url, &body, "evt_1", "file_a")
        .await
        .expect("the fourth attempt goes through");
    assert_eq!(
        seen.requests.load(Ordering::SeqCst),
        4,
        "one request per send: no retries inside"
    );
    assert_eq!(
        seen.verified.load(Ordering::SeqCst),
        4,
        "each request is signed for SQS over exactly what was sent"
    );
    assert_eq!(seen.tampered_verified.load(Ordering::SeqCst), 0);

    // Nothing listens on a port just released.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let err = sender_at(Some(format!("http://127.0.0.1:{closed}")))
        .await
        .send(&url, &body, "evt_2", "file_a")
        .await
        .expect_err("unreachable");
    assert!(err.is_retryable(), "{err}");
    assert_eq!((err.status, err.code.as_deref()), (None, None));

    let got = drain(&direct, &url, 1).await;
    assert_eq!(got.len(), 1, "only the send that succeeded enqueued");
    assert!(got[0].body == body);
    delete_queue(&direct, &url).await;
}

#[tokio::test]
async fn a_queue_url_naming_a_host_outside_aws_is_never_called_without_an_endpoint_override() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while listener.accept().await.is_ok() {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    let sqs = sender_at(None).await;
    for url in [
        format!("http://127.0.0.1:{port}/000000000000/events"),
        format!("http://sqs.us-east-1.amazonaws.com.127.0.0.1:{port}/000000000000/events"),
        format!("http://127.0.0.1:{port}/sqs.us-east-1.amazonaws.com/000000000000/events"),
    ] {
        let err = sqs
            .send(&url, "{}", "evt_1", "file_1")
            .await
            .expect_err("refused");
        assert_permanent(&err, "InvalidQueueUrl");
    }
    // An AWS host over plain HTTP is refused too (the signature would travel in the clear).
    let err = sqs
        .send(
            "http://sqs.us-east-1.amazonaws.com/123456789012/events",
            "{}",
            "evt_1",
            "file_1",
        )
        .await
        .expect_err("refused");
    assert_permanent(&err, "InvalidQueueUrl");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(connections.load(Ordering::SeqCst), 0, "no request was sent");
}

#[tokio::test]
async fn a_committed_filename_sqs_cannot_carry_reaches_the_queue_as_the_same_json() {
    // The server keeps U+FFFE and U+FFFF in a filename (they are neither control nor
    // invisible characters); SQS refuses both in a message body.
    let app = spawn_app().await;
    let alice = app.token("alice");
    let name = "clip\u{FFFF}\u{FFFE}.jpg";
    let resp = app
        .presign(
            &alice,
            json!({"profile": "image", "content_type": "image/jpeg", "size": 600, "filename": name, "method": "PUT"}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let p: Presigned = resp.json().await.expect("presign");
    let status = app
        .upload(&p, crate::helpers::media("image/jpeg", 600), "image/jpeg")
        .await;
    assert!(status.is_success());
    let resp = app.commit(&alice, &p.key, None).await;
    assert_eq!(resp.status(), 201);
    let handle = resp.text().await.expect("handle");
    assert!(
        handle.contains(name),
        "the API returns the name raw: {handle}"
    );
    let body = format!(
        r#"{{"type":"file.committed","timestamp":"2026-12-02T00:00:00Z","data":{handle}}}"#
    );

    let settings = Settings::from_map(&app.env).expect("the server's settings");
    let sqs = SqsSender::connect(&settings.s3).await.expect("sender");
    let url = create_queue(&sqs, true).await;
    sqs.send(&url, &body, "evt_ffff", "file_1")
        .await
        .expect("sent, escaped");
    let got = drain(&sqs, &url, 1).await;
    assert_eq!(got.len(), 1);
    let sent: Value = serde_json::from_str(&body).expect("JSON");
    let received: Value = serde_json::from_str(&got[0].body).expect("still JSON");
    assert_eq!(received, sent, "the receiver reads the same event");
    assert_eq!(received["data"]["original_filename"], name);
    assert_eq!(got[0].attributes["type"], "file.committed");

    // A body that is not JSON cannot be escaped: refused before any call, for good.
    let err = sqs
        .send(&url, "raw \u{FFFF}", "evt_raw", "file_1")
        .await
        .expect_err("unsendable");
    assert_permanent(&err, "InvalidMessageContents");
    assert_eq!(err.status, None, "refused here, not by SQS");
    delete_queue(&sqs, &url).await;
}

/// The server as a queue endpoint's sender: every event reaches a FIFO queue once, as the same
/// JSON the feed carries, with its id and its subject as the message group.
#[tokio::test]
async fn the_server_sends_every_event_to_a_queue_endpoint_once_as_the_feed_carries_it() {
    use crate::helpers::{spawn_app_with, Spawn};

    let sqs = sender().await;
    let url = create_queue(&sqs, true).await;
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_EVENT_QUEUE_URL", url.clone()),
            ("UPCOMMIT_EVENT_QUEUE_ID", "pipeline".into()),
        ],
        ..Spawn::default()
    })
    .await;
    let token = app.token("alice");
    let mut handles = Vec::new();
    for _ in 0..3 {
        let (_, h) = app
            .upload_and_commit(&token, "image", "image/png", 300)
            .await;
        handles.push(h);
    }
    let feed = crate::history::all_events(&app).await;
    assert_eq!(feed.len(), 3);
    let got = drain(&sqs, &url, 3).await;
    assert_eq!(got.len(), 3, "each event once: {got:?}");
    for event in &feed {
        let id = event["id"].as_str().expect("id");
        let m = got
            .iter()
            .find(|m| m.attributes.get("event_id").map(String::as_str) == Some(id))
            .unwrap_or_else(|| panic!("{id} not in the queue: {got:?}"));
        let body: Value = serde_json::from_str(&m.body).expect("JSON body");
        let mut want = event.clone();
        let obj = want.as_object_mut().expect("object");
        obj.remove("cursor");
        obj.remove("id");
        assert_eq!(body, want, "the message is the event's payload");
        assert_eq!(
            m.group.as_deref(),
            event["data"]["id"].as_str(),
            "grouped by file"
        );
        assert_eq!(
            m.attributes.get("type").map(String::as_str),
            Some("file.committed")
        );
    }
    let delivered = app
        .db
        .count("SELECT COUNT(*) FROM event_deliveries WHERE endpoint_id = 'pipeline' AND state = 'delivered'")
        .await;
    assert_eq!(delivered, 3);
    delete_queue(&sqs, &url).await;
}

#[tokio::test]
async fn a_queue_endpoint_that_is_not_a_queue_url_is_refused_at_start() {
    let mut vars: std::collections::HashMap<String, String> = [
        ("UPCOMMIT_JWT_SECRET", "0123456789abcdef0123456789abcdef"),
        ("UPCOMMIT_EVENT_QUEUE_URL", "ftp://sqs.example/queue"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let err = Settings::from_map(&vars).expect_err("refused");
    assert!(err.to_string().contains("queue_url"), "{err}");
    vars.insert(
        "UPCOMMIT_EVENT_QUEUE_URL".into(),
        "https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo".into(),
    );
    vars.insert(
        "UPCOMMIT_EVENT_QUEUE_TYPES".into(),
        "file.committed,file.nope".into(),
    );
    let err = Settings::from_map(&vars).expect_err("unknown type refused");
    assert!(err.to_string().contains("file.nope"), "{err}");
    vars.insert("UPCOMMIT_EVENT_QUEUE_TYPES".into(), "file.committed".into());
    let s = Settings::from_map(&vars).expect("sound");
    assert_eq!(s.events.queues.len(), 1);
    assert_eq!(s.events.queues[0].id, "queue");
}
