//! An archive storage class whose objects are not instantly readable (GLACIER, DEEP_ARCHIVE)
//! would break restore and download of archived files: the real binary refuses it at start,
//! with a message that names the setting and the way out, and a non-zero exit.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::helpers::{spawn_app, TestApp};

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
