//! `upcommit upload`, the real binary against the real server: a PUT upload, a multipart
//! upload, and each kind of refusal with its exit code and message. Uploads carry a checksum by
//! default (SHA-256 in one request, CRC64NVME of the whole file and of each part in parts).

use std::process::{Command, Output};

use serde_json::{json, Value};
use upcommit::domain::checksum::{Checksum, ChecksumAlgorithm};

use crate::helpers::{media, spawn_app, spawn_app_with, Spawn, TestApp};

const MIB: usize = 1024 * 1024;

async fn run_upload(server: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_upcommit"));
    cmd.arg("upload")
        .args(args)
        .env("UPCOMMIT_SERVER", server)
        .env_remove("UPCOMMIT_TOKEN");
    if let Some(t) = token {
        cmd.env("UPCOMMIT_TOKEN", t);
    }
    tokio::task::spawn_blocking(move || cmd.output().expect("run upcommit upload"))
        .await
        .expect("join")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("write file");
    path.display().to_string()
}

async fn assert_committed(app: &TestApp, out: &Output, bytes: &[u8], prefix: &str) -> Value {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let handle: Value = serde_json::from_slice(&out.stdout).expect("handle JSON on stdout");
    let key = handle["key"].as_str().expect("key");
    assert!(key.starts_with(prefix), "{key}");
    assert_eq!(handle["size"], bytes.len());
    assert_eq!(
        app.get_object(key).await,
        bytes,
        "the object holds the file's bytes"
    );
    let id = handle["id"].as_str().expect("id");
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT COUNT(*) FROM file_handles WHERE id = '{id}'"
            ))
            .await,
        1
    );
    handle
}

/// The checksum the upload declared at presign and the one its handle recorded (in the JSON
/// printed and in the catalog) are both `expected`.
async fn assert_checksum(app: &TestApp, handle: &Value, expected: &Checksum) {
    assert_eq!(
        handle["checksum"],
        json!({ "algorithm": expected.algorithm.as_str(), "value": expected.value }),
        "the handle printed carries the file's checksum"
    );
    let id = handle["id"].as_str().expect("id");
    let upload_id = handle["upload_id"].as_str().expect("upload id");
    let pair = |row: Vec<String>| row.join(" ");
    let want = format!("{} {}", expected.algorithm, expected.value);
    assert_eq!(
        pair(
            app.db
                .strings(&format!(
                    "SELECT checksum_algorithm || ' ' || checksum_value FROM uploads WHERE id = '{upload_id}'"
                ))
                .await
        ),
        want,
        "the CLI declared it at presign"
    );
    assert_eq!(
        pair(
            app.db
                .strings(&format!(
                    "SELECT checksum_algorithm || ' ' || checksum_value FROM file_handles WHERE id = '{id}'"
                ))
                .await
        ),
        want,
        "the catalog recorded it"
    );
}

#[tokio::test]
async fn uploads_a_small_image_with_one_put() {
    let app = spawn_app().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = media("image/png", 40_000);
    let file = write(&dir, "photo.png", &bytes);
    let out = run_upload(
        &app.address,
        Some(&app.token("alice")),
        &[&file, "--profile", "image", "--json"],
    )
    .await;
    let handle = assert_committed(&app, &out, &bytes, "media/images/").await;
    assert_eq!(handle["content_type"], "image/png", "guessed from the name");
    assert!(handle["key"].as_str().unwrap_or("").ends_with("/photo.png"));
    assert_checksum(
        &app,
        &handle,
        &Checksum::of(ChecksumAlgorithm::Sha256, &bytes),
    )
    .await;
}

#[tokio::test]
async fn no_checksum_declares_none_and_the_summary_shows_the_checksum() {
    let app = spawn_app().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = media("image/png", 3000);
    let file = write(&dir, "photo.png", &bytes);
    let alice = app.token("alice");
    let out = run_upload(
        &app.address,
        Some(&alice),
        &[&file, "--profile", "image", "--json", "--no-checksum"],
    )
    .await;
    let handle = assert_committed(&app, &out, &bytes, "media/images/").await;
    let upload_id = handle["upload_id"].as_str().expect("upload id");
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT COUNT(*) FROM uploads WHERE id = '{upload_id}' AND checksum_algorithm IS NULL"
            ))
            .await,
        1,
        "--no-checksum declared none"
    );

    let out = run_upload(&app.address, Some(&alice), &[&file, "--profile", "image"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let sha = Checksum::of(ChecksumAlgorithm::Sha256, &bytes).value;
    assert!(
        stderr(&out).contains(&format!("SHA256 {sha}")),
        "the summary line shows the checksum: {}",
        stderr(&out)
    );
}

#[tokio::test]
async fn a_profile_that_requires_a_checksum_takes_the_default_upload_and_refuses_no_checksum() {
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_REQUIRE_CHECKSUM", "image".to_owned())],
        ..Spawn::default()
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = media("image/png", 5000);
    let file = write(&dir, "photo.png", &bytes);
    let alice = app.token("alice");
    let out = run_upload(
        &app.address,
        Some(&alice),
        &[&file, "--profile", "image", "--json"],
    )
    .await;
    let handle = assert_committed(&app, &out, &bytes, "media/images/").await;
    assert_checksum(
        &app,
        &handle,
        &Checksum::of(ChecksumAlgorithm::Sha256, &bytes),
    )
    .await;

    let out = run_upload(
        &app.address,
        Some(&alice),
        &[&file, "--profile", "image", "--no-checksum"],
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("requires a checksum: run without --no-checksum [checksum_required]"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn uploads_a_large_recording_in_parts() {
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_MULTIPART_THRESHOLD_BYTES", (6 * MIB).to_string()),
            ("UPCOMMIT_MULTIPART_PART_SIZE_BYTES", (5 * MIB).to_string()),
        ],
        ..Spawn::default()
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut bytes = media("audio/mpeg", 11 * MIB + 123);
    // Distinct bytes per part, so a part written at the wrong offset would show.
    for (i, b) in bytes.iter_mut().enumerate().skip(16) {
        *b = (i / MIB) as u8;
    }
    let file = write(&dir, "talk.mp3", &bytes);
    let out = run_upload(
        &app.address,
        Some(&app.token("alice")),
        &[&file, "--profile", "recording", "--json"],
    )
    .await;
    let handle = assert_committed(&app, &out, &bytes, "media/recordings/").await;
    let upload_id = handle["upload_id"].as_str().expect("upload id");
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT COUNT(*) FROM upload_parts WHERE upload_id = '{upload_id}'"
            ))
            .await,
        3,
        "three parts recorded"
    );
    assert_checksum(
        &app,
        &handle,
        &Checksum::of(ChecksumAlgorithm::Crc64Nvme, &bytes),
    )
    .await;
}

#[tokio::test]
async fn refusals_have_exit_codes_and_readable_messages() {
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_QUOTA_DAILY_UPLOADS", "1".to_owned())],
        ..Spawn::default()
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let png = write(&dir, "photo.png", &media("image/png", 2000));
    let text = write(&dir, "notes.txt", b"hello");
    let alice = app.token("alice");

    let out = run_upload(&app.address, None, &[&png, "--profile", "image"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no token"));

    let out = run_upload(&app.address, Some("bogus"), &[&png, "--profile", "image"]).await;
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("[unauthorized]"));

    let out = run_upload(&app.address, Some(&alice), &[&text, "--profile", "image"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not accept this file's type [content_type_not_allowed]"));

    let out = run_upload(&app.address, Some(&alice), &[&png, "--profile", "image"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("committed"), "the summary line");
    let out = run_upload(&app.address, Some(&alice), &[&png, "--profile", "image"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("quota is used up"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("[quota_exceeded]"));

    // Nothing listens on port 9 of loopback.
    let out = run_upload(
        "http://127.0.0.1:9",
        Some(&alice),
        &[&png, "--profile", "image", "--retries", "1"],
    )
    .await;
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot reach the service"));

    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM file_handles").await,
        1,
        "only the accepted upload became a file"
    );
}
