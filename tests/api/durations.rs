//! Durations on the command line take the usual spellings (`0s`, `90s`, `1h30m`, `2d`).

use std::process::{Command, Output};

use serde_json::Value;

use crate::helpers::{media, spawn_app, TestApp, SECRET};

fn upcommit(app: &TestApp, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(args)
        .envs(&app.env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit")
}

fn unindexed(out: &Output) -> Vec<String> {
    let body: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "JSON expected: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    body["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["action"] == "unindexed")
        .map(|i| i["key"].as_str().expect("key").to_owned())
        .collect()
}

/// Runs `reconcile --json --grace <grace>`, which must succeed; the unindexed keys it found.
fn reconcile_with_grace(app: &TestApp, grace: &str) -> Vec<String> {
    let out = upcommit(app, &["reconcile", "--json", "--grace", grace]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "--grace {grace}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    unindexed(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_grace_takes_the_usual_duration_spellings() {
    let app = spawn_app().await;
    let stray = "media/images/stray.png";
    app.put_object(stray, media("image/png", 50), "image/png")
        .await;

    for grace in ["0s", "0", "0m"] {
        let found = reconcile_with_grace(&app, grace);
        assert_eq!(found, vec![stray.to_owned()], "--grace {grace}");
    }
    for grace in ["90s", "1h30m", "1h 30m", "2d"] {
        let found = reconcile_with_grace(&app, grace);
        assert!(
            found.is_empty(),
            "--grace {grace}: a young object is skipped"
        );
    }
    let out = upcommit(&app, &["reconcile", "--json", "--grace", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1h30m") && stderr.contains("\"soon\""),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_ttl_takes_the_usual_duration_spellings() {
    let app = spawn_app().await;
    for (ttl, secs) in [("90s", 90), ("1h30m", 5400), ("2d", 172_800), ("45", 45)] {
        let out = upcommit(&app, &["token", "--sub", "alice", "--ttl", ttl]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "--ttl {ttl}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let now = chrono::Utc::now().timestamp();
        assert!(
            upcommit::auth::verify(SECRET.as_bytes(), &token, now + secs - 30).is_ok(),
            "--ttl {ttl} lives {secs} s"
        );
        assert!(
            upcommit::auth::verify(SECRET.as_bytes(), &token, now + secs + 30).is_err(),
            "--ttl {ttl} expires after {secs} s"
        );
    }
    for refused in ["0s", "soon"] {
        let out = upcommit(&app, &["token", "--sub", "alice", "--ttl", refused]);
        assert_eq!(out.status.code(), Some(2), "--ttl {refused}");
    }
}
