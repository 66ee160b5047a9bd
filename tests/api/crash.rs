//! Real crashes: the `upcommit serve` binary is `kill -9`ed at a chosen step of a commit
//! (`UPCOMMIT_CRASH_AT=after_lease|after_copy|after_record`, honoured by test builds only), then
//! a retry on another replica — or, when the client never comes back, the sweep's recovery —
//! must finish the job with one handle, one final object and no tmp leftover (F3, F4).

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

use crate::helpers::{server_process, spawn_app, Presigned, TestApp};

/// Starts the binary on the test's database and bucket, with a 1-second lease so a retry can
/// take over at once; returns the child and its base address.
async fn crashing_server(app: &TestApp, point: &str) -> (std::process::Child, String) {
    server_process(
        app,
        &[
            ("UPCOMMIT_CRASH_AT", point),
            ("UPCOMMIT_COMMIT_LEASE_SECS", "1"),
            ("RUST_LOG", "warn"),
        ],
        Stdio::null(),
    )
    .await
}

/// A commit whose connection dies with the server: `true` when the outcome is unknown.
async fn commit_unknown(app: &TestApp, base: &str, token: &str, key: &str) -> bool {
    app.http
        .post(format!("{base}/v1/files"))
        .bearer_auth(token)
        .json(&serde_json::json!({ "key": key }))
        .send()
        .await
        .is_err()
}

fn wait_killed(mut child: std::process::Child) {
    let status = child.wait().expect("wait");
    assert_eq!(
        status.signal(),
        Some(9),
        "killed by SIGKILL, not exited: {status:?}"
    );
}

/// Alice's uploaded file, whose commit on the binary was killed (SIGKILL) at `point`, the
/// connection dropping with it: (app, alice's token, the upload).
async fn commit_killed_at(point: &str) -> (TestApp, String, Presigned) {
    let app = spawn_app().await;
    let token = app.token("alice");
    let p = app
        .uploaded(&token, "image", "image/png", 2048, "PUT")
        .await;
    let (child, base) = crashing_server(&app, point).await;
    assert!(
        commit_unknown(&app, &base, &token, &p.key).await,
        "the connection drops: the client cannot tell what happened"
    );
    wait_killed(child);
    (app, token, p)
}

/// Where the commit puts the upload's object.
fn final_key(p: &Presigned) -> String {
    format!("media/images/{}/clip.bin", p.upload_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_copy_the_retry_recognises_its_own_final_object() {
    let (app, token, p) = commit_killed_at("after_copy").await;
    let final_key = final_key(&p);
    assert!(
        app.object_exists(&final_key).await,
        "copied before the kill"
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0);
    assert_eq!(app.db.upload_state(&p.upload_id).await, "promoting");

    tokio::time::sleep(Duration::from_millis(1200)).await; // the crashed commit's lease ends
    let retry = app.commit(&token, &p.key, None).await;
    assert_eq!(retry.status(), 201, "the retry rolls forward");
    let handle: serde_json::Value = retry.json().await.expect("handle");
    assert_eq!(
        handle["image"],
        serde_json::json!({"width": 1, "height": 1}),
        "the image's size, read again: {handle}"
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
    app.sweep_after_urls_expire().await;
    assert!(
        !app.object_exists(&p.key).await,
        "tmp removed once its URL expired"
    );
    assert_eq!(app.keys().await, vec![final_key]);
    assert_eq!(
        app.db
            .count("SELECT CAST(COALESCE(SUM(uploads), 0) AS BIGINT) FROM quota_usage")
            .await,
        1,
        "charged once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_copy_and_the_tmp_object_gone_the_retry_reads_the_size_from_the_copy() {
    let (app, token, p) = commit_killed_at("after_copy").await;
    // Whatever removed it (a lifecycle rule, an operator): the copy is all that is left.
    app.lose_object(&p.key).await;
    tokio::time::sleep(Duration::from_millis(1200)).await; // the crashed commit's lease ends
    let retry = app.commit(&token, &p.key, None).await;
    assert_eq!(
        retry.status(),
        201,
        "the retry rolls forward from the final object"
    );
    let handle: serde_json::Value = retry.json().await.expect("handle");
    assert_eq!(
        handle["image"],
        serde_json::json!({"width": 1, "height": 1}),
        "the size, read from the final object: {handle}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_recording_the_retry_returns_the_same_handle_and_cleans_up() {
    let (app, token, p) = commit_killed_at("after_record").await;
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
    assert!(
        app.object_exists(&p.key).await,
        "tmp not yet deleted when the process died"
    );

    let retry = app.commit(&token, &p.key, None).await;
    assert_eq!(retry.status(), 200, "the same handle, not a second one");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
    assert!(
        app.object_exists(&p.key).await,
        "the tmp object stays while its URL is valid"
    );
    app.sweep_after_urls_expire().await;
    assert!(
        !app.object_exists(&p.key).await,
        "the sweep removed it once the URL expired"
    );
    assert_eq!(app.keys().await, vec![final_key(&p)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_copy_with_no_retry_the_sweep_finishes_the_commit() {
    let (app, token, p) = commit_killed_at("after_copy").await;
    assert_eq!(app.db.upload_state(&p.upload_id).await, "promoting");

    // The client never comes back. Once the lease has been expired for a further lease period,
    // the sweep's recovery does what its retry would have done.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["sweep", "--json"])
        .envs(&app.env)
        .env("UPCOMMIT_COMMIT_LEASE_SECS", "1")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit sweep");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).expect("sweep JSON");
    assert_eq!(body["summary"]["recovery"]["commits_finished"], 1, "{body}");
    let final_key = final_key(&p);
    assert!(body["items"].as_array().is_some_and(|items| items
        .iter()
        .any(|i| i["action"] == "recovered_commit" && i["key"] == p.key.as_str())));
    assert_eq!(app.db.upload_state(&p.upload_id).await, "committed");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
    app.sweep_after_urls_expire().await;
    assert_eq!(
        app.keys().await,
        vec![final_key],
        "tmp removed once its URL expired, the final object kept"
    );
    // The client, had it come back, gets the same handle.
    assert_eq!(app.commit(&token, &p.key, None).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_taking_the_lease_the_retry_takes_over_and_copies() {
    let (app, token, p) = commit_killed_at("after_lease").await;
    assert_eq!(app.db.upload_state(&p.upload_id).await, "promoting");
    assert_eq!(app.keys().await, vec![p.key.clone()], "nothing copied yet");

    tokio::time::sleep(Duration::from_millis(1200)).await; // the dead commit's lease ends
    let retry = app.commit(&token, &p.key, None).await;
    assert_eq!(retry.status(), 201);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
    app.sweep_after_urls_expire().await;
    assert_eq!(app.keys().await, vec![final_key(&p)]);
}
