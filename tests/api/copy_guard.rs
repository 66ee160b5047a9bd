//! Issue 36: Ceph RGW 16.2 ignores CopyObject's `x-amz-copy-source-if-match` and keeps the same
//! condition under its older name, `x-amz-copy-if-match`. upcommit sends the older name only
//! where its probe found the store keeps it; AWS documents no such header, so it is sent
//! nowhere else. A recording proxy in front of the store under test sees every CopyObject the
//! service makes — a commit's, archival's rewrite in place, quarantine's copy aside — and checks
//! each: AWS's guard always, naming the ETag the copy read; the older name beside it, with the
//! same ETag, on RGW, and on no copy at all on LocalStack and Garage. (The probe's own copies,
//! under tmp/, try the older name on every store: that is how it finds out.)

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::response::Response;
use chrono::Duration;

use crate::helpers::{media, spawn_app_with, store_kind, Spawn};
use crate::hygiene::{file, hygiene, hygiene_env, in_days, moved, DAY};
use crate::reconcile::{keys, reconcile_cli};

/// One CopyObject or UploadPartCopy as it reached the proxy.
#[derive(Debug, Clone)]
struct SeenCopy {
    /// The destination, `/{bucket}/{key}` (path-style).
    path: String,
    aws: Option<String>,
    legacy: Option<String>,
    /// An UploadPartCopy (`partNumber` in the query).
    part: bool,
}

type Seen = Arc<Mutex<Vec<SeenCopy>>>;

async fn record(State((seen, http)): State<(Seen, reqwest::Client)>, req: Request) -> Response {
    if req.method() == "PUT" && req.headers().contains_key("x-amz-copy-source") {
        let header = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let copy = SeenCopy {
            path: req.uri().path().to_owned(),
            aws: header("x-amz-copy-source-if-match"),
            legacy: header("x-amz-copy-if-match"),
            part: req.uri().query().is_some_and(|q| q.contains("partNumber=")),
        };
        seen.lock().expect("lock").push(copy);
    }
    crate::s3_proxy::relay(&http, req).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_older_copy_guard_goes_only_to_a_store_that_keeps_it_on_every_copy_the_service_makes() {
    let seen: Seen = Arc::default();
    let router = axum::Router::new()
        .fallback(record)
        .with_state((seen.clone(), crate::s3_proxy::relay_client()));
    let mut env = hygiene_env(DAY);
    env.push(("UPCOMMIT_S3_ENDPOINT", crate::helpers::serve(router).await));
    let app = spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await;

    // A commit, then archival of the file once unlinked (a CLI run: a process that probes
    // nothing but what archival uses), then quarantine of a stray object (another CLI run).
    let (_, key) = file(&app, 2000).await;
    assert_eq!(hygiene(&app, Some(in_days(2)))["summary"]["unlinked"], 1);
    let archived = hygiene(&app, Some(in_days(3) + Duration::seconds(5)));
    assert_eq!(archived["summary"]["archived"], 1, "{archived}");
    let stray = "media/images/stray/copy-guard.png";
    app.put_object(stray, media("image/png", 300), "image/png")
        .await;
    let run = reconcile_cli(&app, &["--quarantine"]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert_eq!(keys(&run.body, "quarantined").len(), 1, "{}", run.body);

    let bucket = format!("/{}/", app.bucket);
    let copies: Vec<SeenCopy> = seen
        .lock()
        .expect("lock")
        .iter()
        .filter(|c| !c.path.starts_with(&format!("{bucket}tmp/")))
        .cloned()
        .collect();
    let to = |k: &str| format!("{bucket}{k}");
    let expected: Vec<String> = std::iter::once(to(&key))
        .chain((moved(1) == 1).then(|| to(&key)))
        .chain(std::iter::once(to(&format!("quarantine/{stray}"))))
        .collect();
    assert_eq!(
        copies.iter().map(|c| c.path.clone()).collect::<Vec<_>>(),
        expected,
        "the service's copies: the commit's, archival's (where it moves objects), quarantine's: {copies:#?}"
    );
    let keeps_older_name = store_kind() == "rgw";
    for c in &copies {
        assert!(!c.part, "no copy here is over the single-copy limit: {c:?}");
        let aws = c.aws.as_deref().expect("AWS's guard on every copy");
        assert!(aws.starts_with('"') && aws.len() > 2, "{c:?}");
        if keeps_older_name {
            assert_eq!(c.legacy.as_deref(), Some(aws), "{c:?}");
        } else {
            assert_eq!(
                c.legacy, None,
                "sent to a store that does not keep it: {c:?}"
            );
        }
    }
    // The probe's copies did try the older name: the finding is the store's answer, not a
    // default (on the cached probe of the test servers, the CLI runs' own question).
    let probed = seen
        .lock()
        .expect("lock")
        .iter()
        .filter(|c| c.path.starts_with(&format!("{bucket}tmp/")) && c.legacy.is_some())
        .count();
    assert!(
        probed >= 1,
        "the older name was asked of the store ({probed} probe copies)"
    );
}

/// What the recording proxy does to the copy guard's question: its probe write refused (403),
/// as a store answers a job whose credentials may not write under tmp/.
async fn refuse_the_question(
    State((seen, http)): State<(Seen, reqwest::Client)>,
    req: Request,
) -> Response {
    let path = req.uri().path().to_owned();
    if req.method() == "PUT" && path.contains("/tmp/") && path.ends_with("-seed") {
        seen.lock().expect("lock").push(SeenCopy {
            path,
            aws: None,
            legacy: None,
            part: false,
        });
        return Response::builder()
            .status(403)
            .header("content-type", "application/xml")
            .body(axum::body::Body::from(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>denied</Message></Error>",
            ))
            .expect("response");
    }
    crate::s3_proxy::relay(&http, req).await
}

/// Review of issue 36: a store that refuses the question (not one that does not answer) was
/// asked again before every copy — three rounds of probe writes each, a second and more per
/// object on RGW. A process asks at most once while the answer stays unknown; its copies go
/// with AWS's name only, and the job still does its work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_guard_question_is_asked_once_per_process_not_before_every_copy() {
    let seen: Seen = Arc::default();
    let router = axum::Router::new()
        .fallback(refuse_the_question)
        .with_state((seen.clone(), crate::s3_proxy::relay_client()));
    let proxy = crate::helpers::serve(router).await;
    let app = crate::helpers::spawn_app().await;
    let strays = ["a", "b", "c", "d"].map(|n| format!("media/images/stray/refused-{n}.png"));
    for key in &strays {
        app.put_object(key, media("image/png", 300), "image/png")
            .await;
    }
    let mut env = app.env.clone();
    env.insert("UPCOMMIT_S3_ENDPOINT".into(), proxy);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["reconcile", "--json", "--grace", "0", "--quarantine"])
        .envs(&env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("reconcile");
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{body} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(keys(&body, "quarantined").len(), strays.len(), "{body}");
    let questions = seen.lock().expect("lock").len();
    // One question is up to three rounds (a write each) within the probe's budget.
    assert!(
        (1..=3).contains(&questions),
        "the question was asked {questions} times for {} copies",
        strays.len()
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("x-amz-copy-if-match").count(),
        1,
        "one warning: {stderr}"
    );
    assert!(!stderr.contains("Some("), "{stderr}");
}
