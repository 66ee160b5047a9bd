//! `upcommit reconcile` (the real binary) on LocalStack: planted unindexed objects and a missing
//! one, found on a listing and on a synthetic inventory; exact matching of keys that share a
//! textual prefix; quarantine that moves and loses nothing; resumption from a checkpoint.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::Command;

use serde_json::Value;
use upcommit::domain::jobs::JobRun;

use crate::helpers::{media, small_copy_limit, spawn_app, TestApp};

pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) body: Value,
}

pub(crate) fn reconcile_cli(app: &TestApp, extra: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["reconcile", "--json", "--grace", "0"])
        .args(extra)
        .envs(&app.env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit reconcile");
    let stdout = String::from_utf8_lossy(&out.stdout);
    Run {
        code: out.status.code().unwrap_or(-1),
        body: serde_json::from_str(&stdout).unwrap_or_else(|_| {
            panic!(
                "JSON expected: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        }),
    }
}

pub(crate) fn keys(body: &Value, action: &str) -> BTreeSet<String> {
    body["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["action"] == action)
        .map(|i| i["key"].as_str().expect("key").to_owned())
        .collect()
}

fn set(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Two committed files; returns their final keys.
async fn two_files(app: &TestApp) -> (String, String) {
    let token = app.token("alice");
    let (_, a) = app
        .upload_and_commit(&token, "image", "image/png", 300)
        .await;
    let (_, b) = app
        .upload_and_commit(&token, "image", "image/png", 400)
        .await;
    (
        a["key"].as_str().expect("key").to_owned(),
        b["key"].as_str().expect("key").to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_unindexed_objects_and_a_missing_one_are_found_exactly_on_a_listing() {
    let app = spawn_app().await;
    let (kept, lost) = two_files(&app).await;
    let shares_prefix = format!("{kept}.bak");
    let planted = [
        "media/images/planted one.png",
        "media/images/a+b.png",
        "media/images/é.png",
        shares_prefix.as_str(),
    ];
    for k in planted {
        app.put_object(k, media("image/png", 50), "image/png").await;
    }
    // Not a final prefix, though it starts like one.
    app.put_object("media/images2/x.png", media("image/png", 50), "image/png")
        .await;
    app.lose_object(&lost).await;

    let run = reconcile_cli(&app, &[]);
    assert_eq!(run.code, 5, "a missing object is an alarm: {}", run.body);
    assert_eq!(keys(&run.body, "unindexed"), set(&planted));
    assert_eq!(keys(&run.body, "missing"), set(&[lost.as_str()]));
    assert_eq!(run.body["summary"]["matched"], 1);
    assert_eq!(run.body["summary"]["unindexed_bytes"], 4 * 50);
    // The alarm is also an event, once for the run.
    let alarm = the_missing_alarm(&app).await;
    assert_eq!(alarm["data"]["missing"], 1);
    assert_eq!(alarm["data"]["missing_bytes"], 400);
    assert_eq!(alarm["data"]["run_id"], run.body["run"]["id"]);
    // Report only: nothing moved or deleted.
    for k in planted {
        assert!(app.object_exists(k).await, "{k}");
    }
    assert!(app.object_exists(&kept).await);

    // A grace period skips young objects (a commit may be in flight).
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["reconcile", "--json", "--grace", "1h"])
        .envs(&app.env)
        .output()
        .expect("run");
    let body: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(keys(&body, "unindexed").is_empty());
}

fn gzip(text: &str) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(text.as_bytes()).expect("gzip");
    enc.finish().expect("gzip")
}

/// Uploads an inventory of `rows` (key as given, already URL-encoded; last modified) into the
/// test bucket and returns the manifest's s3:// URL. Its manifest does not say when it was taken.
pub(crate) async fn inventory(app: &TestApp, rows: &[(&str, &str)]) -> String {
    inventory_taken(app, rows, None).await
}

/// [`inventory`], its manifest's `creationTimestamp` (when it was taken) as given.
pub(crate) async fn inventory_taken(
    app: &TestApp,
    rows: &[(&str, &str)],
    taken_at: Option<Value>,
) -> String {
    let csv: String = rows
        .iter()
        .map(|(k, t)| format!("\"{}\",\"{k}\",\"50\",\"{t}\"\n", app.bucket))
        .collect();
    let data_key = "inventory/data/part-0.csv.gz";
    app.s3
        .put_object()
        .bucket(&app.bucket)
        .key(data_key)
        .body(gzip(&csv).into())
        .send()
        .await
        .expect("data file");
    let manifest = serde_json::json!({
        "sourceBucket": app.bucket,
        "destinationBucket": format!("arn:aws:s3:::{}", app.bucket),
        "version": "2016-11-30",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate",
        "files": [{ "key": data_key, "size": 1, "MD5checksum": "x" }]
    });
    let mut manifest = manifest;
    if let Some(t) = taken_at {
        manifest["creationTimestamp"] = t;
    }
    app.s3
        .put_object()
        .bucket(&app.bucket)
        .key("inventory/manifest.json")
        .body(manifest.to_string().into_bytes().into())
        .send()
        .await
        .expect("manifest");
    format!("s3://{}/inventory/manifest.json", app.bucket)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synthetic_inventory_is_matched_like_a_listing() {
    let app = spawn_app().await;
    let (kept, lost) = two_files(&app).await;
    // Lost for real: a handle the inventory does not list is missing only if its object is
    // gone now too (`a_file_committed_after_the_inventory_was_taken_is_not_missing`).
    app.lose_object(&lost).await;
    let old = "2026-01-01T00:00:00.000Z";
    let mut rows = vec![
        (kept.as_str(), old),
        ("media/images/a%2Bb.png", old),
        ("media/images/planted%20one.png", old),
        ("media/images/%C3%A9.png", old),
        ("media/images2/x.png", old),
        ("tmp/2026/01/01/abc/old.png", old),
        ("tmp/2099/01/01/abc/new.png", "2099-01-01T00:00:00.000Z"),
    ];
    rows.sort_by(|a, b| {
        let d = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .expect("utf8")
                .into_owned()
        };
        d(a.0).as_bytes().cmp(d(b.0).as_bytes())
    });
    let url = inventory(&app, &rows).await;

    let run = reconcile_cli(&app, &["--inventory", &url]);
    assert_eq!(run.code, 5, "{}", run.body);
    assert_eq!(run.body["summary"]["source"], "inventory");
    assert_eq!(
        keys(&run.body, "unindexed"),
        set(&[
            "media/images/a+b.png",
            "media/images/planted one.png",
            "media/images/é.png"
        ])
    );
    assert_eq!(keys(&run.body, "missing"), set(&[lost.as_str()]));
    assert_eq!(
        keys(&run.body, "tmp_past_lifecycle"),
        set(&["tmp/2026/01/01/abc/old.png"])
    );
}

/// An S3 inventory is a snapshot, a day old or more: a file committed after it was taken has
/// a handle and an object but no row in it. That is no data loss, and must not be reported as
/// one (exit 5, an ERROR line per key) — the same as a commit recorded while a listing runs,
/// after the listing passed its key. A handle whose object is gone now is still missing.
/// (This manifest does not say when it was taken, so a HEAD of the key tells; with
/// `creationTimestamp`, see the next test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_committed_after_the_inventory_was_taken_is_not_missing() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let (_, before) = app
        .upload_and_commit(&token, "image", "image/png", 300)
        .await;
    let before = before["key"].as_str().expect("key").to_owned();
    let url = inventory(&app, &[(before.as_str(), "2026-01-01T00:00:00.000Z")]).await;
    let (_, after) = app
        .upload_and_commit(&token, "image", "image/png", 400)
        .await;
    let after = after["key"].as_str().expect("key").to_owned();

    let run = reconcile_cli(&app, &["--inventory", &url]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert!(keys(&run.body, "missing").is_empty(), "{}", run.body);
    assert_eq!(run.body["summary"]["matched"], 1);
    assert_eq!(run.body["summary"]["appeared"], 1, "{}", run.body);

    // Gone for real: the alarm stands; and so it does when something else (4 bytes, not the
    // handle's 400) has been put at the key since.
    app.lose_object(&after).await;
    let run = reconcile_cli(&app, &["--inventory", &url]);
    assert_eq!(run.code, 5, "{}", run.body);
    assert_eq!(keys(&run.body, "missing"), set(&[after.as_str()]));
    assert_eq!(run.body["summary"]["appeared"], 0);
    app.put_object(&after, b"\x89PNG".to_vec(), "image/png")
        .await;
    let run = reconcile_cli(&app, &["--inventory", &url]);
    assert_eq!(run.code, 5, "{}", run.body);
    assert_eq!(keys(&run.body, "missing"), set(&[after.as_str()]));
}

/// A manifest that says when the inventory was taken (`creationTimestamp`, as S3's always do):
/// the handles recorded after it are left to the next inventory, without a HEAD each (a day of
/// commits is a day of HEADs otherwise), while every handle recorded before it is judged as
/// before, and a key the inventory shows is matched whenever its handle was recorded. The
/// losses are real: a handle before the timestamp and one after it, both objects deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inventory_leaves_handles_recorded_after_it_was_taken_to_the_next_one() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let commit = || {
        let (app, token) = (&app, &token);
        async move {
            let (_, file) = app
                .upload_and_commit(token, "image", "image/png", 300)
                .await;
            file["key"].as_str().expect("key").to_owned()
        }
    };
    let listed_before = commit().await;
    let lost_before = commit().await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let taken = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let listed_after = commit().await;
    let lost_after = commit().await;
    app.lose_object(&lost_before).await;
    app.lose_object(&lost_after).await;
    let old = "2026-01-01T00:00:00.000Z";
    let mut rows = vec![(listed_before.as_str(), old), (listed_after.as_str(), old)];
    rows.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    // Epoch milliseconds as a string, as S3 writes it.
    let millis = taken.timestamp_millis().to_string();
    let url = inventory_taken(&app, &rows, Some(millis.into())).await;

    let run = reconcile_cli(&app, &["--inventory", &url]);
    assert_eq!(run.code, 5, "{}", run.body);
    assert_eq!(keys(&run.body, "missing"), set(&[lost_before.as_str()]));
    assert!(keys(&run.body, "unindexed").is_empty(), "{}", run.body);
    let summary = &run.body["summary"];
    assert_eq!(summary["matched"], 2, "{}", run.body);
    assert_eq!(summary["recorded_after_inventory"], 1, "{}", run.body);
    assert_eq!(summary["appeared"], 0, "{}", run.body);
    assert_eq!(summary["handles_read"], 4, "{}", run.body);
    let said = summary["inventory_taken_at"].as_str().expect("taken at");
    let said = chrono::DateTime::parse_from_rfc3339(said).expect("RFC 3339");
    assert_eq!(said.timestamp_millis(), taken.timestamp_millis());
    // The text line an operator reads says the same (the docs promise it).
    let text = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["reconcile", "--grace", "0", "--inventory", &url])
        .envs(&app.env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.status.code(), Some(5), "{stdout}");
    assert!(
        stdout.contains(&format!("the inventory was taken at {}", said.to_rfc3339()))
            && stdout.contains("1 handles recorded since are left to a later one"),
        "{stdout}"
    );

    // A time it cannot trust is refused before anything is judged, never read as a cut that
    // would leave every loss since unreported (found by the outside review: 0, a negative
    // value, seconds read as milliseconds or a month-old manifest each made a run with real
    // losses exit 0): not a time, null, the epoch, seconds, older than --inventory-max-age
    // (10 days unless given), in the future.
    let ms = |t: chrono::DateTime<chrono::Utc>| Value::from(t.timestamp_millis().to_string());
    let month_ago = taken - chrono::Duration::days(30);
    let refused: [(Value, &str); 7] = [
        ("yesterday".into(), "milliseconds since the epoch"),
        (Value::Null, "milliseconds since the epoch"),
        ("0".into(), "max-age"),
        ("-1".into(), "max-age"),
        (taken.timestamp().to_string().into(), "max-age"),
        (ms(month_ago), "max-age"),
        (ms(taken + chrono::Duration::hours(2)), "in the future"),
    ];
    let runs_before = app.db.count("SELECT COUNT(*) FROM job_runs").await;
    for (stamp, why) in refused {
        let bad = inventory_taken(&app, &rows, Some(stamp.clone())).await;
        let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
            .args(["reconcile", "--json", "--grace", "0", "--inventory", &bad])
            .envs(&app.env)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stamp}: {stderr}");
        assert!(stderr.contains(why), "{stamp}: {stderr}");
    }
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM job_runs").await,
        runs_before,
        "a refused inventory starts no run"
    );
    // A bound that is not a duration, or too large for one, is refused too, inventory or not
    // (found by the second review: a huge one made the program panic, exit 101).
    for (bound, inventory) in [
        ("9223372036854775807", Some(url.as_str())),
        ("1000000000y", Some(url.as_str())),
        ("garbage", None),
    ] {
        let mut args = vec!["reconcile", "--json", "--inventory-max-age", bound];
        if let Some(url) = inventory {
            args.extend(["--inventory", url]);
        }
        let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
            .args(&args)
            .envs(&app.env)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bound}: {stderr}");
        assert!(stderr.contains("--inventory-max-age"), "{bound}: {stderr}");
    }
    // The grace is read the same way: too long for a duration is refused, not a panic.
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["reconcile", "--json", "--grace", "9223372036854775807"])
        .envs(&app.env)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--grace"), "{stderr}");
    // An operator who means a month-old inventory says so, and its cut then holds: the two
    // handles it does not show, both recorded since, are left to a later inventory.
    let old_one = inventory_taken(&app, &rows, Some(ms(month_ago))).await;
    let run = reconcile_cli(
        &app,
        &["--inventory", &old_one, "--inventory-max-age", "31d"],
    );
    assert_eq!(run.code, 0, "{}", run.body);
    assert_eq!(
        run.body["summary"]["recorded_after_inventory"], 2,
        "{}",
        run.body
    );
    assert_eq!(run.body["summary"]["matched"], 2, "{}", run.body);
}

/// A run judges the handles recorded before it began, not the ones committed while it runs
/// (found by the outside review: under steady commits a run read each new handle, which the
/// listing had not shown, HEADed it, and went on for as long as the commits did). A handle
/// recorded "after the start" is planted with its object gone: read, it would be an alarm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_leaves_handles_recorded_after_it_began_to_the_next_run() {
    let app = spawn_app().await;
    let (kept, later) = two_files(&app).await;
    app.db
        .execute(&format!(
            "UPDATE file_handles SET created_at = '2099-01-01T00:00:00.000000+00:00' WHERE key = '{later}'"
        ))
        .await;
    app.lose_object(&later).await;

    let run = reconcile_cli(&app, &[]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert!(keys(&run.body, "missing").is_empty(), "{}", run.body);
    assert_eq!(run.body["summary"]["handles_read"], 1, "{}", run.body);
    assert_eq!(run.body["summary"]["matched"], 1);
    assert_eq!(run.body["summary"]["appeared"], 0);
    assert!(app.object_exists(&kept).await);
}

/// S3 Inventory writes a key form-encoded: a space as `+` (or `%20`), a literal `+` as `%2B`.
/// Read with `+` kept as a `+`, "a b.png" became "a+b.png": a wrong key in the unindexed
/// report, and an inventory in S3's order (a space, 0x20, sorts before `!`, 0x21, though `+`
/// sorts after it) refused as out of byte order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inventory_keys_with_spaces_and_plus_signs_are_read_as_s3_encodes_them() {
    let app = spawn_app().await;
    let admin = app.admin_token("root");
    let p = app.uploaded(&admin, "image", "image/png", 300, "PUT").await;
    let plus = "media/images/e+f.png";
    assert_eq!(app.commit(&admin, &p.key, Some(plus)).await.status(), 201);
    let old = "2026-01-01T00:00:00.000Z";
    // In the byte order of the keys they stand for, as S3 writes them.
    let url = inventory(
        &app,
        &[
            ("media/images/a+b.png", old),
            ("media/images/a%21.png", old),
            ("media/images/c%20d.png", old),
            ("media/images/e%2Bf.png", old),
        ],
    )
    .await;

    let run = reconcile_cli(&app, &["--inventory", &url]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert_eq!(
        keys(&run.body, "unindexed"),
        set(&[
            "media/images/a b.png",
            "media/images/a!.png",
            "media/images/c d.png"
        ])
    );
    assert_eq!(run.body["summary"]["matched"], 1, "{}", run.body);
    assert_eq!(run.body["summary"]["missing"], 0, "{}", run.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inventory_out_of_byte_order_is_refused() {
    let app = spawn_app().await;
    let old = "2026-01-01T00:00:00.000Z";
    let url = inventory(
        &app,
        &[("media/images/b.png", old), ("media/images/a.png", old)],
    )
    .await;
    let run = reconcile_cli(&app, &["--inventory", &url]);
    assert_eq!(run.code, 3, "{}", run.body);
    assert_eq!(run.body["run"]["state"], "refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quarantine_moves_unindexed_objects_and_loses_nothing() {
    let app = spawn_app().await;
    let (kept, _) = two_files(&app).await;
    let stray = "media/images/stray/leftover.png";
    let bytes = media("image/png", 77);
    app.put_object(stray, bytes.clone(), "image/png").await;

    let run = reconcile_cli(&app, &["--quarantine"]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert_eq!(keys(&run.body, "quarantined"), set(&[stray]));
    assert!(!app.object_exists(stray).await);
    assert_eq!(
        app.get_object(&format!("quarantine/{stray}")).await,
        bytes,
        "moved, byte for byte"
    );
    assert!(app.object_exists(&kept).await, "recorded files untouched");
    // The next run sees nothing new: quarantine/ is not a final prefix.
    let again = reconcile_cli(&app, &[]);
    assert!(keys(&again.body, "unindexed").is_empty(), "{}", again.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quarantine_moves_an_object_over_the_single_copy_limit_in_parts() {
    let app = spawn_app().await;
    let stray = "media/images/stray/large.png";
    // Over 5 MiB: the smallest source a store must copy in parts (Garage refuses a smaller one).
    let bytes = media("image/png", 5 * 1024 * 1024 + 3000);
    // Served with headers and tags of its own, which a copy in parts must write again (review
    // 26: they were dropped, where the single CopyObject keeps them).
    app.s3
        .put_object()
        .bucket(&app.bucket)
        .key(stray)
        .body(bytes.clone().into())
        .content_type("image/png")
        .content_encoding("identity")
        .cache_control("max-age=60")
        .content_disposition("inline; filename=\"large.png\"")
        .content_language("en")
        .tagging("team=media&kind=large")
        .send()
        .await
        .expect("put the stray object");

    let out = quarantine_with(&app, &small_copy_limit());
    let body: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(keys(&body, "quarantined"), set(&[stray]), "{body}");
    assert!(!app.object_exists(stray).await);
    let moved = format!("quarantine/{stray}");
    let head = app.s3.head_object().bucket(&app.bucket).key(&moved);
    let head = head.send().await.expect("HEAD");
    assert!(
        head.e_tag().expect("etag").ends_with("-2\""),
        "assembled from two copied parts: {:?}",
        head.e_tag()
    );
    assert_eq!(head.content_type(), Some("image/png"));
    assert_eq!(head.content_encoding(), Some("identity"));
    assert_eq!(head.cache_control(), Some("max-age=60"));
    assert_eq!(
        head.content_disposition(),
        Some("inline; filename=\"large.png\"")
    );
    assert_eq!(head.content_language(), Some("en"));
    if crate::helpers::gap_accepted("object_tags") {
        // Garage keeps no tags: there are none to carry.
        assert_eq!(app.get_object(&moved).await, bytes, "moved, byte for byte");
        return;
    }
    let tags = app
        .s3
        .get_object_tagging()
        .bucket(&app.bucket)
        .key(&moved)
        .send()
        .await
        .expect("tags");
    let mut tags: Vec<(String, String)> = tags
        .tag_set()
        .iter()
        .map(|t| (t.key().to_owned(), t.value().to_owned()))
        .collect();
    tags.sort();
    assert_eq!(
        tags,
        vec![
            ("kind".to_owned(), "large".to_owned()),
            ("team".to_owned(), "media".to_owned())
        ]
    );
    assert_eq!(app.get_object(&moved).await, bytes, "moved, byte for byte");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_reconcile_resumes_after_its_checkpoint() {
    let app = spawn_app().await;
    for k in ["media/images/a/before.png", "media/images/z/after.png"] {
        app.put_object(k, media("image/png", 10), "image/png").await;
    }
    let mut crashed = JobRun::start("reconcile", false, upcommit::domain::records::now());
    crashed.checkpoint = Some("media/images/m".into());
    app.catalog.insert_run(&crashed).await.expect("run");

    let run = reconcile_cli(&app, &[]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert_eq!(run.body["run"]["id"], crashed.id.as_str());
    assert_eq!(run.body["summary"]["resumed"], true);
    assert_eq!(
        keys(&run.body, "unindexed"),
        set(&["media/images/z/after.png"]),
        "keys up to the checkpoint were judged by the crashed run"
    );
}

/// A run that found a loss, checkpointed it and crashed: the resumed run does not judge those
/// keys again, so its totals, its exit code and the `reconcile.missing` alarm must carry what
/// the crashed run found (found by the outside review: the resumed run started its totals from
/// zero, exited 0 and raised no alarm, while its own items named the lost files).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loss_found_before_a_crash_is_still_an_alarm_after_the_resume() {
    let app = spawn_app().await;
    app.put_object(
        "media/images/z/after.png",
        media("image/png", 10),
        "image/png",
    )
    .await;
    let mut crashed = JobRun::start("reconcile", false, upcommit::domain::records::now());
    crashed.checkpoint = Some("media/images/m".into());
    crashed.summary = Some(
        serde_json::json!({
            "source": "listing", "keys_listed": 3, "handles_read": 4, "matched": 2,
            "missing": 1, "missing_bytes": 300, "unindexed": 1, "unindexed_bytes": 50,
            "list_requests": 1
        })
        .to_string(),
    );
    app.catalog.insert_run(&crashed).await.expect("run");
    let found = |action: &str, key: &str, bytes| upcommit::domain::jobs::JobItem {
        action: action.into(),
        key: key.into(),
        version_id: None,
        bytes,
        reason: "found before the crash".into(),
    };
    app.catalog
        .add_job_items(
            &crashed.id,
            &[
                found("missing", "media/images/a/lost.png", 300),
                found("unindexed", "media/images/b/planted.png", 50),
            ],
        )
        .await
        .expect("items");

    let run = reconcile_cli(&app, &[]);
    assert_eq!(run.code, 5, "the loss is still an alarm: {}", run.body);
    assert_eq!(run.body["run"]["id"], crashed.id.as_str());
    let summary = &run.body["summary"];
    assert_eq!(summary["resumed"], true);
    assert_eq!(summary["missing"], 1, "{}", run.body);
    assert_eq!(summary["missing_bytes"], 300);
    assert_eq!(summary["unindexed"], 2, "one before the crash, one after");
    let after = run.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["key"] == "media/images/z/after.png")
        .expect("the object after the checkpoint")["bytes"]
        .as_u64()
        .expect("bytes");
    assert_eq!(summary["unindexed_bytes"], 50 + after);
    assert_eq!(summary["keys_listed"], 4);
    assert_eq!(summary["matched"], 2);
    assert_eq!(summary["list_requests"], 2);
    assert_eq!(
        keys(&run.body, "missing"),
        set(&["media/images/a/lost.png"])
    );
    let alarm = the_missing_alarm(&app).await;
    assert_eq!(alarm["data"]["missing"], 1);
    assert_eq!(alarm["data"]["run_id"], crashed.id.as_str());
}

/// The one `reconcile.missing` event recorded so far.
async fn the_missing_alarm(app: &TestApp) -> Value {
    let mut alarms: Vec<Value> = crate::history::all_events(app)
        .await
        .into_iter()
        .filter(|e| e["type"] == "reconcile.missing")
        .collect();
    assert_eq!(alarms.len(), 1, "{alarms:#?}");
    alarms.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_storage_report_adds_up_handles_tmp_by_age_and_unindexed_bytes() {
    let app = spawn_app().await;
    let (_, lost) = two_files(&app).await; // 300 + 400 bytes
                                           // Their tmp objects stay until the URLs expire; let that happen first.
    app.sweep_after_urls_expire().await;
    let token = app.token("alice");
    app.uploaded(&token, "image", "image/png", 120, "PUT").await; // today's tmp
    app.put_object(
        "tmp/2026/10/01/x/old.png",
        media("image/png", 90),
        "image/png",
    )
    .await;
    app.put_object(
        "media/images/stray.png",
        media("image/png", 50),
        "image/png",
    )
    .await;
    app.lose_object(&lost).await;
    assert_eq!(reconcile_cli(&app, &[]).code, 5);

    let forbidden = app
        .get("/v1/admin/storage-report", Some(&app.token("alice")))
        .await;
    assert_eq!(
        crate::helpers::error_code(forbidden).await,
        (403, "admin_required".to_owned())
    );
    let resp = app
        .get("/v1/admin/storage-report", Some(&app.admin_token("root")))
        .await;
    assert_eq!(resp.status(), 200);
    let report: Value = resp.json().await.expect("JSON");
    assert_eq!(report["handles"][0][0], "available");
    assert_eq!(report["handles"][0][1]["count"], 2);
    assert_eq!(report["handles"][0][1]["bytes"], 700);
    let age = |name: &str| {
        report["tmp_by_age"]
            .as_array()
            .expect("ages")
            .iter()
            .find(|b| b["age"] == name)
            .cloned()
            .expect("bucket")
    };
    assert_eq!(age("under_1d")["bytes"], 120);
    assert_eq!(age("over_30d")["bytes"], 90);
    assert_eq!(report["unindexed"]["count"], 1);
    assert_eq!(report["unindexed"]["bytes"], 50);
    assert!(report["estimated_monthly_cost"].as_f64().is_some());

    // The same from the command line.
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["report", "--json"])
        .envs(&app.env)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    let cli: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(cli["handles"], report["handles"]);
    assert_eq!(cli["tmp_by_age"], report["tmp_by_age"]);

    // The data-loss alarm is on /metrics for every replica, once the gauges' background refresh
    // (every few seconds) has read the run.
    let mut metrics = String::new();
    for _ in 0..300 {
        metrics = app.metrics_text().await;
        if metrics.contains("upcommit_reconcile_missing_objects") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        metrics.contains("upcommit_reconcile_missing_objects 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_outside_every_known_prefix_are_reported_stray_and_moved_only_when_asked() {
    let app = spawn_app().await;
    let (kept, _) = two_files(&app).await;
    let strays = ["exports/x.csv", "media/images2/x.jpg"];
    app.put_object(strays[0], vec![b'a'; 70], "text/csv").await;
    app.put_object(strays[1], media("image/jpeg", 50), "image/jpeg")
        .await;
    let unindexed = "media/images/lost/u.png";
    app.put_object(unindexed, media("image/png", 30), "image/png")
        .await;

    let run = reconcile_cli(&app, &["--quarantine"]);
    assert_eq!(
        run.code, 0,
        "stray data is reported, not an alarm: {}",
        run.body
    );
    assert_eq!(run.body["summary"]["stray"], 2, "{}", run.body);
    assert_eq!(run.body["summary"]["stray_bytes"], 120);
    assert_eq!(keys(&run.body, "stray"), set(&strays));
    assert_eq!(keys(&run.body, "quarantined"), set(&[unindexed]));
    for k in strays {
        assert!(app.object_exists(k).await, "--quarantine alone left {k}");
    }

    let run = reconcile_cli(&app, &["--quarantine-stray"]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert_eq!(keys(&run.body, "quarantined"), set(&strays));
    assert_eq!(run.body["summary"]["stray_quarantined"], 2);
    for k in strays {
        assert!(!app.object_exists(k).await, "{k}");
        assert!(app.object_exists(&format!("quarantine/{k}")).await, "{k}");
    }
    assert!(app.object_exists(&kept).await, "recorded files untouched");
    let again = reconcile_cli(&app, &[]);
    assert_eq!(again.body["summary"]["stray"], 0, "{}", again.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_that_xml_cannot_carry_are_listed_exactly_and_quarantined_intact() {
    // S3 keys may hold any Unicode character; control characters cannot be written in XML 1.0,
    // and a space and a `+` are one character apart only when the listing encodes them. A
    // listing that asked for raw keys stopped at the first such key (the whole run failed).
    let app = spawn_app().await;
    let (kept, _) = two_files(&app).await;
    let strays = [
        "exports/a b.csv",
        "exports/a+b.csv",
        "exports/100%25 done.csv",
        "exports/\u{1b}[2Jclear\u{7}.csv",
        "exports/한글 & <x> \"q\".csv",
    ];
    for k in strays {
        app.put_object(k, vec![b'a'; 10], "text/csv").await;
    }

    for workers in ["1", "4"] {
        let run = reconcile_cli(&app, &["--workers", workers]);
        assert_eq!(run.code, 0, "--workers {workers}: {}", run.body);
        assert_eq!(
            keys(&run.body, "stray"),
            set(&strays),
            "--workers {workers}"
        );
        assert_eq!(run.body["summary"]["missing"], 0, "{}", run.body);
        assert_eq!(run.body["summary"]["matched"], 2, "{}", run.body);
    }

    let run = reconcile_cli(&app, &["--quarantine-stray"]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert_eq!(keys(&run.body, "quarantined"), set(&strays));
    for k in strays {
        assert!(!app.object_exists(k).await, "{k:?} moved");
        assert_eq!(
            app.get_object(&format!("quarantine/{k}")).await,
            vec![b'a'; 10],
            "{k:?} intact under quarantine/"
        );
    }
    assert!(app.object_exists(&kept).await, "recorded files untouched");
}

/// Review 27, round 2: on an unversioned store (Garage) quarantine copied the object, then
/// deleted "the object at the key" — by then another writer's newer object, never copied
/// anywhere. Now the key is read again before the delete: the newer object stays in place, the
/// quarantine holds the one copied, and the item says why. (On a versioned bucket the delete
/// names the version copied, so the newer one stays too: asserted on both.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_replaced_while_quarantine_copies_it_is_kept_in_place() {
    let app = spawn_app().await;
    let (stray, body) = replaced_while_quarantine_copies(&app).await;
    if crate::helpers::gap_accepted("versioning") {
        assert!(keys(&body, "quarantined").is_empty(), "{body}");
        assert_eq!(keys(&body, "unindexed"), set(&[stray]), "{body}");
    }
}

/// A stray object; `reconcile --quarantine` held right after its copy while another writer
/// puts a newer object at the key; then released. Asserts the newer object stayed in place and
/// the quarantine holds the one copied; returns the key and the run's JSON.
async fn replaced_while_quarantine_copies(app: &TestApp) -> (&'static str, Value) {
    let stray = "media/images/stray/replaced.png";
    let old = media("image/png", 3000);
    app.put_object(stray, old.clone(), "image/png").await;
    let paused = crate::hygiene::Paused::start_with(
        app,
        &["reconcile", "--json", "--grace", "0", "--quarantine"],
        "quarantine_copied",
    )
    .await;
    let newer = media("image/jpeg", 4000);
    app.put_object(stray, newer.clone(), "image/jpeg").await;
    let body = paused.release();
    assert_eq!(
        app.get_object(stray).await,
        newer,
        "the newer object: {body}"
    );
    assert_eq!(
        app.get_object(&format!("quarantine/{stray}")).await,
        old,
        "the quarantine holds the object copied"
    );
    (stray, body)
}

/// `upcommit reconcile --json --grace 0 --quarantine` with the test server's settings and
/// `extra` on top; its output.
fn quarantine_with(app: &TestApp, extra: &[(&str, String)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["reconcile", "--json", "--grace", "0", "--quarantine"])
        .envs(&app.env)
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit reconcile")
}

/// [`quarantine_with`] the test server's settings alone, its JSON.
fn quarantine_run(app: &TestApp) -> Value {
    serde_json::from_slice(&quarantine_with(app, &[]).stdout).expect("JSON")
}

/// Review 27, round 3: quarantining a key a second time copied over the first quarantined
/// object: gone on an unversioned store (Garage), left to the one-day noncurrent expiry on a
/// versioned one. The quarantine key is never overwritten now: the second object stays where
/// it is, reported, and the first stays in quarantine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_quarantine_of_a_key_never_overwrites_the_first() {
    let app = spawn_app().await;
    let stray = "media/images/stray/twice.png";
    let first = media("image/png", 3000);
    app.put_object(stray, first.clone(), "image/png").await;
    let body = quarantine_run(&app);
    assert_eq!(keys(&body, "quarantined"), set(&[stray]), "{body}");
    // The same size, other bytes: only reading them tells.
    let second = media("image/jpeg", 3000);
    app.put_object(stray, second.clone(), "image/jpeg").await;
    let body = quarantine_run(&app);
    assert!(keys(&body, "quarantined").is_empty(), "{body}");
    assert_eq!(keys(&body, "unindexed"), set(&[stray]), "{body}");
    let moved = format!("quarantine/{stray}");
    assert_eq!(
        app.get_object(&moved).await,
        first,
        "the first stays quarantined"
    );
    assert_eq!(app.versions(&moved).await, 1, "and was never overwritten");
    assert_eq!(
        app.get_object(stray).await,
        second,
        "the second stays in place"
    );
}

/// Review 27, round 3: on a bucket whose versioning is suspended, HEAD names the version
/// "null", and the quarantine's re-read before its delete (for unversioned stores) was skipped:
/// a newer object written while it copied was deleted. "null" is unversioned now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_suspended_bucket_an_object_replaced_while_quarantine_copies_it_is_kept() {
    let app = spawn_app().await;
    crate::helpers::set_versioning(
        &app.s3,
        &app.bucket,
        aws_sdk_s3::types::BucketVersioningStatus::Suspended,
    )
    .await;
    let (_, body) = replaced_while_quarantine_copies(&app).await;
    assert!(keys(&body, "quarantined").is_empty(), "{body}");
}

/// Review 27, round 4: a quarantine killed between its copy and its delete left a copy whose
/// ETag is not its source's (a copy in parts has one of its own), and every rerun refused it as
/// "another object". The rerun now reads the two side by side: the same bytes, so it finishes
/// the move. (Sources over 5 MiB: Garage copies nothing smaller in parts.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarantine_killed_after_a_copy_in_parts_is_finished_by_the_next_run() {
    let app = spawn_app().await;
    let stray = "media/images/stray/resumed.png";
    let bytes = media("image/png", 5 * 1024 * 1024 + 3000);
    app.put_object(stray, bytes.clone(), "image/png").await;
    let run = |crash: bool| {
        let mut extra = small_copy_limit();
        extra.push(("UPCOMMIT_JOB_LEASE_SECS", "2".into()));
        if crash {
            extra.push(("UPCOMMIT_CRASH_AT", "quarantine_copied".into()));
        }
        quarantine_with(&app, &extra)
    };
    assert!(!run(true).status.success(), "the run was killed");
    let moved = format!("quarantine/{stray}");
    let copied = app.s3.head_object().bucket(&app.bucket).key(&moved);
    let copied = copied.send().await.expect("the copy landed");
    assert!(
        copied.e_tag().expect("etag").contains('-'),
        "a copy in parts"
    );
    assert_eq!(app.get_object(stray).await, bytes, "the original stayed");
    // Waiting out the 2 s job lease (a state to reach, not a timing assertion).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let out = run(false);
    let body: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(keys(&body, "quarantined"), set(&[stray]), "{body}");
    assert!(!app.object_exists(stray).await);
    assert_eq!(app.get_object(&moved).await, bytes);
}

/// How [`tampering_proxy`] lies.
#[derive(Clone)]
enum Tamper {
    /// Cuts the body of every presigned GET to its first bytes.
    Cut(usize),
    /// Removes the ETag header from every answer.
    StripEtag,
    /// Answers every presigned GET with this object's body and ETag instead (a cache serving
    /// signed URLs, or the same body for both).
    ServeObject(aws_sdk_s3::Client, String, String),
}

/// A proxy in front of the store under test that relays everything but tampers as `how` says
/// (a presigned GET has `X-Amz-Signature` in its query); its address.
async fn tampering_proxy(how: Tamper) -> String {
    use axum::extract::{Request, State};
    use axum::response::Response;
    async fn handle(
        State((http, how)): State<(reqwest::Client, Tamper)>,
        req: Request,
    ) -> Response {
        let presigned_get = req.method() == "GET"
            && req
                .uri()
                .query()
                .is_some_and(|q| q.contains("X-Amz-Signature"));
        if let (true, Tamper::ServeObject(s3, bucket, key)) = (presigned_get, &how) {
            let got = s3.get_object().bucket(bucket).key(key).send().await;
            let got = got.expect("the object served instead");
            let etag = got.e_tag().expect("etag").to_owned();
            let bytes = got.body.collect().await.expect("body").into_bytes();
            return Response::builder()
                .status(200)
                .header("etag", etag)
                .body(axum::body::Body::from(bytes))
                .expect("response");
        }
        let mut resp = crate::s3_proxy::relay(&http, req).await;
        match how {
            Tamper::StripEtag => {
                resp.headers_mut().remove("etag");
                resp
            }
            Tamper::Cut(keep) if presigned_get => {
                let (mut parts, body) = resp.into_parts();
                let bytes = axum::body::to_bytes(body, 64 * 1024 * 1024)
                    .await
                    .expect("body");
                parts.headers.remove("content-length");
                Response::from_parts(
                    parts,
                    axum::body::Body::from(bytes.slice(..keep.min(bytes.len()))),
                )
            }
            _ => resp,
        }
    }
    let router = axum::Router::new()
        .fallback(handle)
        .with_state((crate::s3_proxy::relay_client(), how));
    crate::helpers::serve(router).await
}

/// A stray object and an earlier quarantine copy of the same size, other bytes (the second half
/// differs); `reconcile --quarantine` through a proxy lying as `how` says must move nothing.
async fn quarantine_through_a_lying_proxy(how: impl FnOnce(&TestApp, &str) -> Tamper) {
    let app = spawn_app().await;
    let stray = "media/images/stray/lied.png";
    let mut ours = media("image/png", 2000);
    ours[1000..].fill(b'X');
    let mut earlier = ours.clone();
    earlier[1000..].fill(b'Y');
    app.put_object(stray, ours.clone(), "image/png").await;
    let moved = format!("quarantine/{stray}");
    app.put_object(&moved, earlier.clone(), "image/png").await;
    let endpoint = tampering_proxy(how(&app, &moved)).await;
    let out = quarantine_with(&app, &[("UPCOMMIT_S3_ENDPOINT", endpoint)]);
    let body: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(keys(&body, "quarantined").is_empty(), "{body}");
    assert_eq!(app.get_object(stray).await, ours, "{body}");
    assert_eq!(app.get_object(&moved).await, earlier);
}

/// Review 27, round 6: an answer without an ETag (a gateway that drops the header) gave both
/// objects the ETag "", which counted as the same bytes: the source was deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_whose_etags_the_path_drops_are_never_taken_for_the_same() {
    quarantine_through_a_lying_proxy(|_, _| Tamper::StripEtag).await;
}

/// Review 27, round 6: a GET answered with another object's body (a cache serving signed URLs)
/// was compared as if it were the source's. Each answer must name the ETag its HEAD read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_answered_with_another_objects_body_is_no_evidence() {
    quarantine_through_a_lying_proxy(|app, moved| {
        Tamper::ServeObject(app.s3.clone(), app.bucket.clone(), moved.to_owned())
    })
    .await;
}

/// Review 27, round 5: the comparison with an earlier quarantine copy took two bodies cut at
/// the same point for the same bytes, and the source — other bytes — was deleted. Both must
/// now deliver the size their HEADs reported: here every GET is cut after 1,000 of 2,000 bytes,
/// the two differ only after that, and nothing is moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comparison_cut_short_never_counts_as_the_same_bytes() {
    quarantine_through_a_lying_proxy(|_, _| Tamper::Cut(1000)).await;
}

/// Review 27, round 5: a key with `..` segments was compared through a URL whose path lost
/// them, reading another key. Such a key is not compared, so never counted as the same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_with_dot_segments_is_never_compared_through_a_url() {
    let app = spawn_app().await;
    let stray = "media/images/stray/../dots.png";
    let ours = media("image/png", 2000);
    let mut earlier = ours.clone();
    earlier[1500..].fill(b'Y');
    app.put_object(stray, ours.clone(), "image/png").await;
    let moved = format!("quarantine/{stray}");
    app.put_object(&moved, earlier.clone(), "image/png").await;
    let body = quarantine_run(&app);
    assert!(keys(&body, "quarantined").is_empty(), "{body}");
    let reasons = body["items"].to_string();
    assert!(reasons.contains("`..` segments"), "{body}");
    assert_eq!(app.get_object(stray).await, ours);
    assert_eq!(app.get_object(&moved).await, earlier);
}
