//! The HTTP edge (issue 12, items 13, 14, 17, 18): refused presigns cost no rate-limit token,
//! sizes are exact integers, every response says `nosniff`, CORS for the configured origins, and
//! slow or idle connections are closed without starving real requests.

use serde_json::json;

use crate::helpers::{error_code, spawn_app_with, Spawn};

/// Item 17: three presigns with an unknown profile used to leave the user rate-limited.
#[tokio::test]
async fn refused_presigns_do_not_use_up_the_rate_limit() {
    let app = spawn_app_with(Spawn {
        env: vec![
            // One token every 1,000 s: a taken token does not come back during the test.
            ("UPCOMMIT_PRESIGN_RATE_PER_SEC", "0.001".into()),
            ("UPCOMMIT_PRESIGN_BURST", "2".into()),
        ],
        ..Default::default()
    })
    .await;
    let alice = app.token("alice");
    let refused = [
        json!({"profile": "video", "content_type": "image/png", "size": 10}),
        json!({"profile": "image", "content_type": "text/html", "size": 10}),
        json!({"profile": "image", "content_type": "image/png", "size": 0}),
        json!({"profile": "image", "content_type": "image/png", "size": 1.5}),
        json!({"profile": "image", "content_type": "image/png", "size": 10, "filename": "a\nb"}),
    ];
    for body in &refused {
        let (status, code) = error_code(app.presign(&alice, body.clone()).await).await;
        assert_eq!(status, 400, "{body}: {code}");
    }
    let ok = json!({"profile": "image", "content_type": "image/png", "size": 10});
    for _ in 0..2 {
        assert_eq!(
            app.presign(&alice, ok.clone()).await.status(),
            201,
            "the burst is intact after refused presigns"
        );
    }
    assert_eq!(
        error_code(app.presign(&alice, ok).await).await,
        (429, "rate_limited".to_owned()),
        "accepted presigns still take tokens"
    );
}

/// Item 18: a size that is not written as an integer is refused, even when its value is whole
/// or rounds to one; nothing is recorded or charged.
#[tokio::test]
async fn sizes_that_are_not_integer_literals_are_refused() {
    let app = crate::helpers::spawn_app().await;
    let token = app.token("alice");
    for size in [
        "1e3",
        "1E3",
        "1.0",
        "1000.000",
        "20971520.0000000001",
        "1e20",
    ] {
        let body = format!(r#"{{"profile":"image","content_type":"image/png","size":{size}}}"#);
        let resp = app
            .http
            .post(format!("{}/v1/uploads", app.address))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("sent");
        assert_eq!(
            error_code(resp).await,
            (400, "size_invalid".to_owned()),
            "size {size}"
        );
    }
    let resp = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(r#"{"profile":"image","content_type":"image/png","size":"1000"}"#)
        .send()
        .await
        .expect("sent");
    assert_eq!(
        error_code(resp).await,
        (400, "invalid_json".to_owned()),
        "a string is not a size"
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM quota_usage").await, 0);
    // The integer literal itself is still accepted, up to the maximum.
    let resp = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(r#"{"profile":"image","content_type":"image/png","size":20971520}"#)
        .send()
        .await
        .expect("sent");
    assert_eq!(resp.status(), 201);
}

/// Item 18: every API response, errors and unmatched routes included, carries
/// `X-Content-Type-Options: nosniff`.
#[tokio::test]
async fn every_response_says_nosniff() {
    let app = crate::helpers::spawn_app().await;
    let token = app.token("alice");
    let ok = json!({"profile": "image", "content_type": "image/png", "size": 10});
    let responses = [
        ("201 presign", app.presign(&token, ok.clone()).await),
        (
            "400 presign",
            app.presign(&token, json!({"profile": "video", "size": 10}))
                .await,
        ),
        ("401", app.post_json("/v1/uploads", None, &ok).await),
        ("404 route", app.get("/no/such/route", None).await),
        (
            "405",
            app.http
                .delete(format!("{}/v1/uploads", app.address))
                .send()
                .await
                .expect("sent"),
        ),
        ("200 health", app.get("/healthz", None).await),
        ("200 spec", app.get("/openapi.yaml", None).await),
    ];
    for (what, resp) in responses {
        assert_eq!(
            resp.headers()
                .get("x-content-type-options")
                .and_then(|v| v.to_str().ok()),
            Some("nosniff"),
            "{what}: {}",
            resp.status()
        );
    }
}
