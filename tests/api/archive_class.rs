//! An archive storage class whose objects are not instantly readable (GLACIER, DEEP_ARCHIVE)
//! would break restore and download of archived files: the real binary refuses it at start,
//! with a message that names the setting and the way out, and a non-zero exit. An object over
//! the single-copy limit is archived in place by a multipart copy, like one under it.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::Value;

use crate::helpers::{media, small_copy_limit, spawn_app, spawn_app_with, Spawn, TestApp};

/// Runs `upcommit <args>` on the test server's environment with `class` as the archive class;
/// kills it if it is still running after 20 s (then the refusal did not happen).
fn upcommit_with_class(app: &TestApp, class: &str, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(args)
        .envs(&app.env)
        .env("UPCOMMIT_ARCHIVE_STORAGE_CLASS", class)
        .env("UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS", "0")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run upcommit");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait_with_output().expect("output")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_refuses_to_start_with_an_archive_class_that_needs_a_restore() {
    let app = spawn_app().await;
    for class in ["GLACIER", "DEEP_ARCHIVE", "deep_archive"] {
        let out = upcommit_with_class(&app, class, &["serve"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{class}: {stderr}");
        assert!(
            stderr.contains("UPCOMMIT_ARCHIVE_STORAGE_CLASS")
                && stderr.contains("not instantly readable")
                && stderr.contains("GLACIER_IR"),
            "{class}: {stderr}"
        );
    }
    // An unknown name is refused too (a typo must not reach the first archival).
    let out = upcommit_with_class(&app, "GLACIER-IR", &["serve"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("not a storage class upcommit can archive into"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instantly_readable_archive_classes_are_accepted() {
    let app = spawn_app().await;
    // `migrate` loads the same settings as `serve` and then exits.
    for class in ["GLACIER_IR", "standard_ia", "INTELLIGENT_TIERING"] {
        let out = upcommit_with_class(&app, class, &["migrate"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{class}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `upcommit hygiene --at <now + days>` with the single-copy limit lowered to 5 MiB (its least):
/// only the job copies in parts, the commit before it did not.
fn hygiene_in_parts(app: &TestApp, days: i64) -> Value {
    let at = Utc::now() + chrono::Duration::seconds(days * 86_400 + 5);
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["hygiene", "--json", "--at", &at.to_rfc3339()])
        .envs(&app.env)
        .envs(small_copy_limit())
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit hygiene");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_over_the_single_copy_limit_is_archived_in_place_in_parts() {
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_UNLINKED_GRACE_SECS", "86400".into()),
            ("UPCOMMIT_ARCHIVE_AFTER_SECS", "86400".into()),
            ("UPCOMMIT_DELETE_AFTER_SECS", "172800".into()),
            ("UPCOMMIT_ARCHIVE_MIN_BYTES", "1000".into()),
            ("UPCOMMIT_TRACKS_LINKS", "image".into()),
        ],
        ..Spawn::default()
    })
    .await;
    // Over 5 MiB, so that the lowered limit sends it down the copy in parts.
    let size = 5 * 1024 * 1024 + 2000;
    let (_, h) = app
        .upload_and_commit(&app.token("alice"), "image", "image/png", size)
        .await;
    let key = h["key"].as_str().expect("key");
    let head = |key: &str| {
        let req = app.s3.head_object().bucket(&app.bucket).key(key);
        req.checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled)
            .send()
    };
    let before = head(key).await.expect("HEAD before");
    assert!(
        !before.e_tag().expect("etag").contains('-'),
        "one CopyObject"
    );

    let run = hygiene_in_parts(&app, 2);
    assert_eq!(run["summary"]["unlinked"], 1, "{run}");
    let run = hygiene_in_parts(&app, 3);
    assert_eq!(run["summary"]["archived"], 1, "{run}");
    assert_eq!(run["summary"]["failed"], 0, "{run}");

    let after = head(key).await.expect("HEAD after");
    assert!(
        after.e_tag().expect("etag").ends_with("-2\""),
        "assembled from two copied parts: {:?}",
        after.e_tag()
    );
    assert_eq!(
        after.storage_class().map(|c| c.as_str()),
        Some("GLACIER_IR")
    );
    let tags = app.s3.get_object_tagging().bucket(&app.bucket).key(key);
    let tags = tags.send().await.expect("tagging");
    let tags: Vec<_> = tags
        .tag_set()
        .iter()
        .map(|t| (t.key(), t.value()))
        .collect();
    if crate::helpers::gap_accepted("object_tags") {
        // RGW 16.2 keeps no tags a multipart upload was created with: archival sends none.
        assert!(tags.is_empty(), "{tags:?}");
    } else {
        assert_eq!(tags, [("upcommit-status", "archived")]);
    }
    assert_eq!(after.content_type(), before.content_type());
    assert_eq!(after.metadata(), before.metadata());
    if !crate::helpers::gap_accepted("checksum_crc64nvme") {
        // RGW 16.2 keeps no checksums (HEAD returns none): nothing to carry over there.
        assert!(before.checksum_crc64_nvme().is_some());
        assert_eq!(after.checksum_crc64_nvme(), before.checksum_crc64_nvme());
    }
    assert_eq!(app.versions(key).await, 1, "held once");
    assert_eq!(app.get_object(key).await, media("image/png", size));
}

/// Issue 35: a store that keeps storage classes but whose tags are an accepted gap (R2's
/// profile in docs/stores.md) turned archival catalog-only, its report saying the store had no
/// storage classes. The class moves wherever `storage_class` is present; only the tag is left
/// out. On LocalStack, which keeps both, the fault wrapper's probe reports the tags missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archival_moves_the_class_where_only_the_tags_gap_is_accepted() {
    use crate::hygiene::{file, hygiene, in_days, spawn, status, DAY};
    use upcommit::domain::capabilities::Capability;
    use upcommit::services::hygiene::{run, HygieneOutcome};
    if !crate::hygiene::archival_moves_objects() {
        // Garage keeps no storage classes: there is nothing to move.
        return;
    }
    let app = spawn(DAY).await;
    let (id, key) = file(&app, 2000).await;
    assert_eq!(hygiene(&app, Some(in_days(2)))["summary"]["unlinked"], 1);

    let faults = std::sync::Arc::new(crate::faults::Faults::default());
    *faults.hide_capabilities.lock().expect("lock") = vec![Capability::ObjectTags];
    let mut settings = upcommit::config::Settings::from_map(&app.env).expect("settings");
    settings.s3.accept_gaps.insert(Capability::ObjectTags);
    let real = upcommit::storage::S3Store::connect(&settings.s3)
        .await
        .expect("store");
    let raw = real.client().clone();
    let store = crate::faults::faulty_store(faults)(std::sync::Arc::new(real), raw);
    let at = in_days(3) + chrono::Duration::seconds(5);
    let outcome = run(&app.catalog, &store, &settings, false, at)
        .await
        .expect("hygiene");
    let HygieneOutcome::Ran { run, summary } = outcome else {
        panic!("busy");
    };

    assert_eq!(
        (summary.archived, summary.archived_in_place, summary.failed),
        (1, 0, 0),
        "{summary:?}"
    );
    assert_eq!(status(&app, &id).await, "archived");
    let head = app.head(&key).await;
    assert_eq!(head.storage_class().map(|c| c.as_str()), Some("GLACIER_IR"));
    let tags = app.s3.get_object_tagging().bucket(&app.bucket).key(&key);
    let tags = tags.send().await.expect("tagging");
    assert!(tags.tag_set().is_empty(), "{:?}", tags.tag_set());
    let reasons = app
        .db
        .strings(&format!(
            "SELECT reason FROM job_items WHERE run_id = '{}' AND action = 'archived'",
            run.id
        ))
        .await;
    assert_eq!(reasons, [format!("file {id}: moved to GLACIER_IR")]);
}
