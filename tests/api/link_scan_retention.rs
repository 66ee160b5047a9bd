//! Link-scan retention from outside: `upcommit prune` removes the scans a newer completed one
//! superseded longer than `UPCOMMIT_JOB_HISTORY_RETENTION` ago and the open ones abandoned for
//! as long, with their batches and seen rows; the latest completed scan (the one hygiene judges
//! by) and a young open scan stay, and hygiene decides exactly as before.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use upcommit::catalog::ScanPruneCounts;
use upcommit::config::Settings;
use upcommit::services::prune::{prune_at, PruneOutcome, PruneSummary};

use crate::helpers::{error_code, TestApp, TestDb};
use crate::hygiene::{complete_scan, file, in_days, scan, scan_seeing, spawn, status, DAY};

/// The job history's retention (the default, 90 days) and a little more.
const PAST_RETENTION_DAYS: i64 = 91;
/// Older than the retention.
const OLD_DAYS: i64 = 100;

async fn prune_in(app: &TestApp, days: i64, dry_run: bool) -> PruneSummary {
    let settings = Settings::from_map(&app.env).expect("settings");
    match prune_at(
        &app.catalog,
        &settings,
        dry_run,
        Utc::now() + Duration::days(days),
    )
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

/// As if scan `id` had been opened, sent its batches and (if it did) completed `days` ago.
async fn backdate(app: &TestApp, id: &str, days: i64) {
    let at: DateTime<Utc> = Utc::now() - Duration::days(days);
    let statements = [
        "UPDATE link_scans SET started_at = $1 WHERE id = $2",
        "UPDATE link_scans SET completed_at = $1 WHERE id = $2 AND completed_at IS NOT NULL",
        "UPDATE link_scan_batches SET received_at = $1 WHERE scan_id = $2",
    ];
    for sql in statements {
        match &app.db {
            TestDb::Sqlite(p) => sqlx::query(sql)
                .bind(at)
                .bind(id)
                .execute(p)
                .await
                .map(|_| ()),
            TestDb::Postgres(p) => sqlx::query(sql)
                .bind(at)
                .bind(id)
                .execute(p)
                .await
                .map(|_| ()),
        }
        .expect("backdate the scan");
    }
}

/// (scans, batches, seen rows) of scan `id` in the database.
async fn rows_of(app: &TestApp, id: &str) -> (i64, i64, i64) {
    let count =
        |table: &str, column: &str| format!("SELECT COUNT(*) FROM {table} WHERE {column} = '{id}'");
    (
        app.db.count(&count("link_scans", "id")).await,
        app.db.count(&count("link_scan_batches", "scan_id")).await,
        app.db.count(&count("link_scan_seen", "scan_id")).await,
    )
}

/// (link_scans, link_scan_batches, link_scan_seen) rows as `GET /v1/admin/storage-report` shows
/// them.
async fn reported_rows(app: &TestApp) -> (i64, i64, i64) {
    let report: Value = app
        .get("/v1/admin/storage-report", Some(&app.admin_token("root")))
        .await
        .json()
        .await
        .expect("report");
    let rows = |name: &str| {
        report["tables"]
            .as_array()
            .expect("tables")
            .iter()
            .find(|t| t["table"] == name)
            .and_then(|t| t["rows"].as_i64())
            .unwrap_or_else(|| panic!("{name} in {report}"))
    };
    (
        rows("link_scans"),
        rows("link_scan_batches"),
        rows("link_scan_seen"),
    )
}

/// `PUT /v1/link-scans/{id}/batches/{n}` as the scanner.
async fn put_batch(app: &TestApp, id: &str, n: u32, files: &[&str]) -> reqwest::Response {
    app.http
        .put(format!("{}/v1/link-scans/{id}/batches/{n}", app.address))
        .bearer_auth(app.admin_token("scanner"))
        .json(&serde_json::json!({ "file_ids": files }))
        .send()
        .await
        .expect("batch")
}

/// What a hygiene dry run as of `at` would do: its (action, key) items, sorted.
async fn hygiene_plan(app: &TestApp, at: DateTime<Utc>) -> Vec<(String, String)> {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"));
    command
        .args(["hygiene", "--json", "--dry-run", "--at", &at.to_rfc3339()])
        .envs(&app.env)
        .env("RUST_LOG", "warn");
    let out = tokio::task::spawn_blocking(move || command.output().expect("run upcommit hygiene"))
        .await
        .expect("CLI thread");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut plan: Vec<(String, String)> = report["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["action"].as_str().unwrap_or_default().to_owned(),
                i["key"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    plan.sort();
    plan
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_removes_superseded_and_abandoned_link_scans_and_keeps_the_latest_completed_and_young_open_ones(
) {
    let app = spawn(DAY).await;
    let (f, _) = file(&app, 300).await;
    let (g, _) = file(&app, 300).await;
    let (h, _) = file(&app, 300).await;
    let superseded = scan(&app, &[&f, &g]).await;
    let latest = scan(&app, &[&g]).await;
    let abandoned = scan_seeing(&app, &[&f, &h]).await;
    let young = scan_seeing(&app, &[&h]).await;
    // Completed, and superseded, longer than the retention ago; open and idle as long.
    backdate(&app, &superseded, OLD_DAYS).await;
    backdate(&app, &abandoned, OLD_DAYS).await;
    let plan = hygiene_plan(&app, in_days(2)).await;
    assert_eq!(plan.len(), 2, "f and h would be unlinked: {plan:?}");

    let pruned = prune_in(&app, 0, false).await;
    assert_eq!(
        pruned.link_scans,
        ScanPruneCounts {
            superseded: 1,
            abandoned: 1,
            batches: 2,
            seen: 4
        },
        "{pruned:?}"
    );
    assert_eq!(rows_of(&app, &superseded).await, (0, 0, 0), "{pruned:?}");
    assert_eq!(rows_of(&app, &abandoned).await, (0, 0, 0), "{pruned:?}");
    assert_eq!(
        rows_of(&app, &latest).await,
        (1, 1, 1),
        "the latest completed scan stays"
    );
    assert_eq!(
        rows_of(&app, &young).await,
        (1, 1, 1),
        "a young open scan stays"
    );

    // Hygiene judges exactly as before, then acts on it.
    assert_eq!(hygiene_plan(&app, in_days(2)).await, plan);
    let run = crate::hygiene::hygiene(&app, Some(in_days(2)));
    assert_eq!(run["summary"]["unlinked"], 2, "{run}");
    assert_eq!(status(&app, &g).await, "available");
    assert_eq!(status(&app, &f).await, "unlinked");

    // The abandoned scan is gone for its scanner; the young one carries on and completes.
    assert_eq!(
        error_code(put_batch(&app, &abandoned, 1, &[&g]).await).await,
        (404, "link_scan_not_found".to_owned())
    );
    assert_eq!(
        error_code(complete_scan(&app, &abandoned).await).await,
        (404, "link_scan_not_found".to_owned())
    );
    assert_eq!(put_batch(&app, &young, 1, &[&f]).await.status(), 200);
    assert_eq!(complete_scan(&app, &young).await.status(), 200);

    // Past the retention the scan it superseded goes; the newest completed one stays, however
    // old, and vouches for f and h: they come back.
    let pruned = prune_in(&app, PAST_RETENTION_DAYS, false).await;
    assert_eq!(
        (pruned.link_scans.superseded, pruned.link_scans.abandoned),
        (1, 0),
        "{pruned:?}"
    );
    assert_eq!(rows_of(&app, &latest).await, (0, 0, 0), "{pruned:?}");
    assert_eq!(rows_of(&app, &young).await, (1, 2, 2), "{pruned:?}");
    let run = crate::hygiene::hygiene(&app, Some(in_days(3)));
    assert_eq!(run["summary"]["returned"], 2, "{run}");
    assert_eq!(status(&app, &f).await, "available");
    assert_eq!(status(&app, &h).await, "available");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_counts_the_link_scans_it_would_prune_and_deletes_nothing() {
    let app = spawn(DAY).await;
    let (f, _) = file(&app, 300).await;
    let superseded = scan(&app, &[&f]).await;
    scan(&app, &[&f]).await;
    let abandoned = scan_seeing(&app, &[&f]).await;
    backdate(&app, &superseded, OLD_DAYS).await;
    backdate(&app, &abandoned, OLD_DAYS).await;
    let total = |app: &TestApp| {
        let db = app.db.clone();
        async move {
            (
                db.count("SELECT COUNT(*) FROM link_scans").await,
                db.count("SELECT COUNT(*) FROM link_scan_batches").await,
                db.count("SELECT COUNT(*) FROM link_scan_seen").await,
            )
        }
    };
    assert_eq!(total(&app).await, (3, 3, 3));
    assert_eq!(
        reported_rows(&app).await,
        (3, 3, 3),
        "the storage report sizes them"
    );

    let dry = prune_in(&app, 0, true).await;
    assert_eq!(
        dry.link_scans,
        ScanPruneCounts {
            superseded: 1,
            abandoned: 1,
            batches: 2,
            seen: 2
        },
        "{dry:?}"
    );
    assert_eq!(total(&app).await, (3, 3, 3), "a dry run deletes nothing");
    assert_eq!(
        app.db
            .strings(&format!(
                "SELECT state FROM link_scans WHERE id = '{abandoned}'"
            ))
            .await,
        ["open"],
        "nor expires a scan"
    );

    let real = prune_in(&app, 0, false).await;
    assert_eq!(
        real.link_scans, dry.link_scans,
        "the dry run counted what goes"
    );
    assert_eq!(rows_of(&app, &superseded).await, (0, 0, 0));
    assert_eq!(rows_of(&app, &abandoned).await, (0, 0, 0));
    assert_eq!(total(&app).await, (1, 1, 1));
    assert_eq!(reported_rows(&app).await, (1, 1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_of_more_files_than_a_batch_holds_is_pruned_in_several_short_transactions() {
    let app = spawn(DAY).await;
    let (f, _) = file(&app, 300).await;
    // 2,500 files seen (ids of files this service never made: a scanner sends what it has).
    let ids: Vec<String> = (0..2_500).map(|i| format!("{i:032x}")).collect();
    let big = scan_seeing(&app, &[&f]).await;
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(put_batch(&app, &big, 1, &refs).await.status(), 200);
    assert_eq!(complete_scan(&app, &big).await.status(), 200);
    scan(&app, &[&f]).await;
    backdate(&app, &big, OLD_DAYS).await;
    assert_eq!(rows_of(&app, &big).await, (1, 2, 2_501));

    let pruned = prune_in(&app, 0, false).await;
    assert_eq!(
        pruned.link_scans,
        ScanPruneCounts {
            superseded: 1,
            abandoned: 0,
            batches: 2,
            seen: 2_501
        },
        "{pruned:?}"
    );
    assert!(
        pruned.batches >= 3,
        "at most {} rows a transaction: {pruned:?}",
        upcommit::services::prune::BATCH
    );
    assert_eq!(rows_of(&app, &big).await, (0, 0, 0));
}
