//! `POST /v1/files/{id}/copies`: shared handles. A copy is a new handle of the same object (no
//! bytes copied, no quota), with its own owner, links and status; hygiene archives and deletes
//! the object only when no copy needs it, reconcile counts a shared key once, and a commit still
//! never lands on a key a copy holds.

use std::process::Command;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::helpers::{error_code, media, spawn_app, spawn_app_with, Spawn, TestApp};
use crate::hygiene::{hygiene_env, in_days, restore, standard, DAY};

/// Short hygiene periods (the `image` profile tracks links) and a reconcile catalog page of
/// two keys, so three files already cross a page boundary.
async fn spawn() -> TestApp {
    let mut env = hygiene_env(DAY);
    env.push(("UPCOMMIT_RECONCILE_CATALOG_PAGE", "2".into()));
    spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await
}

/// Commits a PNG of `size` bytes for alice; returns the handle.
async fn file(app: &TestApp, size: usize) -> Value {
    app.upload_and_commit(&app.token("alice"), "image", "image/png", size)
        .await
        .1
}

fn id(h: &Value) -> String {
    h["id"].as_str().expect("id").to_owned()
}

fn key(h: &Value) -> String {
    h["key"].as_str().expect("key").to_owned()
}

pub(crate) async fn copy(
    app: &TestApp,
    token: &str,
    source: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut req = app
        .http
        .post(format!("{}/v1/files/{source}/copies", app.address))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.expect("POST copies")
}

/// Copies `source` for alice and asserts 201.
async fn copy_ok(app: &TestApp, source: &str) -> Value {
    let resp = copy(app, &app.token("alice"), source, None).await;
    assert_eq!(resp.status(), 201);
    resp.json().await.expect("copy JSON")
}

async fn handle(app: &TestApp, id: &str) -> Value {
    app.get(&format!("/v1/files/{id}"), Some(&app.admin_token("root")))
        .await
        .json()
        .await
        .expect("handle")
}

async fn status(app: &TestApp, id: &str) -> String {
    handle(app, id).await["status"]
        .as_str()
        .expect("status")
        .to_owned()
}

/// Follows the file's download redirect and returns the bytes.
async fn download(app: &TestApp, token: &str, id: &str) -> Vec<u8> {
    let (_, got) = app.download(id, token).await;
    assert_eq!(got.status(), 200);
    got.bytes().await.expect("bytes").to_vec()
}

async fn put_link(app: &TestApp, id: &str, path: &str) -> u16 {
    crate::hygiene::put_link(app, &app.token("alice"), id, path)
        .await
        .status()
        .as_u16()
}

async fn delete_link(app: &TestApp, id: &str, path: &str) -> u16 {
    app.delete(
        &format!("/v1/files/{id}/links/{path}"),
        Some(&app.token("alice")),
    )
    .await
    .status()
    .as_u16()
}

fn cli(app: &TestApp, args: &[&str]) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(args)
        .envs(&app.env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit");
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "JSON expected: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        }),
    )
}

fn hygiene(app: &TestApp, at: DateTime<Utc>) -> Value {
    crate::hygiene::hygiene(app, Some(at))
}

fn items<'a>(run: &'a Value, action: &str) -> Vec<&'a Value> {
    run["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["action"] == action)
        .collect()
}

async fn head_class(app: &TestApp, key: &str) -> Option<String> {
    app.head(key)
        .await
        .storage_class()
        .map(|c| c.as_str().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_copies_a_file_into_a_new_handle_of_the_same_object_without_new_bytes_or_quota() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let source = file(&app, 700).await;
    let keys_before = app.keys().await;
    let today = Utc::now().date_naive();
    let quota_before = app
        .catalog
        .quota_usage("alice", today)
        .await
        .expect("quota");

    let resp = copy(&app, &alice, &id(&source), None).await;
    assert_eq!(resp.status(), 201);
    let c: Value = resp.json().await.expect("copy JSON");

    assert_ne!(c["id"], source["id"]);
    assert_eq!(c["copied_from"], source["id"]);
    assert!(source.get("copied_from").is_none(), "{source}");
    for field in [
        "key",
        "size",
        "content_type",
        "etag",
        "profile",
        "upload_id",
    ] {
        assert_eq!(c[field], source[field], "{field}");
    }
    assert_eq!(c["created_by"], "alice");
    assert_eq!(c["status"], "available");
    assert_eq!(
        handle(&app, &id(&c)).await,
        c,
        "the 201 body is the stored handle"
    );
    assert_eq!(app.keys().await, keys_before, "no object was written");
    assert_eq!(
        app.catalog
            .quota_usage("alice", today)
            .await
            .expect("quota"),
        quota_before,
        "a copy charges no quota"
    );
    assert_eq!(
        download(&app, &alice, &id(&c)).await,
        media("image/png", 700),
        "the copy downloads the same bytes"
    );

    // Each call makes another copy (no idempotency key in this API).
    let again = copy(&app, &alice, &id(&source), Some(json!({}))).await;
    assert_eq!(again.status(), 201);
    let again: Value = again.json().await.expect("JSON");
    assert_ne!(again["id"], c["id"]);
    // A copy of a copy names the copy it came from.
    let second = copy_ok(&app, &id(&c)).await;
    assert_eq!(second["copied_from"], c["id"]);
    assert_eq!(second["key"], source["key"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_copies_a_file_to_another_owner_who_alone_with_admins_can_read_it() {
    let app = spawn_app().await;
    let source = file(&app, 500).await;
    let resp = copy(
        &app,
        &app.admin_token("root"),
        &id(&source),
        Some(json!({"owner": "bob"})),
    )
    .await;
    assert_eq!(resp.status(), 201);
    let c: Value = resp.json().await.expect("copy JSON");
    assert_eq!(c["created_by"], "bob");
    assert_eq!(c["copied_from"], source["id"]);

    let bob = app.token("bob");
    assert_eq!(download(&app, &bob, &id(&c)).await, media("image/png", 500));
    // The copy is bob's: alice cannot see it, and bob cannot see alice's source.
    assert_eq!(
        error_code(
            app.get(&format!("/v1/files/{}", id(&c)), Some(&app.token("alice")))
                .await
        )
        .await,
        (404, "file_not_found".to_owned())
    );
    assert_eq!(
        error_code(
            app.get(&format!("/v1/files/{}", id(&source)), Some(&bob))
                .await
        )
        .await,
        (404, "file_not_found".to_owned())
    );
    // An admin's owner is held to the token rule.
    let bad = copy(
        &app,
        &app.admin_token("root"),
        &id(&source),
        Some(json!({"owner": "a\u{7}b"})),
    )
    .await;
    assert_eq!(error_code(bad).await, (400, "invalid_request".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_admin_naming_an_owner_is_refused_and_nothing_is_copied() {
    let app = spawn_app().await;
    let source = file(&app, 500).await;
    for (body, refusal) in [
        (json!({"owner": "bob"}), (403, "owner_forbidden")),
        // Even naming herself: only admins name owners.
        (json!({"owner": "alice"}), (403, "owner_forbidden")),
        // A body that is not the documented one is refused too.
        (json!({"owner_id": "bob"}), (400, "invalid_json")),
    ] {
        let resp = copy(&app, &app.token("alice"), &id(&source), Some(body.clone())).await;
        assert_eq!(
            error_code(resp).await,
            (refusal.0, refusal.1.to_owned()),
            "{body}"
        );
    }
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copying_another_users_file_is_not_found_exactly_like_an_unknown_id() {
    let app = spawn_app().await;
    let source = file(&app, 500).await;
    let bob = app.token("bob");
    let other = error_code(copy(&app, &bob, &id(&source), None).await).await;
    let unknown =
        error_code(copy(&app, &bob, "0123456789abcdef0123456789abcdef", None).await).await;
    let garbage = error_code(copy(&app, &bob, "..%2F..", None).await).await;
    assert_eq!(other, (404, "file_not_found".to_owned()));
    assert_eq!(other, unknown);
    assert_eq!(other, garbage);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
    let anonymous = app
        .http
        .post(format!("{}/v1/files/{}/copies", app.address, id(&source)))
        .send()
        .await
        .expect("POST");
    assert_eq!(
        error_code(anonymous).await,
        (401, "unauthorized".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_retry_still_answers_its_own_handle_and_never_a_copy() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let (p, source) = app
        .upload_and_commit(&alice, "image", "image/png", 400)
        .await;
    let c = copy_ok(&app, &id(&source)).await;
    let retry = app.commit(&alice, &p.key, None).await;
    assert_eq!(retry.status(), 200);
    let retry: Value = retry.json().await.expect("JSON");
    assert_eq!(retry["id"], source["id"]);
    assert_ne!(retry["id"], c["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_to_a_key_a_copy_holds_is_still_refused() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let admin = app.admin_token("root");
    // An admin commits a file at a key of their choosing, then copies it.
    let p = app.uploaded(&alice, "image", "image/png", 400, "PUT").await;
    let resp = app.commit(&admin, &p.key, Some("shared/avatar.png")).await;
    assert_eq!(resp.status(), 201);
    let source: Value = resp.json().await.expect("JSON");
    let c = copy_ok(&app, &id(&source)).await;
    assert_eq!(c["key"], "shared/avatar.png");
    assert_eq!(put_link(&app, &id(&c), "post/1").await, 204);

    // Another upload aimed at that key is refused…
    let other = app.uploaded(&alice, "image", "image/png", 300, "PUT").await;
    let resp = app
        .commit(&admin, &other.key, Some("shared/avatar.png"))
        .await;
    assert_eq!(
        error_code(resp).await,
        (409, "final_key_conflict".to_owned())
    );
    // …and still once the source's upload row is gone (as retention prunes it): S3's guard on
    // the copy refuses to overwrite the object.
    app.db
        .execute(&format!("DELETE FROM uploads WHERE id = '{}'", p.upload_id))
        .await;
    let resp = app
        .commit(&admin, &other.key, Some("shared/avatar.png"))
        .await;
    assert_eq!(
        error_code(resp).await,
        (409, "final_key_conflict".to_owned())
    );

    assert_eq!(
        download(&app, &alice, &id(&c)).await,
        media("image/png", 400),
        "the copy's object is untouched"
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM file_handles WHERE key = 'shared/avatar.png'")
            .await,
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_available_cannot_be_copied() {
    let app = spawn().await;
    let source = file(&app, 2000).await;
    hygiene(&app, in_days(2));
    assert_eq!(status(&app, &id(&source)).await, "unlinked");
    let resp = copy(&app, &app.token("alice"), &id(&source), None).await;
    assert_eq!(
        error_code(resp).await,
        (409, "file_not_available".to_owned())
    );
    hygiene(&app, in_days(3) + chrono::Duration::seconds(5));
    assert_eq!(status(&app, &id(&source)).await, "archived");
    let resp = copy(&app, &app.token("alice"), &id(&source), None).await;
    assert_eq!(
        error_code(resp).await,
        (409, "file_not_available".to_owned())
    );
    hygiene(&app, in_days(6));
    assert_eq!(status(&app, &id(&source)).await, "deleted");
    let resp = copy(&app, &app.token("alice"), &id(&source), None).await;
    assert_eq!(error_code(resp).await, (410, "file_deleted".to_owned()));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlinking_one_copy_leaves_the_object_to_the_copy_still_in_use() {
    let app = spawn().await;
    let source = file(&app, 2000).await;
    let c = copy_ok(&app, &id(&source)).await;
    let k = key(&source);
    assert_eq!(put_link(&app, &id(&source), "post/1").await, 204);
    assert_eq!(put_link(&app, &id(&c), "album/7").await, 204);
    // The source stops being used: its link is deleted.
    assert_eq!(delete_link(&app, &id(&source), "post/1").await, 204);

    let first = hygiene(&app, in_days(2));
    assert_eq!(first["summary"]["unlinked"], 1, "{first}");
    assert_eq!(status(&app, &id(&source)).await, "unlinked");
    assert_eq!(status(&app, &id(&c)).await, "available");
    for at in [in_days(4), in_days(8), in_days(16)] {
        let run = hygiene(&app, at);
        assert_eq!(run["summary"]["archived"], 0, "{run}");
        assert_eq!(run["summary"]["deleted"], 0, "{run}");
    }
    assert_eq!(status(&app, &id(&source)).await, "unlinked");
    assert!(app.object_exists(&k).await);
    assert_ne!(head_class(&app, &k).await.as_deref(), Some("GLACIER_IR"));
    assert_eq!(app.versions(&k).await, 1);
    assert_eq!(
        download(&app, &app.token("alice"), &id(&c)).await,
        media("image/png", 2000)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_whose_copies_are_all_unlinked_is_archived_once_and_restored_for_all() {
    let app = spawn().await;
    let source = file(&app, 2000).await;
    let c = copy_ok(&app, &id(&source)).await;
    let k = key(&source);
    let run = hygiene(&app, in_days(2));
    assert_eq!(run["summary"]["unlinked"], 2, "{run}");

    let run = hygiene(&app, in_days(3) + chrono::Duration::seconds(5));
    assert_eq!(run["summary"]["archived"], 2, "{run}");
    assert_eq!(status(&app, &id(&source)).await, "archived");
    assert_eq!(status(&app, &id(&c)).await, "archived");
    let archived = items(&run, "archived");
    let moved: Vec<_> = archived
        .iter()
        .filter(|i| i["reason"].as_str().is_some_and(|r| r.contains("moved to")))
        .collect();
    assert_eq!(
        moved.len() as u64,
        crate::hygiene::moved(1),
        "the shared object is rewritten once (never, where archival is catalog-only): {run}"
    );
    assert_eq!(
        run["summary"]["archived_bytes"],
        2000 * crate::hygiene::moved(1),
        "{run}"
    );
    crate::hygiene::assert_archived_in_s3(&app, &k).await;
    assert_eq!(app.versions(&k).await, 1);

    // Restoring one copy brings the object back for every copy; the other keeps its status.
    let restored = app
        .post_json(
            &format!("/v1/files/{}/restore", id(&c)),
            Some(&app.token("alice")),
            &Value::Null,
        )
        .await;
    assert_eq!(restored.status(), 200);
    assert_eq!(status(&app, &id(&c)).await, "available");
    assert_eq!(status(&app, &id(&source)).await, "archived");
    let class = head_class(&app, &k).await;
    assert!(
        class.is_none() || class.as_deref() == Some("STANDARD"),
        "{class:?}"
    );
    assert_eq!(
        download(&app, &app.token("alice"), &id(&source)).await,
        media("image/png", 2000),
        "the archived copy still reads the shared object"
    );

    // Past retention, the archived copy is not deleted: the restored one is live.
    let run = hygiene(&app, in_days(8));
    assert_eq!(run["summary"]["deleted"], 0, "{run}");
    assert!(app.object_exists(&k).await);
    assert_eq!(status(&app, &id(&source)).await, "archived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_counts_a_key_shared_by_three_handles_once_across_catalog_pages() {
    let app = spawn().await;
    // Keys on both sides of the shared one, with a catalog page of two keys.
    let mut files = Vec::new();
    for _ in 0..4 {
        files.push(file(&app, 300).await);
    }
    let shared = files[1].clone();
    let a = copy_ok(&app, &id(&shared)).await;
    let b = copy_ok(&app, &id(&shared)).await;
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 6);

    let (code, body) = cli(&app, &["reconcile", "--json", "--grace", "0"]);
    assert_eq!(code, 0, "{body}");
    assert_eq!(body["summary"]["matched"], 4, "{body}");
    assert_eq!(body["summary"]["missing"], 0, "{body}");
    assert_eq!(body["summary"]["unindexed"], 0, "{body}");
    assert_eq!(
        body["summary"]["handles_read"], 4,
        "one row per key: {body}"
    );

    // The shared object is lost: reported once, naming its three handles.
    app.lose_object(&key(&shared)).await;
    let (code, body) = cli(&app, &["reconcile", "--json", "--grace", "0"]);
    assert_eq!(code, 5, "{body}");
    assert_eq!(body["summary"]["missing"], 1, "{body}");
    assert_eq!(body["summary"]["matched"], 3, "{body}");
    let missing = items(&body, "missing");
    assert_eq!(missing.len(), 1, "{body}");
    assert_eq!(missing[0]["key"], shared["key"]);
    let reason = missing[0]["reason"].as_str().expect("reason");
    for h in [&shared, &a, &b] {
        assert!(reason.contains(&id(h)), "{reason}");
    }
    assert!(reason.contains("3 handles"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_the_database_cannot_record_answers_503_and_records_nothing() {
    use std::sync::{Arc, Mutex};

    use crate::catalog_faults::{CatalogFaults, FaultyCatalog};

    let faults = Arc::new(Mutex::new(CatalogFaults::seeded(7)));
    let cf = faults.clone();
    let app = spawn_app_with(Spawn {
        wrap_catalog: Some(Box::new(move |real| Arc::new(FaultyCatalog::new(real, cf)))),
        ..Spawn::default()
    })
    .await;
    let source = file(&app, 500).await;
    faults.lock().expect("faults").before_percent = 100;
    let resp = copy(&app, &app.token("alice"), &id(&source), None).await;
    assert!(resp.headers().contains_key("retry-after"));
    assert_eq!(
        error_code(resp).await,
        (503, "service_unavailable".to_owned())
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
    faults.lock().expect("faults").off();
    let resp = copy(&app, &app.token("alice"), &id(&source), None).await;
    assert_eq!(resp.status(), 201, "the retry makes the copy");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_request_with_a_body_that_is_not_json_is_refused() {
    let app = spawn_app().await;
    let source = file(&app, 500).await;
    let resp = app
        .http
        .post(format!("{}/v1/files/{}/copies", app.address, id(&source)))
        .bearer_auth(app.token("alice"))
        .header("content-type", "text/plain")
        .body("owner=bob")
        .send()
        .await
        .expect("POST");
    assert_eq!(
        error_code(resp).await,
        (415, "unsupported_media_type".to_owned())
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
}

/// A file and a copy of it, both unlinked; returns (the one archival claims first — id order —,
/// the other, the key).
async fn two_unlinked_copies(app: &TestApp) -> (String, String, String) {
    let source = file(app, 2000).await;
    let c = copy_ok(app, &id(&source)).await;
    assert_eq!(hygiene(app, in_days(2))["summary"]["unlinked"], 2);
    let (a, b) = (id(&source), id(&c));
    let (first, other) = if a < b { (a, b) } else { (b, a) };
    (first, other, key(&source))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restoring_a_copy_while_another_copy_of_its_key_is_being_archived_answers_file_busy() {
    let app = spawn().await;
    let (first, other, k) = two_unlinked_copies(&app).await;
    let paused = crate::hygiene::Paused::start(
        &app,
        in_days(3) + chrono::Duration::seconds(5),
        "hygiene_archive_claimed",
    )
    .await;
    // The archival holds `first`; the object is about to move for both copies.
    assert_eq!(
        error_code(restore(&app, &other).await).await,
        (503, "file_busy".to_owned())
    );
    assert_eq!(put_link(&app, &other, "post/1").await, 503);
    let run = paused.release();
    assert_eq!(run["summary"]["archived"], 2, "{run}");
    assert_eq!(status(&app, &first).await, "archived");
    crate::hygiene::assert_archived_in_s3(&app, &k).await;
    // Now the restore goes through, and brings the object back for both.
    assert_eq!(restore(&app, &other).await.status(), 200);
    assert!(standard(head_class(&app, &k).await.as_deref()));
    assert_eq!(status(&app, &other).await, "available");
    assert_eq!(status(&app, &first).await, "archived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_restored_while_an_archival_of_its_key_changes_s3_gets_the_object_back() {
    let app = crate::hygiene::spawn_short_lease().await;
    let (first, other, k) = two_unlinked_copies(&app).await;
    // The archival renewed its claim on `first` and is about to rewrite the object.
    let paused = crate::hygiene::Paused::start(
        &app,
        in_days(3) + chrono::Duration::seconds(5),
        "hygiene_archive_s3",
    )
    .await;
    // Waiting out the 2 s lease (a state to reach, not a timing assertion): the other copy is
    // restored meanwhile (nothing to move yet) and is available.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(restore(&app, &other).await.status(), 200);
    let run = paused.release();
    // The archival changed S3, then could not settle beside an available copy: it put the
    // object back. (Where archival is catalog-only, it changed nothing in S3: nothing to undo.)
    assert_eq!(run["summary"]["undone"], crate::hygiene::moved(1), "{run}");
    assert_eq!(run["summary"]["archived"], 0, "{run}");
    assert_eq!(status(&app, &other).await, "available");
    assert_eq!(status(&app, &first).await, "unlinked");
    assert!(standard(head_class(&app, &k).await.as_deref()), "{run}");
    assert_eq!(
        download(&app, &app.token("alice"), &other).await,
        media("image/png", 2000)
    );
    // The claim was given back: a later run may judge `first` again.
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT COUNT(*) FROM file_handles WHERE id = '{first}' AND claim IS NULL"
            ))
            .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_deleted_once_when_every_copy_is_archived_past_retention() {
    let app = spawn().await;
    let (first, other, k) = two_unlinked_copies(&app).await;
    let run = hygiene(&app, in_days(3) + chrono::Duration::seconds(5));
    assert_eq!(run["summary"]["archived"], 2, "{run}");
    // Before retention nothing goes.
    let run = hygiene(&app, in_days(4));
    assert_eq!(run["summary"]["deleted"], 0, "{run}");
    assert!(app.object_exists(&k).await);

    let run = hygiene(&app, in_days(6));
    assert_eq!(
        run["summary"]["deleted"], 1,
        "one object, deleted once: {run}"
    );
    assert_eq!(app.versions(&k).await, 0);
    for h in [&first, &other] {
        assert_eq!(status(&app, h).await, "deleted");
        let resp = app
            .get(&format!("/v1/files/{h}/content"), Some(&app.token("alice")))
            .await;
        assert_eq!(error_code(resp).await, (410, "file_deleted".to_owned()));
    }
    let (code, body) = cli(&app, &["reconcile", "--json", "--grace", "0"]);
    assert_eq!(code, 0, "a deletion on purpose is no alarm: {body}");
    assert_eq!(body["summary"]["missing"], 0, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_object_has_at_most_the_configured_handles_even_when_copies_race() {
    // Hygiene's work on a key grows with the square of its handles: one user making thousands
    // of copies of one file must not be able to stall it.
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_MAX_COPIES_PER_FILE", "4".into())],
        ..Spawn::default()
    })
    .await;
    let source = file(&app, 500).await;
    let alice = app.token("alice");
    // Eight copies at once where three fit: exactly three land, the rest are refused.
    let source_id = id(&source);
    let answers =
        futures::future::join_all((0..8).map(|_| copy(&app, &alice, &source_id, None))).await;
    let mut created = 0;
    for resp in answers {
        match resp.status().as_u16() {
            201 => created += 1,
            409 => assert_eq!(error_code(resp).await.1, "too_many_copies"),
            // The insert's own bound refused it under the key's lock: retry later.
            503 => assert_eq!(error_code(resp).await.1, "file_busy"),
            other => panic!("copy answered {other}"),
        }
    }
    assert_eq!(created, 3);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 4);
    // Beyond the bound, always the clear answer; a copy of a copy counts the same.
    let copies = app
        .db
        .strings("SELECT id FROM file_handles WHERE copied_from IS NOT NULL")
        .await;
    let resp = copy(&app, &alice, &copies[0], None).await;
    assert_eq!(error_code(resp).await, (409, "too_many_copies".to_owned()));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_storage_report_counts_a_shared_object_s_bytes_once() {
    let app = spawn().await;
    let source = file(&app, 700).await;
    copy_ok(&app, &id(&source)).await;
    copy_ok(&app, &id(&source)).await;
    let other = file(&app, 300).await;
    let report: Value = app
        .get("/v1/admin/storage-report", Some(&app.admin_token("root")))
        .await
        .json()
        .await
        .expect("report JSON");
    assert_eq!(report["handles"][0][0], "available", "{report}");
    assert_eq!(report["handles"][0][1]["count"], 4, "{report}");
    assert_eq!(
        report["handles"][0][1]["bytes"],
        1000,
        "three handles of a 700-byte object and one of 300 bytes: {report} ({})",
        id(&other)
    );
}
