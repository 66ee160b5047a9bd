//! Links, link scans and the unlinked → archived → deleted stages on LocalStack, with the clock
//! injected through `upcommit hygiene --at`.

use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use upcommit::domain::ids::UploadId;
use upcommit::domain::records::UploadState;

use crate::helpers::{error_code, png_upload, spawn_app_with, Spawn, TestApp, TestDb};

pub(crate) const DAY: i64 = 86_400;

/// Short hygiene periods; the `image` profile tracks links (hygiene acts on nothing else).
pub(crate) fn hygiene_env(grace_secs: i64) -> Vec<(&'static str, String)> {
    vec![
        ("UPCOMMIT_UNLINKED_GRACE_SECS", grace_secs.to_string()),
        ("UPCOMMIT_ARCHIVE_AFTER_SECS", DAY.to_string()),
        ("UPCOMMIT_DELETE_AFTER_SECS", (2 * DAY).to_string()),
        ("UPCOMMIT_ARCHIVE_MIN_BYTES", "1000".into()),
        ("UPCOMMIT_TRACKS_LINKS", "image".into()),
    ]
}

pub(crate) async fn spawn(grace_secs: i64) -> TestApp {
    spawn_app_with(Spawn {
        env: hygiene_env(grace_secs),
        ..Spawn::default()
    })
    .await
}

/// Commits a PNG of `size` bytes for alice; returns (file id, key).
pub(crate) async fn file(app: &TestApp, size: usize) -> (String, String) {
    let (_, h) = app
        .upload_and_commit(&app.token("alice"), "image", "image/png", size)
        .await;
    (
        h["id"].as_str().expect("id").to_owned(),
        h["key"].as_str().expect("key").to_owned(),
    )
}

pub(crate) fn hygiene(app: &TestApp, at: Option<DateTime<Utc>>) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_upcommit"));
    cmd.args(["hygiene", "--json"])
        .envs(&app.env)
        .env("RUST_LOG", "warn");
    if let Some(at) = at {
        cmd.args(["--at", &at.to_rfc3339()]);
    }
    json_output(cmd.output().expect("run upcommit hygiene"))
}

/// The JSON report of a run that exited 0.
fn json_output(out: std::process::Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

pub(crate) fn in_days(days: i64) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::seconds(days * DAY)
}

pub(crate) async fn status(app: &TestApp, id: &str) -> String {
    let h: Value = app
        .get(&format!("/v1/files/{id}"), Some(&app.admin_token("root")))
        .await
        .json()
        .await
        .expect("handle");
    h["status"].as_str().expect("status").to_owned()
}

/// Whether archival rewrites objects in the archive class on the store under test. On a store
/// without storage classes and tags (Garage, the gaps accepted) archival is catalog-only: the
/// handle is archived and its object stays as it was (docs/stores.md).
pub(crate) fn archival_moves_objects() -> bool {
    !crate::helpers::gap_accepted("storage_class")
}

/// How many of `n` files archival moves in S3 on the store under test (none where it is
/// catalog-only: those are counted as archived in place).
pub(crate) fn moved(n: u64) -> u64 {
    if archival_moves_objects() {
        n
    } else {
        0
    }
}

/// Asserts `key`'s object is as archival leaves it: in the archive class and tagged; on a store
/// where archival is catalog-only, still there, in the standard class and untagged.
pub(crate) async fn assert_archived_in_s3(app: &TestApp, key: &str) {
    let (class, tags) = head_class_and_tags(app, key).await;
    if archival_moves_objects() {
        assert_eq!(class.as_deref(), Some("GLACIER_IR"), "{key}");
        // Where the store keeps no tags a copy writes (RGW 16.2: the gap `object_tags`),
        // archival sends none: the object moves untagged.
        let tagged = if crate::helpers::gap_accepted("object_tags") {
            vec![]
        } else {
            vec![("upcommit-status".to_owned(), "archived".to_owned())]
        };
        assert_eq!(tags, tagged, "{key}");
    } else {
        assert!(standard(class.as_deref()), "{key}: {class:?}");
    }
}

/// The object's storage class (HEAD) and tags. The tags are read only where the store
/// implements GetObjectTagging: Garage does not (501), and nothing there can be tagged.
pub(crate) async fn head_class_and_tags(
    app: &TestApp,
    key: &str,
) -> (Option<String>, Vec<(String, String)>) {
    let head = app.head(key).await;
    if crate::helpers::store_kind() == "garage" {
        return (
            head.storage_class().map(|c| c.as_str().to_owned()),
            Vec::new(),
        );
    }
    let tags = app
        .s3
        .get_object_tagging()
        .bucket(&app.bucket)
        .key(key)
        .send()
        .await
        .expect("tagging");
    (
        head.storage_class().map(|c| c.as_str().to_owned()),
        tags.tag_set()
            .iter()
            .map(|t| (t.key().to_owned(), t.value().to_owned()))
            .collect(),
    )
}

pub(crate) async fn put_link(
    app: &TestApp,
    token: &str,
    id: &str,
    path: &str,
) -> reqwest::Response {
    app.http
        .put(format!("{}/v1/files/{id}/links/{path}", app.address))
        .bearer_auth(token)
        .send()
        .await
        .expect("PUT link")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlinked_files_are_archived_restored_and_deleted_only_after_retention() {
    let app = spawn(DAY).await;
    let (big, big_key) = file(&app, 2000).await;
    let (small, small_key) = file(&app, 300).await;
    let (used, _) = file(&app, 2000).await;
    let token = app.token("alice");
    assert_eq!(put_link(&app, &token, &used, "post/42").await.status(), 204);
    assert_eq!(
        put_link(&app, &token, &used, "post/42").await.status(),
        204,
        "idempotent"
    );

    // Young files are left alone.
    let run = hygiene(&app, None);
    assert_eq!(run["summary"]["unlinked"], 0);

    // Past the grace period: the files nothing uses become unlinked, still downloadable.
    let run = hygiene(&app, Some(in_days(2)));
    assert_eq!(run["summary"]["unlinked"], 2, "{run}");
    assert_eq!(status(&app, &big).await, "unlinked");
    assert_eq!(status(&app, &used).await, "available");
    let download = app
        .get(&format!("/v1/files/{big}/content"), Some(&token))
        .await;
    assert_eq!(download.status(), 302);

    // A further period on: archived. The big one moves to the archive class, tagged, held
    // once; the small one keeps its class.
    let run = hygiene(&app, Some(in_days(3) + chrono::Duration::seconds(5)));
    assert_eq!(run["summary"]["archived"], 2, "{run}");
    // Where archival is catalog-only, the big one is archived in place too.
    assert_eq!(run["summary"]["archived_in_place"], 2 - moved(1), "{run}");
    assert_eq!(status(&app, &big).await, "archived");
    assert_archived_in_s3(&app, &big_key).await;
    assert_eq!(
        app.versions(&big_key).await,
        1,
        "the STANDARD version is gone"
    );
    let (small_class, _) = head_class_and_tags(&app, &small_key).await;
    assert_ne!(small_class.as_deref(), Some("GLACIER_IR"));

    // Restore brings it back: STANDARD, untagged, available.
    let restored = app
        .post_json(
            &format!("/v1/files/{big}/restore"),
            Some(&token),
            &Value::Null,
        )
        .await;
    assert_eq!(restored.status(), 200);
    let restored: Value = restored.json().await.expect("JSON");
    assert_eq!(restored["status"], "available");
    let (class, tags) = head_class_and_tags(&app, &big_key).await;
    assert!(
        class.is_none() || class.as_deref() == Some("STANDARD"),
        "{class:?}"
    );
    assert!(tags.is_empty());
    assert_eq!(
        app.get_object(&big_key).await,
        crate::helpers::media("image/png", 2000)
    );

    // Before retention nothing is deleted; after it, only the archived file is.
    let run = hygiene(&app, Some(in_days(4)));
    assert_eq!(run["summary"]["deleted"], 0, "{run}");
    let run = hygiene(&app, Some(in_days(6)));
    assert_eq!(run["summary"]["deleted"], 1, "{run}");
    assert_eq!(
        status(&app, &small).await,
        "deleted",
        "the row stays for audit"
    );
    assert_eq!(app.versions(&small_key).await, 0);
    assert_eq!(
        error_code(
            app.get(&format!("/v1/files/{small}/content"), Some(&token))
                .await
        )
        .await,
        (410, "file_deleted".to_owned())
    );
    assert_eq!(
        error_code(
            app.post_json(
                &format!("/v1/files/{small}/restore"),
                Some(&token),
                &Value::Null
            )
            .await
        )
        .await,
        (410, "file_deleted".to_owned())
    );
    assert_eq!(
        error_code(
            app.get(&format!("/v1/files/{small}/download-url"), Some(&token))
                .await
        )
        .await,
        (410, "file_deleted".to_owned())
    );
    let relink = app
        .http
        .put(format!("{}/v1/files/{small}/links/post/7", app.address))
        .bearer_auth(&token)
        .send()
        .await
        .expect("PUT link");
    assert_eq!(
        error_code(relink).await,
        (410, "file_deleted".to_owned()),
        "a deleted file cannot be linked back to life"
    );
    assert!(app.object_exists(&big_key).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_file_is_not_flagged_again_within_the_grace_period() {
    let app = spawn(2).await;
    let (id, _) = file(&app, 300).await;
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert_eq!(hygiene(&app, None)["summary"]["unlinked"], 1);
    let token = app.token("alice");
    let r = app
        .post_json(
            &format!("/v1/files/{id}/restore"),
            Some(&token),
            &Value::Null,
        )
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(hygiene(&app, None)["summary"]["unlinked"], 0, "no flapping");
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert_eq!(
        hygiene(&app, None)["summary"]["unlinked"],
        1,
        "after the grace period, again"
    );
}

/// Inserts a committed upload and a handle of it for `key` in `status` straight into the
/// catalog (2,000 bytes, alice's, no object uploaded); returns the handle's id.
async fn insert_handle(app: &TestApp, key: &str, status: &str) -> String {
    let tmp_key = format!("tmp/2026/01/01/{}/f.png", UploadId::generate());
    let upload = png_upload(
        UploadId::generate(),
        "alice",
        tmp_key,
        2000,
        UploadState::Committed,
    );
    app.catalog.import_upload(&upload).await.expect("upload");
    let id = uuid::Uuid::new_v4().simple().to_string();
    let sql = "INSERT INTO file_handles (id, upload_id, key, size, content_type, etag, profile, created_by, created_at, status) \
               VALUES ($1, $2, $3, 2000, 'image/png', '\"x\"', 'image', 'alice', $4, $5)";
    match &app.db {
        TestDb::Sqlite(p) => sqlx::query(sql)
            .bind(&id)
            .bind(upload.id.as_str())
            .bind(key)
            .bind(Utc::now())
            .bind(status)
            .execute(p)
            .await
            .map(|_| ()),
        TestDb::Postgres(p) => sqlx::query(sql)
            .bind(&id)
            .bind(upload.id.as_str())
            .bind(key)
            .bind(Utc::now())
            .bind(status)
            .execute(p)
            .await
            .map(|_| ()),
    }
    .expect("handle");
    id
}

/// Inserts another handle for `key` (a copy) in `status`, linked (in use); returns its id.
async fn sibling(app: &TestApp, key: &str, status: &str) -> String {
    let id = insert_handle(app, key, status).await;
    let file = upcommit::domain::ids::FileId::parse(&id).expect("file id");
    app.catalog
        .put_link(&file, "album", "7", Utc::now())
        .await
        .expect("link");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_shared_with_an_available_handle_are_never_archived_and_do_not_stall_the_run() {
    let app = spawn(DAY).await;
    let mut blocked = Vec::new();
    for _ in 0..3 {
        let (id, key) = file(&app, 2000).await;
        blocked.push((id, key));
    }
    let (free, free_key) = file(&app, 2000).await;
    assert_eq!(hygiene(&app, Some(in_days(2)))["summary"]["unlinked"], 4);
    // Copies of three keys are in use.
    for (_, key) in &blocked {
        sibling(&app, key, "available").await;
    }
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_links").await, 3);
    for _ in 0..2 {
        let run = hygiene(&app, Some(in_days(3) + chrono::Duration::seconds(5)));
        assert_eq!(run["run"]["state"], "finished");
        assert_eq!(run["summary"]["blocked"], 3, "{run}");
        for (id, key) in &blocked {
            assert_eq!(status(&app, id).await, "unlinked");
            assert_ne!(
                head_class_and_tags(&app, key).await.0.as_deref(),
                Some("GLACIER_IR")
            );
        }
    }
    assert_eq!(status(&app, &free).await, "archived");
    assert_archived_in_s3(&app, &free_key).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_scans_resume_idempotently_and_never_flag_files_created_after_they_began() {
    let app = spawn(DAY).await;
    let (seen, _) = file(&app, 300).await;
    let (unseen, _) = file(&app, 300).await;

    let not_admin = app
        .post_json("/v1/link-scans", Some(&app.token("alice")), &Value::Null)
        .await;
    assert_eq!(
        error_code(not_admin).await,
        (403, "admin_required".to_owned())
    );
    let scan_id = open_scan(&app).await;
    let first: Value = put_batch(&app, &scan_id, 0, &[&seen])
        .await
        .json()
        .await
        .expect("JSON");
    assert_eq!(first["duplicate"], false);
    // The scanner crashed and sends batch 0 again: nothing is added twice.
    let again: Value = put_batch(&app, &scan_id, 0, &[&seen])
        .await
        .json()
        .await
        .expect("JSON");
    assert_eq!(again["duplicate"], true);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM link_scan_seen").await, 1);
    let bad = put_batch(&app, &scan_id, 1, &["not-an-id"]).await;
    assert_eq!(error_code(bad).await, (400, "invalid_request".to_owned()));

    // A file created after the scan began.
    let (late, _) = file(&app, 300).await;
    let done = complete_scan(&app, &scan_id).await;
    assert_eq!(done.status(), 200);
    assert_eq!(
        error_code(put_batch(&app, &scan_id, 2, &[&seen]).await).await,
        (409, "link_scan_completed".to_owned())
    );

    let run = hygiene(&app, Some(in_days(2)));
    assert_eq!(run["summary"]["unlinked"], 1, "{run}");
    assert_eq!(status(&app, &unseen).await, "unlinked");
    assert_eq!(status(&app, &seen).await, "available");
    assert_eq!(status(&app, &late).await, "available");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_are_for_the_owner_or_an_admin_and_validated() {
    let app = spawn(DAY).await;
    let (id, _) = file(&app, 300).await;
    assert_eq!(
        error_code(put_link(&app, &app.token("mallory"), &id, "post/1").await).await,
        (404, "file_not_found".to_owned())
    );
    assert_eq!(
        put_link(&app, &app.admin_token("root"), &id, "post/1")
            .await
            .status(),
        204
    );
    assert_eq!(
        error_code(put_link(&app, &app.token("alice"), &id, "post/a%2Fb").await).await,
        (400, "invalid_request".to_owned())
    );
    let (alice, link) = (app.token("alice"), format!("/v1/files/{id}/links/post/1"));
    let del = || app.delete(&link, Some(&alice));
    assert_eq!(del().await.status(), 204);
    assert_eq!(del().await.status(), 204, "idempotent");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_links").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hygiene_touches_no_file_of_a_profile_that_does_not_track_links() {
    // The README walkthrough: the links API is never called, nothing is configured.
    let mut env = hygiene_env(DAY);
    env.retain(|(k, _)| *k != "UPCOMMIT_TRACKS_LINKS");
    let app = spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await;
    let (id, key) = file(&app, 300).await;
    for days in [2, 4, 400] {
        let run = hygiene(&app, Some(in_days(days)));
        assert_eq!(run["summary"]["unlinked"], 0, "{run}");
        assert_eq!(run["summary"]["profiles"], serde_json::json!([]), "{run}");
    }
    assert_eq!(status(&app, &id).await, "available");
    assert!(app.object_exists(&key).await);

    // A profile opted in later: its files are acted on, the others' still not.
    let opted = hygiene_env(DAY);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_upcommit"));
    cmd.args(["hygiene", "--json", "--at", &in_days(2).to_rfc3339()])
        .envs(&app.env)
        .envs(opted.iter().map(|(k, v)| (*k, v.as_str())))
        .env("RUST_LOG", "warn");
    let out = cmd.output().expect("run upcommit hygiene");
    let run: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(run["summary"]["unlinked"], 1, "{run}");
    assert_eq!(run["summary"]["profiles"], serde_json::json!(["image"]));
}

/// Runs `upcommit reconcile --grace 0 --json`: (exit code, output).
fn reconcile(app: &TestApp) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["reconcile", "--json", "--grace", "0"])
        .envs(&app.env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit reconcile");
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).expect("JSON"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_does_not_report_a_file_hygiene_deleted_on_purpose_as_missing() {
    let app = spawn(DAY).await;
    let (gone, gone_key) = file(&app, 300).await;
    let (kept, kept_key) = file(&app, 300).await;
    assert_eq!(
        put_link(&app, &app.token("alice"), &kept, "post/1")
            .await
            .status(),
        204
    );
    hygiene(&app, Some(in_days(2)));
    hygiene(&app, Some(in_days(3) + chrono::Duration::seconds(5)));
    let run = hygiene(&app, Some(in_days(6)));
    assert_eq!(run["summary"]["deleted"], 1, "{run}");
    assert_eq!(status(&app, &gone).await, "deleted");
    assert_eq!(app.versions(&gone_key).await, 0);

    // A copy shares the live key: one key, matched once (the join needs keys in strict order).
    sibling(&app, &kept_key, "available").await;
    let (code, body) = reconcile(&app);
    assert_eq!(code, 0, "a deletion on purpose is no alarm: {body}");
    assert_eq!(body["summary"]["missing"], 0, "{body}");
    assert_eq!(body["summary"]["matched"], 1, "{body}");

    // A live handle whose object is lost still is.
    app.lose_object(&kept_key).await;
    let (code, body) = reconcile(&app);
    assert_eq!(code, 5, "{body}");
    assert_eq!(body["summary"]["missing"], 1, "{body}");
}

/// `upcommit hygiene --at` (or another command) started in the background, holding at pause
/// point `point` until released.
pub(crate) struct Paused {
    child: std::process::Child,
    gate: std::path::PathBuf,
}

impl Paused {
    pub(crate) async fn start(app: &TestApp, at: DateTime<Utc>, point: &str) -> Self {
        Self::start_with(app, &["hygiene", "--json", "--at", &at.to_rfc3339()], point).await
    }

    /// `upcommit <args>` started in the background, holding at `point`.
    pub(crate) async fn start_with(app: &TestApp, args: &[&str], point: &str) -> Self {
        let gate =
            std::env::temp_dir().join(format!("upcommit-gate-{}", uuid::Uuid::new_v4().simple()));
        let child = Command::new(env!("CARGO_BIN_EXE_upcommit"))
            .args(args)
            .envs(&app.env)
            .env("RUST_LOG", "warn")
            .env("UPCOMMIT_PAUSE_AT", point)
            .env("UPCOMMIT_PAUSE_GATE", &gate)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start upcommit");
        let mut paused = Self { child, gate };
        let reached = paused.gate.with_extension("reached");
        for _ in 0..1500 {
            if reached.exists() {
                return paused;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = paused.child.kill();
        let _ = paused.child.wait();
        panic!("{args:?} never reached {point}");
    }

    /// The process id of the run.
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Ends the run where it holds, as a crash would.
    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(self.gate.with_extension("reached"));
    }

    /// Lets the run go on and returns its JSON output (asserting it exits 0).
    pub(crate) fn release(self) -> Value {
        json_output(self.finish())
    }

    /// Lets the run go on and returns its output, however it ended.
    pub(crate) fn finish(self) -> std::process::Output {
        std::fs::write(&self.gate, b"go").expect("open the gate");
        let out = self.child.wait_with_output().expect("the run ends");
        let _ = std::fs::remove_file(&self.gate);
        let _ = std::fs::remove_file(self.gate.with_extension("reached"));
        out
    }
}

pub(crate) async fn restore(app: &TestApp, id: &str) -> reqwest::Response {
    app.post_json(
        &format!("/v1/files/{id}/restore"),
        Some(&app.token("alice")),
        &Value::Null,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_added_between_detection_read_and_update_keeps_the_file_available() {
    let app = spawn(DAY).await;
    let (id, _) = file(&app, 300).await;
    let paused = Paused::start(&app, in_days(2), "hygiene_unlink").await;
    // Detection has read its candidates; the application links the file now.
    assert_eq!(
        put_link(&app, &app.token("alice"), &id, "post/9")
            .await
            .status(),
        204
    );
    let run = paused.release();
    assert_eq!(run["summary"]["unlinked"], 0, "{run}");
    assert_eq!(status(&app, &id).await, "available");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_links").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_while_archival_holds_the_file_answers_file_busy_and_never_loses_the_class() {
    let app = spawn(DAY).await;
    let (id, key) = file(&app, 2000).await;
    assert_eq!(hygiene(&app, Some(in_days(2)))["summary"]["unlinked"], 1);
    let paused = Paused::start(
        &app,
        in_days(3) + chrono::Duration::seconds(5),
        "hygiene_archive_claimed",
    )
    .await;
    // Archival has claimed the file and not yet touched S3.
    let busy = restore(&app, &id).await;
    assert_eq!(busy.headers()["retry-after"], "1");
    assert_eq!(error_code(busy).await, (503, "file_busy".to_owned()));
    assert_eq!(
        error_code(put_link(&app, &app.token("alice"), &id, "post/1").await).await,
        (503, "file_busy".to_owned())
    );
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM file_links").await,
        0,
        "a refused link leaves nothing behind"
    );
    let run = paused.release();
    assert_eq!(run["summary"]["archived"], 1, "{run}");
    assert_eq!(status(&app, &id).await, "archived");
    assert_archived_in_s3(&app, &key).await;

    // The retry succeeds, and the handle and the object agree.
    let again = restore(&app, &id).await;
    assert_eq!(again.status(), 200);
    assert_eq!(status(&app, &id).await, "available");
    let (class, tags) = head_class_and_tags(&app, &key).await;
    assert!(standard(class.as_deref()), "{class:?}");
    assert!(tags.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_while_deletion_holds_the_file_answers_file_busy_and_the_deletion_completes() {
    let app = spawn(DAY).await;
    let (id, key) = file(&app, 300).await;
    hygiene(&app, Some(in_days(2)));
    assert_eq!(
        hygiene(&app, Some(in_days(3) + chrono::Duration::seconds(5)))["summary"]["archived"],
        1
    );
    let paused = Paused::start(&app, in_days(6), "hygiene_delete_claimed").await;
    // Deletion has claimed the file and not yet deleted a version.
    assert_eq!(
        error_code(restore(&app, &id).await).await,
        (503, "file_busy".to_owned())
    );
    let run = paused.release();
    assert_eq!(run["summary"]["deleted"], 1, "{run}");
    assert_eq!(status(&app, &id).await, "deleted");
    assert_eq!(app.versions(&key).await, 0);
    assert_eq!(
        error_code(restore(&app, &id).await).await,
        (410, "file_deleted".to_owned()),
        "never available without its object"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_whose_restore_fails_is_not_recorded_and_a_retry_restores_and_links() {
    let faults = std::sync::Arc::new(crate::faults::Faults::default());
    let app = spawn_app_with(Spawn {
        env: hygiene_env(DAY),
        wrap_store: Some(crate::faults::faulty_store(faults.clone())),
        ..Spawn::default()
    })
    .await;
    let (id, key) = file(&app, 2000).await;
    hygiene(&app, Some(in_days(2)));
    hygiene(&app, Some(in_days(3) + chrono::Duration::seconds(5)));
    assert_eq!(status(&app, &id).await, "archived");
    assert_archived_in_s3(&app, &key).await;

    faults
        .fail_class_changes
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let token = app.token("alice");
    assert_eq!(
        error_code(put_link(&app, &token, &id, "post/5").await).await,
        (503, "service_unavailable".to_owned())
    );
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM file_links").await,
        0,
        "no link on a file left archived"
    );
    assert_eq!(status(&app, &id).await, "archived");

    // The claim was given back: the retry restores and links.
    assert_eq!(put_link(&app, &token, &id, "post/5").await.status(), 204);
    assert_eq!(status(&app, &id).await, "available");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_links").await, 1);
    let (class, _) = head_class_and_tags(&app, &key).await;
    assert!(
        class.is_none() || class.as_deref() == Some("STANDARD"),
        "{class:?}"
    );
}

/// Opens a link scan (as the admin `scanner`); returns its id.
async fn open_scan(app: &TestApp) -> String {
    let scan: Value = app
        .post_json(
            "/v1/link-scans",
            Some(&app.admin_token("scanner")),
            &Value::Null,
        )
        .await
        .json()
        .await
        .expect("scan");
    scan["id"].as_str().expect("id").to_owned()
}

/// `PUT /v1/link-scans/{id}/batches/{n}` of `files`, answered as it is.
async fn put_batch(app: &TestApp, id: &str, n: u32, files: &[&str]) -> reqwest::Response {
    app.http
        .put(format!("{}/v1/link-scans/{id}/batches/{n}", app.address))
        .bearer_auth(app.admin_token("scanner"))
        .json(&serde_json::json!({ "file_ids": files }))
        .send()
        .await
        .expect("batch")
}

/// An open link scan that has seen exactly `files` (one batch); returns its id.
pub(crate) async fn scan_seeing(app: &TestApp, files: &[&str]) -> String {
    let id = open_scan(app).await;
    assert_eq!(put_batch(app, &id, 0, files).await.status(), 200);
    id
}

/// `POST /v1/link-scans/{id}/complete`, answered as it is.
pub(crate) async fn complete_scan(app: &TestApp, id: &str) -> reqwest::Response {
    app.post_json(
        &format!("/v1/link-scans/{id}/complete"),
        Some(&app.admin_token("scanner")),
        &Value::Null,
    )
    .await
}

/// A completed link scan that saw exactly `files`; returns its id.
pub(crate) async fn scan(app: &TestApp, files: &[&str]) -> String {
    let id = scan_seeing(app, files).await;
    assert_eq!(complete_scan(app, &id).await.status(), 200);
    id
}

pub(crate) fn standard(class: Option<&str>) -> bool {
    class.is_none() || class == Some("STANDARD")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlinked_file_the_latest_scan_saw_comes_back_and_is_never_archived() {
    let app = spawn(DAY).await;
    let (f, f_key) = file(&app, 2000).await;
    let (g, _) = file(&app, 2000).await;
    scan(&app, &[&g]).await;
    let run = hygiene(&app, Some(in_days(2)));
    assert_eq!(run["summary"]["unlinked"], 1, "{run}");
    assert_eq!(status(&app, &f).await, "unlinked");

    // The next scan sees F again: in use. It is not archived; it is available again.
    scan(&app, &[&f, &g]).await;
    let run = hygiene(&app, Some(in_days(3) + chrono::Duration::seconds(5)));
    assert_eq!(run["summary"]["archived"], 0, "{run}");
    assert_eq!(run["summary"]["returned"], 1, "{run}");
    assert_eq!(status(&app, &f).await, "available");
    assert!(standard(
        head_class_and_tags(&app, &f_key).await.0.as_deref()
    ));

    // And while the latest scan sees it, no later stage touches it.
    let run = hygiene(&app, Some(in_days(6)));
    assert_eq!(run["summary"]["unlinked"], 0, "{run}");
    assert_eq!(run["summary"]["deleted"], 0, "{run}");
    assert_eq!(status(&app, &f).await, "available");
    assert_eq!(app.versions(&f_key).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_file_the_latest_scan_saw_is_never_deleted() {
    let app = spawn(DAY).await;
    let (f, f_key) = file(&app, 2000).await;
    let (g, _) = file(&app, 2000).await;
    scan(&app, &[&g]).await;
    hygiene(&app, Some(in_days(2)));
    let run = hygiene(&app, Some(in_days(3) + chrono::Duration::seconds(5)));
    assert_eq!(run["summary"]["archived"], 1, "{run}");
    assert_eq!(status(&app, &f).await, "archived");

    scan(&app, &[&f, &g]).await;
    let run = hygiene(&app, Some(in_days(6)));
    assert_eq!(run["summary"]["deleted"], 0, "{run}");
    assert_eq!(
        status(&app, &f).await,
        "archived",
        "kept, still downloadable"
    );
    assert_eq!(app.versions(&f_key).await, 1);
    assert_eq!(restore(&app, &f).await.status(), 200);
    assert_eq!(
        app.get_object(&f_key).await,
        crate::helpers::media("image/png", 2000)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_completed_while_detection_holds_its_read_keeps_the_file_available() {
    let app = spawn(DAY).await;
    let (f, _) = file(&app, 300).await;
    scan(&app, &[]).await;
    let paused = Paused::start(&app, in_days(2), "hygiene_unlink").await;
    // Detection read its candidates as of the empty scan; a newer scan sees F.
    scan(&app, &[&f]).await;
    let run = paused.release();
    assert_eq!(run["summary"]["unlinked"], 0, "{run}");
    assert_eq!(status(&app, &f).await, "available");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_that_sees_a_file_while_archival_holds_it_stops_the_archival() {
    let app = spawn(DAY).await;
    let (f, f_key) = file(&app, 2000).await;
    scan(&app, &[]).await;
    assert_eq!(hygiene(&app, Some(in_days(2)))["summary"]["unlinked"], 1);
    let paused = Paused::start(
        &app,
        in_days(3) + chrono::Duration::seconds(5),
        "hygiene_archive_claimed",
    )
    .await;
    scan(&app, &[&f]).await;
    let run = paused.release();
    assert_eq!(run["summary"]["archived"], 0, "{run}");
    assert_eq!(run["summary"]["skipped"], 1, "{run}");
    assert_eq!(status(&app, &f).await, "unlinked");
    assert!(standard(
        head_class_and_tags(&app, &f_key).await.0.as_deref()
    ));
    // The next run brings it back.
    let run = hygiene(&app, Some(in_days(3) + chrono::Duration::seconds(10)));
    assert_eq!(run["summary"]["returned"], 1, "{run}");
    assert_eq!(status(&app, &f).await, "available");
}

pub(crate) async fn spawn_short_lease() -> TestApp {
    let mut env = hygiene_env(DAY);
    env.push(("UPCOMMIT_JOB_LEASE_SECS", "2".into()));
    spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await
}

/// Review 26: archival killed (kill -9) after its in-place copy and before it removed the
/// version it replaced. The next run took the file again, copied the whole object a second
/// time and removed only the version between, so the original STANDARD version stayed as a
/// noncurrent version (the bytes held twice, one copy out of the archive class). Now the next
/// run finds the object already in the class, copies nothing, and removes every older version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archival_killed_between_its_copy_and_its_cleanup_leaves_one_version_in_the_class() {
    let app = spawn_short_lease().await;
    let (f, key) = file(&app, 2000).await;
    assert_eq!(hygiene(&app, Some(in_days(2)))["summary"]["unlinked"], 1);
    let at = in_days(3) + chrono::Duration::seconds(5);
    let crashed = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["hygiene", "--json", "--at", &at.to_rfc3339()])
        .envs(&app.env)
        .env("UPCOMMIT_CRASH_AT", "class_rewritten")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit hygiene");
    assert!(!crashed.status.success(), "the run was killed");
    assert_eq!(
        app.versions(&key).await,
        2,
        "the copy landed, the original stayed"
    );
    // Waiting out the 2 s leases (a state to reach, not a timing assertion).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let copies_before = app.versions(&key).await;
    let run = hygiene(&app, Some(at + chrono::Duration::seconds(10)));
    assert_eq!(run["summary"]["archived"], 1, "{run}");
    assert_eq!(status(&app, &f).await, "archived");
    assert_eq!(copies_before, 2);
    assert_eq!(
        app.version_sizes(&key).await,
        vec![(2000, false)],
        "one version, the archived one"
    );
    assert_archived_in_s3(&app, &key).await;
}

/// Holds archival at `point` past its claim's lease; a restore and a link take the file back.
async fn restore_after_the_archive_lease(point: &str) -> (TestApp, String, String, Value) {
    let app = spawn_short_lease().await;
    let (f, key) = file(&app, 2000).await;
    assert_eq!(hygiene(&app, Some(in_days(2)))["summary"]["unlinked"], 1);
    let paused = Paused::start(&app, in_days(3) + chrono::Duration::seconds(5), point).await;
    // Waiting out the 2 s lease (a state to reach, not a timing assertion).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(restore(&app, &f).await.status(), 200);
    assert_eq!(
        put_link(&app, &app.token("alice"), &f, "post/1")
            .await
            .status(),
        204
    );
    let run = paused.release();
    (app, f, key, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archival_whose_claim_a_restore_took_over_never_changes_s3() {
    let (app, f, key, run) = restore_after_the_archive_lease("hygiene_archive_claimed").await;
    assert_eq!(status(&app, &f).await, "available");
    let (class, tags) = head_class_and_tags(&app, &key).await;
    assert!(standard(class.as_deref()), "{class:?}: {run}");
    assert!(tags.is_empty(), "{tags:?}");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_links").await, 1);
    assert_eq!(run["summary"]["archived"], 0, "{run}");
    assert_eq!(run["summary"]["skipped"], 1, "checked before S3: {run}");
    assert_eq!(run["summary"]["undone"], 0, "{run}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archival_taken_over_after_it_changed_s3_puts_the_object_back() {
    let (app, f, key, run) = restore_after_the_archive_lease("hygiene_archive_s3").await;
    assert_eq!(run["summary"]["archived"], 0, "{run}");
    if archival_moves_objects() {
        assert_eq!(run["summary"]["undone"], 1, "{run}");
    } else {
        // Catalog-only: the settle is refused with nothing changed in S3, nothing to undo.
        assert_eq!(run["summary"]["undone"], 0, "{run}");
        assert_eq!(run["summary"]["skipped"], 1, "{run}");
    }
    assert_eq!(status(&app, &f).await, "available");
    let (class, tags) = head_class_and_tags(&app, &key).await;
    assert!(standard(class.as_deref()), "{class:?}");
    assert!(tags.is_empty(), "{tags:?}");
    assert_eq!(app.versions(&key).await, 1);
    assert_eq!(
        app.get_object(&key).await,
        crate::helpers::media("image/png", 2000)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_taking_over_from_an_archival_that_died_after_changing_s3_puts_the_object_back() {
    let app = spawn_short_lease().await;
    let (f, key) = file(&app, 2000).await;
    assert_eq!(hygiene(&app, Some(in_days(2)))["summary"]["unlinked"], 1);
    let paused = Paused::start(
        &app,
        in_days(3) + chrono::Duration::seconds(5),
        "hygiene_archive_changed",
    )
    .await;
    // The object is archived in S3; the process dies before it settles.
    assert_archived_in_s3(&app, &key).await;
    paused.kill();
    // Waiting out the 2 s lease (a state to reach, not a timing assertion).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(restore(&app, &f).await.status(), 200);
    assert_eq!(status(&app, &f).await, "available");
    let (class, tags) = head_class_and_tags(&app, &key).await;
    assert!(standard(class.as_deref()), "{class:?}");
    assert!(tags.is_empty(), "{tags:?}");
    assert_eq!(
        app.get_object(&key).await,
        crate::helpers::media("image/png", 2000)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restoring_a_copy_while_another_handle_of_its_key_is_deleted_answers_file_busy() {
    let app = spawn(DAY).await;
    let (a, key) = file(&app, 300).await;
    let (b, b_key) = file(&app, 300).await;
    // B becomes a copy of A: one key, two handles.
    app.db
        .execute(&format!(
            "UPDATE file_handles SET key = '{key}' WHERE id = '{b}'"
        ))
        .await;
    app.lose_object(&b_key).await;
    hygiene(&app, Some(in_days(2)));
    let run = hygiene(&app, Some(in_days(3) + chrono::Duration::seconds(5)));
    assert_eq!(run["summary"]["archived"], 2, "{run}");
    // Deletion claims the first in id order; the test restores the other.
    let other = if a < b { b.clone() } else { a.clone() };
    // The copy's profile no longer tracks links, so no stage of its own will ever delete it:
    // the deletion of the key must settle it too.
    app.db
        .execute(&format!(
            "UPDATE file_handles SET profile = 'recording' WHERE id = '{other}'"
        ))
        .await;
    let paused = Paused::start(&app, in_days(6), "hygiene_delete_claimed").await;
    assert_eq!(
        error_code(restore(&app, &other).await).await,
        (503, "file_busy".to_owned())
    );
    assert_eq!(
        error_code(put_link(&app, &app.token("alice"), &other, "post/1").await).await,
        (503, "file_busy".to_owned())
    );
    let run = paused.release();
    assert_eq!(run["run"]["state"], "finished", "{run}");
    assert_eq!(app.versions(&key).await, 0);
    assert_eq!(status(&app, &a).await, "deleted");
    assert_eq!(
        status(&app, &b).await,
        "deleted",
        "the copy went with the key"
    );
    let (code, body) = reconcile(&app);
    assert_eq!(body["summary"]["missing"], 0, "{body}");
    assert_eq!(code, 0, "{body}");
}

/// Inserts `n` available, unlinked handles of the `image` profile straight into the catalog
/// (detection touches no object, so none is uploaded).
async fn unused_handles(app: &TestApp, n: usize) {
    for _ in 0..n {
        let key = format!("media/images/{}/f.png", uuid::Uuid::new_v4().simple());
        insert_handle(app, &key, "available").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_writes_its_report_a_page_at_a_time_not_all_at_the_end() {
    let app = spawn(DAY).await;
    unused_handles(&app, 450).await;
    let job = app.observed_job().await;

    let outcome = upcommit::services::hygiene::run(
        &job.catalog,
        &job.store,
        &job.settings,
        false,
        in_days(2),
    )
    .await
    .expect("hygiene");
    let upcommit::services::hygiene::HygieneOutcome::Ran { run, summary } = outcome else {
        panic!("busy");
    };

    assert_eq!(summary.unlinked, 450);
    // Three pages of candidates (200 a page): their items went to the report page by page.
    let writes = job.catalog_calls("add_job_items");
    assert!(writes >= 3.0, "{writes} writes of the report's items");
    let stored = app
        .db
        .count(&format!(
            "SELECT COUNT(*) FROM job_items WHERE run_id = '{}' AND action = 'unlinked'",
            run.id
        ))
        .await;
    assert_eq!(stored, 450);
}

/// Review 27: archival probed the store at each run and went catalog-only whenever storage
/// classes or tags were not found, accepted or not, and a single probe call that got no answer
/// was enough. It is now judged as `serve` judges it: a store found without them archives
/// nothing unless the gap is accepted by name; accepted, the files are archived in the catalog
/// only, with the reason said. On LocalStack, which keeps classes, the wrapper's probe reports
/// them missing; on Garage they are missing, and the run is judged without the test servers'
/// acceptance of the gaps, then with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archival_without_storage_classes_needs_the_gap_accepted() {
    let faults = std::sync::Arc::new(crate::faults::Faults::default());
    *faults.hide_capabilities.lock().expect("lock") = vec![
        upcommit::domain::capabilities::Capability::StorageClass,
        upcommit::domain::capabilities::Capability::ObjectTags,
    ];
    let app = spawn(DAY).await;
    let (id, key) = file(&app, 2000).await;
    assert_eq!(hygiene(&app, Some(in_days(2)))["summary"]["unlinked"], 1);

    let mut settings = upcommit::config::Settings::from_map(&app.env).expect("settings");
    let real = upcommit::storage::S3Store::connect(&settings.s3)
        .await
        .expect("store");
    let raw = real.client().clone();
    let store = crate::faults::faulty_store(faults)(std::sync::Arc::new(real), raw);
    let at = in_days(3) + chrono::Duration::seconds(5);
    let run = |settings: upcommit::config::Settings| {
        let (catalog, store) = (app.catalog.clone(), store.clone());
        async move {
            match upcommit::services::hygiene::run(&catalog, &store, &settings, false, at)
                .await
                .expect("hygiene")
            {
                upcommit::services::hygiene::HygieneOutcome::Ran { summary, .. } => summary,
                upcommit::services::hygiene::HygieneOutcome::Busy => panic!("busy"),
            }
        }
    };
    // Not accepted: nothing archived, and the run says why.
    settings.s3.accept_gaps.retain(|c| {
        !matches!(
            c,
            upcommit::domain::capabilities::Capability::StorageClass
                | upcommit::domain::capabilities::Capability::ObjectTags
        )
    });
    let refused = run(settings.clone()).await;
    assert_eq!(refused.archived, 0, "{refused:?}");
    assert_eq!(refused.failed, 1, "{refused:?}");
    assert_eq!(status(&app, &id).await, "unlinked");

    // Accepted: archived in the catalog only; the object keeps its class.
    settings.s3.accept_gaps.extend([
        upcommit::domain::capabilities::Capability::StorageClass,
        upcommit::domain::capabilities::Capability::ObjectTags,
    ]);
    let archived = run(settings).await;
    assert_eq!(archived.archived, 1, "{archived:?}");
    assert_eq!(archived.archived_in_place, 1, "{archived:?}");
    assert_eq!(status(&app, &id).await, "archived");
    let (class, tags) = head_class_and_tags(&app, &key).await;
    assert!(
        class.is_none() || class.as_deref() == Some("STANDARD"),
        "{class:?}"
    );
    assert!(tags.is_empty(), "{tags:?}");
}
