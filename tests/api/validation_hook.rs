//! The pre-commit validation hook: a real HTTP hook server in the test, the real server,
//! LocalStack and the test's database. The hook is told the facts of exactly the bytes that
//! get copied; a refusal rejects the upload for good; no answer fails closed (503, the upload
//! stays committable) or open (201, counted); bytes posted while it scans are never committed
//! (the copy is of the version it was given); a copy it allowed is never put to it again.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use hmac::Mac;
use serde_json::{json, Value};

use crate::helpers::{
    error_code, media, server_process, small_copy_limit, spawn_app_with, Spawn, TestApp,
};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const PNG: &str = "image/png";
/// A type without a known signature: the MD5-colliding files below pass its sniff.
const PDF: &str = "application/pdf";

/// How the hook answers its next calls.
#[derive(Clone)]
enum Mode {
    Allow,
    Refuse(String),
    Status(u16),
    /// 200 with a body that is not a verdict.
    Garbage,
    /// 200 with this JSON body, as written (`json!` could not repeat a key).
    Raw(&'static str),
    /// Answers "allow", too late.
    Slow(Duration),
    /// Writes these bytes, of this type, to the tmp key with the S3 client (a client racing
    /// the hook's answer, or re-posting its form while the hook scans), then allows.
    Put(aws_sdk_s3::Client, String, &'static str, Vec<u8>),
    /// Writes these bytes at this key (another writer), then allows.
    PutAt(aws_sdk_s3::Client, String, String, Vec<u8>),
}

struct Call {
    headers: HeaderMap,
    raw: Vec<u8>,
    body: Value,
}

#[derive(Clone)]
struct Hook {
    mode: Arc<Mutex<Mode>>,
    calls: Arc<Mutex<Vec<Call>>>,
    url: String,
}

impl Hook {
    async fn start() -> Self {
        let mut hook = Hook {
            mode: Arc::new(Mutex::new(Mode::Allow)),
            calls: Arc::default(),
            // Known once it listens (the handler does not read it).
            url: String::new(),
        };
        let router = axum::Router::new()
            .route("/check", axum::routing::post(answer))
            .with_state(hook.clone());
        hook.url = format!("{}/check", crate::helpers::serve(router).await);
        hook
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().expect("mode") = mode;
    }

    fn count(&self) -> usize {
        self.calls.lock().expect("calls").len()
    }

    fn body(&self, i: usize) -> Value {
        self.calls.lock().expect("calls")[i].body.clone()
    }
}

async fn answer(State(hook): State<Hook>, headers: HeaderMap, raw: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let key = body["key"].as_str().unwrap_or_default().to_owned();
    hook.calls.lock().expect("calls").push(Call {
        headers,
        raw: raw.to_vec(),
        body,
    });
    let mode = hook.mode.lock().expect("mode").clone();
    match mode {
        Mode::Allow => Json(json!({"allow": true})).into_response(),
        Mode::Refuse(reason) => Json(json!({"allow": false, "reason": reason})).into_response(),
        Mode::Status(code) => (
            StatusCode::from_u16(code).expect("status"),
            Json(json!({"allow": true})),
        )
            .into_response(),
        Mode::Garbage => (StatusCode::OK, "yes, fine").into_response(),
        Mode::Raw(body) => (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Mode::Slow(delay) => {
            tokio::time::sleep(delay).await;
            Json(json!({"allow": true})).into_response()
        }
        Mode::Put(s3, bucket, content_type, bytes) => {
            s3.put_object()
                .bucket(bucket)
                .key(key)
                .content_type(content_type)
                .body(bytes.into())
                .send()
                .await
                .expect("re-post the tmp object");
            Json(json!({"allow": true})).into_response()
        }
        Mode::PutAt(s3, bucket, at, bytes) => {
            crate::helpers::put_as_another_writer(&s3, &bucket, &at, bytes).await;
            Json(json!({"allow": true})).into_response()
        }
    }
}

/// Over 5 MiB: the smallest source every store copies in parts (Garage's UploadPartCopy refuses
/// a smaller one). With `small_copy_limit()`, two parts.
const OVER_A_PART: usize = 5 * 1024 * 1024 + 2000;

/// The hook overwrites the tmp object with other bytes of the same size (still a PNG), then
/// allows.
fn swap(app: &TestApp, size: usize) -> Mode {
    let mut other = media(PNG, size);
    let last = other.len() - 1;
    other[last] = b'!';
    Mode::Put(app.s3.clone(), app.bucket.clone(), PNG, other)
}

/// A server whose `scan` profile asks `hook`; `extra` adds to the hook's table.
async fn spawn_with_hook(url: &str, extra: &str) -> TestApp {
    spawn_with_hook_env(url, extra, Vec::new()).await
}

async fn spawn_with_hook_env(url: &str, extra: &str, env: Vec<(&'static str, String)>) -> TestApp {
    spawn_app_with(Spawn {
        env,
        config: Some(format!(
            r#"
            [[profiles]]
            name = "scan"
            content_types = ["image/png", "application/pdf"]
            max_size = 8388608
            final_prefix = "scanned/"
            validation_hook = {{ url = "{url}", secret = "{SECRET}"{extra} }}
            "#
        )),
        ..Spawn::default()
    })
    .await
}

fn final_key(upload_id: &str) -> String {
    format!("scanned/{upload_id}/clip.bin")
}

/// The Standard Webhooks signature, computed here with the hmac crate (not the server's code).
fn expected_signature(id: &str, timestamp: &str, body: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64
        .decode(SECRET.trim_start_matches("whsec_"))
        .expect("secret");
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).expect("key");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", b64.encode(mac.finalize().into_bytes()))
}

#[tokio::test]
async fn an_allowing_hook_is_told_the_facts_of_the_bytes_and_the_commit_answers_201() {
    let hook = Hook::start().await;
    let app = spawn_with_hook(&hook.url, "").await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "scan", PNG, 3000, "PUT").await;
    let tmp = app.head(&p.key).await;

    let resp = app.commit(&token, &p.key, None).await;
    assert_eq!(resp.status(), 201);
    let handle: Value = resp.json().await.expect("handle");

    assert_eq!(hook.count(), 1);
    let facts = hook.body(0);
    assert_eq!(facts["type"], "upload.validate");
    assert_eq!(facts["upload_id"], p.upload_id.as_str());
    assert_eq!(facts["owner"], "alice");
    assert_eq!(facts["profile"], "scan");
    assert_eq!(facts["content_type"], PNG);
    assert_eq!(facts["stored_content_type"], PNG);
    assert_eq!(facts["sniffed_content_type"], PNG);
    assert_eq!(facts["size"], 3000);
    assert_eq!(facts["etag"], tmp.e_tag().expect("etag"));
    assert_eq!(
        facts["etag"], handle["etag"],
        "what was copied is what the hook saw"
    );
    assert_eq!(facts["original_filename"], "clip.bin");
    assert_eq!(facts["key"], p.key.as_str());
    assert_eq!(facts["final_key"], handle["key"]);
    assert_eq!(facts["final_key"], final_key(&p.upload_id).as_str());
    assert_eq!(facts["checksum"], Value::Null, "none declared");
    // The GET URL serves exactly the uploaded bytes, with the ETag the hook was told.
    let got = app
        .http
        .get(facts["download_url"].as_str().expect("download_url"))
        .send()
        .await
        .expect("GET the tmp object");
    assert_eq!(got.status(), 200);
    assert_eq!(
        got.headers().get("etag").and_then(|v| v.to_str().ok()),
        facts["etag"].as_str()
    );
    assert_eq!(got.bytes().await.expect("bytes").to_vec(), media(PNG, 3000));
    // Signed like a Standard Webhooks message with the hook's secret.
    {
        let calls = hook.calls.lock().expect("calls");
        let h = &calls[0].headers;
        let header = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).expect(n).to_owned();
        let (id, ts) = (header("webhook-id"), header("webhook-timestamp"));
        let age = chrono::Utc::now().timestamp() - ts.parse::<i64>().expect("timestamp");
        assert!((0..60).contains(&age), "timestamp is now: {age}");
        assert_eq!(
            header("webhook-signature"),
            expected_signature(&id, &ts, &calls[0].raw)
        );
    }

    let again = app.commit(&token, &p.key, None).await;
    assert_eq!(again.status(), 200, "a retry answers the same handle");
    assert_eq!(hook.count(), 1, "and does not ask the hook again");
}

#[tokio::test]
async fn a_refusal_rejects_the_upload_for_good_and_nothing_reaches_the_final_key() {
    let hook = Hook::start().await;
    let app = spawn_with_hook(&hook.url, "").await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "scan", PNG, 2000, "PUT").await;
    hook.set(Mode::Refuse(format!(
        "EICAR\r\nSet-Cookie: x=1\u{1b}[0m {}",
        "z".repeat(500)
    )));

    let resp = app.commit(&token, &p.key, None).await;
    assert_eq!(resp.status(), 422);
    let body: Value = resp.json().await.expect("error body");
    assert_eq!(body["error"]["code"], "rejected_by_hook");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("EICAR Set-Cookie: x=1 [0m zzz"),
        "the reason, cleaned: {message}"
    );
    assert!(!message.chars().any(char::is_control), "{message:?}");
    assert!(
        message.chars().count() < 300,
        "the reason is cut: {message}"
    );

    assert_eq!(app.db.upload_state(&p.upload_id).await, "rejected");
    assert_eq!(
        app.db
            .strings(&format!(
                "SELECT reject_code FROM uploads WHERE id = '{}'",
                p.upload_id
            ))
            .await,
        vec!["rejected_by_hook".to_owned()]
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM events WHERE type = 'upload.rejected' AND payload LIKE '%rejected_by_hook%'")
            .await,
        1,
        "the rejection's event, written with it"
    );

    // A retry answers the same refusal, without asking the hook (now allowing) again.
    hook.set(Mode::Allow);
    let (status, code) = error_code(app.commit(&token, &p.key, None).await).await;
    assert_eq!((status, code.as_str()), (422, "rejected_by_hook"));
    assert_eq!(hook.count(), 1);

    assert!(!app.object_exists(&final_key(&p.upload_id)).await);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0);
    // The URL is single-use while it lives; then the sweep deletes the refused bytes.
    let second = app.upload(&p, media(PNG, 2000), PNG).await;
    if crate::helpers::gap_accepted("conditional_put") {
        // The documented gap (Garage): the URL stores again, but the upload stays rejected.
        assert!(second.is_success(), "{second}");
        let (status, code) = error_code(app.commit(&token, &p.key, None).await).await;
        assert_eq!((status, code.as_str()), (422, "rejected_by_hook"));
        assert_eq!(hook.count(), 1, "never asked again");
    } else {
        assert_eq!(second.as_u16(), 412, "the URL cannot store other bytes");
    }
    app.sweep_after_urls_expire().await;
    assert!(app.keys().await.is_empty(), "{:?}", app.keys().await);
}

#[tokio::test]
async fn no_answer_fails_closed_and_the_upload_commits_once_the_hook_recovers() {
    let hook = Hook::start().await;
    let app = spawn_with_hook(&hook.url, ", timeout_ms = 400").await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "scan", PNG, 2000, "PUT").await;

    for mode in [
        Mode::Slow(Duration::from_millis(1500)),
        Mode::Status(500),
        Mode::Status(302),
        Mode::Garbage,
    ] {
        hook.set(mode);
        let resp = app.commit(&token, &p.key, None).await;
        assert_eq!(resp.status(), 503);
        assert!(resp.headers().contains_key("retry-after"));
        let (_, code) = error_code(resp).await;
        assert_eq!(code, "validation_hook_unavailable");
        assert_eq!(
            app.db.upload_state(&p.upload_id).await,
            "issued",
            "still committable"
        );
        assert!(!app.object_exists(&final_key(&p.upload_id)).await);
    }
    assert_eq!(hook.count(), 4, "every retry asked again");

    hook.set(Mode::Allow);
    let resp = app.commit(&token, &p.key, None).await;
    assert_eq!(resp.status(), 201);
    assert_eq!(hook.count(), 5);
    assert_eq!(
        app.get_object(&final_key(&p.upload_id)).await,
        media(PNG, 2000)
    );
}

#[tokio::test]
async fn no_answer_fails_open_when_the_profile_says_so_and_is_counted() {
    // Nothing listens there.
    let url = format!("http://127.0.0.1:{}/check", crate::helpers::free_port());
    let app = spawn_with_hook(&url, r#", on_error = "allow""#).await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "scan", PNG, 2000, "PUT").await;
    // Review 35: the series started at 1 with the first fail-open, and Prometheus's
    // increase() sees no increase in a series that appears at 1. It is there at 0 from start.
    let before = app.metrics_text().await;
    assert!(
        before.contains("upcommit_validation_hook_failed_open_total{profile=\"scan\"} 0"),
        "{before}"
    );

    let resp = app.commit(&token, &p.key, None).await;
    assert_eq!(resp.status(), 201);
    assert!(app.object_exists(&final_key(&p.upload_id)).await);
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains("upcommit_validation_hook_failed_open_total{profile=\"scan\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains(
        "upcommit_validation_hook_duration_seconds_count{profile=\"scan\",result=\"unreachable\"} 1"
    ));
}

/// An answer that repeats a key is ambiguous — JSON parsers disagree on which one wins (ours
/// took the last) — and so is every 2xx body that is not a clean verdict; it is never read as a
/// yes: the commit answers 503
/// `validation_hook_unavailable` and the upload stays committable, even for a profile that fails
/// open (a reason built from the file's name could smuggle a second `allow` in).
#[tokio::test]
async fn an_answer_with_a_repeated_key_never_commits_even_when_the_profile_fails_open() {
    let hook = Hook::start().await;
    let app = spawn_with_hook(&hook.url, r#", on_error = "allow""#).await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "scan", PNG, 2000, "PUT").await;

    // Refusals a hook could send when it builds its reason from the file's name, or a proxy
    // alters (review 26): a quote left unescaped, a second object after the first, a byte-order
    // mark, a reason over the 16 KiB limit. Each failed open (201) before.
    let oversize: &'static str = Box::leak(
        format!(
            r#"{{"allow": false, "reason": "{}"}}"#,
            "v".repeat(17 * 1024)
        )
        .into_boxed_str(),
    );
    for body in [
        r#"{"allow": false, "allow": true}"#,
        r#"{"allow": true, "allow": true}"#,
        r#"{"allow": false, "reason": "EICAR", "allow": true}"#,
        r#"{"allow": true, "reason": "a", "reason": "b"}"#,
        r#"{"allow": true, "details": {"engine": "x", "engine": "y"}}"#,
        r#"{"allow": false, "reason": "virus in x".png"}"#,
        r#"{"allow": false, "reason": "virus"}{"allow": true}"#,
        "\u{feff}{\"allow\": false, \"reason\": \"virus\"}",
        oversize,
        "yes, fine",
    ] {
        hook.set(Mode::Raw(body));
        let resp = app.commit(&token, &p.key, None).await;
        assert_eq!(resp.status(), 503, "{body}");
        let (_, code) = error_code(resp).await;
        assert_eq!(code, "validation_hook_unavailable", "{body}");
        assert_eq!(app.db.upload_state(&p.upload_id).await, "issued", "{body}");
        assert!(!app.object_exists(&final_key(&p.upload_id)).await, "{body}");
    }
    let metrics = app.metrics_text().await;
    let failed_open = metrics
        .lines()
        .find(|l| l.starts_with("upcommit_validation_hook_failed_open_total{profile=\"scan\"}"));
    assert!(
        failed_open.map_or(true, |l| l.ends_with(" 0")),
        "never counted as failing open: {metrics}"
    );

    hook.set(Mode::Allow);
    let resp = app.commit(&token, &p.key, None).await;
    assert_eq!(resp.status(), 201);
}

#[tokio::test]
async fn bytes_swapped_while_the_hook_scans_are_never_committed() {
    let hook = Hook::start().await;
    let app = spawn_with_hook(&hook.url, "").await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "scan", PNG, 2000, "PUT").await;
    hook.set(swap(&app, 2000));

    if crate::helpers::gap_accepted("versioning") {
        // Unversioned (Garage): no version to pin; the ETag guard refuses the swapped bytes and
        // nothing reaches the final key (docs/stores.md).
        let (status, code) = error_code(app.commit(&token, &p.key, None).await).await;
        assert_eq!((status, code.as_str()), (409, "object_changed"));
        assert!(!app.object_exists(&final_key(&p.upload_id)).await);
        return;
    }
    // The copy is of the version the hook was given, not of the bytes now current.
    let resp = app.commit(&token, &p.key, None).await;
    assert_eq!(resp.status(), 201);
    let handle: Value = resp.json().await.expect("handle");
    let seen = hook.body(0)["etag"].clone();
    assert_eq!(handle["etag"], seen);
    assert_eq!(
        app.get_object(&final_key(&p.upload_id)).await,
        media(PNG, 2000),
        "the bytes the hook allowed"
    );
    assert_eq!(hook.count(), 1);
    // The hook's URL still serves the version it was asked about, not the bytes now current.
    let pinned = app
        .http
        .get(hook.body(0)["download_url"].as_str().expect("download_url"))
        .send()
        .await
        .expect("GET");
    assert_eq!(
        pinned.headers().get("etag").and_then(|v| v.to_str().ok()),
        seen.as_str()
    );
    assert_eq!(
        pinned.bytes().await.expect("bytes").to_vec(),
        media(PNG, 2000)
    );
    assert_eq!(app.get_object(&p.key).await.last(), Some(&b'!'), "swapped");
}

#[tokio::test]
async fn a_copy_the_hook_allowed_is_recorded_after_a_crash_without_asking_again() {
    let hook = Hook::start().await;
    let app = spawn_with_hook(&hook.url, "").await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "scan", PNG, 2000, "PUT").await;
    let (mut child, base) = server_process(
        &app,
        &[
            ("UPCOMMIT_CRASH_AT", "after_copy"),
            ("UPCOMMIT_COMMIT_LEASE_SECS", "1"),
            ("RUST_LOG", "warn"),
        ],
        Stdio::null(),
    )
    .await;
    let died = app
        .http
        .post(format!("{base}/v1/files"))
        .bearer_auth(&token)
        .json(&json!({ "key": p.key }))
        .send()
        .await;
    assert!(died.is_err(), "the server died mid-commit");
    let _ = child.wait();
    assert_eq!(hook.count(), 1, "asked before the copy");
    assert!(app.object_exists(&final_key(&p.upload_id)).await);
    assert_eq!(app.db.upload_state(&p.upload_id).await, "promoting");

    // The hook would refuse now; the copy it allowed is recorded as it is.
    hook.set(Mode::Refuse("changed my mind".into()));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let resp = app.commit(&token, &p.key, None).await;
    assert_eq!(resp.status(), 201, "the retry rolls forward");
    assert_eq!(hook.count(), 1, "without asking again");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
}

#[tokio::test]
async fn objects_copied_in_parts_are_put_to_the_hook_before_the_copy_too() {
    let hook = Hook::start().await;
    // Every object over 5 MiB goes down the UploadPartCopy path.
    let app = spawn_with_hook_env(&hook.url, "", small_copy_limit()).await;
    let token = app.token("alice");

    let refused = app.uploaded(&token, "scan", PNG, OVER_A_PART, "PUT").await;
    hook.set(Mode::Refuse("no".into()));
    let (status, code) = error_code(app.commit(&token, &refused.key, None).await).await;
    assert_eq!((status, code.as_str()), (422, "rejected_by_hook"));
    assert_eq!(app.db.upload_state(&refused.upload_id).await, "rejected");
    assert!(!app.object_exists(&final_key(&refused.upload_id)).await);

    // Bytes swapped while it scans are not what the parts are copied from.
    let swapped = app.uploaded(&token, "scan", PNG, OVER_A_PART, "PUT").await;
    hook.set(swap(&app, OVER_A_PART));
    let committed = if crate::helpers::gap_accepted("versioning") {
        // Unversioned (Garage): no version to pin; the part copies' ETag guard refuses the
        // swapped bytes and nothing reaches the final key (docs/stores.md).
        let (status, code) = error_code(app.commit(&token, &swapped.key, None).await).await;
        assert_eq!((status, code.as_str()), (409, "object_changed"));
        assert!(!app.object_exists(&final_key(&swapped.upload_id)).await);
        1
    } else {
        assert_eq!(app.commit(&token, &swapped.key, None).await.status(), 201);
        assert_eq!(
            app.get_object(&final_key(&swapped.upload_id)).await,
            media(PNG, OVER_A_PART)
        );
        2
    };

    let allowed = app.uploaded(&token, "scan", PNG, OVER_A_PART, "PUT").await;
    hook.set(Mode::Allow);
    let resp = app.commit(&token, &allowed.key, None).await;
    assert_eq!(resp.status(), 201);
    assert_eq!(hook.count(), 3);
    assert_eq!(
        app.get_object(&final_key(&allowed.upload_id)).await,
        media(PNG, OVER_A_PART)
    );
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM file_handles").await,
        committed
    );
}

/// Two different files of the same size and the same MD5 — so the same single-request ETag —
/// built on the published Wang et al. (2004) colliding blocks: what a client can post in
/// place of bytes the hook is scanning without tripping an ETag guard.
fn md5_twins() -> (Vec<u8>, Vec<u8>) {
    md5_twins_of(2028)
}

/// Two MD5-colliding byte strings `len` bytes long (`len` at least 128).
fn md5_twins_of(len: usize) -> (Vec<u8>, Vec<u8>) {
    let hex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    };
    let a = hex(concat!(
        "d131dd02c5e6eec4693d9a0698aff95c2fcab58712467eab4004583eb8fb7f89",
        "55ad340609f4b30283e488832571415a085125e8f7cdc99fd91dbdf280373c5b",
        "d8823e3156348f5bae6dacd436c919c6dd53e2b487da03fd02396306d248cda0",
        "e99f33420f577ee8ce54b67080a80d1ec69821bcb6a8839396f9652b6ff72a70",
    ));
    let b = hex(concat!(
        "d131dd02c5e6eec4693d9a0698aff95c2fcab50712467eab4004583eb8fb7f89",
        "55ad340609f4b30283e4888325f1415a085125e8f7cdc99fd91dbd7280373c5b",
        "d8823e3156348f5bae6dacd436c919c6dd53e23487da03fd02396306d248cda0",
        "e99f33420f577ee8ce54b67080280d1ec69821bcb6a8839396f965ab6ff72a70",
    ));
    // A common suffix keeps the collision (MD5 is a chain of blocks).
    let tail = vec![b'z'; len - a.len()];
    ([a, tail.clone()].concat(), [b, tail].concat())
}

/// Uploads `benign`, has the hook re-post `evil` (same size, same ETag) while it scans,
/// commits; returns the committed bytes.
async fn commit_while_an_md5_twin_is_re_posted(
    hook: &Hook,
    app: &TestApp,
    (benign, evil): (Vec<u8>, Vec<u8>),
) -> Vec<u8> {
    let token = app.token("alice");
    let p = app.uploaded_bytes(&token, "scan", PDF, benign).await;
    let scanned = app.head(&p.key).await;
    hook.set(Mode::Put(
        app.s3.clone(),
        app.bucket.clone(),
        PDF,
        evil.clone(),
    ));

    let resp = app.commit(&token, &p.key, None).await;
    assert_eq!(resp.status(), 201);
    let current = app.head(&p.key).await;
    assert_eq!(
        current.e_tag(),
        scanned.e_tag(),
        "the re-posted twin has the ETag the hook was told: the ETag guard alone lets it pass"
    );
    if !crate::helpers::gap_accepted("versioning") {
        assert_ne!(current.version_id(), scanned.version_id(), "a new version");
    }
    assert_eq!(app.get_object(&p.key).await, evil, "the twin is current");
    assert_eq!(hook.body(0)["etag"], scanned.e_tag().expect("etag"));
    app.get_object(&final_key(&p.upload_id)).await
}

#[tokio::test]
async fn the_copy_is_of_the_version_the_hook_scanned_not_a_twin_posted_meanwhile() {
    let hook = Hook::start().await;
    let app = spawn_with_hook(&hook.url, "").await;
    let committed = commit_while_an_md5_twin_is_re_posted(&hook, &app, md5_twins()).await;
    if crate::helpers::gap_accepted("versioning") {
        // The documented weakening of an unversioned store (docs/stores.md, `versioning`): with
        // no version to pin, the ETag is the only guard, and an MD5-colliding twin posted while
        // the hook scans is what gets copied. Asserted so that the gap stays visible.
        assert!(
            committed == md5_twins().1,
            "on an unversioned store the twin passes the ETag guard"
        );
        return;
    }
    assert!(
        committed == md5_twins().0,
        "the final object holds the re-posted twin, not the bytes the hook allowed"
    );
}

/// Review 27 (S2): while the hook scans an object to be copied in parts, another writer puts an
/// object at the final key (an admin's custom key). Where the completion's `If-None-Match` is
/// honoured (LocalStack) the completion refuses; where it is ignored (Garage, the gap
/// `conditional_complete` accepted) the final key is read again after the hook. Either way 409
/// `final_key_conflict`, the other object intact. Before, on Garage: 201, the object replaced
/// (the final key was read only before the hook).
#[tokio::test]
async fn an_object_written_at_the_final_key_while_the_hook_scans_a_copy_in_parts_is_kept() {
    let hook = Hook::start().await;
    let app = spawn_with_hook_env(&hook.url, "", small_copy_limit()).await;
    let admin = app.admin_token("root");
    let p = app.uploaded(&admin, "scan", PNG, OVER_A_PART, "PUT").await;
    let at = "scanned/custom/arrived.png";
    let theirs = media("image/jpeg", 4321);
    hook.set(Mode::PutAt(
        app.s3.clone(),
        app.bucket.clone(),
        at.into(),
        theirs.clone(),
    ));
    let (status, code) = error_code(app.commit(&admin, &p.key, Some(at)).await).await;
    assert_eq!((status, code.as_str()), (409, "final_key_conflict"));
    assert_eq!(hook.count(), 1, "the hook was asked");
    assert_eq!(app.get_object(at).await, theirs);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0);
}

#[tokio::test]
async fn every_part_copy_is_of_the_version_the_hook_scanned_not_a_twin_posted_meanwhile() {
    let hook = Hook::start().await;
    // Every object over 5 MiB goes down the UploadPartCopy path.
    let app = spawn_with_hook_env(&hook.url, "", small_copy_limit()).await;
    let twins = md5_twins_of(OVER_A_PART);
    let committed = commit_while_an_md5_twin_is_re_posted(&hook, &app, twins.clone()).await;
    if crate::helpers::gap_accepted("versioning") {
        // The documented weakening of an unversioned store, as for a single copy.
        assert!(
            committed == twins.1,
            "on an unversioned store the twin passes the ETag guard"
        );
        return;
    }
    assert!(
        committed == twins.0,
        "the final object holds the re-posted twin, not the bytes the hook allowed"
    );
}

/// A hook speaking raw HTTP: it reads the request head, then writes `answer` as it is and
/// closes (or, with `hold`, keeps the connection open without another byte).
async fn raw_hook(answer: &'static [u8], hold: bool) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/check", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = sock.write_all(answer).await;
                if hold {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
            });
        }
    });
    url
}

/// Review 26b: a 2xx answer whose body broke off (the connection closed before the declared
/// length, or the timeout passed after the status line) was taken as no answer, and a profile
/// that fails open committed the file although the bytes that arrived were a refusal. Such an
/// answer is unreadable: 503 `validation_hook_unavailable`, whatever `on_error` says.
#[tokio::test]
async fn a_2xx_answer_that_breaks_off_never_commits_even_when_the_profile_fails_open() {
    for (answer, hold) in [
        (
            &b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"allow\": false, \"reason\": \"virus\"}"[..],
            false,
        ),
        (
            &b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n24\r\n{\"allow\": false, \"reason\": \"virus\"}\r\nzz\r\n"[..],
            false,
        ),
        (
            &b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 36\r\n\r\n"[..],
            true,
        ),
    ] {
        let url = raw_hook(answer, hold).await;
        let app = spawn_with_hook(&url, r#", on_error = "allow", timeout_ms = 1000"#).await;
        let token = app.token("alice");
        let p = app.uploaded(&token, "scan", PNG, 2000, "PUT").await;
        let resp = app.commit(&token, &p.key, None).await;
        let (status, code) = error_code(resp).await;
        assert_eq!(
            (status, code.as_str()),
            (503, "validation_hook_unavailable"),
            "{}",
            String::from_utf8_lossy(answer)
        );
        assert!(!app.object_exists(&final_key(&p.upload_id)).await);
        assert_eq!(app.db.upload_state(&p.upload_id).await, "issued");
    }
}

/// Review 34: the shared outgoing client cut every connection that took more than 3 s to open,
/// so a hook allowed 12 s whose handshake was slow answered 503 at 3 s and never saw the
/// request. The hook's own limit covers the connection: here the hook's listener lets its
/// handshake complete only about 7 s after the commit asked (its accept queue is kept full, so
/// the first SYNs are dropped and retransmitted), and the commit waits for its answer.
#[tokio::test]
async fn a_hook_whose_handshake_is_slow_is_waited_for_within_its_own_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let listener = socket.listen(0).expect("listen");
    let addr = listener.local_addr().expect("addr");
    // Fills the accept queue: further handshakes wait until it is drained.
    let filler = std::net::TcpStream::connect(addr).expect("filler");
    let app = spawn_with_hook(&format!("http://{addr}/check"), ", timeout_ms = 12000").await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "scan", PNG, 2000, "PUT").await;

    let asked = Arc::new(Mutex::new(0));
    let counted = asked.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(3500)).await;
        drop(filler);
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                *counted.lock().expect("count") += 1;
                let body = br#"{"allow": true}"#;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(body).await;
            });
        }
    });

    let started = std::time::Instant::now();
    let resp = app.commit(&token, &p.key, None).await;
    let waited = started.elapsed();
    assert_eq!(resp.status(), 201, "{:?}", resp.text().await);
    assert!(
        waited > Duration::from_secs(3),
        "the handshake was not slow ({waited:?}): the test proves nothing"
    );
    assert_eq!(*asked.lock().expect("count"), 1, "the hook was asked once");
    assert_eq!(
        app.get_object(&final_key(&p.upload_id)).await,
        media(PNG, 2000)
    );
}
