//! Temporary profiles: files with a time to live, committed under `temp/<N>d/`, which the
//! bucket's lifecycle rule expires; their handles answer 410 `file_expired` after `expires_at`,
//! the sweep marks them expired, and hygiene never counts, archives or deletes them.

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use upcommit::config::Settings;
use upcommit::domain::lifecycle::required_rules;
use upcommit::services::sweep::{sweep_at, SweepOutcome, SweepSummary};
use upcommit::storage::{ObjectStore, S3Store};

use crate::helpers::{error_code, put_lifecycle, spawn_app_with, Spawn, TestApp};

const DAY: i64 = 86_400;

/// `image` as built in, tracking links so hygiene acts on it, and `export`, temporary for 7 days
/// (tracking links too: hygiene must leave it alone all the same).
fn profiles(ttl: &str) -> String {
    format!(
        r#"
        [[profiles]]
        name = "image"
        content_types = ["image/png"]
        max_size = 1000000
        final_prefix = "media/images/"
        tracks_links = true

        [[profiles]]
        name = "export"
        content_types = ["image/png"]
        max_size = 1000000
        final_prefix = "exports/"
        tracks_links = true
        temporary_ttl = "{ttl}"
        "#
    )
}

async fn spawn() -> TestApp {
    spawn_app_with(Spawn {
        config: Some(profiles("7d")),
        env: vec![
            ("UPCOMMIT_UNLINKED_GRACE_SECS", DAY.to_string()),
            ("UPCOMMIT_ARCHIVE_AFTER_SECS", DAY.to_string()),
            ("UPCOMMIT_DELETE_AFTER_SECS", (2 * DAY).to_string()),
        ],
        ..Spawn::default()
    })
    .await
}

/// Commits a PNG for alice under `profile`; returns the handle.
async fn file(app: &TestApp, profile: &str) -> Value {
    let (_, h) = app
        .upload_and_commit(&app.token("alice"), profile, "image/png", 300)
        .await;
    h
}

fn id(h: &Value) -> String {
    h["id"].as_str().expect("id").to_owned()
}

fn at(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().expect("timestamp"))
        .expect("RFC 3339")
        .with_timezone(&Utc)
}

async fn sweep(app: &TestApp, now: DateTime<Utc>) -> SweepSummary {
    let settings = Settings::from_sources(Some(&profiles("7d")), &|k| app.env.get(k).cloned())
        .expect("settings");
    let store: Arc<dyn ObjectStore> =
        Arc::new(S3Store::connect(&settings.s3).await.expect("store"));
    match sweep_at(&app.catalog, &store, &settings, false, now)
        .await
        .expect("sweep")
    {
        SweepOutcome::Ran { summary, .. } => {
            assert!(summary.error.is_none(), "sweep failed: {summary:?}");
            *summary
        }
        SweepOutcome::Busy => panic!("sweep busy"),
    }
}

/// Runs the binary: (exit code, stdout, stderr).
fn run(env: &HashMap<String, String>, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(args)
        .envs(env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs the binary: (exit code, stdout then stderr).
fn upcommit(env: &HashMap<String, String>, args: &[&str]) -> (i32, String) {
    let (code, out, err) = run(env, args);
    (code, format!("{out}{err}"))
}

/// Runs the binary for its JSON on stdout.
fn upcommit_json(env: &HashMap<String, String>, args: &[&str]) -> (i32, Value) {
    let (code, out, err) = run(env, args);
    let body = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{args:?} printed JSON ({e}): {out}{err}"));
    (code, body)
}

/// `doctor --json`: (exit code, failed check names, the whole output).
fn doctor(app: &TestApp) -> (i32, Vec<String>, String) {
    let (code, body) = upcommit_json(&app.env, &["doctor", "--json"]);
    let out = body.to_string();
    let failed = body["report"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["ok"] == false)
        .map(|r| r["check"].as_str().expect("check").to_owned())
        .collect();
    (code, failed, out)
}

async fn status(app: &TestApp, h: &Value) -> String {
    let got: Value = app
        .get(
            &format!("/v1/files/{}", id(h)),
            Some(&app.admin_token("root")),
        )
        .await
        .json()
        .await
        .expect("JSON");
    got["status"].as_str().unwrap_or("?").to_owned()
}

async fn get_code(app: &TestApp, path: &str, token: &str) -> (u16, String) {
    error_code(app.get(path, Some(token)).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_file_lives_under_its_ttl_prefix_until_expires_at_then_answers_410() {
    let app = spawn().await;
    let token = app.token("alice");
    let h = file(&app, "export").await;
    let upload_id = h["upload_id"].as_str().expect("upload id");
    let key = h["key"].as_str().expect("key");
    assert!(
        key.starts_with(&format!("temp/7d/exports/{upload_id}/")),
        "{key}"
    );
    assert!(app.object_exists(key).await);
    assert_eq!(
        at(&h["expires_at"]),
        at(&h["created_at"]) + Duration::days(7),
        "{h}"
    );
    let ordinary = file(&app, "image").await;
    assert!(ordinary["key"]
        .as_str()
        .expect("key")
        .starts_with("media/images/"));
    assert!(ordinary.get("expires_at").is_none(), "{ordinary}");

    // Before expiry: served like any file, the same body as the commit's.
    let f = id(&h);
    let got = app.get(&format!("/v1/files/{f}"), Some(&token)).await;
    assert_eq!(got.status(), 200);
    assert_eq!(got.json::<Value>().await.expect("JSON"), h);
    let download = app
        .get(&format!("/v1/files/{f}/content"), Some(&token))
        .await;
    assert_eq!(download.status(), 302);

    // A sweep before the TTL marks nothing.
    let now = Utc::now();
    assert_eq!(
        sweep(&app, now + Duration::days(6)).await.handles_expired,
        0
    );

    // Past expires_at (time moved through the catalog): 410 on every read, before any sweep,
    // for the owner and for an admin alike.
    app.db
        .set_handle_expiry(&f, now - Duration::seconds(1))
        .await;
    let admin = app.admin_token("root");
    for path in [
        format!("/v1/files/{f}"),
        format!("/v1/files/{f}/content"),
        format!("/v1/files/{f}/download-url"),
    ] {
        assert_eq!(
            get_code(&app, &path, &token).await,
            (410, "file_expired".into()),
            "{path}"
        );
        assert_eq!(
            get_code(&app, &path, &admin).await,
            (410, "file_expired".into()),
            "{path}"
        );
    }
    // Nor can a link bring it back.
    let link = app
        .http
        .put(format!("{}/v1/files/{f}/links/post/1", app.address))
        .bearer_auth(&token)
        .send()
        .await
        .expect("PUT link");
    assert_eq!(error_code(link).await, (410, "file_expired".into()));
    let restore = app
        .post_json(
            &format!("/v1/files/{f}/restore"),
            Some(&token),
            &Value::Null,
        )
        .await;
    assert_eq!(error_code(restore).await, (410, "file_expired".into()));

    // The sweep marks it expired, once; the ordinary file is untouched.
    assert_eq!(sweep(&app, Utc::now()).await.handles_expired, 1);
    assert_eq!(sweep(&app, Utc::now()).await.handles_expired, 0);
    let statuses = app
        .db
        .strings("SELECT CASE WHEN expired_at IS NULL THEN status ELSE 'expired' END FROM file_handles ORDER BY key")
        .await;
    assert_eq!(statuses, vec!["available", "expired"]);
    assert_eq!(
        get_code(&app, &format!("/v1/files/{f}"), &token).await,
        (410, "file_expired".into())
    );
    let fine = app
        .get(&format!("/v1/files/{}", id(&ordinary)), Some(&token))
        .await;
    assert_eq!(fine.status(), 200);
    // One file.expired event, for that file, carrying it as it now is; the second sweep
    // announced nothing.
    let expired: Vec<Value> = crate::history::all_events(&app)
        .await
        .into_iter()
        .filter(|e| e["type"] == "file.expired")
        .collect();
    assert_eq!(expired.len(), 1, "{expired:#?}");
    assert_eq!(expired[0]["data"]["id"], f.as_str());
    assert_eq!(expired[0]["data"]["status"], "expired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_marks_temporary_handles_once_their_ttl_has_passed() {
    let app = spawn().await;
    let a = file(&app, "export").await;
    let b = file(&app, "export").await;
    file(&app, "image").await;
    let summary = sweep(&app, at(&b["expires_at"]) + Duration::seconds(1)).await;
    assert_eq!(summary.handles_expired, 2);
    let expired = app
        .db
        .count("SELECT COUNT(*) FROM file_handles WHERE expired_at IS NOT NULL AND expires_at IS NOT NULL")
        .await;
    assert_eq!(expired, 2);
    assert!(at(&a["expires_at"]) <= at(&b["expires_at"]));

    // The storage report counts them apart, their bytes as free.
    let report: Value = app
        .get("/v1/admin/storage-report", Some(&app.admin_token("root")))
        .await
        .json()
        .await
        .expect("JSON");
    let handles: HashMap<String, Value> = report["handles"]
        .as_array()
        .expect("handles")
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().expect("status").to_owned(),
                pair[1].clone(),
            )
        })
        .collect();
    assert_eq!(handles["expired"]["count"], 2, "{report}");
    assert_eq!(handles["available"]["count"], 1, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hygiene_never_counts_archives_or_deletes_a_temporary_file() {
    let app = spawn().await;
    let temp = file(&app, "export").await;
    let ordinary = file(&app, "image").await;
    let hygiene = |days: i64| {
        let when = (Utc::now() + Duration::days(days)).to_rfc3339();
        let (code, body) = upcommit_json(&app.env, &["hygiene", "--json", "--at", &when]);
        assert_eq!(code, 0, "{body}");
        body
    };
    // The export profile says it tracks links; hygiene acts on the ordinary profile only.
    let run = hygiene(2);
    assert_eq!(run["summary"]["unlinked"], 1, "{run}");
    assert_eq!(run["summary"]["profiles"], serde_json::json!(["image"]));
    let run = hygiene(4);
    assert_eq!(run["summary"]["archived"], 1, "{run}");
    let run = hygiene(8);
    assert_eq!(run["summary"]["deleted"], 1, "{run}");

    assert_eq!(status(&app, &ordinary).await, "deleted");
    assert_eq!(status(&app, &temp).await, "available");
    let key = temp["key"].as_str().expect("key");
    assert_eq!(app.versions(key).await, 1, "hygiene left its bytes alone");

    // Even with the profile named in UPCOMMIT_TRACKS_LINKS.
    let mut env = app.env.clone();
    env.insert("UPCOMMIT_TRACKS_LINKS".into(), "image,export".into());
    let when = (Utc::now() + Duration::days(3)).to_rfc3339();
    let (code, run) = upcommit_json(&env, &["hygiene", "--json", "--at", &when]);
    assert_eq!(code, 0, "{run}");
    assert_eq!(run["summary"]["unlinked"], 0, "{run}");
    assert_eq!(run["summary"]["profiles"], serde_json::json!(["image"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_made_ordinary_later_does_not_hand_its_temporary_files_to_hygiene() {
    let app = spawn().await;
    let temp = file(&app, "export").await;
    // The operator drops `temporary_ttl` from the profile, which tracks links: hygiene now acts
    // on the profile, but the files committed under temp/ keep their expires_at and stay the
    // lifecycle rule's.
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("ordinary.toml");
    std::fs::write(&path, profiles("7d").replace("temporary_ttl = \"7d\"", "")).expect("write");
    let mut env = app.env.clone();
    env.insert("UPCOMMIT_CONFIG".into(), path.display().to_string());
    for days in [2, 4, 9] {
        let when = (Utc::now() + Duration::days(days)).to_rfc3339();
        let (code, run) = upcommit_json(&env, &["hygiene", "--json", "--at", &when]);
        assert_eq!(code, 0, "{run}");
        assert_eq!(
            run["summary"]["profiles"],
            serde_json::json!(["image", "export"]),
            "{run}"
        );
        assert_eq!(run["summary"]["unlinked"], 0, "{run}");
    }
    assert_eq!(status(&app, &temp).await, "available");
    assert_eq!(app.versions(temp["key"].as_str().expect("key")).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_is_not_alarmed_by_the_lifecycle_removing_an_expired_file_but_is_by_a_live_one() {
    let app = spawn().await;
    let expired = file(&app, "export").await;
    let live = file(&app, "export").await;
    app.db
        .set_handle_expiry(&id(&expired), Utc::now() - Duration::seconds(1))
        .await;
    // The lifecycle rule's doing for the expired one; a loss for the live one.
    for h in [&expired, &live] {
        app.lose_object(h["key"].as_str().expect("key")).await;
    }
    let run = crate::reconcile::reconcile_cli(&app, &[]);
    assert_eq!(run.body["summary"]["missing"], 1, "{}", run.body);
    assert_eq!(
        crate::reconcile::keys(&run.body, "missing"),
        [live["key"].as_str().expect("key").to_owned()]
            .into_iter()
            .collect()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_cannot_move_a_temporary_file_out_of_its_prefix_nor_an_ordinary_one_into_temp() {
    let app = spawn().await;
    let admin = app.admin_token("root");

    // A temporary upload: any admin key is refused, wherever it points.
    let p = app
        .uploaded(&admin, "export", "image/png", 300, "PUT")
        .await;
    for wanted in [
        "exports/kept.png",
        "media/images/kept.png",
        "keep/forever.png",
        "temp/30d/exports/longer.png",
    ] {
        let code = error_code(app.commit(&admin, &p.key, Some(wanted)).await).await;
        assert!(
            code == (400, "final_key_temporary".into())
                || code == (400, "final_key_reserved".into()),
            "{wanted}: {code:?}"
        );
    }
    assert_eq!(
        error_code(app.commit(&admin, &p.key, Some("exports/kept.png")).await).await,
        (400, "final_key_temporary".into())
    );
    // Still committable, under its pair.
    let ok = app.commit(&admin, &p.key, None).await;
    assert_eq!(ok.status(), 201);
    let h: Value = ok.json().await.expect("JSON");
    assert!(h["key"]
        .as_str()
        .expect("key")
        .starts_with("temp/7d/exports/"));

    // An ordinary upload: no spelling of a temp/ key is accepted.
    let p = app.uploaded(&admin, "image", "image/png", 300, "PUT").await;
    for wanted in [
        "temp/7d/exports/mine.png",
        "temp/1d/x.png",
        "temp/x.png",
        "TEMP/7d/x.png",
        "temp%2F7d/x.png",
        "./temp/7d/x.png",
        "media/../temp/7d/x.png",
    ] {
        assert_eq!(
            error_code(app.commit(&admin, &p.key, Some(wanted)).await).await,
            (400, "final_key_reserved".into()),
            "{wanted}"
        );
    }
    assert_eq!(
        app.keys()
            .await
            .iter()
            .filter(|k| k.starts_with("temp/"))
            .count(),
        1
    );
    // And a user cannot name a key at all.
    let q = app
        .uploaded(&app.token("alice"), "export", "image/png", 300, "PUT")
        .await;
    assert_eq!(
        error_code(
            app.commit(&app.token("alice"), &q.key, Some("exports/x.png"))
                .await
        )
        .await,
        (403, "final_key_forbidden".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_requires_the_temp_rule_of_each_configured_ttl_and_only_then() {
    let app = spawn().await;
    let (code, failed, out) = doctor(&app);
    assert_eq!((code, failed.len()), (0, 0), "{out}");

    // The 7d tier's rule gone from the live bucket: named, with its prefix.
    let without: Vec<_> = required_rules()
        .iter()
        .filter(|r| r.id != "upcommit-temp-7d-expire")
        .cloned()
        .collect();
    put_lifecycle(&app.s3, &app.bucket, &without).await;
    let (code, failed, out) = doctor(&app);
    assert_eq!(code, 1, "{out}");
    assert_eq!(failed, vec!["lifecycle_required_rules".to_owned()], "{out}");
    assert!(out.contains("temp/7d/"), "{out}");

    // A weaker rule (30 days over the 7-day prefix) does not stand in for it.
    let mut weaker = without.clone();
    let mut rule = upcommit::domain::temporary::TtlDays::parse("7d")
        .expect("7d")
        .lifecycle_rule();
    rule.expiration_days = Some(30);
    weaker.push(rule);
    put_lifecycle(&app.s3, &app.bucket, &weaker).await;
    let (code, _, out) = doctor(&app);
    assert_eq!(code, 1, "{out}");

    // apply-lifecycle writes it back.
    let (code, out) = upcommit(&app.env, &["bucket", "apply-lifecycle", "--yes"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(doctor(&app).0, 0);

    // Beside the right rule, one that ends `temp/` after 3 days would delete 7-day files their
    // handles still serve: named, even though the required rule is there.
    let mut early = required_rules().to_vec();
    early.push(upcommit::domain::lifecycle::Rule {
        expiration_days: Some(3),
        noncurrent_expiration_days: Some(1),
        ..upcommit::domain::lifecycle::Rule::new("someone-elses-temp-cleanup", "temp/")
    });
    put_lifecycle(&app.s3, &app.bucket, &early).await;
    let (code, failed, out) = doctor(&app);
    assert_eq!(code, 1, "{out}");
    assert_eq!(failed, vec!["lifecycle_final_prefixes".to_owned()], "{out}");
    assert!(out.contains("someone-elses-temp-cleanup"), "{out}");
    put_lifecycle(&app.s3, &app.bucket, required_rules()).await;
    assert_eq!(doctor(&app).0, 0);

    // A deployment with no temporary profile needs no temp/ rule at all.
    let no_temp: Vec<_> = required_rules()
        .iter()
        .filter(|r| !r.prefix.starts_with("temp/"))
        .cloned()
        .collect();
    put_lifecycle(&app.s3, &app.bucket, &no_temp).await;
    let mut env = app.env.clone();
    env.remove("UPCOMMIT_CONFIG");
    let (code, body) = upcommit_json(&env, &["doctor", "--json"]);
    assert_eq!(code, 0, "{body}");
    assert_eq!(doctor(&app).0, 1, "the temporary deployment still needs it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_ttl_is_refused_at_start_naming_the_profile() {
    let app = spawn().await;
    for (ttl, says) in [
        ("36h", "whole number of days"),
        ("0d", "whole number of days"),
        ("1.5d", "temporary_ttl"),
        ("soon", "not a duration"),
        ("14d", "temp/14d/"),
    ] {
        let err = Settings::from_sources(Some(&profiles(ttl)), &|k| app.env.get(k).cloned())
            .expect_err(ttl)
            .to_string();
        assert!(
            err.contains("profiles.export") && err.contains(says),
            "{ttl}: {err}"
        );
        // The binary refuses to start with it too.
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, profiles(ttl)).expect("write");
        let mut env = app.env.clone();
        env.insert("UPCOMMIT_CONFIG".into(), path.display().to_string());
        let (code, out) = upcommit(&env, &["doctor"]);
        assert_ne!(code, 0, "{ttl}: {out}");
        assert!(out.contains("profiles.export"), "{ttl}: {out}");
    }
    // The tiers the rules file has start.
    for ttl in ["1d", "7d", "30d", "168h"] {
        assert!(
            Settings::from_sources(Some(&profiles(ttl)), &|k| app.env.get(k).cloned()).is_ok(),
            "{ttl}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_a_temporary_file_ends_with_it_and_an_expired_one_cannot_be_copied() {
    let app = spawn().await;
    let h = file(&app, "export").await;
    let alice = app.token("alice");
    let copies = |source: String| {
        app.http
            .post(format!("{}/v1/files/{source}/copies", app.address))
            .bearer_auth(&alice)
            .send()
    };

    // The copy shares the object under `temp/`, which the lifecycle rule ends: so does the copy.
    let resp = copies(id(&h)).await.expect("POST copies");
    assert_eq!(resp.status(), 201);
    let copy: Value = resp.json().await.expect("copy json");
    assert_eq!(copy["key"], h["key"]);
    assert_eq!(at(&copy["expires_at"]), at(&h["expires_at"]));

    // Once the source has expired (the sweep need not have run), it is gone for copies too,
    // and so is the copy itself.
    let past = Utc::now() - Duration::seconds(1);
    app.db.set_handle_expiry(&id(&h), past).await;
    app.db.set_handle_expiry(&id(&copy), past).await;
    let resp = copies(id(&h)).await.expect("POST copies");
    assert_eq!(error_code(resp).await, (410, "file_expired".to_owned()));
    let resp = copies(id(&copy)).await.expect("POST copies");
    assert_eq!(resp.status(), 410);
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM file_handles").await,
        2,
        "no third handle"
    );
}
