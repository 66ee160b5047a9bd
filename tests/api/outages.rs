//! The database going away: presign issues no URL, commit changes nothing in S3, readiness
//! reports it. The fault is real: the pool the server uses is closed under it.

use crate::helpers::{error_code, spawn_app, TestDb};

async fn take_database_down(db: &TestDb) {
    match db {
        TestDb::Sqlite(p) => p.close().await,
        TestDb::Postgres(p) => p.close().await,
    }
}

#[tokio::test]
async fn with_the_database_down_presign_answers_503_and_issues_no_url() {
    let app = spawn_app().await;
    let token = app.token("alice");
    take_database_down(&app.db).await;

    let resp = app
        .presign(
            &token,
            serde_json::json!({"profile": "image", "content_type": "image/png", "size": 10}),
        )
        .await;
    assert!(resp.headers().contains_key("retry-after"));
    let body = resp.text().await.expect("body");
    assert!(
        !body.contains("X-Amz-Signature"),
        "no URL may leave the server: {body}"
    );
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["code"], "service_unavailable");

    let ready = app.get("/readyz", None).await;
    assert_eq!(ready.status(), 503);
    let v: serde_json::Value = ready.json().await.expect("json");
    assert_eq!(
        (
            v["checks"]["database"].as_str(),
            v["checks"]["bucket"].as_str()
        ),
        (Some("unavailable"), Some("ok"))
    );
    assert_eq!(v["error"]["code"], "not_ready");
}

#[tokio::test]
async fn with_the_database_down_commit_answers_503_before_touching_s3() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "image", "image/png", 500, "PUT").await;
    take_database_down(&app.db).await;

    assert_eq!(
        error_code(app.commit(&token, &p.key, None).await).await,
        (503, "service_unavailable".to_owned())
    );
    assert_eq!(
        app.keys().await,
        vec![p.key.clone()],
        "tmp intact, nothing promoted"
    );
}
