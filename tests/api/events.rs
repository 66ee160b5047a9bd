//! Event delivery to a real webhook receiver (`tests/api/webhook_receiver.py`) that verifies
//! every request with the `standardwebhooks` library from PyPI, in the venv
//! `UPCOMMIT_TEST_WEBHOOK_PYTHON` names (scripts/test.sh makes it with
//! `ensure_webhook_receiver_installed`). The receiver can be told to answer 500, be slow, or
//! drop connections; the server is killed with SIGKILL and run as two replicas.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{error_code, server_process, spawn_app_with, Spawn, TestApp};

const DAY: i64 = 86_400;

/// The admin API's webhook collection.
const WEBHOOKS: &str = "/v1/admin/webhooks";

fn secret() -> String {
    upcommit::domain::webhooks::secret_from_key(b"upcommit-events-test-secret-0123")
}

/// The receiver process: killed when dropped.
struct Receiver {
    child: std::process::Child,
    base: String,
    http: reqwest::Client,
}

impl Receiver {
    fn start() -> Self {
        let python = std::env::var("UPCOMMIT_TEST_WEBHOOK_PYTHON").unwrap_or_else(|_| {
            format!(
                "{}/.cache/upcommit/webhook-venv/bin/python",
                std::env::var("HOME").unwrap_or_default()
            )
        });
        let mut child = std::process::Command::new(&python)
            .arg("-c")
            .arg(include_str!("webhook_receiver.py"))
            .arg(secret())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{python}: {e} (set UPCOMMIT_TEST_WEBHOOK_PYTHON to a python with standardwebhooks; scripts/test.sh does)")
            });
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("receiver port");
        let port: u16 = line.trim().parse().expect("a port");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    fn hook(&self) -> String {
        format!("{}/hook", self.base)
    }

    async fn mode(&self, mode: &str, delay: f64) {
        self.control(json!({ "mode": mode, "delay": delay })).await;
    }

    async fn control(&self, body: Value) {
        let resp = self
            .http
            .post(format!("{}/control/mode", self.base))
            .json(&body)
            .send()
            .await
            .expect("control");
        assert_eq!(resp.status(), 200);
    }

    async fn state(&self) -> Value {
        self.http
            .get(format!("{}/control/state", self.base))
            .send()
            .await
            .expect("state")
            .json()
            .await
            .expect("state JSON")
    }

    /// The deliveries the receiver verified so far, in the order they arrived.
    async fn verified(&self) -> Vec<Value> {
        self.state().await["verified"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The verified deliveries once there are at least `n` (panics after `within`).
    async fn wait_for(&self, n: usize, within: Duration) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let verified = self.verified().await;
            if verified.len() >= n {
                return verified;
            }
            assert!(
                started.elapsed() < within,
                "{} of {n} events arrived within {within:?}: {verified:#?}",
                verified.len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The webhook endpoint (environment form, so replicas started from the environment have it
/// too), with quick retries.
fn webhook_env(receiver: &Receiver) -> Vec<(&'static str, String)> {
    vec![
        ("UPCOMMIT_WEBHOOK_URL", receiver.hook()),
        ("UPCOMMIT_WEBHOOK_SECRET", secret()),
        ("UPCOMMIT_WEBHOOK_RETRY_BASE_MS", "100".into()),
        ("UPCOMMIT_WEBHOOK_RETRY_CAP_SECS", "1".into()),
        ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "2".into()),
    ]
}

async fn spawn_with(
    receiver: &Receiver,
    extra: impl IntoIterator<Item = (&'static str, impl Into<String>)>,
) -> TestApp {
    let mut env = webhook_env(receiver);
    env.extend(extra.into_iter().map(|(k, v)| (k, v.into())));
    spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await
}

/// The verified events about `subject` (`data.id` of a file, `data.upload_id` of an upload),
/// in the order they arrived.
fn about<'a>(events: &'a [Value], subject: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["data"]["id"] == subject || e["data"]["upload_id"] == subject)
        .collect()
}

fn types(events: &[&Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Every event id arrived once (the receiver answered 200 once per id) and no change arrived
/// under two ids.
fn assert_once_each(events: &[Value]) {
    let mut ids = HashSet::new();
    let mut changes = HashSet::new();
    for e in events {
        assert!(
            ids.insert(e["id"].as_str().expect("id").to_owned()),
            "{} arrived twice",
            e["id"]
        );
        let change = (
            e["type"].to_string(),
            e["data"]["id"].to_string(),
            e["data"]["upload_id"].to_string(),
            e["data"]["status"].to_string(),
        );
        assert!(changes.insert(change), "one change under two ids: {e}");
    }
}

async fn get_handle(app: &TestApp, id: &str) -> Value {
    app.get(&format!("/v1/files/{id}"), Some(&app.admin_token("root")))
        .await
        .json()
        .await
        .expect("handle")
}

/// Waits until `sql` (a `COUNT(*)`) counts a row; panics with `what` after `within`.
async fn wait_for_a_row(app: &TestApp, sql: &str, within: Duration, what: &str) {
    let started = Instant::now();
    while app.db.count(sql).await == 0 {
        assert!(started.elapsed() < within, "{what}: {sql}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn each_event_the_api_triggers_arrives_once_with_the_api_payload() {
    let receiver = Receiver::start();
    let app = spawn_with(&receiver, crate::multipart::five_mib_parts()).await;
    let token = app.token("alice");

    let (_, committed) = app
        .upload_and_commit(&token, "image", "image/png", 2048)
        .await;
    let file = committed["id"].as_str().expect("id").to_owned();
    let copy = crate::copies::copy(&app, &token, &file, None).await;
    assert_eq!(copy.status(), 201);
    let copy: Value = copy.json().await.expect("copy JSON");

    let mut html = b"<!DOCTYPE html><html></html>".to_vec();
    html.resize(200, b' ');
    let p = app.uploaded_bytes(&token, "image", "image/png", html).await;
    assert_eq!(
        error_code(app.commit(&token, &p.key, None).await).await,
        (422, "content_mismatch".to_owned())
    );

    let started = crate::multipart::start(&app, &token, 12 * 1024 * 1024).await;
    let aborted = app
        .delete(&format!("/v1/uploads/{}", started.id()), Some(&token))
        .await;
    assert_eq!(aborted.status(), 204);

    receiver.wait_for(4, Duration::from_secs(20)).await;
    // Nothing more comes (no second delivery of any of them).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let events = receiver.verified().await;
    assert_eq!(events.len(), 4, "{events:#?}");
    assert_once_each(&events);

    let by_type: BTreeMap<String, &Value> = events
        .iter()
        .map(|e| (e["type"].as_str().unwrap_or("").to_owned(), e))
        .collect();
    assert_eq!(
        by_type["file.committed"]["data"], committed,
        "the handle exactly as the commit returned it"
    );
    assert_eq!(by_type["file.copied"]["data"], copy);
    assert_eq!(by_type["file.copied"]["data"]["copied_from"], file);
    let rejected = &by_type["upload.rejected"]["data"];
    assert_eq!(rejected["upload_id"], p.upload_id);
    assert_eq!(rejected["code"], "content_mismatch");
    assert_eq!(rejected["owner"], "alice");
    assert_eq!(rejected["key"], p.key);
    let aborted = &by_type["multipart.aborted"]["data"];
    assert_eq!(aborted["upload_id"], started.id());
    assert_eq!(aborted["key"], started.key());
    for e in &events {
        // The payload's time is the change's; the header's is the sending's, within the
        // library's five minutes (it checked).
        let header: i64 = e["webhook_timestamp"]
            .as_str()
            .expect("header")
            .parse()
            .expect("seconds");
        assert!((chrono::Utc::now().timestamp() - header).abs() < 60);
        assert!(e["id"].as_str().expect("id").starts_with("evt_"));
    }
    // The feed carries the same ids.
    let feed: Value = app
        .get("/v1/events", Some(&app.admin_token("root")))
        .await
        .json()
        .await
        .expect("feed");
    let feed_ids: HashSet<&str> = feed["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    let got: HashSet<&str> = events.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(feed_ids, got);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE state = 'delivered'")
            .await,
        4
    );
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains(
            "upcommit_event_deliveries_total{endpoint=\"default\",result=\"delivered\"} 4"
        ),
        "{metrics}"
    );

    // Replaying from the first event's cursor sends the three after it again, same ids.
    let first = feed["events"][0]["cursor"]
        .as_str()
        .expect("cursor")
        .to_owned();
    let (code, out) = events_cli(
        &app,
        &[
            "replay",
            "--endpoint",
            "default",
            "--after",
            &first,
            "--dry-run",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("3 events"), "{out}");
    assert_eq!(
        events_cli(
            &app,
            &["replay", "--endpoint", "default", "--after", "x1", "--yes"]
        )
        .await
        .0,
        2
    );
    let (code, out) = events_cli(
        &app,
        &[
            "replay",
            "--endpoint",
            "default",
            "--after",
            &first,
            "--yes",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    let again = receiver.wait_for(7, Duration::from_secs(15)).await;
    let replayed: HashSet<&str> = again[4..].iter().filter_map(|e| e["id"].as_str()).collect();
    let expected: HashSet<&str> = feed["events"].as_array().expect("events")[1..]
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert_eq!(replayed, expected);
}

/// Runs a CLI to its end on a blocking thread. These tests run on one runtime thread, which
/// also runs the server and its background writers: a CLI waited for on that thread would
/// freeze a write transaction the server has open, and the CLI would wait for its lock in turn
/// (`database is locked` after 30 s).
async fn run_cli(mut command: std::process::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || command.output().expect("run upcommit"))
        .await
        .expect("CLI thread")
}

async fn hygiene(app: &TestApp, days: i64) {
    let at = chrono::Utc::now() + chrono::Duration::seconds(days * DAY + 5);
    let out = crate::helpers::hygiene_cli(app, Some(at)).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn a_receiver_failing_for_a_while_gets_every_event_once_in_per_file_order() {
    let receiver = Receiver::start();
    // Down first (connections dropped without an answer), then answering 500.
    receiver.mode("down", 0.0).await;
    let app = spawn_with(&receiver, crate::hygiene::hygiene_env(DAY)).await;
    let token = app.token("alice");
    let (_, kept) = app
        .upload_and_commit(&token, "image", "image/png", 2000)
        .await;
    let (_, gone) = app
        .upload_and_commit(&token, "image", "image/png", 2000)
        .await;
    let kept_id = kept["id"].as_str().expect("id").to_owned();
    let gone_id = gone["id"].as_str().expect("id").to_owned();

    hygiene(&app, 2).await; // both unlinked
                            // From now on only the `file.committed` events are refused: every later event of the same
                            // files must wait behind them.
    receiver
        .control(json!({ "mode": "ok", "fail_types": ["file.committed"] }))
        .await;
    hygiene(&app, 3).await; // both archived
    let restored = app
        .post_json(
            &format!("/v1/files/{kept_id}/restore"),
            Some(&token),
            &Value::Null,
        )
        .await;
    assert_eq!(restored.status(), 200);
    // Linked now, so no later run flags it again.
    let linked = app
        .http
        .put(format!("{}/v1/files/{kept_id}/links/post/1", app.address))
        .bearer_auth(&token)
        .send()
        .await
        .expect("link");
    assert_eq!(linked.status(), 204);
    hygiene(&app, 6).await; // the archived one deleted
    assert_eq!(get_handle(&app, &gone_id).await["status"], "deleted");
    assert_eq!(get_handle(&app, &kept_id).await["status"], "available");

    // Nothing was accepted so far, some deliveries were tried several times, and nothing
    // after a refused `file.committed` was sent.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let failing = receiver.state().await;
    assert!(failing["verified"].as_array().expect("verified").is_empty());
    let attempts = failing["attempts"].as_array().expect("attempts").len();
    assert!(attempts >= 2, "attempts while failing: {failing}");
    let attempted: HashSet<&str> = failing["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert_eq!(
        attempted.len(),
        2,
        "only the two heads were ever sent: {failing}"
    );
    let retried = app
        .db
        .count("SELECT COUNT(*) FROM event_deliveries WHERE state = 'pending' AND attempts > 0 AND last_status = 500")
        .await;
    assert!(
        retried >= 1,
        "failed attempts are counted with their status"
    );

    receiver.mode("ok", 0.0).await;
    receiver.wait_for(8, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let events = receiver.verified().await;
    assert_eq!(events.len(), 8, "{events:#?}");
    assert_once_each(&events);
    let kept_events = about(&events, &kept_id);
    assert_eq!(
        types(&kept_events),
        [
            "file.committed",
            "file.unlinked",
            "file.archived",
            "file.restored"
        ],
        "per-file order"
    );
    let gone_events = about(&events, &gone_id);
    assert_eq!(
        types(&gone_events),
        [
            "file.committed",
            "file.unlinked",
            "file.archived",
            "file.deleted"
        ],
        "per-file order"
    );
    assert_eq!(kept_events[0]["data"], kept);
    for (e, status) in gone_events
        .iter()
        .zip(["available", "unlinked", "archived", "deleted"])
    {
        assert_eq!(
            e["data"]["status"], status,
            "the handle as it was after the change: {e}"
        );
    }
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE state <> 'delivered'")
            .await,
        0
    );
}

#[tokio::test]
async fn a_tampered_signature_is_refused_by_the_library() {
    let receiver = Receiver::start();
    let key = upcommit::domain::webhooks::secret_key(&secret()).expect("key");
    let body = r#"{"type":"file.committed","timestamp":"2026-12-01T10:00:00Z","data":{"id":"f1"}}"#;
    let now = chrono::Utc::now().timestamp();
    let send = |id: &'static str, ts: i64, sig: String, body: &'static str| {
        let http = receiver.http.clone();
        let url = receiver.hook();
        async move {
            http.post(url)
                .header("webhook-id", id)
                .header("webhook-timestamp", ts.to_string())
                .header("webhook-signature", sig)
                .body(body)
                .send()
                .await
                .expect("send")
                .status()
                .as_u16()
        }
    };
    let good = upcommit::domain::webhooks::signature(&key, "evt_good", now, body.as_bytes());
    assert_eq!(
        send("evt_good", now, good.clone(), body).await,
        200,
        "our signature verifies"
    );
    // The same signature over another body, id or time; a signature by another key.
    let tampered =
        r#"{"type":"file.committed","timestamp":"2026-12-01T10:00:00Z","data":{"id":"f2"}}"#;
    assert_eq!(send("evt_body", now, good.clone(), tampered).await, 401);
    assert_eq!(send("evt_other", now, good.clone(), body).await, 401);
    assert_eq!(send("evt_good", now + 1, good.clone(), body).await, 401);
    let other = upcommit::domain::webhooks::signature(&[9u8; 32], "evt_key", now, body.as_bytes());
    assert_eq!(send("evt_key", now, other, body).await, 401);
    let mut flipped = good.into_bytes();
    let last = flipped.len() - 2;
    flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).expect("ascii");
    assert_eq!(send("evt_flip", now, flipped, body).await, 401);
    // An old timestamp, correctly signed, is refused too (replay window).
    let old = now - 3600;
    let sig = upcommit::domain::webhooks::signature(&key, "evt_old", old, body.as_bytes());
    assert_eq!(send("evt_old", old, sig, body).await, 401);
    let state = receiver.state().await;
    assert_eq!(state["verified"].as_array().expect("verified").len(), 1);
    let refused: Vec<&str> = state["refused"]
        .as_array()
        .expect("refused")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(
        refused,
        [
            "evt_body",
            "evt_other",
            "evt_good",
            "evt_key",
            "evt_flip",
            "evt_old"
        ]
    );
}

#[tokio::test]
async fn a_server_killed_before_delivery_delivers_after_restart() {
    let receiver = Receiver::start();
    // The test's own server delivers nothing: only the binary does.
    let app = spawn_with(&receiver, [("UPCOMMIT_WEBHOOK_CONCURRENCY", "0")]).await;
    let binary_env = [
        ("UPCOMMIT_WEBHOOK_CONCURRENCY", "4"),
        // Longer than the test takes to kill it: the first request is still in flight then.
        ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "5"),
        ("RUST_LOG", "warn"),
    ];
    // The receiver hangs: the binary's request is in flight, its lease held, when it dies.
    receiver.mode("slow", 120.0).await;
    let (mut child, base) = server_process(&app, &binary_env, Stdio::null()).await;
    let token = app.token("alice");
    let p = app
        .uploaded(&token, "image", "image/png", 2048, "PUT")
        .await;
    let committed = app.commit_at(&base, &token, &p.key, None).await;
    assert_eq!(committed.status(), 201);
    let committed: Value = committed.json().await.expect("handle");
    wait_for_a_row(
        &app,
        "SELECT COUNT(*) FROM event_deliveries WHERE lease_token IS NOT NULL",
        Duration::from_secs(15),
        "never claimed",
    )
    .await;
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9));
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE state = 'pending'")
            .await,
        1,
        "the outcome was never recorded"
    );

    receiver.mode("ok", 0.0).await;
    let (mut child, _) = server_process(&app, &binary_env, Stdio::null()).await;
    let events = receiver.wait_for(1, Duration::from_secs(20)).await;
    // The receiver has it; the server records the outcome right after (killing it at once raced
    // that write on a busy machine: PostgreSQL, 2026-12-08).
    wait_for_a_row(
        &app,
        "SELECT COUNT(*) FROM event_deliveries WHERE state = 'delivered'",
        Duration::from_secs(15),
        "never recorded as delivered",
    )
    .await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["type"], "file.committed");
    assert_eq!(events[0]["data"], committed);
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM event_deliveries WHERE state = 'delivered' AND attempts = 1"
            )
            .await,
        1,
        "the killed attempt left no outcome; the one after the restart delivered"
    );
}

#[tokio::test]
async fn two_replicas_deliver_each_event_once_without_overlapping_attempts() {
    let receiver = Receiver::start();
    // Small claims, so both replicas' workers take part.
    let app = spawn_with(&receiver, [("UPCOMMIT_WEBHOOK_CONCURRENCY", "2")]).await;
    let other = app.replica().await;
    let token = app.token("alice");
    const FILES: usize = 24;
    let mut uploaded = Vec::new();
    for _ in 0..FILES {
        uploaded.push(app.uploaded(&token, "image", "image/png", 300, "PUT").await);
    }
    let commits = uploaded.iter().enumerate().map(|(i, p)| {
        let base = if i % 2 == 0 {
            app.address.clone()
        } else {
            other.clone()
        };
        let (app, token) = (&app, &token);
        async move {
            let resp = app.commit_at(&base, token, &p.key, None).await;
            assert_eq!(resp.status(), 201);
        }
    });
    futures::future::join_all(commits).await;
    let events = receiver.wait_for(FILES, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let state = receiver.state().await;
    let events_now = state["verified"].as_array().expect("verified");
    assert_eq!(events_now.len(), FILES, "{events:#?}");
    assert_once_each(events_now);
    let mut per_id: HashMap<&str, Vec<(f64, f64)>> = HashMap::new();
    for a in state["attempts"].as_array().expect("attempts") {
        per_id
            .entry(a["id"].as_str().expect("id"))
            .or_default()
            .push((
                a["start"].as_f64().expect("start"),
                a["end"].as_f64().expect("end"),
            ));
    }
    for (id, attempts) in &per_id {
        assert_eq!(attempts.len(), 1, "{id} was sent {} times", attempts.len());
    }
    assert_eq!(per_id.len(), FILES);
}

/// `upcommit events …` against the test's database; (exit code, stdout).
async fn events_cli(app: &TestApp, args: &[&str]) -> (i32, String) {
    let out = events_cli_output(app, args).await;
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// [`events_cli`]'s whole output.
async fn events_cli_output(app: &TestApp, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"));
    command
        .arg("events")
        .args(args)
        .envs(&app.env)
        .env("RUST_LOG", "warn");
    run_cli(command).await
}

/// A server whose hygiene unlinks an untracked `image` file after a day (a second event of the
/// same file), with `extra`; and one such file committed: (app, handle, file id).
async fn spawn_and_commit_a_tracked_file(
    receiver: &Receiver,
    extra: (&'static str, String),
) -> (TestApp, Value, String) {
    let app = spawn_with(
        receiver,
        vec![
            extra,
            ("UPCOMMIT_UNLINKED_GRACE_SECS", DAY.to_string()),
            ("UPCOMMIT_TRACKS_LINKS", "image".into()),
        ],
    )
    .await;
    let token = app.token("alice");
    let (_, committed) = app
        .upload_and_commit(&token, "image", "image/png", 300)
        .await;
    let id = committed["id"].as_str().expect("id").to_owned();
    (app, committed, id)
}

#[tokio::test]
async fn a_delivery_past_its_window_is_kept_failed_blocks_its_file_and_events_retry_sends_it() {
    let receiver = Receiver::start();
    receiver.mode("fail", 0.0).await;
    let (app, committed, id) =
        spawn_and_commit_a_tracked_file(&receiver, ("UPCOMMIT_EVENT_RETRY_WINDOW", "1s".into()))
            .await;
    wait_for_a_row(
        &app,
        "SELECT COUNT(*) FROM event_deliveries WHERE state = 'failed'",
        Duration::from_secs(15),
        "never failed",
    )
    .await;
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE state = 'failed' AND attempts >= 1 AND last_status = 500 AND last_error IS NOT NULL")
            .await,
        1,
        "kept, with why"
    );
    // A later change of the same file waits behind the failed one, even with the receiver up.
    hygiene(&app, 2).await;
    receiver.mode("ok", 0.0).await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let state = receiver.state().await;
    assert!(
        state["verified"].as_array().expect("verified").is_empty(),
        "{state}"
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE state = 'pending' AND attempts = 0")
            .await,
        1,
        "the file.unlinked delivery was never sent"
    );

    // The gauges (read every few seconds) show the blocked file's two deliveries.
    let started = Instant::now();
    loop {
        let metrics = app.metrics_text().await;
        let value = |series: &str| crate::helpers::series_value(&metrics, series);
        if value("upcommit_event_outbox_depth{stage=\"failed\"}") == Some(1.0)
            && value("upcommit_event_outbox_depth{stage=\"pending\"}") == Some(1.0)
        {
            assert!(
                value("upcommit_event_oldest_undelivered_age_seconds").is_some_and(|a| a >= 1.0),
                "{metrics}"
            );
            assert!(metrics.contains(
                "upcommit_event_deliveries_total{endpoint=\"default\",result=\"failed\"} 1"
            ));
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(8), "{metrics}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let (code, out) = events_cli(&app, &["list", "--json"]).await;
    assert_eq!(code, 0, "{out}");
    let list: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(list["endpoints"][0]["id"], "default");
    assert_eq!(list["endpoints"][0]["failed"], 1);
    assert_eq!(list["endpoints"][0]["pending"], 1);
    let (code, out) = events_cli(&app, &["retry", "--endpoint", "default", "--dry-run"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 failed deliveries"), "{out}");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE state = 'failed'")
            .await,
        1,
        "a dry run changes nothing"
    );
    assert_eq!(
        events_cli(&app, &["retry", "--endpoint", "nope", "--yes"])
            .await
            .0,
        3
    );
    assert_eq!(
        events_cli(&app, &["retry", "--endpoint", "default"])
            .await
            .0,
        2,
        "--yes or --dry-run"
    );

    let (code, out) = events_cli(&app, &["retry", "--endpoint", "default", "--yes"]).await;
    assert_eq!(code, 0, "{out}");
    let events = receiver.wait_for(2, Duration::from_secs(15)).await;
    assert_eq!(
        types(&about(&events, &id)),
        ["file.committed", "file.unlinked"]
    );
    assert_eq!(events[0]["data"], committed);
    assert_once_each(&events);
}

#[tokio::test]
async fn a_lease_taken_over_cannot_be_overwritten_by_the_worker_that_lost_it() {
    use upcommit::catalog::FailedAttempt;
    let receiver = Receiver::start();
    // No worker of the server claims anything: the test is the only worker.
    let app = spawn_with(&receiver, [("UPCOMMIT_WEBHOOK_CONCURRENCY", "0")]).await;
    let token = app.token("alice");
    app.upload_and_commit(&token, "image", "image/png", 300)
        .await;
    wait_for_a_row(
        &app,
        "SELECT COUNT(*) FROM event_deliveries",
        Duration::from_secs(10),
        "never sequenced",
    )
    .await;
    let catalog = &app.catalog;
    // Worker A claims with a lease that runs out at once; while it holds a live lease nobody
    // else could claim it.
    let a = catalog
        .claim_deliveries("default", "token-a", 0, 10)
        .await
        .expect("claim");
    assert_eq!(a.len(), 1);
    let position = a[0].position;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let b = catalog
        .claim_deliveries("default", "token-b", 60, 10)
        .await
        .expect("claim");
    assert_eq!(b.len(), 1, "the expired lease is taken over");
    assert_eq!(b[0].event_id, a[0].event_id);
    assert!(
        catalog
            .claim_deliveries("default", "token-c", 60, 10)
            .await
            .expect("claim")
            .is_empty(),
        "a live lease is not"
    );
    // A's late outcomes change nothing.
    assert!(!catalog
        .mark_delivered("default", position, "token-a", 200)
        .await
        .expect("mark"));
    let failed = FailedAttempt {
        status: Some(500),
        error: "late",
        retry_in_ms: 10,
    };
    assert_eq!(
        catalog
            .mark_attempt_failed("default", position, "token-a", &failed)
            .await
            .expect("mark"),
        None
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE state = 'pending' AND attempts = 0 AND lease_token = 'token-b'")
            .await,
        1
    );
    // B's stands.
    assert_eq!(
        catalog
            .mark_attempt_failed("default", position, "token-b", &failed)
            .await
            .expect("mark"),
        Some(false)
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE state = 'pending' AND attempts = 1 AND last_status = 500 AND lease_token IS NULL")
            .await,
        1
    );
    assert!(
        !catalog
            .mark_delivered("default", position, "token-b", 200)
            .await
            .expect("mark"),
        "its lease ended with its outcome"
    );
}

#[tokio::test]
async fn a_slow_endpoint_holds_up_neither_commits_nor_another_endpoint() {
    let slow = Receiver::start();
    let fast = Receiver::start();
    slow.mode("slow", 30.0).await;
    let config = format!(
        "[[events.webhooks]]\nid = \"slow\"\nurl = \"{}\"\nsecret = \"{}\"\ntypes = [\"*\"]\n\n\
         [[events.webhooks]]\nid = \"fast\"\nurl = \"{}\"\nsecret = \"{}\"\ntypes = [\"file.committed\"]\n",
        slow.hook(),
        secret(),
        fast.hook(),
        secret()
    );
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "20".into()),
            ("UPCOMMIT_WEBHOOK_CONCURRENCY", "1".into()),
        ],
        config: Some(config),
        ..Spawn::default()
    })
    .await;
    let token = app.token("alice");
    let mut committed = Vec::new();
    for _ in 0..3 {
        let p = app.uploaded(&token, "image", "image/png", 300, "PUT").await;
        let began = Instant::now();
        let resp = app.commit(&token, &p.key, None).await;
        assert_eq!(resp.status(), 201);
        assert!(
            began.elapsed() < Duration::from_secs(3),
            "commits never wait"
        );
        committed.push(resp.json::<Value>().await.expect("handle"));
    }
    let mut html = b"<!DOCTYPE html><html></html>".to_vec();
    html.resize(200, b' ');
    let p = app.uploaded_bytes(&token, "image", "image/png", html).await;
    assert_eq!(app.commit(&token, &p.key, None).await.status(), 422);

    // The fast endpoint has its three commits (and not the rejection: not subscribed) while
    // the slow one still holds its first request.
    let began = Instant::now();
    let got = fast.wait_for(3, Duration::from_secs(10)).await;
    assert!(began.elapsed() < Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got_now = fast.verified().await;
    assert_eq!(got_now.len(), 3, "{got:#?}");
    let mut data: Vec<Value> = got_now.iter().map(|e| e["data"].clone()).collect();
    data.sort_by_key(|d| d["id"].as_str().unwrap_or("").to_owned());
    committed.sort_by_key(|d| d["id"].as_str().unwrap_or("").to_owned());
    assert_eq!(data, committed);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE endpoint_id = 'slow' AND lease_token IS NOT NULL")
            .await,
        1,
        "the slow endpoint's first request is still in flight"
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE endpoint_id = 'slow' AND state = 'pending'")
            .await,
        4,
        "the slow endpoint's four wait their turn"
    );
}

/// The webhook `id` in a `GET /v1/admin/webhooks` answer.
fn webhook_in<'a>(list: &'a Value, id: &str) -> Option<&'a Value> {
    list["webhooks"]
        .as_array()
        .expect("webhooks")
        .iter()
        .find(|w| w["id"] == id)
}

#[tokio::test]
async fn webhooks_added_through_the_admin_api_show_their_secret_once_and_receive_events() {
    let receiver = Receiver::start();
    // A settings endpoint too (subscribed to something this test never causes).
    let app = spawn_with(&receiver, [("UPCOMMIT_WEBHOOK_TYPES", "multipart.aborted")]).await;
    let root = app.admin_token("root");
    let alice = app.token("alice");
    let good = json!({ "id": "app", "url": receiver.hook(), "types": ["file.committed"] });
    assert_eq!(
        error_code(app.post_json(WEBHOOKS, None, &good).await).await,
        (401, "unauthorized".to_owned())
    );
    assert_eq!(
        error_code(app.post_json(WEBHOOKS, Some(&alice), &good).await).await,
        (403, "admin_required".to_owned())
    );
    for bad in [
        json!({ "id": "app", "url": "ftp://x.example/", "types": ["*"] }),
        json!({ "id": "App", "url": receiver.hook(), "types": ["*"] }),
        json!({ "id": "app", "url": receiver.hook(), "types": ["file.nope"] }),
        json!({ "id": "app", "url": receiver.hook(), "types": [] }),
    ] {
        assert_eq!(
            error_code(app.post_json(WEBHOOKS, Some(&root), &bad).await)
                .await
                .0,
            400,
            "{bad}"
        );
    }
    let text = app
        .http
        .post(format!("{}{WEBHOOKS}", app.address))
        .bearer_auth(&root)
        .header("content-type", "text/plain")
        .body("id=app")
        .send()
        .await
        .expect("POST");
    assert_eq!(text.status(), 415);
    let huge = json!({ "id": "app", "url": format!("{}?{}", receiver.hook(), "x".repeat(70_000)), "types": ["*"] });
    assert_eq!(
        app.post_json(WEBHOOKS, Some(&root), &huge).await.status(),
        413
    );

    let created = app.post_json(WEBHOOKS, Some(&root), &good).await;
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.expect("JSON");
    let secret = created["secret"].as_str().expect("secret").to_owned();
    assert_eq!(
        upcommit::domain::webhooks::secret_key(&secret)
            .expect("a whsec_ secret")
            .len(),
        32
    );
    assert_eq!(created["types"], json!(["file.committed"]));
    assert_eq!(
        error_code(app.post_json(WEBHOOKS, Some(&root), &good).await).await,
        (409, "webhook_exists".to_owned())
    );
    let settings_id = json!({ "id": "default", "url": receiver.hook(), "types": ["*"] });
    assert_eq!(
        error_code(app.post_json(WEBHOOKS, Some(&root), &settings_id).await).await,
        (409, "webhook_exists".to_owned())
    );

    // The receiver knows the new secret; a commit now reaches it, signed with it.
    receiver
        .control(json!({ "mode": "ok", "secret": secret }))
        .await;
    let (_, committed) = app
        .upload_and_commit(&alice, "image", "image/png", 300)
        .await;
    let events = receiver.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(events[0]["data"], committed);
    assert!(receiver.state().await["refused"]
        .as_array()
        .expect("refused")
        .is_empty());

    assert_eq!(app.get(WEBHOOKS, None).await.status(), 401);
    assert_eq!(app.get(WEBHOOKS, Some(&alice)).await.status(), 403);
    let listed = app.get(WEBHOOKS, Some(&root)).await;
    assert_eq!(listed.status(), 200);
    let listed_text = listed.text().await.expect("text");
    assert!(!listed_text.contains("whsec_"), "never a secret again");
    let listed: Value = serde_json::from_str(&listed_text).expect("JSON");
    let app_ep = webhook_in(&listed, "app").expect("app").clone();
    assert_eq!(app_ep["source"], "api");
    assert_eq!(app_ep["enabled"], true);
    assert_eq!(app_ep["types"], json!(["file.committed"]));
    let started = Instant::now();
    loop {
        let l: Value = app
            .get(WEBHOOKS, Some(&root))
            .await
            .json()
            .await
            .expect("JSON");
        let d = webhook_in(&l, "app").map(|w| w["delivered"].clone());
        if d == Some(json!(1)) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{l}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    assert_eq!(
        app.delete("/v1/admin/webhooks/app", None).await.status(),
        401
    );
    assert_eq!(
        app.delete("/v1/admin/webhooks/app", Some(&alice))
            .await
            .status(),
        403
    );
    assert_eq!(
        error_code(app.delete("/v1/admin/webhooks/nope", Some(&root)).await).await,
        (404, "webhook_not_found".to_owned())
    );
    assert_eq!(
        error_code(app.delete("/v1/admin/webhooks/default", Some(&root)).await).await,
        (409, "webhook_from_settings".to_owned())
    );
    assert_eq!(
        app.delete("/v1/admin/webhooks/app", Some(&root))
            .await
            .status(),
        204
    );
    assert_eq!(
        app.delete("/v1/admin/webhooks/app", Some(&root))
            .await
            .status(),
        204,
        "idempotent"
    );
    // Disabled: later events are not fanned out to it.
    app.upload_and_commit(&alice, "image", "image/png", 300)
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        receiver.state().await["verified"]
            .as_array()
            .expect("verified")
            .len(),
        1
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM event_deliveries WHERE endpoint_id = 'app'")
            .await,
        1
    );
}

#[tokio::test]
async fn redirects_are_not_followed_and_slow_answers_time_out_as_failed_attempts() {
    let receiver = Receiver::start();
    receiver.mode("redirect", 0.0).await;
    let app = spawn_with(&receiver, [("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "1")]).await;
    let token = app.token("alice");
    app.upload_and_commit(&token, "image", "image/png", 300)
        .await;
    let wait_for_row =
        |sql: &'static str| wait_for_a_row(&app, sql, Duration::from_secs(15), "never");
    // A 307 is a failed attempt (a followed one would have re-sent the body to /hook and
    // been verified there).
    wait_for_row(
        "SELECT COUNT(*) FROM event_deliveries WHERE state = 'pending' AND last_status = 307",
    )
    .await;
    let state = receiver.state().await;
    assert!(
        state["verified"].as_array().expect("verified").is_empty(),
        "{state}"
    );
    // An answer slower than the timeout is a failed attempt too, and the next one delivers.
    receiver.mode("slow", 3.0).await;
    wait_for_row("SELECT COUNT(*) FROM event_deliveries WHERE state = 'pending' AND last_status IS NULL AND last_error LIKE 'timed out%'").await;
    receiver.mode("ok", 0.0).await;
    let events = receiver.wait_for(1, Duration::from_secs(15)).await;
    assert_eq!(events[0]["type"], "file.committed");
}

/// Issue 26 (5): URLs no request can reach (a port past 65535, an unclosed IPv6 bracket, a
/// host that is not one, an empty host) are refused by the admin API (400 `invalid_request`)
/// and by the settings, instead of being stored and failing every attempt with "builder error".
#[tokio::test]
async fn webhook_urls_no_request_can_reach_are_refused_by_the_api_and_the_settings() {
    let app = crate::helpers::spawn_app().await;
    let root = app.admin_token("root");
    for url in [
        "http://127.0.0.1:99999/x",
        "http://[::1",
        "http://%zz/",
        "http://:0/",
        "http://127.0.0.1:0/x",
    ] {
        let resp = app
            .post_json(
                WEBHOOKS,
                Some(&root),
                &json!({ "id": "app", "url": url, "types": ["*"] }),
            )
            .await;
        assert_eq!(
            error_code(resp).await,
            (400, "invalid_request".to_owned()),
            "{url}"
        );
        let mut env = app.env.clone();
        env.insert("UPCOMMIT_WEBHOOK_URL".into(), url.into());
        env.insert("UPCOMMIT_WEBHOOK_SECRET".into(), secret());
        let refused = upcommit::config::Settings::from_map(&env);
        assert!(refused.is_err(), "the settings took {url}");
    }
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM event_endpoints").await,
        0
    );
}

/// Review 26: `events replay` (and `retry`) into a disabled endpoint said "17 events … are due
/// again" though nothing delivers there; the rows only held back pruning and were then counted
/// as discarded. Both now refuse (exit 3) and change nothing.
#[tokio::test]
async fn replay_and_retry_into_a_disabled_endpoint_are_refused_and_change_nothing() {
    let app = crate::helpers::spawn_app().await;
    let root = app.admin_token("root");
    let created = app
        .post_json(
            WEBHOOKS,
            Some(&root),
            &json!({ "id": "gone", "url": "http://127.0.0.1:9/x", "types": ["*"] }),
        )
        .await;
    assert_eq!(created.status(), 201);
    let token = app.token("alice");
    app.upload_and_commit(&token, "image", "image/png", 300)
        .await;
    let deleted = app.delete("/v1/admin/webhooks/gone", Some(&root)).await;
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let before = app.db.count("SELECT COUNT(*) FROM event_deliveries").await;
    for args in [
        &["replay", "--endpoint", "gone", "--after", "0", "--yes"][..],
        &["retry", "--endpoint", "gone", "--yes"][..],
    ] {
        let out = events_cli_output(&app, args).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(err.contains("is disabled"), "{err}");
    }
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM event_deliveries").await,
        before
    );
}

/// Issue 26 (7): `events replay` while an attempt of a later event of the same file is in
/// flight. The replay makes that delivery pending again and takes its lease away, so the
/// in-flight attempt's outcome is not recorded (`lease_lost`) and both events are sent again,
/// in the file's order. Without clearing the lease the in-flight attempt marked its event
/// delivered after the replay: `file.unlinked` was never resent while `file.committed` was
/// resent after it.
#[tokio::test]
async fn a_replay_during_an_attempt_in_flight_resends_every_event_in_file_order() {
    let receiver = Receiver::start();
    let (app, _, id) =
        spawn_and_commit_a_tracked_file(&receiver, ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "10".into()))
            .await;
    receiver.wait_for(1, Duration::from_secs(15)).await;

    // The file.unlinked attempt is held by the receiver for 4 s.
    receiver.mode("slow", 4.0).await;
    hygiene(&app, 2).await;
    wait_for_a_row(
        &app,
        "SELECT COUNT(*) FROM event_deliveries WHERE state = 'pending' AND lease_token IS NOT NULL",
        Duration::from_secs(15),
        "never claimed",
    )
    .await;
    // The request reaches the receiver (and sleeps there) before the mode changes back.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (code, out) = events_cli(
        &app,
        &["replay", "--endpoint", "default", "--after", "0", "--yes"],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    receiver.mode("ok", 0.0).await;

    let events = receiver.wait_for(4, Duration::from_secs(20)).await;
    assert_eq!(
        types(&about(&events, &id)),
        [
            "file.committed",
            "file.unlinked",
            "file.committed",
            "file.unlinked"
        ]
    );
}

/// Issue 26 (8): a replica whose clock runs 10 minutes ahead sequences the events. Their
/// deliveries are timed by the database's clock, as the claims are, so they are sent at once;
/// timed by the replica's clock they were due only 10 minutes later. The test's own server
/// (no skew) is kept from sequencing and delivering: every catalog call of it fails.
#[tokio::test]
async fn deliveries_sequenced_by_a_replica_whose_clock_runs_ahead_are_sent_without_delay() {
    use std::sync::{Arc, Mutex};
    use upcommit::domain::events::{EventType, UploadFacts};

    use crate::catalog_faults::{CatalogFaults, FaultyCatalog};
    let receiver = Receiver::start();
    let faults = Arc::new(Mutex::new(CatalogFaults::seeded(26)));
    let cf = faults.clone();
    let mut env = webhook_env(&receiver);
    env.push(("RUST_LOG", "error".into()));
    let app = spawn_app_with(Spawn {
        env,
        wrap_catalog: Some(Box::new(move |real| Arc::new(FaultyCatalog::new(real, cf)))),
        ..Spawn::default()
    })
    .await;
    faults.lock().expect("faults").before_percent = 100;
    /// Killed when dropped, the test failing or not.
    struct Replica(std::process::Child);
    impl Drop for Replica {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _ahead = Replica(
        server_process(
            &app,
            &[("UPCOMMIT_CLOCK_SKEW_SECS", "600"), ("RUST_LOG", "warn")],
            Stdio::null(),
        )
        .await
        .0,
    );
    let event = UploadFacts {
        upload_id: "upl_skewed".into(),
        owner: "alice".into(),
        profile: "image".into(),
        key: "tmp/x/upl_skewed/a.png".into(),
        code: None,
    }
    .event(EventType::UploadExpired, chrono::Utc::now());
    app.catalog.record_event(&event).await.expect("record");

    let events = receiver.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(events[0]["type"], "upload.expired");
}
