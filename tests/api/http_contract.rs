//! The HTTP envelope: every error, including framework-level ones, is `{"error": {code, message}}`.

use serde_json::Value;

use crate::helpers::{error_code, spawn_app};

#[tokio::test]
async fn health_and_readiness_answer() {
    let app = spawn_app().await;
    assert_eq!(app.get("/healthz", None).await.status(), 200);
    let ready = app.get("/readyz", None).await;
    assert_eq!(ready.status(), 200);
    let body: Value = ready.json().await.expect("json");
    assert_eq!(body["checks"]["database"], "ok");
    assert_eq!(body["checks"]["bucket"], "ok");
}

#[tokio::test]
async fn framework_errors_use_the_envelope_and_every_response_has_a_request_id() {
    let app = spawn_app().await;
    let token = app.token("alice");

    let resp = app.get("/v1/nothing-here", Some(&token)).await;
    assert!(resp.headers().contains_key("x-request-id"));
    assert_eq!(error_code(resp).await, (404, "not_found".to_owned()));
    assert_eq!(
        error_code(app.get("/v1/uploads", Some(&token)).await).await,
        (405, "method_not_allowed".to_owned())
    );

    let malformed = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("sent");
    let (status, code) = error_code(malformed).await;
    assert_eq!((status, code.as_str()), (400, "invalid_json"));

    let no_type = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .body("{}")
        .send()
        .await
        .expect("sent");
    assert_eq!(
        error_code(no_type).await,
        (415, "unsupported_media_type".to_owned())
    );

    let huge = format!(
        r#"{{"profile":"image","filename":"{}"}}"#,
        "a".repeat(10 * 1024 * 1024)
    );
    let too_big = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .expect("sent");
    assert_eq!(
        error_code(too_big).await,
        (413, "payload_too_large".to_owned())
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);
}
