//! Upload retention from outside: the rows of finished uploads are pruned once nothing can use
//! them, never while a commit, a retry, a URL or a multipart session still can; a commit retried
//! after pruning answers the same handle and copies nothing; a dry run changes nothing; the
//! storage report shows the tables' sizes.

use serde_json::Value;
use upcommit::config::Settings;
use upcommit::services::prune::{prune_at, PruneOutcome, PruneSummary};

use crate::helpers::{error_code, spawn_app, spawn_app_with, Spawn, TestApp};
use crate::multipart::{complete, five_mib_parts, sorted, start, upload_parts};

/// Runs the prune as of `days` from now (with the server's settings); asserts it finished.
async fn prune_in(app: &TestApp, days: i64, dry_run: bool) -> PruneSummary {
    let settings = Settings::from_map(&app.env).expect("settings");
    let at = chrono::Utc::now() + chrono::Duration::days(days);
    prune_with(app, &settings, at, dry_run).await
}

async fn prune_with(
    app: &TestApp,
    settings: &Settings,
    at: chrono::DateTime<chrono::Utc>,
    dry_run: bool,
) -> PruneSummary {
    match prune_at(&app.catalog, settings, dry_run, at)
        .await
        .expect("prune")
    {
        PruneOutcome::Ran { run, summary } => {
            assert_eq!(run.state.as_str(), "finished", "{summary:?}");
            *summary
        }
        PruneOutcome::Busy => panic!("prune busy"),
    }
}

async fn uploads_rows(app: &TestApp) -> i64 {
    app.db.count("SELECT COUNT(*) FROM uploads").await
}

#[tokio::test]
async fn a_commit_retried_after_its_upload_row_was_pruned_answers_the_same_handle_and_copies_nothing(
) {
    let app = spawn_app().await;
    let token = app.token("alice");
    let (p, handle) = app
        .upload_and_commit(&token, "image", "image/png", 2048)
        .await;
    app.sweep_after_urls_expire().await;

    let pruned = prune_in(&app, 400, false).await;
    assert_eq!(pruned.uploads.committed, 1, "{pruned:?}");
    assert_eq!(uploads_rows(&app).await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);

    let retry = app.commit(&token, &p.key, None).await;
    assert_eq!(retry.status(), 200, "the same handle, not a new commit");
    let again: Value = retry.json().await.expect("handle");
    assert_eq!(again["id"], handle["id"]);
    assert_eq!(again["key"], handle["key"]);
    let final_key = handle["key"].as_str().expect("key");
    assert_eq!(app.versions(final_key).await, 1, "no second copy");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
    assert_eq!(uploads_rows(&app).await, 0, "no upload row comes back");
    // Someone else's retry of the same key learns nothing.
    assert_eq!(
        error_code(app.commit(&app.token("mallory"), &p.key, None).await).await,
        (404, "upload_not_found".to_owned())
    );
    // The file is still served.
    let file = app
        .get(
            &format!("/v1/files/{}", handle["id"].as_str().expect("id")),
            Some(&token),
        )
        .await;
    assert_eq!(file.status(), 200);
}

#[tokio::test]
async fn a_prune_inside_the_commit_window_deletes_nothing_the_commit_needs() {
    // Rows older than the retention, but the commit window (3 days) still open.
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_UPLOAD_RETENTION", "1d".into()),
            ("UPCOMMIT_COMMIT_WINDOW_SECS", (3 * 86_400).to_string()),
        ],
        ..Spawn::default()
    })
    .await;
    let token = app.token("alice");
    let p = app
        .uploaded(&token, "image", "image/png", 2048, "PUT")
        .await;
    let settings = Settings::from_map(&app.env).expect("settings");
    let at = chrono::Utc::now() + chrono::Duration::days(1) + chrono::Duration::hours(1);

    let pruned = prune_with(&app, &settings, at, false).await;
    assert_eq!(pruned.uploads.uploads(), 0, "{pruned:?}");
    assert_eq!(uploads_rows(&app).await, 1);

    let commit = app.commit(&token, &p.key, None).await;
    assert_eq!(commit.status(), 201, "the commit still finds its upload");
    // Committed, but its tmp object still guards the single-use URL: kept whatever the age.
    let pruned = prune_in(&app, 400, false).await;
    assert_eq!(pruned.uploads.uploads(), 0, "{pruned:?}");
    assert_eq!(app.db.upload_state(&p.upload_id).await, "committed");
}

#[tokio::test]
async fn a_dry_run_counts_what_would_go_and_changes_nothing() {
    let app = spawn_app().await;
    let token = app.token("alice");
    app.upload_and_commit(&token, "image", "image/png", 2048)
        .await;
    // Never committed: expires.
    app.uploaded(&token, "image", "image/png", 1024, "PUT")
        .await;
    app.sweep_after_urls_expire().await;
    let quota_rows = app.db.count("SELECT COUNT(*) FROM quota_usage").await;
    assert_eq!(quota_rows, 1);

    let dry = prune_in(&app, 400, true).await;
    assert_eq!(
        (dry.uploads.committed, dry.uploads.expired, dry.quota_rows),
        (1, 1, 1),
        "{dry:?}"
    );
    assert_eq!(uploads_rows(&app).await, 2, "a dry run deletes nothing");
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM quota_usage").await,
        1,
        "nor quota rows"
    );

    let real = prune_in(&app, 400, false).await;
    assert_eq!(real.uploads, dry.uploads, "the dry run counted what goes");
    assert_eq!(real.quota_rows, 1);
    assert_eq!(uploads_rows(&app).await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM quota_usage").await, 0);
    // A second run finds nothing more.
    let again = prune_in(&app, 400, false).await;
    assert_eq!((again.uploads.uploads(), again.quota_rows), (0, 0));
}

#[tokio::test]
async fn todays_quota_rows_and_recent_uploads_survive_a_prune_on_the_real_clock() {
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_UPLOAD_RETENTION", "1d".into())],
        ..Spawn::default()
    })
    .await;
    let token = app.token("alice");
    app.upload_and_commit(&token, "image", "image/png", 2048)
        .await;
    app.sweep_after_urls_expire().await;
    let settings = Settings::from_map(&app.env).expect("settings");
    let now = app.catalog.clock().await.expect("clock");

    let pruned = prune_with(&app, &settings, now, false).await;
    assert_eq!((pruned.uploads.uploads(), pruned.quota_rows), (0, 0));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM quota_usage").await, 1);
    // A quota day that ended more than the retention ago goes.
    app.db
        .count(
            "INSERT INTO quota_usage (owner, day, uploads, bytes) VALUES ('alice', '2020-01-01', 1, 1) \
             RETURNING uploads",
        )
        .await;
    let pruned = prune_with(&app, &settings, now, false).await;
    assert_eq!(pruned.quota_rows, 1);
    assert!(!app
        .db
        .strings("SELECT day FROM quota_usage")
        .await
        .iter()
        .any(|d| d == "2020-01-01"));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM quota_usage").await, 1);
}

#[tokio::test]
async fn a_multipart_upload_is_pruned_with_its_session_and_parts_only_once_its_session_closed() {
    let app = spawn_app_with(Spawn {
        env: five_mib_parts(),
        ..Spawn::default()
    })
    .await;
    let token = app.token("alice");
    let s = start(&app, &token, 12 * 1024 * 1024).await;
    let first = upload_parts(&app, &token, &s, &[1, 2]).await;

    // Long abandoned, but its multipart session is still open: kept (the sweep aborts it first).
    let pruned = prune_in(&app, 400, false).await;
    assert_eq!(pruned.uploads.uploads(), 0, "{pruned:?}");
    assert_eq!(uploads_rows(&app).await, 1);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM multipart_sessions WHERE state = 'open'")
            .await,
        1
    );

    let mut parts = first;
    parts.extend(upload_parts(&app, &token, &s, &[3]).await);
    assert_eq!(
        complete(&app, &token, s.id(), &sorted(parts))
            .await
            .status(),
        200
    );
    let commit = app.commit(&token, s.key(), None).await;
    assert_eq!(commit.status(), 201);
    let handle: Value = commit.json().await.expect("handle");
    app.sweep_after_urls_expire().await;

    let pruned = prune_in(&app, 400, false).await;
    assert_eq!(
        (
            pruned.uploads.committed,
            pruned.uploads.multipart_sessions,
            pruned.uploads.upload_parts
        ),
        (1, 1, 3),
        "{pruned:?}"
    );
    for table in ["uploads", "multipart_sessions", "upload_parts"] {
        assert_eq!(
            app.db.count(&format!("SELECT COUNT(*) FROM {table}")).await,
            0,
            "{table}"
        );
    }
    let retry = app.commit(&token, s.key(), None).await;
    assert_eq!(retry.status(), 200);
    let again: Value = retry.json().await.expect("handle");
    assert_eq!(again["id"], handle["id"]);
}

#[tokio::test]
async fn the_storage_report_shows_every_tables_rows_and_bytes() {
    let app = spawn_app().await;
    let token = app.token("alice");
    app.upload_and_commit(&token, "image", "image/png", 2048)
        .await;
    let report = app
        .get("/v1/admin/storage-report", Some(&app.admin_token("root")))
        .await;
    assert_eq!(report.status(), 200);
    let report: Value = report.json().await.expect("JSON");
    let tables = report["tables"].as_array().expect("tables");
    let row = |name: &str| {
        tables
            .iter()
            .find(|t| t["table"] == name)
            .unwrap_or_else(|| panic!("{name} in {tables:?}"))
            .clone()
    };
    assert_eq!(row("uploads")["rows"], 1);
    assert_eq!(row("file_handles")["rows"], 1);
    assert_eq!(row("upload_parts")["rows"], 0);
    assert!(
        row("uploads")["bytes"].as_i64().is_some_and(|b| b > 0),
        "both databases tell bytes: {tables:?}"
    );
    assert_eq!(row("render_failures")["rows"], 0);
    assert_eq!(tables.len(), 16);
}

#[tokio::test]
async fn delivered_events_are_pruned_after_the_retention_and_an_older_cursor_is_told_so() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (_, h) = app
            .upload_and_commit(&token, "image", "image/png", 200)
            .await;
        ids.push(h["id"].as_str().expect("id").to_owned());
    }
    let events = crate::history::all_events(&app).await;
    assert_eq!(events.len(), 3);

    // Within the retention nothing goes; a dry run past it counts and changes nothing.
    assert_eq!(prune_in(&app, 1, false).await.events, 0);
    assert_eq!(prune_in(&app, 400, true).await.events, 2);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM events").await, 3);
    // Past it: all but the last (where the next position continues).
    assert_eq!(prune_in(&app, 400, false).await.events, 2);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM events").await, 1);
    assert_eq!(prune_in(&app, 400, false).await.events, 0, "the last stays");

    let admin = app.admin_token("ops");
    for stale in ["", "0", "1"] {
        let resp = app
            .get(&format!("/v1/events?after={stale}"), Some(&admin))
            .await;
        assert_eq!(
            error_code(resp).await,
            (410, "cursor_expired".to_owned()),
            "after={stale}"
        );
    }
    let page: serde_json::Value = app
        .get("/v1/events?after=2", Some(&admin))
        .await
        .json()
        .await
        .expect("page");
    assert_eq!(page["events"][0]["data"]["id"], ids[2].as_str());

    // The next event continues the positions: no cursor is reused.
    let (_, h) = app
        .upload_and_commit(&token, "image", "image/png", 200)
        .await;
    crate::history::sequence_all(&app).await;
    let page: serde_json::Value = app
        .get("/v1/events?after=3", Some(&admin))
        .await
        .json()
        .await
        .expect("page");
    assert_eq!(page["events"][0]["cursor"], "4");
    assert_eq!(page["events"][0]["data"]["id"], h["id"]);
}

#[tokio::test]
async fn an_event_kept_for_an_endpoint_keeps_every_later_one_so_the_feed_never_has_a_gap() {
    let app = spawn_app().await;
    let token = app.token("alice");
    for _ in 0..4 {
        app.upload_and_commit(&token, "image", "image/png", 200)
            .await;
    }
    crate::history::sequence_all(&app).await;
    // Event 2 is still owed to an endpoint (a failed delivery whose window closed within the
    // retention, kept for a retry); 1, 3 and 4 were received everywhere.
    app.db
        .execute(
            "INSERT INTO event_endpoints (id, kind, url, secret, event_types, source, created_at) \
             VALUES ('late', 'webhook', 'http://127.0.0.1:9/h', NULL, '*', 'api', '2026-01-01T00:00:00Z')",
        )
        .await;
    app.db
        .execute(
            "INSERT INTO event_deliveries (endpoint_id, position, event_id, subject, state, attempts, \
             next_attempt_at, deadline_at, created_at) SELECT 'late', position, id, subject, 'failed', 9, \
             occurred_at, '2999-01-01T00:00:00.000+00:00', occurred_at FROM events WHERE position = 2",
        )
        .await;
    assert_eq!(
        prune_in(&app, 400, true).await.events,
        1,
        "only the run before it"
    );
    assert_eq!(prune_in(&app, 400, false).await.events, 1);
    let kept = app
        .db
        .strings("SELECT CAST(position AS TEXT) FROM events ORDER BY position")
        .await;
    assert_eq!(kept, vec!["2", "3", "4"], "nothing after the kept one goes");
    let admin = app.admin_token("ops");
    let page: Value = app
        .get("/v1/events?after=1", Some(&admin))
        .await
        .json()
        .await
        .expect("page");
    let cursors: Vec<&str> = page["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["cursor"].as_str().expect("cursor"))
        .collect();
    assert_eq!(cursors, vec!["2", "3", "4"]);
}

/// Issue 26 (4): a year of events, one every three hours, and three endpoints: `live` received
/// every one, `dead` (enabled) never answered — each delivery failed when its window closed —
/// and `gone` was disabled after the 80th event with its 80 deliveries still pending. One
/// undelivered delivery used to keep every later event for ever; now a disabled endpoint's
/// backlog is kept for the retention after it was disabled, a delivery whose window closed for
/// the retention after that, and then both are discarded and counted, so a prune at the end of
/// the year leaves about the retention's worth of rows.
#[tokio::test]
async fn a_year_of_events_with_a_dead_and_a_disabled_endpoint_is_pruned_to_the_retention() {
    use upcommit::domain::events::{EventType, NewEvent};
    const EVERY_HOURS: i64 = 3;
    const EVENTS: i64 = 365 * 24 / EVERY_HOURS;
    let app = spawn_app().await;
    let settings = Settings::from_map(&app.env).expect("settings");
    let retention = i64::try_from(settings.jobs.upload_retention_secs).expect("retention");
    let start = chrono::Utc::now();
    let at = |i: i64| start + chrono::Duration::hours(EVERY_HOURS * i);
    for i in 0..EVENTS {
        let subject = format!("upl_{}", i % 50);
        let e = NewEvent::new(EventType::UploadExpired, &subject, at(i), &subject);
        app.catalog.record_event(&e).await.expect("record");
    }
    crate::history::sequence_all(&app).await;
    app.db
        .execute(
            "INSERT INTO event_endpoints (id, kind, url, secret, event_types, source, created_at) \
             SELECT x.id, 'webhook', 'http://127.0.0.1:9/h', NULL, '*', 'api', e.occurred_at \
             FROM events e, (SELECT 'live' AS id UNION ALL SELECT 'dead' UNION ALL SELECT 'gone') x \
             WHERE e.position = 1",
        )
        .await;
    app.db
        .execute(
            "UPDATE event_endpoints SET disabled_at = \
             (SELECT occurred_at FROM events WHERE position = 80) WHERE id = 'gone'",
        )
        .await;
    for (endpoint, state, deadline, upto) in [
        ("live", "delivered", "e.occurred_at", EVENTS),
        ("dead", "failed", "e.occurred_at", EVENTS),
        // Still inside their window (the whole year): only the endpoint's being disabled can
        // let them go.
        (
            "gone",
            "pending",
            "(SELECT MAX(occurred_at) FROM events)",
            80,
        ),
    ] {
        app.db
            .execute(&format!(
                "INSERT INTO event_deliveries (endpoint_id, position, event_id, subject, state, \
                 attempts, next_attempt_at, deadline_at, created_at) SELECT '{endpoint}', \
                 e.position, e.id, e.subject, '{state}', 1, e.occurred_at, {deadline}, \
                 e.occurred_at FROM events e WHERE e.position <= {upto}"
            ))
            .await;
    }
    let rows = |table: &'static str| {
        let db = &app.db;
        async move { db.count(&format!("SELECT COUNT(*) FROM {table}")).await }
    };
    assert_eq!(rows("events").await, EVENTS);
    assert_eq!(rows("event_deliveries").await, 2 * EVENTS + 80);

    // Half a retention after `gone` was disabled its backlog is kept (it would be delivered
    // if it came back), and so is every event from its first on.
    let half = at(79) + chrono::Duration::seconds(retention - 86_400);
    let first = prune_with(&app, &settings, half, false).await;
    assert_eq!(first.discarded_deliveries.get("gone"), None);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE endpoint_id = 'gone' AND state = 'pending'")
            .await,
        80
    );
    assert_eq!(app.db.count("SELECT MIN(position) FROM events").await, 1);
    // The disabled endpoint's backlog is on /metrics.
    wait_for_metric(
        &app,
        "upcommit_event_outbox_depth{stage=\"disabled\"}",
        80.0,
    )
    .await;

    // At the end of the year.
    let end = at(EVENTS);
    assert_eq!(
        prune_with(&app, &settings, end, true)
            .await
            .discarded_deliveries
            .get("gone"),
        Some(&80),
        "a dry run counts them"
    );
    let last = prune_with(&app, &settings, end, false).await;
    assert_eq!(last.discarded_deliveries.get("gone"), Some(&80));
    let discarded: u64 = [&first, &last]
        .iter()
        .flat_map(|s| s.discarded_deliveries.values())
        .sum();
    wait_for_metric(
        &app,
        "upcommit_event_deliveries_discarded_total",
        discarded as f64,
    )
    .await;
    wait_for_metric(&app, "upcommit_event_outbox_depth{stage=\"disabled\"}", 0.0).await;
    let kept = retention / (EVERY_HOURS * 3600) + 2;
    let (events, deliveries) = (rows("events").await, rows("event_deliveries").await);
    println!(
        "a year: {EVENTS} events, {} deliveries before; after the prune {events} events, {deliveries} deliveries (retention {retention} s)",
        2 * EVENTS + 80
    );
    assert!(events <= kept, "events kept: {events} (bound {kept})");
    assert!(
        deliveries <= 2 * kept,
        "deliveries kept: {deliveries} (bound {})",
        2 * kept
    );
}

/// Waits (the gauges are read every 5 s) until `/metrics` shows `series` at `value`.
async fn wait_for_metric(app: &TestApp, series: &str, value: f64) {
    let started = std::time::Instant::now();
    loop {
        let metrics = app.metrics_text().await;
        let now = crate::helpers::series_value(&metrics, series);
        if now == Some(value) {
            return;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(12),
            "{series} is {now:?}, not {value}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
