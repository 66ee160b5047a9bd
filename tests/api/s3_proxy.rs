//! F13: S3 answering 503 SlowDown, or CopyObject answering 200 with an error body. A small
//! HTTP proxy in front of LocalStack forwards every request unchanged (the Host header too, so
//! signatures still verify) except the CopyObject calls it is told to fail. The server under
//! test talks to S3 only through it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::Response;

use crate::helpers::{error_code, s3_endpoint, spawn_app_with, Spawn, TestApp};

#[derive(Default)]
struct Plan {
    /// CopyObject calls answered 503 SlowDown.
    slowdowns: AtomicU32,
    /// CopyObject calls answered 200 with an `<Error>` body (not forwarded).
    errors_in_200: AtomicU32,
    /// CopyObject calls seen.
    copies: AtomicU32,
}

fn take(n: &AtomicU32) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
        .is_ok()
}

const SLOW_DOWN: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>proxy</RequestId></Error>";
const INTERNAL: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message><RequestId>proxy</RequestId></Error>";

async fn forward(
    State((plan, http)): State<(Arc<Plan>, reqwest::Client)>,
    req: Request,
) -> Response {
    let is_copy = req.method() == "PUT" && req.headers().contains_key("x-amz-copy-source");
    if is_copy {
        plan.copies.fetch_add(1, Ordering::SeqCst);
        if take(&plan.slowdowns) {
            return Response::builder()
                .status(StatusCode::SERVICE_UNAVAILABLE)
                .header("content-type", "application/xml")
                .body(Body::from(SLOW_DOWN))
                .expect("response");
        }
        if take(&plan.errors_in_200) {
            return Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/xml")
                .body(Body::from(INTERNAL))
                .expect("response");
        }
    }
    relay(&http, req).await
}

/// Forwards `req` to the store under test unchanged (the Host header too, so signatures still
/// verify) and its answer back.
pub(crate) async fn relay(http: &reqwest::Client, req: Request) -> Response {
    let method = reqwest::Method::from_bytes(req.method().as_str().as_bytes()).expect("method");
    let url = format!(
        "{}{}",
        s3_endpoint(),
        req.uri().path_and_query().map_or("/", |p| p.as_str())
    );
    let headers = req.headers().clone();
    let body = to_bytes(req.into_body(), 64 * 1024 * 1024)
        .await
        .expect("request body");
    let mut out = http.request(method, url).body(body);
    for (k, v) in &headers {
        out = out.header(k.as_str(), v.as_bytes());
    }
    let resp = match out.send().await {
        Ok(r) => r,
        Err(e) => {
            return Response::builder()
                .status(StatusCode::BAD_GATEWAY)
                .body(Body::from(e.to_string()))
                .expect("response")
        }
    };
    let mut builder = Response::builder().status(resp.status().as_u16());
    for (k, v) in resp.headers() {
        // Content-Length too: a HEAD answer has no body to compute it from.
        if !["transfer-encoding", "connection"].contains(&k.as_str()) {
            builder = builder.header(
                HeaderName::from_bytes(k.as_str().as_bytes()).expect("header"),
                v.as_bytes(),
            );
        }
    }
    let bytes = resp.bytes().await.unwrap_or_default();
    builder.body(Body::from(bytes)).expect("response")
}

/// The client a proxy relays with: it follows no redirect (the store's answer goes back as is).
pub(crate) fn relay_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// A server whose S3 traffic goes through the faulty proxy.
async fn spawn_behind_proxy() -> (TestApp, Arc<Plan>) {
    let plan = Arc::new(Plan::default());
    let router = axum::Router::new()
        .fallback(forward)
        .with_state((plan.clone(), relay_client()));
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_S3_ENDPOINT", crate::helpers::serve(router).await)],
        ..Spawn::default()
    })
    .await;
    (app, plan)
}

#[tokio::test]
async fn slow_down_is_retried_with_backoff() {
    let (app, plan) = spawn_behind_proxy().await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "image", "image/png", 900, "PUT").await;
    // Count the commit's copies only (the start's capability probe copies too).
    plan.copies.store(0, Ordering::SeqCst);
    plan.slowdowns.store(2, Ordering::SeqCst);
    let resp = app.commit(&token, &p.key, None).await;
    assert_eq!(resp.status(), 201, "the third attempt succeeds");
    assert_eq!(
        plan.copies.load(Ordering::SeqCst),
        3,
        "two throttled attempts, then one through"
    );
    assert_eq!(app.db.upload_state(&p.upload_id).await, "committed");
}

#[tokio::test]
async fn slow_down_to_exhaustion_answers_503_and_changes_nothing() {
    let (app, plan) = spawn_behind_proxy().await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "image", "image/png", 900, "PUT").await;
    plan.copies.store(0, Ordering::SeqCst);
    plan.slowdowns.store(100, Ordering::SeqCst);
    let resp = app.commit(&token, &p.key, None).await;
    assert!(resp.headers().contains_key("retry-after"));
    assert_eq!(
        error_code(resp).await,
        (503, "service_unavailable".to_owned())
    );
    assert_eq!(
        plan.copies.load(Ordering::SeqCst),
        3,
        "the SDK's three attempts"
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0);
    assert_eq!(
        app.keys().await,
        vec![p.key.clone()],
        "tmp intact, nothing copied"
    );

    plan.slowdowns.store(0, Ordering::SeqCst);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(
        app.commit(&token, &p.key, None).await.status(),
        201,
        "the retry finishes"
    );
}

#[tokio::test]
async fn a_copy_answering_200_with_an_error_body_is_a_failure() {
    let (app, plan) = spawn_behind_proxy().await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "image", "image/png", 900, "PUT").await;
    plan.errors_in_200.store(1, Ordering::SeqCst);
    let resp = app.commit(&token, &p.key, None).await;
    let final_key = format!("media/images/{}/clip.bin", p.upload_id);
    // Taken for a success, the fake 200 would record a handle for a copy that never happened.
    // It is a failure: either retried (a second, real copy) or answered 503.
    let status = resp.status().as_u16();
    eprintln!(
        "200-with-error copy: answered {status} after {} CopyObject calls",
        plan.copies.load(Ordering::SeqCst)
    );
    match status {
        201 => assert!(plan.copies.load(Ordering::SeqCst) >= 2, "retried for real"),
        503 => assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0),
        other => panic!("unexpected {other}"),
    }
    if status == 503 {
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        assert_eq!(app.commit(&token, &p.key, None).await.status(), 201);
    }
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
    assert!(
        app.object_exists(&final_key).await,
        "the handle's object exists"
    );
}
