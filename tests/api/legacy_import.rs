//! `upcommit legacy import`, run as the real binary against LocalStack and the test database:
//! objects written with raw S3 PUTs in the layout that predates `tmp/`, then dry run, import,
//! rerun, refusals, resumption after a crash, and the lease against a second operator.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::helpers::{error_code, media, spawn_app_with, Spawn, TestApp};

const PATTERN: &str = "uploads/{owner}/*";

async fn legacy_app(extra: &[(&'static str, &str)]) -> TestApp {
    let mut env = vec![("UPCOMMIT_LEGACY_PREFIXES", "uploads/".to_owned())];
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await
}

struct Run {
    code: i32,
    body: Value,
    stderr: String,
}

fn cli(app: &TestApp, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["legacy", "import", "--json"])
        .args(args)
        .envs(&app.env)
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit legacy import");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    Run {
        code: out.status.code().unwrap_or(-1),
        body: serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stderr: format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
    }
}

fn by_pattern(app: &TestApp, extra: &[&str]) -> Run {
    by_pattern_with(app, extra, &[])
}

/// [`by_pattern`] with `env` added to the server's environment.
fn by_pattern_with(app: &TestApp, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let mut args = vec!["--owner-pattern", PATTERN, "--profile", "image"];
    args.extend_from_slice(extra);
    cli(app, &args, env)
}

/// The text report (no `--json`) of `upcommit legacy import <args>`.
fn text_report(app: &TestApp, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["legacy", "import"])
        .args(args)
        .envs(&app.env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit legacy import");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes a 40-byte PNG at each of `keys` with a raw S3 PUT, as the uploader before `tmp/` did.
async fn legacy_pngs(app: &TestApp, keys: &[&str]) {
    for k in keys {
        app.put_object(k, media("image/png", 40), "image/png").await;
    }
}

/// An owners CSV holding `text`, in a directory that lives as long as the guard; (guard, path).
fn owners_csv(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("owners.csv");
    std::fs::write(&csv, text).expect("csv");
    let path = csv.to_str().expect("utf-8").to_owned();
    (dir, path)
}

fn keys(body: &Value, action: &str) -> BTreeSet<String> {
    body["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|i| i["action"] == action)
                .map(|i| i["key"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn reason(body: &Value, key: &str) -> String {
    body["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["key"] == key))
        .and_then(|i| i["reason"].as_str())
        .unwrap_or("<no item>")
        .to_owned()
}

fn set(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

async fn handles(app: &TestApp) -> Vec<String> {
    app.db
        .strings("SELECT key || ' ' || created_by FROM file_handles ORDER BY key")
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_lists_what_it_would_import_skip_and_refuse_and_changes_nothing() {
    let app = legacy_app(&[]).await;
    legacy_pngs(&app, &["uploads/alice/a.png"]).await;
    app.put_object("uploads/bob/b.jpg", media("image/jpeg", 50), "image/jpeg")
        .await;
    legacy_pngs(&app, &["uploads/loose.png"]).await;
    app.put_object("uploads/carol/notes.txt", b"hello".to_vec(), "text/plain")
        .await;
    let before = app.keys().await;

    let run = by_pattern(&app, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s = &run.body["summary"];
    assert_eq!(s["dry_run"], true, "{s}");
    assert_eq!(s["keys_listed"], 4, "{s}");
    assert_eq!(s["imported"], 2, "{s}");
    assert_eq!(s["refused"], 2, "{s}");
    assert_eq!(s["refusals"]["pattern_mismatch"], 1, "{s}");
    assert_eq!(s["refusals"]["content_type_not_allowed"], 1, "{s}");
    assert_eq!(
        keys(&run.body, "would_import"),
        set(&["uploads/alice/a.png", "uploads/bob/b.jpg"])
    );
    assert!(reason(&run.body, "uploads/loose.png").starts_with("pattern_mismatch"));

    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0);
    assert_eq!(app.keys().await, before, "nothing in the bucket changed");
    // `--dry-run` says the same thing out loud; the text report too.
    let explicit = by_pattern(&app, &["--dry-run"]);
    assert_eq!(
        explicit.body["summary"]["imported"], 2,
        "{}",
        explicit.stderr
    );
    let text = text_report(&app, &["--owner-pattern", PATTERN, "--profile", "image"]);
    assert!(
        text.contains("(dry run: nothing changed; --yes imports)"),
        "{text}"
    );
    assert!(text.contains("would import 2"), "{text}");
    assert!(
        text.contains("refused (content_type_not_allowed 1, pattern_mismatch 1)"),
        "{text}"
    );
    assert!(text.contains("would_import  uploads/alice/a.png"), "{text}");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_commits_each_key_in_place_for_its_owner_uncharged_and_a_rerun_imports_nothing() {
    let app = legacy_app(&[]).await;
    let png = media("image/png", 40);
    app.put_object("uploads/alice/2019/a.png", png.clone(), "image/png")
        .await;
    app.put_object("uploads/bob/b.jpg", media("image/jpeg", 50), "image/jpeg")
        .await;
    let before = app.keys().await;

    let run = by_pattern(&app, &["--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s = &run.body["summary"];
    assert_eq!(
        (s["imported"].clone(), s["committed"].clone()),
        (2.into(), 2.into()),
        "{s}"
    );
    assert_eq!(
        handles(&app).await,
        vec!["uploads/alice/2019/a.png alice", "uploads/bob/b.jpg bob"]
    );
    assert_eq!(
        app.keys().await,
        before,
        "committed in place: no copy, nothing moved"
    );
    assert_eq!(app.versions("uploads/alice/2019/a.png").await, 1);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM quota_usage WHERE uploads > 0 OR bytes > 0")
            .await,
        0,
        "imported uploads are not charged to anyone's quota"
    );

    // The owner reads it through the API; nobody else does.
    let id = app
        .db
        .strings("SELECT id FROM file_handles WHERE created_by = 'alice'")
        .await
        .remove(0);
    let (_, body) = app.download(&id, &app.token("alice")).await;
    assert_eq!(body.bytes().await.expect("bytes").to_vec(), png);
    assert_eq!(
        error_code(
            app.get(&format!("/v1/files/{id}"), Some(&app.token("bob")))
                .await
        )
        .await,
        (404, "file_not_found".to_owned())
    );
    // A client's commit of the same key answers with the handle the import recorded.
    let again = app
        .commit(&app.token("alice"), "uploads/alice/2019/a.png", None)
        .await;
    assert_eq!(again.status(), 200);

    let rerun = by_pattern(&app, &["--yes"]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    assert_eq!(rerun.body["summary"]["imported"], 0, "{}", rerun.body);
    assert_eq!(rerun.body["summary"]["skipped"], 2, "{}", rerun.body);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 2);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_the_checks_refuse_is_reported_with_the_code_and_left_untouched() {
    let app = legacy_app(&[]).await;
    // Declared a PNG, but the bytes are not one: the commit's sniff refuses it.
    let fake = b"this is not a png at all".to_vec();
    app.put_object("uploads/alice/fake.png", fake.clone(), "image/png")
        .await;
    app.put_object("uploads/alice/notes.txt", b"notes".to_vec(), "text/plain")
        .await;
    app.put_object(
        "uploads/alice/big.png",
        media("image/png", 2000),
        "image/png",
    )
    .await;
    legacy_pngs(&app, &["uploads/alice/ok.png"]).await;
    // The operator's profile allows images up to 1,000 bytes.
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("upcommit.toml");
    std::fs::write(
        &config,
        "[[profiles]]\nname = \"image\"\ncontent_types = [\"image/png\"]\nmax_size = 1000\nfinal_prefix = \"media/images/\"\n",
    )
    .expect("config");
    let config = config.to_str().expect("utf-8").to_owned();

    let run = by_pattern_with(&app, &["--yes"], &[("UPCOMMIT_CONFIG", &config)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s = &run.body["summary"];
    assert_eq!(s["committed"], 1, "{s}");
    assert_eq!(s["refused"], 3, "{s}");
    assert!(reason(&run.body, "uploads/alice/fake.png").starts_with("content_mismatch"));
    assert!(reason(&run.body, "uploads/alice/notes.txt").starts_with("content_type_not_allowed"));
    assert!(reason(&run.body, "uploads/alice/big.png").starts_with("size_too_large"));
    assert_eq!(
        app.db
            .strings("SELECT state || ' ' || COALESCE(reject_code, '') FROM uploads WHERE key = 'uploads/alice/fake.png'")
            .await,
        vec!["rejected content_mismatch"],
        "the commit's own rejection, recorded"
    );
    assert_eq!(handles(&app).await, vec!["uploads/alice/ok.png alice"]);

    // Left in place, untouched, also after the sweep that clears settled uploads' objects.
    app.sweep_after_urls_expire().await;
    assert_eq!(app.get_object("uploads/alice/fake.png").await, fake);
    assert_eq!(app.versions("uploads/alice/fake.png").await, 1);
    for k in ["uploads/alice/notes.txt", "uploads/alice/big.png"] {
        assert!(app.object_exists(k).await, "{k}");
    }
    // The runbook's check: reconcile finds exactly the refused keys unrecorded, nothing missing.
    let check = crate::reconcile::reconcile_cli(&app, &[]);
    assert_eq!(check.code, 0, "{}", check.body);
    assert_eq!(
        crate::reconcile::keys(&check.body, "unindexed"),
        set(&[
            "uploads/alice/big.png",
            "uploads/alice/fake.png",
            "uploads/alice/notes.txt"
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_outside_the_legacy_prefixes_or_under_tmp_are_never_imported() {
    let app = legacy_app(&[]).await;
    legacy_pngs(
        &app,
        &[
            "media/images/x/stray.png",
            "tmp/2026/11/01/0000000000000000000000000a/x.png",
            "other/alice/x.png",
            "uploads/alice/in.png",
        ],
    )
    .await;
    // A --prefix outside the legacy prefixes is refused up front.
    let run = by_pattern(&app, &["--prefix", "other/", "--yes"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("not within any legacy prefix"),
        "{}",
        run.stderr
    );

    // A CSV that names them does not make them eligible.
    let (_dir, csv) = owners_csv(
        "key,owner,profile\nmedia/images/x/stray.png,alice,image\ntmp/2026/11/01/0000000000000000000000000a/x.png,alice,image\nother/alice/x.png,alice,image\nuploads/alice/in.png,alice,image\n",
    );
    let run = cli(&app, &["--owners", &csv, "--yes"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        keys(&run.body, "refused"),
        set(&[
            "media/images/x/stray.png",
            "tmp/2026/11/01/0000000000000000000000000a/x.png",
            "other/alice/x.png"
        ])
    );
    assert!(reason(&run.body, "other/alice/x.png").starts_with("key_outside_legacy_prefixes"));
    assert_eq!(handles(&app).await, vec!["uploads/alice/in.png alice"]);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csv_maps_owners_and_its_bad_rows_are_refused_never_guessed() {
    let app = legacy_app(&[]).await;
    for k in [
        "uploads/a/1.png",
        "uploads/b/2.mp3",
        "uploads/c/3.png",
        "uploads/d/4.png",
        "uploads/e/5.png",
        "uploads/f/6.png",
    ] {
        let (ct, bytes) = if k.ends_with(".mp3") {
            ("audio/mpeg", media("audio/mpeg", 60))
        } else {
            ("image/png", media("image/png", 40))
        };
        app.put_object(k, bytes, ct).await;
    }
    let (_dir, path) = owners_csv(
        "\u{feff}key,owner,profile\r\n\
         uploads/a/1.png,alice\r\n\
         \"uploads/b/2.mp3\",bob,recording\n\
         uploads/c/3.png, carol\n\
         uploads/d/4.png,dave,video\n\
         uploads/e/5.png,erin\n\
         uploads/e/5.png,eve\n\
         uploads/z/0.png\n",
    );

    let run = cli(
        &app,
        &["--owners", &path, "--profile", "image", "--yes"],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        handles(&app).await,
        vec!["uploads/a/1.png alice", "uploads/b/2.mp3 bob"]
    );
    assert!(
        reason(&run.body, "uploads/c/3.png").starts_with("mapping_invalid"),
        "{}",
        run.body
    );
    assert!(reason(&run.body, "uploads/d/4.png").starts_with("profile_unknown"));
    assert!(reason(&run.body, "uploads/e/5.png").starts_with("owner_ambiguous"));
    assert!(reason(&run.body, "uploads/f/6.png").starts_with("owner_unmapped"));
    assert!(
        reason(&run.body, "uploads/z/0.png").contains("line 8"),
        "{}",
        run.body
    );
    assert_eq!(run.body["summary"]["refused"], 5, "{}", run.body);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 2);

    // Without its header the file is not read at all.
    std::fs::write(&path, "uploads/c/3.png,carol\n").expect("csv");
    let run = cli(
        &app,
        &["--owners", &path, "--profile", "image", "--yes"],
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("header"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_commit_records_uploads_that_a_later_run_commits() {
    let app = legacy_app(&[]).await;
    legacy_pngs(&app, &["uploads/alice/a.png"]).await;
    let run = by_pattern(&app, &["--yes", "--no-commit"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.body["summary"]["imported"], 1, "{}", run.body);
    assert_eq!(
        app.db.strings("SELECT state FROM uploads").await,
        vec!["issued"]
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0);

    let run = by_pattern(&app, &["--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.body["summary"]["imported"], 0, "{}", run.body);
    assert_eq!(run.body["summary"]["committed"], 1, "{}", run.body);
    assert_eq!(handles(&app).await, vec!["uploads/alice/a.png alice"]);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 1);
}

/// `legacy import --json` by pattern with `--yes` and `extra`, started in the background and
/// holding at its first checkpoint (100 keys judged) until released.
async fn paused_at_checkpoint(app: &TestApp, extra: &[&str]) -> crate::hygiene::Paused {
    let mut args = vec!["legacy", "import", "--json", "--owner-pattern", PATTERN];
    args.extend(["--profile", "image", "--yes"]);
    args.extend_from_slice(extra);
    crate::hygiene::Paused::start_with(app, &args, "legacy_import_checkpoint").await
}

/// More keys than one checkpoint holds.
/// `n` keys imported, each once: a handle and an upload row apiece.
async fn imported_once(app: &TestApp, n: i64) {
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, n);
    let keys = app
        .db
        .count("SELECT COUNT(DISTINCT key) FROM uploads")
        .await;
    assert_eq!(keys, n, "every key imported once");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, n);
}

async fn many_keys(app: &TestApp, n: usize) -> Vec<String> {
    let keys: Vec<String> = (0..n)
        .map(|i| format!("uploads/user{}/{i:04}.png", i % 7))
        .collect();
    let puts = keys
        .iter()
        .map(|k| app.put_object(k, media("image/png", 40), "image/png"));
    futures::future::join_all(puts).await;
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_run_resumes_after_its_checkpoint_and_imports_every_key_once() {
    let app = legacy_app(&[("UPCOMMIT_JOB_LEASE_SECS", "2")]).await;
    let all = many_keys(&app, 130).await;

    // Killed (SIGKILL) right after its first checkpoint: 100 keys judged.
    let crashed = by_pattern_with(
        &app,
        &["--yes"],
        &[("UPCOMMIT_CRASH_AT", "legacy_import_checkpoint")],
    );
    assert_ne!(crashed.code, 0, "{}", crashed.stderr);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 100);
    // Its lease runs out (2 s), as a dead process's does.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let run = by_pattern(&app, &["--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s = &run.body["summary"];
    assert_eq!(s["resumed"], true, "{s}");
    // The totals are the whole run's: the crashed part's 100 keys and the resumed part's 30.
    assert_eq!(s["keys_listed"], 130, "{s}");
    assert_eq!(s["imported"], 130, "{s}");
    assert_eq!(s["committed"], 130, "{s}");
    // The run's report holds the crashed part's items and the rest: each key once.
    let committed: Vec<&Value> = run.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["action"] == "committed")
        .collect();
    assert_eq!(committed.len(), 130, "{}", run.body);
    assert_eq!(
        keys(&run.body, "committed"),
        all.iter().cloned().collect::<BTreeSet<_>>()
    );
    imported_once(&app, 130).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_is_refused_while_the_first_holds_the_lease() {
    let app = legacy_app(&[]).await;
    many_keys(&app, 120).await;
    // The first run holds at its checkpoint.
    let first = paused_at_checkpoint(&app, &[]).await;

    let second = by_pattern(&app, &["--yes"]);
    assert_eq!(second.code, 4, "{}", second.stderr);
    assert!(
        second.stderr.contains("another legacy import is running"),
        "{}",
        second.stderr
    );
    // A dry run reads only: it runs beside.
    assert_eq!(by_pattern(&app, &[]).code, 0);

    let out = first.finish();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 120);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inventory_run_imports_only_what_lies_under_its_prefix() {
    let app = legacy_app(&[]).await;
    legacy_pngs(&app, &["uploads/alice/a.png", "uploads/bob/b.png"]).await;
    let old = "2026-01-01T00:00:00.000Z";
    // In byte order, as S3 Inventory writes them; one key the bucket no longer holds. The
    // import never reads when the inventory was taken, so a manifest that says it oddly is no
    // reason to refuse it (reconcile refuses it: it would trust that time).
    let url = crate::reconcile::inventory_taken(
        &app,
        &[
            ("media/images/x.png", old),
            ("tmp/2026/01/01/abc/old.png", old),
            ("uploads/alice/a.png", old),
            ("uploads/alice/gone.png", old),
            ("uploads/bob/b.png", old),
        ],
        Some("2026-12-02T10:00:00Z".into()),
    )
    .await;

    let run = by_pattern(
        &app,
        &["--inventory", &url, "--prefix", "uploads/alice/", "--yes"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s = &run.body["summary"];
    assert_eq!(s["source"], "inventory", "{s}");
    assert_eq!(s["keys_listed"], 2, "{s}");
    assert_eq!(s["outside_legacy_prefixes"], 3, "{s}");
    assert_eq!(s["committed"], 1, "{s}");
    assert!(reason(&run.body, "uploads/alice/gone.png").starts_with("object_not_uploaded"));
    assert_eq!(handles(&app).await, vec!["uploads/alice/a.png alice"]);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 1);
}

/// Keys in an S3 Inventory are form-encoded (a space as `+` or `%20`, a literal `+` as
/// `%2B`): each is judged as the key it stands for. Read with `+` kept, "my photo.png" was
/// looked for as "my+photo.png" and reported gone; now both spellings of a space meet the same
/// rule (a key with a space is not one a commit accepts) and a literal `+` is imported in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inventory_run_reads_spaces_and_plus_signs_in_keys_as_s3_encodes_them() {
    let app = legacy_app(&[]).await;
    legacy_pngs(
        &app,
        &[
            "uploads/alice/a+b.png",
            "uploads/alice/my photo.png",
            "uploads/alice/x y.png",
        ],
    )
    .await;
    let old = "2026-01-01T00:00:00.000Z";
    let url = crate::reconcile::inventory(
        &app,
        &[
            ("uploads/alice/a%2Bb.png", old),
            ("uploads/alice/my+photo.png", old),
            ("uploads/alice/x%20y.png", old),
        ],
    )
    .await;

    let run = by_pattern(&app, &["--inventory", &url, "--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.body["summary"]["committed"], 1, "{}", run.body);
    for spaced in ["uploads/alice/my photo.png", "uploads/alice/x y.png"] {
        assert!(
            reason(&run.body, spaced).starts_with("key_invalid"),
            "{spaced}: {}",
            run.body
        );
    }
    assert_eq!(handles(&app).await, vec!["uploads/alice/a+b.png alice"]);
}

/// The owner mapping `by_pattern` runs with, as a run's summary records it.
const BY_PATTERN: &str = "--owner-pattern uploads/{owner}/* --profile image";

/// A run left `running` by a crash, with its checkpoint and the summary it last stored.
async fn stopped_run(app: &TestApp, checkpoint: &str, prefixes: &str) -> String {
    stopped_run_with(app, checkpoint, prefixes, BY_PATTERN, true).await
}

async fn stopped_run_with(
    app: &TestApp,
    checkpoint: &str,
    prefixes: &str,
    mapping: &str,
    commit: bool,
) -> String {
    let mut run = upcommit::domain::jobs::JobRun::start(
        "legacy_import",
        false,
        upcommit::domain::records::now(),
    );
    run.checkpoint = Some(checkpoint.to_owned());
    run.summary = Some(
        serde_json::json!({
            "source": "listing",
            "prefixes": serde_json::from_str::<Value>(prefixes).expect("prefixes"),
            "mapping": mapping,
            "commit": commit,
            "keys_listed": 7,
            "skipped": 7,
        })
        .to_string(),
    );
    app.catalog.insert_run(&run).await.expect("run");
    app.catalog
        .update_run(
            &run.id,
            upcommit::domain::jobs::RunState::Running,
            Some(checkpoint),
            run.summary.as_deref().unwrap_or_default(),
            upcommit::domain::records::now(),
        )
        .await
        .expect("summary");
    run.id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_run_over_the_same_keys_is_resumed_and_one_over_others_is_not() {
    let app = legacy_app(&[]).await;
    legacy_pngs(&app, &["uploads/alice/a.png", "uploads/zed/z.png"]).await;
    let stopped = stopped_run(&app, "uploads/m", r#"["uploads/"]"#).await;

    // Over alice's keys only: the stopped run's checkpoint would skip them all.
    let narrow = by_pattern(&app, &["--prefix", "uploads/alice/", "--yes"]);
    assert_eq!(narrow.code, 0, "{}", narrow.stderr);
    assert_eq!(narrow.body["summary"]["resumed"], false, "{}", narrow.body);
    assert_ne!(narrow.body["run"]["id"], stopped.as_str());
    assert_eq!(handles(&app).await, vec!["uploads/alice/a.png alice"]);
    assert_eq!(
        app.db
            .strings(&format!(
                "SELECT state FROM job_runs WHERE id = '{stopped}'"
            ))
            .await,
        vec!["failed"],
        "closed, so it is not resumed by a later run either"
    );

    // Over the same keys: resumed after its checkpoint (alice's key sorts before it).
    let again = stopped_run(&app, "uploads/m", r#"["uploads/"]"#).await;
    let run = by_pattern(&app, &["--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.body["run"]["id"], again.as_str());
    assert_eq!(run.body["summary"]["resumed"], true, "{}", run.body);
    // Its totals go on from the stopped run's (7 listed and skipped before the checkpoint).
    assert_eq!(run.body["summary"]["keys_listed"], 8, "{}", run.body);
    assert_eq!(run.body["summary"]["skipped"], 7, "{}", run.body);
    assert_eq!(keys(&run.body, "committed"), set(&["uploads/zed/z.png"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_profile_is_never_imported_in_place() {
    // A temporary profile's files live only under `temp/<N>d/`, where its lifecycle rule ends
    // them: a legacy key committed in place would be neither expired nor looked after.
    let app = spawn_app_with(Spawn {
        config: Some(
            r#"
            [[profiles]]
            name = "export"
            content_types = ["image/png"]
            max_size = 1000000
            final_prefix = "exports/"
            temporary_ttl = "7d"
            "#
            .to_owned(),
        ),
        env: vec![("UPCOMMIT_LEGACY_PREFIXES", "uploads/".to_owned())],
        ..Spawn::default()
    })
    .await;
    legacy_pngs(&app, &["uploads/alice/a.png"]).await;
    let before = app.keys().await;

    let run = cli(
        &app,
        &["--owner-pattern", PATTERN, "--profile", "export", "--yes"],
        &[],
    );

    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.body["summary"]["refused"], 1, "{}", run.body);
    assert!(
        reason(&run.body, "uploads/alice/a.png").starts_with("profile_temporary"),
        "{}",
        run.body
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0);
    assert_eq!(app.keys().await, before, "the object is left as it was");
}

/// Runs `sql` on the test database with `$1` a time and `$2` a key; how many rows it changed.
async fn update_at(app: &TestApp, sql: &str, at: chrono::DateTime<chrono::Utc>, key: &str) -> u64 {
    match &app.db {
        crate::helpers::TestDb::Sqlite(p) => sqlx::query(sql)
            .bind(at)
            .bind(key)
            .execute(p)
            .await
            .map(|r| r.rows_affected()),
        crate::helpers::TestDb::Postgres(p) => sqlx::query(sql)
            .bind(at)
            .bind(key)
            .execute(p)
            .await
            .map(|r| r.rows_affected()),
    }
    .expect("update")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inventory_out_of_byte_order_or_with_a_key_twice_is_refused_before_it_imports() {
    let app = legacy_app(&[]).await;
    legacy_pngs(
        &app,
        &["uploads/a/1.png", "uploads/b/1.png", "uploads/c/1.png"],
    )
    .await;
    let old = "2026-01-01T00:00:00.000Z";
    // Two inventory files the wrong way round: b, c, then a. Before the fix a dry run accepted
    // it, and a resume after a checkpoint in "b" skipped "a" as judged.
    let url = crate::reconcile::inventory(
        &app,
        &[
            ("uploads/b/1.png", old),
            ("uploads/c/1.png", old),
            ("uploads/a/1.png", old),
        ],
    )
    .await;
    let dry = by_pattern(&app, &["--inventory", &url]);
    assert_eq!(dry.code, 3, "{}", dry.stderr);
    assert_eq!(dry.body["run"]["state"], "refused", "{}", dry.body);
    let error = dry.body["summary"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("byte order") && error.contains("uploads/a/1.png"),
        "{error}"
    );
    // A resumed run whose checkpoint lies past "a" is refused too, never skips it.
    stopped_run(&app, "uploads/b/1.png", r#"["uploads/"]"#).await;
    let run = by_pattern(&app, &["--inventory", &url, "--yes"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);

    // A key listed twice is out of order as well: no bogus failures, nothing imported.
    let url = crate::reconcile::inventory(
        &app,
        &[
            ("uploads/a/1.png", old),
            ("uploads/b/1.png", old),
            ("uploads/b/1.png", old),
        ],
    )
    .await;
    let run = by_pattern(&app, &["--inventory", &url, "--yes"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.body["summary"]["failed"], 0, "{}", run.body);
    assert!(
        run.body["summary"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("byte order")),
        "{}",
        run.body
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_run_under_other_owners_is_not_resumed_and_every_key_is_judged_again() {
    let app = legacy_app(&[("UPCOMMIT_JOB_LEASE_SECS", "2")]).await;
    let all = many_keys(&app, 130).await;
    let table = |all_users: bool| {
        let mut text = "key,owner\n".to_owned();
        for (i, k) in all.iter().enumerate() {
            if all_users || i % 7 < 4 {
                text.push_str(&format!("{k},user{}\n", i % 7));
            }
        }
        text
    };
    let (_dir, path) = owners_csv(&table(false));
    let args = ["--owners", path.as_str(), "--profile", "image", "--yes"];
    let crashed = cli(
        &app,
        &args,
        &[("UPCOMMIT_CRASH_AT", "legacy_import_checkpoint")],
    );
    assert_ne!(crashed.code, 0, "{}", crashed.stderr);
    let first = app.db.count("SELECT COUNT(*) FROM file_handles").await;
    assert!(first < 100, "the first CSV maps only some keys: {first}");
    tokio::time::sleep(Duration::from_secs(3)).await;

    // The same path, other content (every key mapped): not the stopped run's options.
    std::fs::write(&path, table(true)).expect("csv");
    let run = cli(&app, &args, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s = &run.body["summary"];
    assert_eq!(s["resumed"], false, "{s}");
    assert_eq!(s["keys_listed"], 130, "{s}");
    assert_eq!(s["refused"], 0, "{s}");
    assert_eq!(s["skipped"], first, "{s}");
    assert_eq!(s["committed"].as_i64(), Some(130 - first), "{s}");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 130);

    // Other `--no-commit` or another profile than the stopped run's: not resumed either.
    for (mapping, commit) in [
        (BY_PATTERN, false),
        ("--owner-pattern uploads/{owner}/* --profile video", true),
    ] {
        let stopped =
            stopped_run_with(&app, "uploads/zzz", r#"["uploads/"]"#, mapping, commit).await;
        let run = by_pattern(&app, &["--yes"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.body["summary"]["resumed"], false, "{}", run.body);
        assert_ne!(run.body["run"]["id"], stopped.as_str());
        assert_eq!(run.body["summary"]["keys_listed"], 130, "{}", run.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_csv_row_whose_quote_is_left_open_is_refused_never_read_across_lines() {
    let app = legacy_app(&[]).await;
    legacy_pngs(
        &app,
        &["uploads/x/k5.png", "uploads/x/k6.png", "uploads/x/k7.png"],
    )
    .await;
    let (_dir, path) = owners_csv(
        "key,owner\n\
         uploads/x/k5.png,\"dave\nsomething else\",more\n\
         uploads/x/k6.png,\"erin\n\
         uploads/x/k7.png,\"frank\"\n",
    );
    let run = cli(&app, &["--owners", &path, "--profile", "image"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        keys(&run.body, "would_import"),
        set(&["uploads/x/k7.png"]),
        "{}",
        run.body
    );
    for (key, line) in [("uploads/x/k5.png", 2), ("uploads/x/k6.png", 4)] {
        let why = reason(&run.body, key);
        assert!(
            why.starts_with("mapping_invalid") && why.contains(&format!("line {line}")),
            "{key}: {why}"
        );
    }
    // The line the open quote ran on into is refused too, not read as a row of its own.
    assert_eq!(
        run.body["summary"]["refusals"]["mapping_invalid"], 3,
        "{}",
        run.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_checkpoints_and_gives_the_lease_back_so_a_rerun_resumes_at_once() {
    // The default lease (300 s): a rerun that had to wait for it would exit 4.
    let app = legacy_app(&[]).await;
    many_keys(&app, 120).await;
    let first = paused_at_checkpoint(&app, &["--concurrency", "1"]).await;
    let sent = Command::new("kill")
        .args(["-INT", &first.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(sent.success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let out = first.finish();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 100);

    let run = by_pattern(&app, &["--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.body["summary"]["resumed"], true, "{}", run.body);
    assert_eq!(run.body["summary"]["keys_listed"], 120, "{}", run.body);
    assert_eq!(run.body["summary"]["committed"], 120, "{}", run.body);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 120);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_a_kill_cut_off_is_committed_by_the_rerun_and_a_live_one_is_left_to_retry() {
    let app = legacy_app(&[]).await;
    legacy_pngs(&app, &["uploads/alice/cut.png", "uploads/bob/live.png"]).await;
    let run = by_pattern(&app, &["--yes", "--no-commit"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // As a run killed mid-commit leaves them: `promoting`, the final key held, no handle; one
    // lease ran out, the other is still alive (another commit of it is running).
    let promoting = "UPDATE uploads SET state = 'promoting', lease_token = 'killed', \
                     lease_until = $1, final_key = key WHERE key = $2";
    let now = chrono::Utc::now();
    let past = now - chrono::Duration::minutes(5);
    let future = now + chrono::Duration::hours(1);
    assert_eq!(
        update_at(&app, promoting, past, "uploads/alice/cut.png").await,
        1
    );
    assert_eq!(
        update_at(&app, promoting, future, "uploads/bob/live.png").await,
        1
    );

    // The commit waits for a live lease at most until the request timeout (less 2 s).
    let run = by_pattern_with(&app, &["--yes"], &[("UPCOMMIT_REQUEST_TIMEOUT_SECS", "3")]);
    assert_eq!(
        run.code, 1,
        "a key to retry is not a finished import: {}",
        run.stderr
    );
    let s = &run.body["summary"];
    assert_eq!(s["skipped"], 0, "{s}");
    assert_eq!(s["committed"], 1, "{s}");
    assert_eq!(s["retry_later"], 1, "{s}");
    assert_eq!(
        keys(&run.body, "committed"),
        set(&["uploads/alice/cut.png"])
    );
    assert!(reason(&run.body, "uploads/bob/live.png").starts_with("commit_in_progress"));
    assert_eq!(handles(&app).await, vec!["uploads/alice/cut.png alice"]);

    // Once that lease runs out, a rerun takes the commit over.
    assert_eq!(
        update_at(&app, promoting, past, "uploads/bob/live.png").await,
        1
    );
    let run = by_pattern(&app, &["--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.body["summary"]["committed"], 1, "{}", run.body);
    assert_eq!(
        handles(&app).await,
        vec!["uploads/alice/cut.png alice", "uploads/bob/live.png bob"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_commit_import_past_its_commit_deadline_is_still_committed_by_a_rerun() {
    let app = legacy_app(&[]).await;
    legacy_pngs(&app, &["uploads/alice/a.png"]).await;
    let run = by_pattern(&app, &["--yes", "--no-commit"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Months later: the deadline an import records is long past.
    let past = chrono::Utc::now() - chrono::Duration::days(90);
    let sql = "UPDATE uploads SET commit_deadline = $1 WHERE key = $2";
    assert_eq!(update_at(&app, sql, past, "uploads/alice/a.png").await, 1);

    let run = by_pattern(&app, &["--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.body["summary"]["refused"], 0, "{}", run.body);
    assert_eq!(run.body["summary"]["committed"], 1, "{}", run.body);
    assert_eq!(handles(&app).await, vec!["uploads/alice/a.png alice"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_text_report_escapes_control_characters_in_keys() {
    let app = legacy_app(&[]).await;
    // In an inventory a key is URL-encoded: ESC [2J (clear the screen), a line break that would
    // forge a report line. Neither object exists: each is reported as refused.
    let url = crate::reconcile::inventory(
        &app,
        &[
            ("uploads/alice/a%1B%5B2Jb.png", "2026-01-01T00:00:00.000Z"),
            (
                "uploads/bob/x%0A%20%20committed%20uploads/bob/y.png",
                "2026-01-01T00:00:00.000Z",
            ),
        ],
    )
    .await;
    let text = text_report(
        &app,
        &[
            "--owner-pattern",
            PATTERN,
            "--profile",
            "image",
            "--inventory",
            &url,
        ],
    );
    assert!(text.contains("uploads/alice/a\\u{1b}[2Jb.png"), "{text}");
    assert!(text.contains("uploads/bob/x\\u{a}  committed"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(
        !text.lines().any(|l| l.starts_with("  committed")),
        "no forged line: {text}"
    );
    // The JSON report keeps the key as it is.
    let run = by_pattern(&app, &["--inventory", &url]);
    assert!(
        keys(&run.body, "refused").contains("uploads/alice/a\u{1b}[2Jb.png"),
        "{}",
        run.body
    );
}

/// Review 26b: archiving a legacy key (committed in place) removed every older version of it —
/// versions written before upcommit ever saw the key — because the in-place rewrite's cleanup
/// took "every version but the current one" to be its own leftovers. It removes the version it
/// replaced only: the key's earlier history stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archiving_a_legacy_key_keeps_the_versions_written_before_upcommit_saw_it() {
    let app = legacy_hygiene_app().await;
    let key = "uploads/bob/avatar.png";
    app.put_object(key, media("image/png", 2100), "image/png")
        .await;
    app.put_object(key, media("image/png", 2000), "image/png")
        .await;
    assert_eq!(
        app.version_sizes(key).await,
        vec![(2000, false), (2100, false)]
    );
    import_and_archive(&app);
    // The archived copy of the 2,000 bytes, and the 2,100-byte version from before the import.
    assert_eq!(
        app.version_sizes(key).await,
        vec![(2000, false), (2100, false)]
    );
    let (class, _) = crate::hygiene::head_class_and_tags(&app, key).await;
    assert_eq!(class.as_deref(), Some("GLACIER_IR"));
}

/// Review 26c: a legacy key whose current version is already in the archive class (written so,
/// or moved by the bucket's lifecycle) looked like an archival interrupted before its cleanup,
/// and the older version of the same size right behind it was deleted — other bytes, never
/// written by upcommit. Only a version with the current one's ETag (the very bytes a single
/// CopyObject copied) is an interrupted rewrite's leftover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_version_of_other_bytes_survives_archiving_a_key_already_in_the_class() {
    let app = legacy_hygiene_app().await;
    let key = "uploads/bob/x.png";
    app.put_object(key, media("image/png", 2000), "image/png")
        .await;
    let mut other = media("image/png", 2000);
    other[1000] = b'!';
    app.s3
        .put_object()
        .bucket(&app.bucket)
        .key(key)
        .body(other.into())
        .content_type("image/png")
        .storage_class(aws_sdk_s3::types::StorageClass::GlacierIr)
        .send()
        .await
        .expect("put in GLACIER_IR");
    assert_eq!(
        app.version_sizes(key).await,
        vec![(2000, false), (2000, false)]
    );
    import_and_archive(&app);
    assert_eq!(
        app.version_sizes(key).await,
        vec![(2000, false), (2000, false)],
        "the older version is the key's own history"
    );
}

/// A server whose legacy prefix is `uploads/` and whose `image` files hygiene acts on.
async fn legacy_hygiene_app() -> TestApp {
    let mut env = crate::hygiene::hygiene_env(crate::hygiene::DAY);
    env.push(("UPCOMMIT_LEGACY_PREFIXES", "uploads/".to_owned()));
    spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await
}

/// Imports `uploads/<owner>/…` for its owners, then lets hygiene unlink and archive the file.
fn import_and_archive(app: &TestApp) {
    let run = by_pattern(app, &["--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let at = |days| crate::hygiene::in_days(days) + chrono::Duration::seconds(5);
    assert_eq!(
        crate::hygiene::hygiene(app, Some(at(2)))["summary"]["unlinked"],
        1
    );
    let archived = crate::hygiene::hygiene(app, Some(at(3)));
    assert_eq!(archived["summary"]["archived"], 1, "{archived}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_panics_after_a_checkpoint_is_failed_frees_its_lease_and_the_next_imports_every_key_once(
) {
    // The default lease (300 s): only a lease given back lets the next run start at once.
    let app = legacy_app(&[]).await;
    let all = many_keys(&app, 130).await;
    let panicked = by_pattern_with(
        &app,
        &["--yes"],
        &[("UPCOMMIT_PANIC_AT", "legacy_import_checkpoint")],
    );
    assert_eq!(panicked.code, 70, "{}", panicked.stderr);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 100);
    let failed = app
        .db
        .count(
            "SELECT COUNT(*) FROM job_runs WHERE job = 'legacy_import' AND state = 'failed' \
             AND summary LIKE '%the run panicked: UPCOMMIT_PANIC_AT: legacy_import_checkpoint%'",
        )
        .await;
    assert_eq!(
        failed, 1,
        "the panicked run is recorded failed with its message"
    );

    let run = by_pattern(&app, &["--yes"]);
    assert_eq!(run.code, 0, "not busy: {}", run.stderr);
    let s = &run.body["summary"];
    // A panicked run is not resumed: the next judges every key again, and the 100 imported
    // before the panic are found already imported, not imported twice.
    assert_eq!(s["resumed"], false, "{s}");
    assert_eq!(s["keys_listed"], 130, "{s}");
    imported_once(&app, 130).await;
    for key in &all {
        assert!(app.object_exists(key).await, "{key} is still there");
    }
}
