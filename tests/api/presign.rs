use serde_json::json;

use crate::helpers::{error_code, spawn_app, spawn_app_with, Spawn};

#[tokio::test]
async fn presign_put_issues_a_tmp_key_with_signed_headers_and_records_the_upload() {
    let app = spawn_app().await;
    let token = app.token("alice");

    let p = app
        .presign_ok(&token, "image", "image/png", 1234, "PUT")
        .await;

    let today = chrono::Utc::now().format("%Y/%m/%d").to_string();
    assert!(
        p.key.starts_with(&format!("tmp/{today}/{}/", p.upload_id)),
        "{}",
        p.key
    );
    assert!(p.key.ends_with("/clip.bin"));
    assert_eq!(p.max_size, 20 * 1024 * 1024);
    let headers = p.headers.expect("headers");
    assert_eq!(
        headers.get("Content-Type").map(String::as_str),
        Some("image/png")
    );
    assert_eq!(
        headers.get("Content-Length").map(String::as_str),
        Some("1234")
    );
    assert_eq!(headers.get("If-None-Match").map(String::as_str), Some("*"));
    assert!(p
        .url
        .contains("X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost%3Bif-none-match"));
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM uploads WHERE state = 'issued'")
            .await,
        1
    );
    assert!(
        app.keys().await.is_empty(),
        "presign must not create objects"
    );
}

#[tokio::test]
async fn presign_post_returns_a_policy_form_for_the_exact_key() {
    let app = spawn_app().await;
    let p = app
        .presign_ok(&app.token("alice"), "recording", "audio/mpeg", 5000, "POST")
        .await;
    let fields = p.fields.expect("fields");
    let get = |n: &str| fields.get(n).cloned();
    assert_eq!(get("key"), Some(p.key.clone()));
    assert_eq!(get("Content-Type").as_deref(), Some("audio/mpeg"));
    assert!(get("policy").is_some() && get("x-amz-signature").is_some());
    assert!(p.url.ends_with(&format!("/{}/", app.bucket)));
}

#[tokio::test]
async fn bad_presign_requests_get_their_own_codes_and_record_nothing() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let cases = [
        (
            json!({"profile": "video", "content_type": "image/png", "size": 10}),
            400,
            "profile_unknown",
        ),
        (
            json!({"profile": "image", "content_type": "text/html", "size": 10}),
            400,
            "content_type_not_allowed",
        ),
        (
            json!({"profile": "image", "content_type": "image/svg+xml", "size": 10}),
            400,
            "content_type_not_allowed",
        ),
        (
            json!({"profile": "image", "size": 10}),
            400,
            "content_type_required",
        ),
        (
            json!({"profile": "image", "content_type": "", "size": 10}),
            400,
            "content_type_required",
        ),
        (
            json!({"profile": "image", "content_type": "image/png\r\nX: y", "size": 10}),
            400,
            "content_type_invalid",
        ),
        (
            json!({"profile": "image", "content_type": "image/png", "size": 0}),
            400,
            "size_invalid",
        ),
        (
            json!({"profile": "image", "content_type": "image/png", "size": -1}),
            400,
            "size_invalid",
        ),
        (
            json!({"profile": "image", "content_type": "image/png", "size": 1.5}),
            400,
            "size_invalid",
        ),
        (
            json!({"profile": "image", "content_type": "image/png"}),
            400,
            "size_invalid",
        ),
        (
            json!({"profile": "image", "content_type": "image/png", "size": 20 * 1024 * 1024 + 1}),
            400,
            "size_too_large",
        ),
        (
            json!({"profile": "image", "content_type": "image/png", "size": 10, "filename": "a\r\nb"}),
            400,
            "filename_invalid",
        ),
        (
            json!({"profile": "image", "content_type": "image/png", "size": 10, "filename": "x".repeat(256)}),
            400,
            "filename_too_long",
        ),
        (
            json!({"profile": "image", "content_type": "image/png", "size": 10, "method": "GET"}),
            400,
            "method_invalid",
        ),
        (
            json!({"content_type": "image/png", "size": 10}),
            400,
            "invalid_json",
        ),
        (
            json!({"profile": "", "content_type": "image/png", "size": 10}),
            400,
            "invalid_request",
        ),
    ];
    for (body, status, code) in cases {
        let got = error_code(app.presign(&token, body.clone()).await).await;
        assert_eq!(got, (status, code.to_owned()), "{body}");
    }
    // A size beyond 2^64 is a number JSON can carry; it is too large, not a parse error.
    let resp = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(r#"{"profile":"image","content_type":"image/png","size":18446744073709551617}"#)
        .send()
        .await
        .expect("sent");
    assert_eq!(error_code(resp).await, (400, "size_too_large".to_owned()));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM quota_usage").await, 0);
}

#[tokio::test]
async fn odd_content_type_spellings_are_canonicalized_everywhere() {
    let app = spawn_app().await;
    let resp = app
        .presign(
            &app.token("alice"),
            json!({"profile": "image", "content_type": "IMAGE/PNG; charset=utf-8", "size": 10}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let v: serde_json::Value = resp.json().await.expect("json");
    assert_eq!(v["headers"]["Content-Type"], "image/png");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM uploads WHERE content_type = 'image/png'")
            .await,
        1
    );
}

#[tokio::test]
async fn missing_expired_or_forged_tokens_get_401() {
    let app = spawn_app().await;
    let body = json!({"profile": "image", "content_type": "image/png", "size": 10});
    let expired = upcommit::auth::issue(
        crate::helpers::SECRET.as_bytes(),
        "alice",
        false,
        10,
        chrono::Utc::now().timestamp() - 60,
    );
    let forged = upcommit::auth::issue(
        b"not-the-server-secret-0123456789",
        "alice",
        true,
        3600,
        chrono::Utc::now().timestamp(),
    );
    for token in [
        None,
        Some("garbage"),
        Some(expired.as_str()),
        Some(forged.as_str()),
    ] {
        let resp = app.post_json("/v1/uploads", token, &body).await;
        assert_eq!(
            resp.headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap_or("")),
            Some("Bearer")
        );
        assert_eq!(
            error_code(resp).await,
            (401, "unauthorized".to_owned()),
            "{token:?}"
        );
    }
    // Identity comes from the token only; spoofed headers change nothing.
    let resp = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .header("X-User-Id", "admin")
        .json(&body)
        .send()
        .await
        .expect("sent");
    assert_eq!(resp.status(), 401);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);
}

/// The seconds a `Retry-After` header asks to wait, if it holds a number of them.
fn retry_after_secs(resp: &reqwest::Response) -> Option<u64> {
    resp.headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn daily_quota_answers_429_with_retry_after_and_charges_nothing_more() {
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_QUOTA_DAILY_UPLOADS", "2".into()),
            ("UPCOMMIT_QUOTA_DAILY_BYTES", "1000".into()),
        ],
        ..Spawn::default()
    })
    .await;
    let alice = app.token("alice");
    let body = |size: u64| json!({"profile": "image", "content_type": "image/png", "size": size});

    assert_eq!(app.presign(&alice, body(600)).await.status(), 201);
    // Bytes: 600 + 500 > 1000.
    let resp = app.presign(&alice, body(500)).await;
    let retry_after = retry_after_secs(&resp).expect("Retry-After in seconds");
    assert!((1..=86_400).contains(&retry_after));
    assert_eq!(error_code(resp).await, (429, "quota_exceeded".to_owned()));
    assert_eq!(app.presign(&alice, body(400)).await.status(), 201);
    // Count: a third upload.
    assert_eq!(
        error_code(app.presign(&alice, body(1)).await).await,
        (429, "quota_exceeded".to_owned())
    );
    // Another user is unaffected.
    assert_eq!(app.presign(&app.token("bob"), body(1)).await.status(), 201);

    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM uploads WHERE owner = 'alice'")
            .await,
        2
    );
    assert_eq!(
        app.db
            .count("SELECT uploads FROM quota_usage WHERE owner = 'alice'")
            .await,
        2
    );
    assert_eq!(
        app.db
            .count("SELECT bytes FROM quota_usage WHERE owner = 'alice'")
            .await,
        1000
    );
}

/// Security case 12: a presign flood by one user is limited for that user; others are served,
/// and nothing is charged for the refused ones.
#[tokio::test]
async fn a_presign_flood_is_limited_for_that_user_only() {
    let app = crate::helpers::spawn_app_with(crate::helpers::Spawn {
        env: vec![
            ("UPCOMMIT_PRESIGN_RATE_PER_SEC", "0.5".into()),
            ("UPCOMMIT_PRESIGN_BURST", "3".into()),
        ],
        ..Default::default()
    })
    .await;
    let alice = app.token("alice");
    let body = serde_json::json!({"profile": "image", "content_type": "image/png", "size": 10});
    for _ in 0..3 {
        assert_eq!(app.presign(&alice, body.clone()).await.status(), 201);
    }
    let limited = app.presign(&alice, body.clone()).await;
    assert_eq!(limited.status(), 429);
    assert!(retry_after_secs(&limited).is_some_and(|s| s >= 1));
    assert_eq!(
        crate::helpers::error_code(limited).await,
        (429, "rate_limited".to_owned())
    );
    assert_eq!(
        app.presign(&app.token("bob"), body.clone()).await.status(),
        201,
        "other users are served"
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM uploads WHERE owner = 'alice'")
            .await,
        3
    );
    assert_eq!(
        app.db
            .count("SELECT CAST(COALESCE(SUM(uploads), 0) AS BIGINT) FROM quota_usage WHERE owner = 'alice'")
            .await,
        3,
        "refused presigns are not charged"
    );
}
