//! `/readyz` and `/metrics` need no token, so a flood of them must not become a flood of S3 calls
//! or database queries: readiness is served from a probe at most a second old, shared by
//! concurrent probes (a cached failure still answers 503), and metrics come from memory.

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
