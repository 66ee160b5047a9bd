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

/// Whether the store under test verifies no checksum the CLI declares (RGW 16.2 ignores every
/// `x-amz-checksum-*`: presign refuses them, docs/stores.md), so the CLI uploads without one.
fn store_verifies_no_checksum() -> bool {
    crate::helpers::gap_accepted("checksum_sha256")
        && crate::helpers::gap_accepted("checksum_crc64nvme")
}

/// Whether the upload behind `handle` declared no checksum at presign (the catalog's record).
async fn declared_none(app: &TestApp, handle: &Value) -> bool {
    let upload_id = handle["upload_id"].as_str().expect("upload id");
    app.db
        .count(&format!(
            "SELECT COUNT(*) FROM uploads WHERE id = '{upload_id}' AND checksum_algorithm IS NULL"
        ))
        .await
        == 1
}

/// What the CLI says when it falls back to no checksum.
const NO_CHECKSUM_WARNING: &str = "cannot verify a checksum on this upload; uploading without one";

/// The checksum the upload declared at presign and the one its handle recorded (in the JSON
/// printed and in the catalog) are both `expected`; on a store that verifies none, the upload
/// declared none and its handle records none.
async fn assert_checksum(app: &TestApp, handle: &Value, expected: &Checksum) {
    if store_verifies_no_checksum() {
        assert!(handle["checksum"].is_null(), "{handle}");
        assert!(declared_none(app, handle).await, "declared none");
        return;
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    assert!(
        declared_none(&app, &handle).await,
        "--no-checksum declared none"
    );

    let out = run_upload(&app.address, Some(&alice), &[&file, "--profile", "image"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    if store_verifies_no_checksum() {
        assert!(
            stderr(&out).contains(NO_CHECKSUM_WARNING),
            "the fallback is said: {}",
            stderr(&out)
        );
        return;
    }
    assert!(
        !stderr(&out).contains(NO_CHECKSUM_WARNING),
        "{}",
        stderr(&out)
    );
    let sha = Checksum::of(ChecksumAlgorithm::Sha256, &bytes).value;
    assert!(
        stderr(&out).contains(&format!("SHA256 {sha}")),
        "the summary line shows the checksum: {}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    if store_verifies_no_checksum() {
        // No checksum the store keeps, and the profile requires one: refused, with the
        // store's reason rather than --no-checksum's, and nothing uploaded.
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("[checksum_algorithm_unavailable]"),
            "{}",
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains(NO_CHECKSUM_WARNING),
            "no warning of an upload that does not happen: {}",
            stderr(&out)
        );
        assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);
    } else {
        let handle = assert_committed(&app, &out, &bytes, "media/images/").await;
        assert_checksum(
            &app,
            &handle,
            &Checksum::of(ChecksumAlgorithm::Sha256, &bytes),
        )
        .await;
    }

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

/// A multipart test file: `parts` parts of 5 MiB (the last one short), distinct bytes per MiB.
fn parted_file(dir: &tempfile::TempDir, parts: usize) -> (String, Vec<u8>) {
    let mut bytes = media("audio/mpeg", (parts - 1) * 5 * MIB + MIB + 123);
    for (i, b) in bytes.iter_mut().enumerate().skip(16) {
        *b = (i / MIB) as u8 ^ (i % 7) as u8;
    }
    (write(dir, "talk.mp3", &bytes), bytes)
}

async fn multipart_app() -> TestApp {
    spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_MULTIPART_THRESHOLD_BYTES", (6 * MIB).to_string()),
            ("UPCOMMIT_MULTIPART_PART_SIZE_BYTES", (5 * MIB).to_string()),
        ],
        ..Spawn::default()
    })
    .await
}

/// A multipart source file of `parts` parts ([`parted_file`]) in a directory of its own, which
/// the guard keeps: (guard, file, its bytes, the resume state the CLI keeps beside it, a log
/// for a run's stderr).
fn parted_source(
    parts: usize,
) -> (
    tempfile::TempDir,
    String,
    Vec<u8>,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, bytes) = parted_file(&dir, parts);
    let state = std::path::PathBuf::from(format!("{file}.upcommit-state.json"));
    let log = dir.path().join("run.log");
    (dir, file, bytes, state, log)
}

fn modified(file: &str) -> std::time::SystemTime {
    std::fs::metadata(file)
        .and_then(|m| m.modified())
        .expect("mtime")
}

/// Rewrites `file` with `bytes` and puts its modification time back to `mtime`.
fn rewrite_at(file: &str, bytes: &[u8], mtime: std::time::SystemTime) {
    std::fs::write(file, bytes).expect("rewrite");
    std::fs::File::options()
        .write(true)
        .open(file)
        .and_then(|f| f.set_modified(mtime))
        .expect("mtime put back");
}

/// `upcommit upload <file> --profile recording --json <extra>` as a child process that stops
/// (for good) after `pause_after` parts are stored (the debug-only
/// `UPCOMMIT_CLI_PAUSE_AFTER_PARTS`); its stderr goes to `log`.
fn spawn_paused_upload(
    server: &str,
    token: &str,
    file: &str,
    extra: &[&str],
    pause_after: usize,
    log: &std::path::Path,
) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["upload", file, "--profile", "recording", "--json"])
        .args(extra)
        .env("UPCOMMIT_SERVER", server)
        .env("UPCOMMIT_TOKEN", token)
        .env("UPCOMMIT_CLI_PAUSE_AFTER_PARTS", pause_after.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("start upcommit upload")
}

/// The part numbers the service lists for `upload_id`.
async fn listed_parts(app: &TestApp, token: &str, upload_id: &str) -> Vec<u64> {
    let resp = app
        .get(&format!("/v1/uploads/{upload_id}/parts"), Some(token))
        .await;
    assert_eq!(resp.status(), 200);
    let listing: Value = resp.json().await.expect("listing");
    listing["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .map(|p| p["part_number"].as_u64().expect("number"))
        .collect()
}

/// Waits until the run has written its state and the service holds `parts` parts, then kills
/// it with SIGKILL (no cleanup runs). Returns the upload id from the state file.
async fn kill_after_parts(
    app: &TestApp,
    token: &str,
    child: &mut std::process::Child,
    state: &std::path::Path,
    parts: usize,
) -> String {
    for _ in 0..600 {
        if let Ok(text) = std::fs::read(state) {
            let st: Value = serde_json::from_slice(&text).expect("state JSON");
            let id = st["upload_id"].as_str().expect("upload id").to_owned();
            if listed_parts(app, token, &id).await.len() >= parts {
                // Paused: no further part starts; a moment for a stray one to show.
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                child.kill().expect("SIGKILL");
                child.wait().expect("reaped");
                assert_eq!(
                    listed_parts(app, token, &id).await.len(),
                    parts,
                    "the run stopped after {parts} parts"
                );
                return id;
            }
        }
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the upload ended before it was killed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the upload never stored {parts} parts");
}

/// When each part of the one multipart upload in the bucket was last written to S3.
async fn part_times(app: &TestApp) -> Vec<(i32, std::time::SystemTime)> {
    let uploads = app.open_multipart_uploads().await;
    let u = &uploads[0];
    let parts = app
        .s3
        .list_parts()
        .bucket(&app.bucket)
        .key(u.key().expect("key"))
        .upload_id(u.upload_id().expect("id"))
        .send()
        .await
        .expect("ListParts");
    parts
        .parts()
        .iter()
        .map(|p| {
            let at = p.last_modified().expect("LastModified");
            (
                p.part_number().expect("number"),
                std::time::UNIX_EPOCH
                    + std::time::Duration::from_millis(
                        u64::try_from(at.to_millis().expect("millis")).expect("after 1970"),
                    ),
            )
        })
        .collect()
}

/// The CLI killed with SIGKILL mid-upload (twice) resumes from the state file beside the
/// source: each rerun lists the parts the service holds, sends only the missing ones (parts
/// already stored keep their S3 write time), completes and commits the file's exact bytes,
/// and removes the state file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_multipart_upload_resumes_and_sends_only_the_missing_parts() {
    let app = multipart_app().await;
    let (_dir, file, bytes, state, log) = parted_source(4);
    let alice = app.token("alice");

    let mut child = spawn_paused_upload(&app.address, &alice, &file, &[], 2, &log);
    let id = kill_after_parts(&app, &alice, &mut child, &state, 2).await;
    assert!(state.exists(), "the state survives the kill");
    let killed_at = std::time::SystemTime::now();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;

    // Second run: sends one more part, then is killed too.
    let mut child = spawn_paused_upload(&app.address, &alice, &file, &[], 1, &log);
    kill_after_parts(&app, &alice, &mut child, &state, 3).await;
    let log_text = std::fs::read_to_string(&log).expect("log");
    assert!(
        log_text.contains(&format!(
            "resuming upload {id}: 2 of 4 parts already stored, sending 2"
        )),
        "{log_text}"
    );
    let times = part_times(&app).await;
    assert_eq!(times.len(), 3, "{times:?}");
    for (n, at) in &times {
        let slack = std::time::Duration::from_millis(500);
        if *n <= 2 {
            assert!(*at <= killed_at + slack, "part {n} was not sent again");
        } else {
            assert!(*at > killed_at + slack, "part {n} was sent by the rerun");
        }
    }

    // Third run, not stopped: sends the last part, completes and commits.
    let out = run_upload(
        &app.address,
        Some(&alice),
        &[&file, "--profile", "recording", "--json"],
    )
    .await;
    assert!(
        stderr(&out).contains(&format!(
            "resuming upload {id}: 3 of 4 parts already stored, sending 1"
        )),
        "{}",
        stderr(&out)
    );
    let handle = assert_committed(&app, &out, &bytes, "media/recordings/").await;
    assert_eq!(handle["upload_id"], id.as_str(), "the same upload, resumed");
    assert_checksum(
        &app,
        &handle,
        &Checksum::of(ChecksumAlgorithm::Crc64Nvme, &bytes),
    )
    .await;
    assert_eq!(listed_parts(&app, &alice, &id).await, vec![1, 2, 3, 4]);
    assert!(!state.exists(), "the state is removed once committed");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 1);
}

/// A source file that changed after the run died is refused with a clear message and nothing
/// committed or sent, whether the change shows in its size, its modification time, or only in
/// its whole-file checksum (a byte in the middle, the modification time put back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_source_file_is_not_resumed_and_nothing_is_committed() {
    let app = multipart_app().await;
    let (_dir, file, bytes, state, log) = parted_source(3);
    let alice = app.token("alice");
    let mut child = spawn_paused_upload(&app.address, &alice, &file, &[], 1, &log);
    let id = kill_after_parts(&app, &alice, &mut child, &state, 1).await;

    let mtime = modified(&file);
    let rewrite = |new: &[u8]| rewrite_at(&file, new, mtime);
    let mut middle = bytes.clone();
    middle[7 * MIB] ^= 0xff;
    let mut longer = bytes.clone();
    longer.push(0);
    for (new, why) in [
        (&middle, "its whole-file CRC64NVME differs"),
        (&longer, "its size changed"),
    ] {
        rewrite(new);
        let out = run_upload(
            &app.address,
            Some(&alice),
            &[&file, "--profile", "recording", "--json"],
        )
        .await;
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let text = stderr(&out);
        assert!(
            text.contains(&format!("changed since upload {id} was started ({why})"))
                && text.contains("nothing was committed"),
            "{text}"
        );
        assert!(out.stdout.is_empty());
    }
    // Same bytes, touched: refused on the modification time alone.
    std::fs::write(&file, &bytes).expect("rewrite");
    let out = run_upload(
        &app.address,
        Some(&alice),
        &[&file, "--profile", "recording"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("its modification time changed"));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0);
    assert_eq!(
        listed_parts(&app, &alice, &id).await,
        vec![1],
        "no part was sent"
    );
    assert!(
        state.exists(),
        "the state is kept for the operator to decide"
    );

    // Following the message: delete the state, and the file as it is now is uploaded anew.
    rewrite(&middle);
    std::fs::remove_file(&state).expect("delete state");
    let out = run_upload(
        &app.address,
        Some(&alice),
        &[&file, "--profile", "recording", "--json"],
    )
    .await;
    let handle = assert_committed(&app, &out, &middle, "media/recordings/").await;
    assert_ne!(handle["upload_id"], id.as_str(), "a new upload");
}

/// Without a whole-file checksum nothing could prove that the parts already stored are the
/// file's current contents (a change in the middle that keeps the size and the modification
/// time), so `--no-checksum` keeps no resume state: a rerun after a killed run uploads the file
/// as it is now, never a mix of old parts and new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_checksum_a_killed_upload_is_started_afresh_never_mixed() {
    let app = multipart_app().await;
    let (_dir, file, bytes, state, log) = parted_source(3);
    let alice = app.token("alice");
    let mut child = spawn_paused_upload(&app.address, &alice, &file, &["--no-checksum"], 1, &log);
    // Wait until the first part is stored, then kill the run there.
    let mut stored = false;
    for _ in 0..600 {
        if app
            .db
            .count("SELECT COUNT(*) FROM uploads WHERE state = 'issued'")
            .await
            == 1
        {
            let ids = app.db.strings("SELECT id FROM uploads").await;
            if listed_parts(&app, &alice, &ids[0]).await.len() == 1 {
                stored = true;
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(stored, "the first run stored a part");
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert!(!state.exists(), "no resume state without a checksum");

    // A change in the middle, size and modification time kept.
    let mtime = modified(&file);
    let mut changed = bytes.clone();
    changed[2 * MIB] ^= 0xff;
    rewrite_at(&file, &changed, mtime);
    let out = run_upload(
        &app.address,
        Some(&alice),
        &[&file, "--profile", "recording", "--json", "--no-checksum"],
    )
    .await;
    assert!(!stderr(&out).contains("resuming"), "{}", stderr(&out));
    assert_committed(&app, &out, &changed, "media/recordings/").await;
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM uploads").await,
        2,
        "a new upload"
    );
}
