//! What operators see: `/metrics` counts what really happened (requests by route and status,
//! outcomes by error code, S3 and database calls, quota rejections, bytes committed); JSON logs
//! carry the request id and never a token or a presigned URL's signature; SIGTERM lets an
//! in-flight commit finish before the process exits.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{error_code, media, server_process, spawn_app_with, Spawn, TestApp};

/// The value of one exact series (`name{labels}`) in a Prometheus text page.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

async fn metrics(app: &TestApp) -> String {
    let resp = app.get("/metrics", None).await;
    assert_eq!(resp.status(), 200);
    resp.text().await.expect("metrics text")
}

#[tokio::test]
async fn metrics_count_what_happened() {
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_QUOTA_DAILY_UPLOADS", "2".to_owned())],
        ..Spawn::default()
    })
    .await;
    let alice = app.token("alice");
    let (p, _) = app
        .upload_and_commit(&alice, "image", "image/png", 3000)
        .await;
    // A replay (200, not a second file), an unknown key, a refused type, then the quota.
    assert_eq!(app.commit(&alice, &p.key, None).await.status(), 200);
    let unknown = app
        .commit(
            &alice,
            "tmp/2026/01/01/00000000000000000000000000/x.png",
            None,
        )
        .await;
    assert_eq!(error_code(unknown).await.1, "upload_not_found");
    let refused = app
        .presign(
            &alice,
            json!({"profile": "image", "content_type": "text/html", "size": 10}),
        )
        .await;
    assert_eq!(error_code(refused).await.1, "content_type_not_allowed");
    app.presign_ok(&alice, "image", "image/png", 10, "PUT")
        .await;
    let over = app
        .presign(
            &alice,
            json!({"profile": "image", "content_type": "image/png", "size": 10}),
        )
        .await;
    assert_eq!(error_code(over).await.1, "quota_exceeded");

    let text = metrics(&app).await;
    let count = |route: &str, status: u16| {
        sample(
            &text,
            &format!("upcommit_http_request_duration_seconds_count{{method=\"POST\",route=\"{route}\",status=\"{status}\"}}"),
        )
    };
    assert_eq!(count("/v1/uploads", 201), Some(2.0), "{text}");
    assert_eq!(count("/v1/uploads", 429), Some(1.0));
    assert_eq!(count("/v1/files", 201), Some(1.0));
    assert_eq!(count("/v1/files", 200), Some(1.0));
    assert_eq!(count("/v1/files", 404), Some(1.0));
    let outcome = |flow: &str, outcome: &str| {
        sample(
            &text,
            &format!("upcommit_outcomes_total{{flow=\"{flow}\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(outcome("presign", "ok"), Some(2.0));
    assert_eq!(outcome("presign", "content_type_not_allowed"), Some(1.0));
    assert_eq!(outcome("presign", "quota_exceeded"), Some(1.0));
    assert_eq!(outcome("commit", "ok"), Some(2.0));
    assert_eq!(outcome("commit", "upload_not_found"), Some(1.0));
    assert_eq!(sample(&text, "upcommit_quota_rejections_total"), Some(1.0));
    assert_eq!(sample(&text, "upcommit_committed_files_total"), Some(1.0));
    assert_eq!(
        sample(&text, "upcommit_committed_bytes_total"),
        Some(3000.0)
    );

    // The commit's S3 calls, named by the SDK's operation: exactly two — the ranged GET (type,
    // size, ETag and the first bytes in one response) and the CopyObject guarded on both sides,
    // whose answer is the verification. No HEAD of tmp, none of the final key, no verify HEAD,
    // no delete (the tmp object stays until the URL has expired; the sweep deletes it in
    // batches). The replay makes no S3 call at all. No hidden extra round trips.
    let s3 = |op: &str, result: &str| {
        sample(
            &text,
            &format!(
                "upcommit_s3_request_duration_seconds_count{{operation=\"{op}\",result=\"{result}\"}}"
            ),
        )
    };
    if crate::helpers::gap_accepted("conditional_copy") {
        // The fallback where CopyObject ignores If-None-Match (Garage): one read of the final
        // key (absent: 404) right before the copy.
        assert_eq!(
            s3("HeadObject", "ok").unwrap_or(0.0) + s3("HeadObject", "error").unwrap_or(0.0),
            1.0,
            "{text}"
        );
    } else {
        assert_eq!(s3("HeadObject", "ok"), None, "{text}");
        assert_eq!(s3("HeadObject", "error"), None, "{text}");
    }
    assert_eq!(s3("GetObject", "ok"), Some(1.0));
    assert_eq!(s3("CopyObject", "ok"), Some(1.0));
    assert_eq!(
        s3("DeleteObject", "ok"),
        None,
        "no delete on the commit's path"
    );
    let db = |op: &str, result: &str| {
        sample(
            &text,
            &format!(
                "upcommit_db_query_duration_seconds_count{{operation=\"{op}\",result=\"{result}\"}}"
            ),
        )
    };
    assert_eq!(db("record_handle", "ok"), Some(1.0));
    assert_eq!(db("create_upload", "ok"), Some(2.0));
    assert_eq!(db("create_upload", "error"), Some(1.0), "the quota refusal");
}

/// The real binary with extra environment, stderr to `log`.
async fn server_with_log(
    app: &TestApp,
    extra: &[(&str, &str)],
    log: &std::path::Path,
) -> (std::process::Child, String) {
    let file = std::fs::File::create(log).expect("log file");
    server_process(app, extra, Stdio::from(file)).await
}

fn sigterm(child: &std::process::Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

#[tokio::test]
async fn json_logs_carry_the_request_id_and_no_secret() {
    let app = spawn_app_with(Spawn::default()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("server.log");
    let (mut child, base) = server_with_log(
        &app,
        &[("UPCOMMIT_LOG_FORMAT", "json"), ("RUST_LOG", "info")],
        &log,
    )
    .await;
    let alice = app.token("alice");
    let resp = app
        .http
        .post(format!("{base}/v1/uploads"))
        .bearer_auth(&alice)
        .header("x-request-id", "req-presign-1")
        .json(&json!({"profile": "image", "content_type": "image/png", "size": 2048, "method": "PUT"}))
        .send()
        .await
        .expect("presign");
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["x-request-id"], "req-presign-1");
    let p: crate::helpers::Presigned = resp.json().await.expect("presign JSON");
    let url = p.url.clone();
    assert!(app
        .upload(&p, media("image/png", 2048), "image/png")
        .await
        .is_success());
    let resp = app.commit_at(&base, &alice, &p.key, None).await;
    assert_eq!(resp.status(), 201);
    let commit_id = resp.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(!commit_id.is_empty(), "a generated request id");
    let bad = app
        .http
        .post(format!("{base}/v1/files"))
        .bearer_auth("not-a-token.at.all")
        .header("x-request-id", "req-bad-token")
        .json(&json!({"key": p.key}))
        .send()
        .await
        .expect("commit");
    assert_eq!(bad.status(), 401);
    sigterm(&child);
    assert!(child.wait().expect("wait").success());

    let text = std::fs::read_to_string(&log).expect("log");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let of_request = |id: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|l| l["span"]["request_id"] == id)
            .collect()
    };
    // Every line logged inside a request carries that request's id; each request logged.
    for id in ["req-presign-1", commit_id.as_str(), "req-bad-token"] {
        assert!(!of_request(id).is_empty(), "no log line for {id}:\n{text}");
    }
    for l in &lines {
        if l["span"]["name"] == "request" {
            assert!(l["span"]["request_id"].is_string(), "{l}");
        }
    }
    assert!(of_request("req-bad-token")
        .iter()
        .any(|l| l["error.code"] == "unauthorized"));
    // No bearer token, presigned URL or signature anywhere in the log.
    let query = url.split_once('?').map_or("", |(_, q)| q);
    for secret in [alice.as_str(), "not-a-token.at.all", "X-Amz-Signature"] {
        assert!(!text.contains(secret), "{secret} leaked into the log");
    }
    if !query.is_empty() {
        assert!(!text.contains(query), "the presigned query leaked");
    }
}

#[tokio::test]
async fn sigterm_finishes_the_in_flight_commit() {
    let app = spawn_app_with(Spawn::default()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, base) = server_with_log(
        &app,
        &[("UPCOMMIT_PAUSE_AT", "after_copy")],
        &dir.path().join("server.log"),
    )
    .await;
    let alice = app.token("alice");
    let p = app
        .uploaded(&alice, "image", "image/png", 2048, "PUT")
        .await;
    let commit = {
        let (http, key, token) = (app.http.clone(), p.key.clone(), alice.clone());
        tokio::spawn(async move {
            http.post(format!("{base}/v1/files"))
                .bearer_auth(token)
                .json(&json!({ "key": key }))
                .send()
                .await
        })
    };
    // The commit copies, then is held for 3 s; SIGTERM lands while it is held.
    let final_key = format!("media/images/{}/clip.bin", p.upload_id);
    for _ in 0..50 {
        if app.object_exists(&final_key).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(app.object_exists(&final_key).await, "the copy happened");
    sigterm(&child);
    let resp = commit
        .await
        .expect("task")
        .expect("the in-flight commit is answered, not cut off");
    assert_eq!(resp.status(), 201);
    let handle: Value = resp.json().await.expect("handle");
    assert_eq!(handle["key"], final_key.as_str());
    assert!(child.wait().expect("wait").success(), "clean exit");
    assert_eq!(app.db.upload_state(&p.upload_id).await, "committed");
    assert!(
        app.object_exists(&p.key).await,
        "tmp object kept until its URL expires"
    );
}

/// One sample line of the Prometheus text format: `(family name, series)` where the series is
/// the name with its label set, or why the line breaks the grammar.
fn parse_sample(line: &str) -> Result<(String, String), String> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .ok_or("no value")?;
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut rest = &line[name_end..];
    let mut series = name.to_owned();
    if let Some(body) = rest.strip_prefix('{') {
        // label="value" pairs; values escape only \\, \" and \n.
        let mut chars = body.char_indices();
        let mut in_value = false;
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match (in_value, c) {
                (true, '\\') => {
                    let (_, e) = chars.next().ok_or("dangling escape")?;
                    if !matches!(e, '\\' | '"' | 'n') {
                        return Err(format!("bad escape \\{e}"));
                    }
                }
                (true, '"') => in_value = false,
                (true, _) => {}
                (false, '"') => in_value = true,
                (false, '}') => {
                    end = Some(i);
                    break;
                }
                (false, c) if c.is_ascii_alphanumeric() || matches!(c, '_' | '=' | ',') => {}
                (false, c) => return Err(format!("bad character {c:?} in labels")),
            }
        }
        let end = end.ok_or("labels not closed")?;
        series.push_str(&line[name_end..name_end + end + 2]);
        rest = &body[end + 1..];
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let value = value.split(' ').next().unwrap_or_default();
    if !(value.parse::<f64>().is_ok() || matches!(value, "+Inf" | "-Inf" | "NaN")) {
        return Err(format!("bad value {value:?}"));
    }
    let family = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name);
    Ok((family.to_owned(), series))
}

#[tokio::test]
async fn every_line_of_a_scrape_follows_the_prometheus_text_format() {
    let app = spawn_app_with(Spawn::default()).await;
    let alice = app.token("alice");
    app.upload_and_commit(&alice, "image", "image/png", 3000)
        .await;
    let _ = app.commit(&alice, "tmp/not-a-key", None).await;
    let text = metrics(&app).await;

    let mut typed = std::collections::HashMap::new();
    let mut seen = std::collections::HashSet::new();
    let mut samples = 0;
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(help) = line.strip_prefix("# HELP ") {
            assert!(help.split_once(' ').is_some(), "HELP without text: {line}");
        } else if let Some(ty) = line.strip_prefix("# TYPE ") {
            let (name, kind) = ty.split_once(' ').expect("TYPE name kind");
            assert!(
                matches!(
                    kind,
                    "counter" | "gauge" | "histogram" | "summary" | "untyped"
                ),
                "{line}"
            );
            assert!(
                typed.insert(name.to_owned(), kind.to_owned()).is_none(),
                "TYPE twice: {line}"
            );
        } else {
            assert!(!line.starts_with('#'), "unknown comment: {line}");
            let (family, series) = parse_sample(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            assert!(
                typed.contains_key(&family) || typed.contains_key(&series),
                "no TYPE before {line}"
            );
            assert!(seen.insert(series.clone()), "series twice: {series}");
            samples += 1;
        }
    }
    assert!(
        samples > 20,
        "a scrape after a commit has many series:\n{text}"
    );
}
