//! The demo page's routes exist only when turned on, minting only in dev mode; the download
//! URL the page shows images from is the owner's alone.

use serde_json::{json, Value};

use crate::helpers::{error_code, spawn_app, spawn_app_with, Spawn, TestApp};

/// A server with the demo on and its token minting too (the demo routes all exist).
pub(crate) async fn spawn_minting_demo() -> TestApp {
    spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_DEMO", "true".to_owned()),
            ("UPCOMMIT_DEMO_MINT_TOKENS", "true".to_owned()),
        ],
        ..Spawn::default()
    })
    .await
}

#[tokio::test]
async fn the_demo_is_off_by_default_and_minting_needs_its_own_switch() {
    let app = spawn_app().await;
    for path in ["/demo", "/demo/app.js", "/demo/upcommit.js", "/demo/config"] {
        assert_eq!(
            error_code(app.get(path, None).await).await,
            (404, "not_found".to_owned())
        );
    }

    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_DEMO", "true".to_owned())],
        ..Spawn::default()
    })
    .await;
    let page = app.get("/demo", None).await;
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("connect-src 'self' http://"),
        "{csp}"
    );
    assert!(page.text().await.expect("html").contains("/demo/app.js"));
    // The page's script imports the browser client, served from the binary.
    let script = app
        .get("/demo/app.js", None)
        .await
        .text()
        .await
        .expect("js");
    assert!(script.contains("from \"/demo/upcommit.js\""), "{script}");
    let client = app.get("/demo/upcommit.js", None).await;
    assert_eq!(client.status(), 200);
    assert!(client.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .starts_with("text/javascript"));
    assert_eq!(
        client.text().await.expect("js"),
        include_str!("../../clients/js/upcommit.js"),
        "the file in clients/js, byte for byte"
    );
    let config: Value = app
        .get("/demo/config", None)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(config["mint_tokens"], false);
    assert_eq!(config["profiles"][0]["name"], "image");
    let mint = app
        .post_json("/demo/token", None, &json!({"sub": "mallory"}))
        .await;
    assert_eq!(error_code(mint).await, (404, "not_found".to_owned()));

    let app = spawn_minting_demo().await;
    let bad = app
        .post_json("/demo/token", None, &json!({"sub": "a b"}))
        .await;
    assert_eq!(error_code(bad).await, (400, "invalid_request".to_owned()));
    let minted: Value = app
        .post_json("/demo/token", None, &json!({"sub": "dev-user"}))
        .await
        .json()
        .await
        .expect("json");
    let token = minted["token"].as_str().expect("token");
    // The minted token works, and is never an admin's.
    assert_eq!(
        app.presign(
            token,
            json!({"profile": "image", "content_type": "image/png", "size": 10})
        )
        .await
        .status(),
        201
    );
    let report = app.get("/v1/admin/storage-report", Some(token)).await;
    assert_eq!(error_code(report).await, (403, "admin_required".to_owned()));
}

#[tokio::test]
async fn download_urls_are_for_the_owner_only() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let (_, handle) = app
        .upload_and_commit(&alice, "image", "image/png", 1500)
        .await;
    let id = handle["id"].as_str().expect("id");
    let resp = app
        .get(&format!("/v1/files/{id}/download-url"), Some(&alice))
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let body: Value = resp.json().await.expect("json");
    assert!(body["expires_in"].as_u64().is_some_and(|s| s > 0));
    let got = app
        .http
        .get(body["url"].as_str().expect("url"))
        .send()
        .await
        .expect("GET");
    assert_eq!(got.status(), 200);
    assert_eq!(got.bytes().await.expect("bytes").len(), 1500);
    let other = app
        .get(
            &format!("/v1/files/{id}/download-url"),
            Some(&app.token("bob")),
        )
        .await;
    assert_eq!(error_code(other).await, (404, "file_not_found".to_owned()));
}
