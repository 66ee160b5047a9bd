//! The tmp sweeper against LocalStack (which runs no lifecycle rules): the real `upcommit sweep`
//! binary on the server's database and bucket, and the server's own schedule.

use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use upcommit::domain::ids::UploadId;
use upcommit::domain::jobs::JobRun;
use upcommit::domain::records::{Upload, UploadState};

use crate::helpers::{media, png_upload, spawn_app, spawn_app_with, Spawn, TestApp};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("time")
        .with_timezone(&Utc)
}

/// Plants an upload of `day` (YYYY/MM/DD) in the catalog (when `state` is given) and its
/// object in the bucket; returns the key.
async fn plant(app: &TestApp, day: &str, state: Option<UploadState>) -> String {
    let id = UploadId::generate();
    let key = format!("tmp/{day}/{id}/old.png");
    let created = at(&format!("{}T10:00:00Z", day.replace('/', "-")));
    if let Some(state) = state {
        let promoting = state == UploadState::Promoting;
        let upload = Upload {
            final_key: promoting.then(|| format!("media/images/{id}/old.png")),
            lease_token: promoting.then(|| "lease".to_owned()),
            lease_until: promoting.then(|| Utc::now() + chrono::Duration::hours(1)),
            created_at: created,
            expires_at: created + chrono::Duration::minutes(15),
            commit_deadline: created + chrono::Duration::days(1),
            ..png_upload(id.clone(), "alice", key.clone(), 100, state)
        };
        app.catalog.import_upload(&upload).await.expect("import");
    }
    app.put_object(&key, media("image/png", 100), "image/png")
        .await;
    key
}

struct Run {
    code: i32,
    body: Value,
}

fn sweep_cli(app: &TestApp, extra: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .arg("sweep")
        .arg("--json")
        .args(extra)
        .envs(&app.env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit sweep");
    let stdout = String::from_utf8_lossy(&out.stdout);
    Run {
        code: out.status.code().unwrap_or(-1),
        body: serde_json::from_str(&stdout).unwrap_or(Value::Null),
    }
}

fn items<'a>(body: &'a Value, action: &str) -> Vec<&'a Value> {
    body["items"]
        .as_array()
        .map(|a| a.iter().filter(|i| i["action"] == action).collect())
        .unwrap_or_default()
}

async fn swept_at_set(app: &TestApp, key: &str) -> bool {
    app.db
        .count(&format!(
            "SELECT COUNT(*) FROM uploads WHERE key = '{key}' AND swept_at IS NOT NULL"
        ))
        .await
        == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_abandoned_partitions_go_with_every_version_and_the_rest_stays() {
    let app = spawn_app().await;
    let token = app.token("alice");
    // Abandoned, with three versions: two writes and a delete marker. (On a store without
    // versioning, Garage: one object, the second write.)
    let versioned = !crate::helpers::gap_accepted("versioning");
    let abandoned = plant(&app, "2026/10/01", Some(UploadState::Issued)).await;
    app.put_object(&abandoned, media("image/png", 200), "image/png")
        .await;
    if versioned {
        app.lose_object(&abandoned).await;
    }
    let written = if versioned { 3 } else { 1 };
    assert_eq!(app.versions(&abandoned).await, written);
    let unrecorded = plant(&app, "2026/10/01", None).await;
    let mid_commit = plant(&app, "2026/10/02", Some(UploadState::Promoting)).await;
    let multipart_key = format!("tmp/2026/10/02/{}/big.png", UploadId::generate());
    app.s3
        .create_multipart_upload()
        .bucket(&app.bucket)
        .key(&multipart_key)
        .send()
        .await
        .expect("abandoned multipart upload");
    let recent = app.uploaded(&token, "image", "image/png", 100, "PUT").await;

    let run = sweep_cli(&app, &[]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert_eq!(run.body["run"]["state"], "finished");
    assert_eq!(run.body["summary"]["partitions_swept"], 2);
    assert_eq!(
        app.versions(&abandoned).await,
        0,
        "every version and marker"
    );
    assert_eq!(app.versions(&unrecorded).await, 0);
    assert_eq!(
        app.versions(&mid_commit).await,
        1,
        "never from under a commit"
    );
    assert!(
        app.object_exists(&recent.key).await,
        "young partitions are not listed"
    );
    assert!(swept_at_set(&app, &abandoned).await);
    let deleted = items(&run.body, "deleted");
    assert_eq!(
        deleted
            .iter()
            .filter(|i| i["key"] == abandoned.as_str())
            .count(),
        written
    );
    assert!(deleted
        .iter()
        .any(|i| i["key"] == unrecorded.as_str() && i["reason"] == "unrecorded"));
    let skipped = items(&run.body, "skipped");
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["key"], mid_commit.as_str());
    assert_eq!(skipped[0]["reason"], "commit_in_progress");
    assert_eq!(items(&run.body, "aborted").len(), 1);
    assert!(app.open_multipart_uploads().await.is_empty());

    // The report is stored with the run.
    let stored = app
        .db
        .count(&format!(
            "SELECT COUNT(*) FROM job_items WHERE run_id = '{}'",
            run.body["run"]["id"].as_str().expect("run id")
        ))
        .await;
    assert_eq!(
        stored as usize,
        run.body["items"].as_array().map_or(0, Vec::len)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_lists_what_would_go_and_changes_nothing() {
    let app = spawn_app().await;
    let abandoned = plant(&app, "2026/10/01", Some(UploadState::Issued)).await;
    let run = sweep_cli(&app, &["--dry-run"]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert_eq!(run.body["run"]["dry_run"], true);
    let would = items(&run.body, "would_delete");
    assert_eq!(would.len(), 1);
    assert_eq!(would[0]["key"], abandoned.as_str());
    assert_eq!(app.versions(&abandoned).await, 1);
    assert!(!swept_at_set(&app, &abandoned).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_dated_in_the_future_makes_the_sweeper_refuse_to_delete_anything() {
    let app = spawn_app().await;
    let abandoned = plant(&app, "2026/10/01", Some(UploadState::Issued)).await;
    let future = plant(&app, "2099/01/01", None).await;
    let run = sweep_cli(&app, &[]);
    assert_eq!(run.code, 3, "{}", run.body);
    assert_eq!(run.body["run"]["state"], "refused");
    assert_eq!(
        run.body["summary"]["future_partitions"][0],
        "tmp/2099/01/01/"
    );
    assert_eq!(app.versions(&abandoned).await, 1);
    assert_eq!(app.versions(&future).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_replica_sweeps_at_a_time() {
    let app = spawn_app().await;
    let abandoned = plant(&app, "2026/10/01", Some(UploadState::Issued)).await;
    assert!(app
        .catalog
        .acquire_job_lock("sweep", "another-replica", 300)
        .await
        .expect("lock"));
    let run = sweep_cli(&app, &[]);
    assert_eq!(run.code, 4);
    assert_eq!(app.versions(&abandoned).await, 1);
    // Once the other replica's lease runs out, a sweep takes over.
    assert!(!app
        .catalog
        .acquire_job_lock("sweep", "third", 300)
        .await
        .expect("lock"));
    app.catalog
        .release_job_lock("sweep", "another-replica")
        .await
        .expect("release");
    assert_eq!(sweep_cli(&app, &[]).code, 0);
    assert_eq!(app.versions(&abandoned).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_lease_is_judged_by_the_database_clock_not_the_replicas() {
    let app = spawn_app().await;
    // Another replica's lease with 20 s left by the database's clock: a replica whose own clock
    // runs 30 s ahead would think it expired.
    let db_now = app.catalog.clock().await.expect("clock");
    let until = db_now + chrono::Duration::seconds(20);
    let sql = "INSERT INTO job_locks (job, holder, until) VALUES ('sweep', 'other', $1)";
    match &app.db {
        crate::helpers::TestDb::Sqlite(p) => {
            sqlx::query(sql).bind(until).execute(p).await.map(|_| ())
        }
        crate::helpers::TestDb::Postgres(p) => {
            sqlx::query(sql).bind(until).execute(p).await.map(|_| ())
        }
    }
    .expect("plant a live lease");
    assert!(
        !app.catalog
            .acquire_job_lock("sweep", "skewed", 300)
            .await
            .expect("lock"),
        "a live lease is not taken over"
    );
    assert_eq!(sweep_cli(&app, &[]).code, 4, "busy");

    // Once it ran out by the database's clock, it is.
    let expired = db_now - chrono::Duration::seconds(1);
    let sql = "UPDATE job_locks SET until = $1 WHERE job = 'sweep'";
    match &app.db {
        crate::helpers::TestDb::Sqlite(p) => {
            sqlx::query(sql).bind(expired).execute(p).await.map(|_| ())
        }
        crate::helpers::TestDb::Postgres(p) => {
            sqlx::query(sql).bind(expired).execute(p).await.map(|_| ())
        }
    }
    .expect("expire it");
    assert!(app
        .catalog
        .acquire_job_lock("sweep", "skewed", 300)
        .await
        .expect("lock"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_sweep_resumes_from_its_checkpoint() {
    let app = spawn_app().await;
    let done = plant(&app, "2026/10/01", Some(UploadState::Issued)).await;
    let todo = plant(&app, "2026/10/03", Some(UploadState::Issued)).await;
    // A run that crashed after finishing 2026-10-02.
    let mut crashed = JobRun::start("sweep", false, upcommit::domain::records::now());
    crashed.checkpoint = Some("2026-10-02".into());
    app.catalog.insert_run(&crashed).await.expect("run");

    let run = sweep_cli(&app, &[]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert_eq!(
        run.body["run"]["id"],
        crashed.id.as_str(),
        "the same run continues"
    );
    assert_eq!(run.body["summary"]["resumed"], true);
    assert_eq!(app.versions(&todo).await, 0);
    assert_eq!(
        app.versions(&done).await,
        1,
        "partitions before the checkpoint were done by the crashed run and are not listed again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_sweeps_on_its_own_schedule() {
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_SWEEP_INTERVAL_SECS", "1".into())],
        ..Spawn::default()
    })
    .await;
    let abandoned = plant(&app, "2026/10/01", Some(UploadState::Issued)).await;
    // The sweep deletes the object, then marks the upload swept (with its `upload.expired`
    // event) in the catalog: both must have happened, the second a moment after the first.
    for _ in 0..100 {
        if app.versions(&abandoned).await == 0 && swept_at_set(&app, &abandoned).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the scheduled sweep never removed {abandoned} and marked it swept ({} versions left, swept_at set: {})",
        app.versions(&abandoned).await,
        swept_at_set(&app, &abandoned).await
    );
}

/// F12: the sweep judges ages by the database's clock, not this machine's. A database whose
/// clock says five days earlier makes a three-day-old partition a partition from the future:
/// the sweep refuses and deletes nothing. With the clocks agreeing, the same partition goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ages_are_judged_by_the_database_clock() {
    use std::sync::{Arc, Mutex};
    use upcommit::catalog::Catalog;
    use upcommit::services::sweep::{sweep, SweepOutcome};
    use upcommit::storage::{ObjectStore, S3Store};

    use crate::catalog_faults::{CatalogFaults, FaultyCatalog};

    let app = spawn_app().await;
    // Four days back: the whole day lies before the sweep's cutoff (now − 2 days 15 min) at
    // any time of day (three days back is not, in the first 15 minutes after midnight UTC).
    let day = (chrono::Utc::now() - chrono::Duration::days(4)).format("%Y/%m/%d");
    let key = format!("tmp/{day}/{}/left.png", "f".repeat(32));
    app.put_object(&key, b"\x89PNG\r\n\x1a\nxx".to_vec(), "image/png")
        .await;
    let settings = upcommit::config::Settings::from_map(&app.env).expect("settings");
    let store: Arc<dyn ObjectStore> =
        Arc::new(S3Store::connect(&settings.s3).await.expect("store"));
    let faults = Arc::new(Mutex::new(CatalogFaults::default()));
    let catalog: Arc<dyn Catalog> =
        Arc::new(FaultyCatalog::new(app.catalog.clone(), faults.clone()));

    if let Ok(mut f) = faults.lock() {
        f.clock_offset = -chrono::Duration::days(5);
    }
    let Ok(SweepOutcome::Ran { run, summary }) = sweep(&catalog, &store, &settings, false).await
    else {
        panic!("sweep ran");
    };
    assert_eq!(
        run.state,
        upcommit::domain::jobs::RunState::Refused,
        "{summary:?}"
    );
    assert_eq!(summary.deleted_versions, 0);
    assert!(app.object_exists(&key).await, "nothing deleted early");

    if let Ok(mut f) = faults.lock() {
        f.clock_offset = chrono::Duration::zero();
    }
    let Ok(SweepOutcome::Ran { run, summary }) = sweep(&catalog, &store, &settings, false).await
    else {
        panic!("sweep ran");
    };
    assert_eq!(
        run.state,
        upcommit::domain::jobs::RunState::Finished,
        "{summary:?}"
    );
    assert_eq!(summary.deleted_versions, 1, "{summary:?}");
    assert!(!app.object_exists(&key).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_of_abandoned_uploads_is_swept_page_by_page_with_batched_catalog_lookups() {
    use futures::StreamExt;
    let app = spawn_app().await;
    // 999 unrecorded objects sort before an abandoned upload with three versions, so its
    // versions straddle the first listing page (1,000 versions) and the second; 1,200 more
    // after it make a third page.
    let fillers: Vec<String> = (0..999)
        .map(|i| format!("tmp/2026/10/01/0000-{i:04}/f.png"))
        .chain((0..1200).map(|i| format!("tmp/2026/10/01/zzzz-{i:04}/f.png")))
        .collect();
    futures::stream::iter(&fillers)
        .for_each_concurrent(32, |k| app.put_object(k, vec![b'x'], "image/png"))
        .await;
    let straddling = plant(&app, "2026/10/01", Some(UploadState::Issued)).await;
    app.put_object(&straddling, media("image/png", 200), "image/png")
        .await;
    app.put_object(&straddling, media("image/png", 300), "image/png")
        .await;
    // On a store without versioning (Garage) the three writes are one object, and a listing
    // page holds 1,000 objects: the key is the page's last, the rest on the next two.
    let straddling_versions = if crate::helpers::gap_accepted("versioning") {
        1
    } else {
        3
    };
    let mid_commit = plant(&app, "2026/10/01", Some(UploadState::Promoting)).await;

    let job = app.observed_job().await;
    let outcome = upcommit::services::sweep::sweep(&job.catalog, &job.store, &job.settings, false)
        .await
        .expect("sweep");
    let upcommit::services::sweep::SweepOutcome::Ran { run, summary } = outcome else {
        panic!("sweep busy");
    };

    assert!(summary.error.is_none(), "{summary:?}");
    assert_eq!(summary.deleted_versions, 999 + 1200 + straddling_versions);
    assert_eq!(summary.skipped_keys, 1);
    assert_eq!(app.keys().await, vec![mid_commit.clone()]);
    assert_eq!(app.versions(&straddling).await, 0);
    assert!(
        swept_at_set(&app, &straddling).await,
        "marked once all its versions, on two pages, were gone"
    );
    // Three pages: at most two batched lookups each (500 keys a batch), none key by key.
    assert_eq!(job.catalog_calls("upload_by_key"), 0.0);
    let batches = job.catalog_calls("uploads_by_keys");
    assert!((3.0..=6.0).contains(&batches), "{batches} batched lookups");
    assert_eq!(job.catalog_calls("mark_swept"), 0.0);
    assert!(job.catalog_calls("mark_swept_many") >= 1.0);
    // Every item is in the stored report, written page by page.
    let stored = app
        .db
        .count(&format!(
            "SELECT COUNT(*) FROM job_items WHERE run_id = '{}'",
            run.id
        ))
        .await;
    assert_eq!(stored, 999 + 1200 + straddling_versions as i64 + 1);
}
