//! Keys in the layout that predates `tmp/` are committed in place when enabled.

use chrono::{Duration, Utc};
use upcommit::domain::ids::UploadId;
use upcommit::domain::records::{Upload, UploadState};

use crate::helpers::{error_code, media, png_upload, spawn_app_with, Spawn, TestApp};

async fn legacy_upload(app: &TestApp, owner: &str) -> (UploadId, String) {
    let id = UploadId::generate();
    let key = format!("uploads/{owner}/{id}.png");
    let now = Utc::now();
    app.catalog
        .import_upload(&Upload {
            created_at: now,
            expires_at: now + Duration::minutes(15),
            commit_deadline: now + Duration::days(1),
            ..png_upload(id.clone(), owner, key.clone(), 333, UploadState::Issued)
        })
        .await
        .expect("import legacy upload");
    app.put_object(&key, media("image/png", 333), "image/png")
        .await;
    (id, key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_key_commits_in_place_when_enabled() {
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_LEGACY_PREFIXES", "uploads/".into())],
        ..Spawn::default()
    })
    .await;
    let (_, key) = legacy_upload(&app, "alice").await;

    let resp = app.commit(&app.token("alice"), &key, None).await;
    assert_eq!(resp.status(), 201);
    let h: serde_json::Value = resp.json().await.expect("handle");
    assert_eq!(h["key"], key.as_str(), "recorded in place");
    assert_eq!(
        h["image"],
        serde_json::json!({"width": 1, "height": 1}),
        "its header read in place too"
    );
    assert_eq!(
        app.keys().await,
        vec![key.clone()],
        "no copy, nothing deleted"
    );
    assert_eq!(
        app.commit(&app.token("alice"), &key, None).await.status(),
        200
    );
    assert_eq!(
        error_code(app.commit(&app.token("bob"), &key, None).await).await,
        (404, "upload_not_found".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_key_is_refused_when_legacy_commits_are_off() {
    let app = spawn_app_with(Spawn::default()).await;
    let (id, key) = legacy_upload(&app, "alice").await;
    assert_eq!(
        error_code(app.commit(&app.token("alice"), &key, None).await).await,
        (404, "upload_not_found".to_owned())
    );
    assert_eq!(app.db.upload_state(id.as_str()).await, "issued");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_quarantine_never_moves_a_legacy_upload_waiting_for_its_commit() {
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_LEGACY_PREFIXES", "uploads/".into())],
        ..Spawn::default()
    })
    .await;
    let (_, key) = legacy_upload(&app, "alice").await;
    // An object under the legacy prefix that no upload names is fair game.
    let orphan = "uploads/nobody/orphan.png";
    app.put_object(orphan, media("image/png", 10), "image/png")
        .await;

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["reconcile", "--json", "--grace", "0", "--quarantine"])
        .envs(&app.env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit reconcile");
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(out.status.code(), Some(0), "{body}");
    assert_eq!(body["summary"]["named_by_upload"], 1, "{body}");
    assert_eq!(body["summary"]["quarantined"], 1, "{body}");
    assert!(app.object_exists(&key).await, "the upload's object stays");
    assert!(!app.object_exists(orphan).await);

    // And its commit still succeeds in place.
    let resp = app.commit(&app.token("alice"), &key, None).await;
    assert_eq!(resp.status(), 201);
}
