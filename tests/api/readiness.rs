//! `/readyz` and `/metrics` need no token, so a flood of them must not become a flood of S3 calls
//! or database queries: readiness is served from a probe at most a second old, shared by
//! concurrent probes (a cached failure still answers 503), and metrics come from memory. Nor may
//! readiness tell anyone more than each check's state: the detail is the admin view's.

use std::time::{Duration, Instant};

use crate::helpers::{spawn_app_with, Spawn, TestApp, TestDb};

/// A server without the drift watch, whose own S3 calls would blur the counts.
async fn quiet_app() -> TestApp {
    spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS", "0".into())],
        ..Spawn::default()
    })
    .await
}

/// The sum of one counter over its series whose labels contain `labels` (e.g.
/// `operation="HeadBucket"`), read from the server's `/metrics` like a scraper would.
async fn counted(app: &TestApp, metric: &str, labels: &str) -> f64 {
    crate::helpers::counter_sum(&app.metrics_text().await, metric, labels)
}

/// `n` concurrent GET /readyz; their statuses.
async fn flood_readyz(app: &TestApp, n: usize) -> Vec<u16> {
    let probes = (0..n).map(|_| async {
        app.http
            .get(format!("{}/readyz", app.address))
            .send()
            .await
            .expect("readyz")
            .status()
            .as_u16()
    });
    futures::future::join_all(probes).await
}

/// At most one refresh per started TTL while the flood ran, plus the one in flight at its start.
fn refreshes_allowed(elapsed: Duration) -> f64 {
    let ttl = upcommit::state::readiness::TTL.as_secs_f64();
    (elapsed.as_secs_f64() / ttl).ceil() + 1.0
}

#[tokio::test]
async fn a_flood_of_readiness_probes_makes_a_handful_of_s3_calls_not_one_each() {
    let app = quiet_app().await;
    let head_bucket = r#"operation="HeadBucket""#;
    let ping = r#"operation="ping""#;
    let s3_before = counted(
        &app,
        "upcommit_s3_request_duration_seconds_count",
        head_bucket,
    )
    .await;
    let db_before = counted(&app, "upcommit_db_query_duration_seconds_count", ping).await;

    let started = Instant::now();
    let statuses = flood_readyz(&app, 300).await;
    let allowed = refreshes_allowed(started.elapsed());

    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let s3 = counted(
        &app,
        "upcommit_s3_request_duration_seconds_count",
        head_bucket,
    )
    .await
        - s3_before;
    let db = counted(&app, "upcommit_db_query_duration_seconds_count", ping).await - db_before;
    assert!(s3 >= 1.0, "the bucket was checked at all");
    assert!(
        s3 <= allowed && s3 < 30.0,
        "300 probes made {s3} HeadBucket calls (allowed {allowed})"
    );
    assert!(
        db <= allowed && db < 30.0,
        "300 probes made {db} database pings"
    );
}

#[tokio::test]
async fn a_cached_failure_still_answers_503_to_every_probe() {
    let app = quiet_app().await;
    match &app.db {
        TestDb::Sqlite(p) => p.close().await,
        TestDb::Postgres(p) => p.close().await,
    }
    let statuses = flood_readyz(&app, 100).await;
    assert!(statuses.iter().all(|s| *s == 503), "{statuses:?}");
    let body: serde_json::Value = app.get("/readyz", None).await.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "not_ready");
    assert_eq!(body["checks"]["database"], "unavailable");
    assert_eq!(body["checks"]["bucket"], "ok");
}

#[tokio::test]
async fn metrics_scrapes_read_no_database_and_no_s3() {
    let app = quiet_app().await;
    let db_all = "";
    let db_before = counted(&app, "upcommit_db_query_duration_seconds_count", db_all).await;
    let s3_before = counted(&app, "upcommit_s3_request_duration_seconds_count", "").await;
    let started = Instant::now();
    for _ in 0..50 {
        assert_eq!(app.get("/metrics", None).await.status(), 200);
    }
    let elapsed = started.elapsed();
    let db = counted(&app, "upcommit_db_query_duration_seconds_count", db_all).await - db_before;
    let s3 = counted(&app, "upcommit_s3_request_duration_seconds_count", "").await - s3_before;
    // Only background tasks read the catalog, whatever the number of scrapes: the job gauges'
    // refresh (two queries per interval), the event sequencer's look for new events (one per
    // 200 ms) and the delivery supervisor's endpoint list and outbox gauges (two per 5 s).
    let secs = elapsed.as_secs_f64();
    let every = upcommit::state::job_gauges::EVERY.as_secs_f64();
    let background = 2.0 * ((secs / every).ceil() + 1.0)
        + (secs / 0.2).ceil()
        + 1.0
        + 2.0 * ((secs / 5.0).ceil() + 1.0);
    assert!(
        db <= background,
        "50 scrapes made {db} catalog calls (background allows {background})",
    );
    assert_eq!(s3, 0.0, "50 scrapes made {s3} S3 calls");
}

/// `upcommit healthcheck`, the container image's HEALTHCHECK, run as the image runs it: with
/// the server's settings and UPCOMMIT_LISTEN on the wildcard address, which it probes on loopback.
/// Off the test's runtime thread, which serves the test server meanwhile.
async fn healthcheck(app: &TestApp, port: &str) -> (i32, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"));
    command
        .arg("healthcheck")
        .envs(&app.env)
        .env("UPCOMMIT_LISTEN", format!("0.0.0.0:{port}"))
        .env("RUST_LOG", "warn");
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("run upcommit healthcheck");
    let printed =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), printed)
}

#[tokio::test]
async fn the_healthcheck_command_exits_0_while_ready_and_1_once_readiness_fails() {
    let app = quiet_app().await;
    let port = app.address.rsplit(':').next().expect("a port").to_owned();
    let (code, printed) = healthcheck(&app, &port).await;
    assert_eq!(code, 0, "{printed}");
    assert!(printed.starts_with("200 "), "{printed}");

    match &app.db {
        TestDb::Sqlite(p) => p.close().await,
        TestDb::Postgres(p) => p.close().await,
    }
    // Past the cached probe's lifetime, the next one finds the database gone.
    tokio::time::sleep(upcommit::state::readiness::TTL + Duration::from_millis(100)).await;
    let (code, printed) = healthcheck(&app, &port).await;
    assert_eq!(code, 1, "{printed}");
    assert!(printed.starts_with("503 "), "{printed}");
}

#[tokio::test]
async fn the_healthcheck_command_exits_1_when_nothing_listens() {
    let app = quiet_app().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port().to_string();
    drop(closed);
    let (code, printed) = healthcheck(&app, &port).await;
    assert_eq!(code, 1, "{printed}");
    assert!(printed.contains("GET http://127.0.0.1:"), "{printed}");
}

/// The `/v1/admin/bucket` view (an admin's token): the watch's verdict, its latest report and
/// the store's capabilities.
async fn admin_bucket(app: &TestApp) -> serde_json::Value {
    let resp = app
        .get("/v1/admin/bucket", Some(&app.admin_token("root")))
        .await;
    assert_eq!(resp.status(), 200);
    resp.json().await.expect("JSON")
}

/// Polls the admin view until the drift watch's verdict is `want`; returns the view.
async fn wait_for_verdict(app: &TestApp, want: &str) -> serde_json::Value {
    let mut view = serde_json::Value::Null;
    for _ in 0..100 {
        view = admin_bucket(app).await;
        if view["verdict"] == want {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the watch never said {want}: {view}");
}

/// Asserts a `/readyz` body says what a load balancer and an orchestrator need (ready or not,
/// each check's state by name) and nothing of what the admin view holds: no bucket
/// configuration, no store capability, no promise.
fn assert_probe_only(body: &serde_json::Value, view: &serde_json::Value, who: &str) {
    let top: Vec<&str> = body
        .as_object()
        .expect("object")
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert!(
        top.iter()
            .all(|k| ["status", "checks", "error"].contains(k)),
        "{who}: {body}"
    );
    let checks: Vec<&str> = body["checks"]
        .as_object()
        .expect("checks")
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        checks,
        ["bucket", "bucket_config", "database"],
        "{who}: {body}"
    );
    let text = body.to_string();
    let mut secrets: Vec<String> = vec![app_bucket(view)];
    for line in view["capabilities"].as_array().expect("capabilities") {
        secrets.push(line["capability"].as_str().expect("name").to_owned());
        secrets.push(line["promise"].as_str().expect("promise").to_owned());
        if let Some(without) = line["without"].as_str() {
            secrets.push(without.to_owned());
        }
    }
    for result in view["report"]["results"].as_array().expect("results") {
        secrets.push(result["check"].as_str().expect("check").to_owned());
    }
    for secret in &secrets {
        assert!(
            !text.contains(secret.as_str()),
            "{who} sees {secret:?}: {body}"
        );
    }
}

fn app_bucket(view: &serde_json::Value) -> String {
    view["bucket"].as_str().expect("bucket").to_owned()
}

/// Issue 35: `/readyz` needs no token and served the whole bucket-configuration report and
/// every accepted store gap with its weakened promise (e.g. that the store takes any POST form):
/// what `GET /v1/admin/bucket` keeps to admins, an attacker's map. Anonymous, with a user's
/// token or an admin's, it says ready or not and which check fails, healthy or failing; the
/// detail is the admin view's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_shows_no_bucket_configuration_and_no_store_gap_to_anyone() {
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS", "1".into()),
            ("UPCOMMIT_BUCKET_CHECK_FAILS_READINESS", "true".into()),
        ],
        ..Spawn::default()
    })
    .await;
    let tokens = [
        ("anonymous", None),
        ("a user", Some(app.token("mallory"))),
        ("an admin", Some(app.admin_token("root"))),
    ];
    let view = wait_for_verdict(&app, "ok").await;
    // Every store under test runs with a gap accepted (LocalStack: POST signatures), so there
    // is something to leak.
    assert!(
        view["capabilities"]
            .as_array()
            .expect("capabilities")
            .iter()
            .any(|l| l["standing"] == "accepted"),
        "{view}"
    );
    for (who, token) in &tokens {
        let resp = app.get("/readyz", token.as_deref()).await;
        assert_eq!(resp.status(), 200, "{who}");
        let body: serde_json::Value = resp.json().await.expect("JSON");
        assert_eq!(body["status"], "ready", "{who}: {body}");
        assert_eq!(body["checks"]["bucket_config"], "ok", "{who}: {body}");
        assert_probe_only(&body, &view, who);
    }

    // The lifecycle document gone: a fault every store under test has (Garage implements no
    // versioning document to suspend).
    app.s3
        .delete_bucket_lifecycle()
        .bucket(&app.bucket)
        .send()
        .await
        .expect("delete the lifecycle configuration");
    let view = wait_for_verdict(&app, "failing").await;
    for (who, token) in &tokens {
        let resp = app.get("/readyz", token.as_deref()).await;
        assert_eq!(resp.status(), 503, "{who}");
        let body: serde_json::Value = resp.json().await.expect("JSON");
        assert_eq!(body["error"]["code"], "not_ready", "{who}: {body}");
        assert_eq!(body["checks"]["bucket_config"], "failing", "{who}: {body}");
        assert_eq!(body["checks"]["database"], "ok", "{who}: {body}");
        assert_probe_only(&body, &view, who);
    }
}
