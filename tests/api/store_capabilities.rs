//! What the store can promise: the capability probe against the real store under test
//! (LocalStack, or Garage with `UPCOMMIT_TEST_STORE=garage`), checked against the table of
//! docs/stores.md; `serve` refusing to start until every gap is accepted by name; the accepted
//! gaps in `GET /v1/admin/bucket`, `/metrics` and `doctor`; the probe touching nothing outside
//! its prefix; and the fallbacks a missing capability turns on.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use upcommit::config::Settings;
use upcommit::domain::capabilities::{Capability, Finding, Findings, Needs};
use upcommit::storage::{ObjectStore, S3Store};

use crate::bucket::upcommit;
use crate::helpers::{
    accepted_store_gaps, error_code, series_value, spawn_app, spawn_app_with, store_kind, Spawn,
    TestApp,
};

/// The row of docs/stores.md's table that the probe measures for the store under test.
fn documented_row() -> BTreeMap<String, String> {
    documented_row_named(match store_kind().as_str() {
        "garage" => "Garage 2.5.0, single node",
        "rgw" if crate::helpers::gap_accepted("versioning") => {
            "Ceph RGW 16.2.15, single node, unversioned bucket"
        }
        "rgw" => "Ceph RGW 16.2.15, single node, versioned bucket",
        _ => "LocalStack 4.14.0",
    })
}

/// The row of docs/stores.md's table whose first cell contains `row_name`.
pub(crate) fn documented_row_named(row_name: &str) -> BTreeMap<String, String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/stores.md"))
        .expect("docs/stores.md");
    let mut header: Option<Vec<String>> = None;
    for line in doc.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<String> = line
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().trim_matches('`').to_owned())
            .collect();
        match &header {
            None if cells.first().is_some_and(|c| c == "Store") => header = Some(cells),
            Some(h) if cells.first().is_some_and(|c| c.contains(row_name)) => {
                return h.iter().cloned().zip(cells).collect();
            }
            _ => {}
        }
    }
    panic!("docs/stores.md has no table row for {row_name}");
}

pub(crate) async fn probe(app: &TestApp) -> Findings {
    let settings =
        Settings::from_sources(None, &|k| app.env.get(k).cloned()).expect("test settings");
    let store = S3Store::connect(&settings.s3).await.expect("S3 client");
    store.probe("GLACIER_IR").await
}

fn gap_names() -> BTreeSet<String> {
    accepted_store_gaps()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The gaps a default test server (no profile tracks links, so no archival) needs accepted.
fn needed_gaps() -> BTreeSet<String> {
    gap_names()
        .into_iter()
        .filter(|g| Capability::parse(g).is_some_and(|c| Needs::default().needs(c)))
        .collect()
}

#[tokio::test]
async fn the_probe_finds_what_docs_stores_md_says_of_this_store() {
    let app = spawn_app().await;
    let findings = probe(&app).await;
    let mut missing = matches_row(&findings, &documented_row());
    // The test servers accept exactly what this store lacks (If-Match on PUT and RGW's older
    // name of the copy guard are relied on by nothing, so they need no acceptance).
    missing.retain(|c| Capability::parse(c).is_some_and(|c| Needs { archival: true }.needs(c)));
    assert_eq!(missing, gap_names(), "UPCOMMIT_TEST_ACCEPT_STORE_GAPS");
}

/// Asserts every finding is what `row` says (`yes…` present, `no…` missing); returns the names
/// of the missing ones.
pub(crate) fn matches_row(findings: &Findings, row: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut missing = BTreeSet::new();
    for cap in Capability::ALL {
        let found = findings
            .get(cap)
            .unwrap_or_else(|| panic!("{} probed", cap.name()));
        let cell = row
            .get(cap.name())
            .unwrap_or_else(|| panic!("docs/stores.md has a column {}", cap.name()));
        let documented_present = cell.starts_with("yes");
        match found {
            Finding::Present => assert!(
                documented_present,
                "{}: the probe finds it present, docs/stores.md says {cell:?}",
                cap.name()
            ),
            Finding::Missing(why) => {
                assert!(
                    cell.starts_with("no"),
                    "{}: the probe finds it missing ({why}), docs/stores.md says {cell:?}",
                    cap.name()
                );
                missing.insert(cap.name().to_owned());
            }
            Finding::Unknown(why) => panic!("{}: the probe could not tell: {why}", cap.name()),
        }
    }
    missing
}

#[tokio::test]
async fn the_probe_touches_nothing_outside_its_prefix_and_leaves_nothing_behind() {
    let app = spawn_app().await;
    // Objects at the keys an attacker would hope a careless probe reuses: a final key, a tmp
    // key of today, the bucket's root.
    let today = chrono::Utc::now().format("%Y/%m/%d");
    let sentinels = [
        "media/images/sentinel.png".to_owned(),
        format!("tmp/{today}/0123456789abcdef0123456789abcdef/seed"),
        "seed".to_owned(),
    ];
    for k in &sentinels {
        app.put_object(k, b"sentinel".to_vec(), "image/png").await;
    }
    let before = all_versions(&app).await;
    let documents = bucket_documents(&app).await;
    for _ in 0..2 {
        let findings = probe(&app).await;
        assert!(findings.0.len() == Capability::ALL.len(), "{findings:?}");
    }
    assert_eq!(
        all_versions(&app).await,
        before,
        "the probe left or changed objects"
    );
    assert_eq!(
        bucket_documents(&app).await,
        documents,
        "the probe writes no bucket configuration document"
    );
    let uploads = app.open_multipart_uploads().await;
    assert!(uploads.is_empty(), "{uploads:?}");
    for k in &sentinels {
        assert_eq!(app.get_object(k).await, b"sentinel", "{k}");
    }
}

/// The bucket's lifecycle and CORS documents, as S3 returns them.
async fn bucket_documents(app: &TestApp) -> String {
    let lifecycle = app
        .s3
        .get_bucket_lifecycle_configuration()
        .bucket(&app.bucket)
        .send()
        .await
        .map(|o| format!("{:?}", o.rules()))
        .unwrap_or_else(|e| format!("status {:?}", e.raw_response().map(|r| r.status().as_u16())));
    let cors = app
        .s3
        .get_bucket_cors()
        .bucket(&app.bucket)
        .send()
        .await
        .map(|o| format!("{:?}", o.cors_rules()))
        .unwrap_or_else(|e| format!("status {:?}", e.raw_response().map(|r| r.status().as_u16())));
    format!("{lifecycle}\n{cors}")
}

/// (key, version id, ETag) of every object version (or, unversioned, every object).
async fn all_versions(app: &TestApp) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    let versioned = app
        .s3
        .list_object_versions()
        .bucket(&app.bucket)
        .send()
        .await;
    match versioned {
        Ok(page) if store_kind() != "garage" => {
            assert!(!page.is_truncated().unwrap_or(false), "a small bucket");
            for v in page.versions() {
                out.insert((
                    v.key().unwrap_or_default().to_owned(),
                    v.version_id().unwrap_or_default().to_owned(),
                    v.e_tag().unwrap_or_default().to_owned(),
                ));
            }
            for m in page.delete_markers() {
                out.insert((
                    m.key().unwrap_or_default().to_owned(),
                    m.version_id().unwrap_or_default().to_owned(),
                    "delete marker".to_owned(),
                ));
            }
        }
        _ => {
            let page = app
                .s3
                .list_objects_v2()
                .bucket(&app.bucket)
                .send()
                .await
                .expect("list objects");
            for o in page.contents() {
                out.insert((
                    o.key().unwrap_or_default().to_owned(),
                    String::new(),
                    o.e_tag().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    out
}

/// Runs `upcommit serve` with the test server's environment and `gaps` accepted; waits for
/// it to exit (refused) or answer `/healthz` (started, then stopped).
async fn serve_with(app: &TestApp, gaps: &str) -> Result<String, (i32, String)> {
    let port = crate::helpers::free_port();
    let stderr = tempfile::NamedTempFile::new().expect("stderr file");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .arg("serve")
        .envs(&app.env)
        .env("UPCOMMIT_LISTEN", format!("127.0.0.1:{port}"))
        .env("UPCOMMIT_ACCEPT_STORE_GAPS", gaps)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(stderr.reopen().expect("stderr"))
        .spawn()
        .expect("start upcommit serve");
    let base = format!("http://127.0.0.1:{port}");
    for _ in 0..600 {
        if let Some(status) = child.try_wait().expect("wait") {
            let text = std::fs::read_to_string(stderr.path()).unwrap_or_default();
            return Err((status.code().unwrap_or(-1), text));
        }
        if app.http.get(format!("{base}/healthz")).send().await.is_ok() {
            let readyz: Value = app
                .http
                .get(format!("{base}/readyz"))
                .send()
                .await
                .expect("readyz")
                .json()
                .await
                .expect("readyz JSON");
            let bucket: Value = app
                .http
                .get(format!("{base}/v1/admin/bucket"))
                .bearer_auth(app.admin_token("root"))
                .send()
                .await
                .expect("admin bucket view")
                .json()
                .await
                .expect("admin bucket view JSON");
            let metrics = app.metrics_text_at(&base).await;
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(stderr.path()).unwrap_or_default();
            return Ok(
                json!({"readyz": readyz, "bucket": bucket, "metrics": metrics, "log": log})
                    .to_string(),
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    panic!("upcommit serve neither started nor exited in 60 s");
}

#[tokio::test]
async fn serve_refuses_to_start_until_every_gap_is_accepted_by_name() {
    let app = spawn_app().await;
    let gaps = needed_gaps();
    assert!(
        !gaps.is_empty(),
        "every store under test lacks something (LocalStack: POST signatures)"
    );

    // Nothing accepted: refused, naming each gap, the promise it breaks and the setting.
    let (code, text) = serve_with(&app, "").await.expect_err("refuses to start");
    assert_ne!(code, 0, "{text}");
    for gap in &gaps {
        let cap = Capability::parse(gap).expect("a capability name");
        assert!(text.contains(gap.as_str()), "{gap} not named: {text}");
        assert!(
            text.contains(cap.promise()),
            "{gap}'s promise not said: {text}"
        );
    }
    assert!(
        text.contains(&format!(
            "UPCOMMIT_ACCEPT_STORE_GAPS={}",
            Capability::ALL
                .iter()
                .filter(|c| gaps.contains(c.name()))
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(",")
        )),
        "{text}"
    );

    // All but one accepted: refused for that one only.
    let (last, rest): (Vec<&String>, Vec<&String>) = {
        let mut all: Vec<&String> = gaps.iter().collect();
        let last = all.pop().expect("one gap");
        (vec![last], all)
    };
    let rest_list = rest
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let (_, text) = serve_with(&app, &rest_list)
        .await
        .expect_err("still refuses");
    assert!(
        text.contains(&format!("UPCOMMIT_ACCEPT_STORE_GAPS={}", last[0])),
        "{text}"
    );

    // A name that is no capability is refused, not ignored.
    let (_, text) = serve_with(&app, &format!("{},conditional_puts", accepted_store_gaps()))
        .await
        .expect_err("a typo refuses");
    assert!(
        text.contains("unknown store capability \"conditional_puts\""),
        "{text}"
    );

    // Everything accepted: it starts and shows each gap in the admin view, /metrics and its log
    // (not in /readyz, which anyone may read: issue 35).
    let out: Value = serde_json::from_str(
        &serve_with(&app, &accepted_store_gaps())
            .await
            .unwrap_or_else(|(c, t)| panic!("did not start ({c}): {t}")),
    )
    .expect("JSON");
    let readyz = &out["readyz"];
    assert_eq!(readyz["status"], "ready", "{readyz}");
    assert!(readyz.get("store_gaps").is_none(), "{readyz}");
    let accepted: Vec<&Value> = out["bucket"]["capabilities"]
        .as_array()
        .expect("capabilities")
        .iter()
        .filter(|l| l["standing"] == "accepted")
        .collect();
    let shown: BTreeSet<String> = accepted
        .iter()
        .map(|g| g["capability"].as_str().expect("name").to_owned())
        .collect();
    assert_eq!(shown, gaps, "{}", out["bucket"]);
    for g in accepted {
        assert!(g["without"].as_str().is_some_and(|w| !w.is_empty()), "{g}");
    }
    let metrics = out["metrics"].as_str().expect("metrics");
    for cap in Capability::ALL {
        let standing = if gaps.contains(cap.name()) {
            "accepted"
        } else if gap_names().contains(cap.name()) || documented_row()[cap.name()].starts_with("no")
        {
            "not_needed"
        } else {
            "present"
        };
        let series = format!(
            "upcommit_store_capability{{capability=\"{}\",standing=\"{standing}\"}}",
            cap.name()
        );
        assert_eq!(
            series_value(metrics, &series),
            Some(1.0),
            "{series}\n{metrics}"
        );
    }
    let log = out["log"].as_str().expect("log");
    for gap in &gaps {
        assert!(
            log.contains("running without a store capability") && log.contains(gap.as_str()),
            "{gap} not in the startup log: {log}"
        );
    }
    // Issue 36: the log said `finding=Missing("…")`. Findings read as words there too.
    assert_no_debug_text(log);
}

/// Issue 36: operator-facing lines showed Rust's debug text (`finding=Missing("…")` in the
/// startup log, "HEAD returns None" in doctor). None of it may appear in `text`.
fn assert_no_debug_text(text: &str) {
    for debug in [
        "Missing(", "Unknown(", "Present(", "Some(", "Refused(", "Silent(",
    ] {
        assert!(!text.contains(debug), "{debug:?} in: {text}");
    }
    // `None` as a word (`If-None-Match` is a header's name).
    for (at, _) in text.match_indices("None") {
        assert!(text[..at].ends_with('-'), "\"None\" in: {text}");
    }
}

#[tokio::test]
async fn doctor_prints_one_line_per_capability_and_fails_on_a_gap_not_accepted() {
    let app = spawn_app().await;
    let gaps = needed_gaps();
    let run = upcommit(&app, &["doctor", "--json"]);
    let body: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("JSON ({e}): {}{}", run.stdout, run.stderr));
    let lines = body["store"]["lines"].as_array().expect("store lines");
    assert_eq!(lines.len(), Capability::ALL.len());
    for l in lines {
        let name = l["capability"].as_str().expect("name");
        let standing = l["standing"].as_str().expect("standing");
        if gaps.contains(name) {
            assert_eq!(standing, "accepted", "{l}");
            assert!(l["without"].as_str().is_some(), "{l}");
        } else {
            assert!(["present", "not_needed"].contains(&standing), "{l}");
        }
        assert!(l["promise"].as_str().is_some_and(|p| !p.is_empty()), "{l}");
    }
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);

    // The same bucket without the acceptance: exit 1, and the text names what to set.
    let mut env_less = app.env.clone();
    env_less.insert("UPCOMMIT_ACCEPT_STORE_GAPS".into(), String::new());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .arg("doctor")
        .envs(&env_less)
        .env("RUST_LOG", "warn")
        .output()
        .expect("doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.contains("guards:")).count(),
        Capability::ALL.len(),
        "{text}"
    );
    for gap in &gaps {
        let line = text
            .lines()
            .find(|l| l.contains("guards:") && l.contains(&format!(" {gap} ")))
            .unwrap_or_else(|| panic!("no line for {gap}: {text}"));
        assert!(line.contains("FAIL"), "{line}");
    }
    assert!(text.contains("serve refuses to start"), "{text}");
    assert_no_debug_text(&text);
}

/// A store wrapper whose probe reports `hidden` missing (the rest as the real store answers):
/// the server's fallbacks for a store that lacks them, on top of the real one.
fn hiding(hidden: &'static [Capability]) -> crate::helpers::StoreWrapper {
    let faults = Arc::new(crate::faults::Faults::default());
    *faults.hide_capabilities.lock().expect("lock") = hidden.to_vec();
    crate::faults::faulty_store(faults)
}

/// Issue 36: RGW refused every part copy the SDK sent (411) and each commit of a file over the
/// single-copy limit answered 500 `internal_error`. Where the probe does not find copies in
/// parts working and the gap is accepted, such files are refused at presign, with their own
/// code, and smaller files are offered as before.
#[tokio::test]
async fn a_file_over_the_single_copy_limit_is_refused_at_presign_where_the_store_cannot_copy_in_parts(
) {
    const MIB: u64 = 1024 * 1024;
    let app = spawn_app_with(Spawn {
        wrap_store: Some(hiding(&[Capability::CopyInParts])),
        env: vec![
            (
                "UPCOMMIT_ACCEPT_STORE_GAPS",
                format!("{},copy_in_parts", accepted_store_gaps()),
            ),
            ("UPCOMMIT_MAX_SINGLE_COPY_BYTES", (5 * MIB).to_string()),
        ],
        ..Spawn::default()
    })
    .await;
    let token = app.token("alice");
    let body = |size: u64, multipart: bool| {
        json!({"profile": "image", "content_type": "image/png", "size": size,
            "filename": "a.png", "multipart": multipart})
    };

    for multipart in [false, true] {
        let (status, code) =
            error_code(app.presign(&token, body(5 * MIB + 1, multipart)).await).await;
        assert_eq!(
            (status, code.as_str()),
            (400, "copy_in_parts_unavailable"),
            "multipart: {multipart}"
        );
    }
    assert_eq!(
        app.presign(&token, body(5 * MIB, false)).await.status(),
        201
    );
    // The refusals cost no quota and leave no upload behind.
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 1);
}

#[tokio::test]
async fn what_the_store_cannot_enforce_is_not_offered() {
    const HIDDEN: &[Capability] = &[Capability::ChecksumSha256, Capability::PostSizeRange];
    let app = spawn_app_with(Spawn {
        wrap_store: Some(hiding(HIDDEN)),
        env: vec![(
            "UPCOMMIT_ACCEPT_STORE_GAPS",
            format!("{},checksum_sha256,post_size_range", accepted_store_gaps()),
        )],
        ..Spawn::default()
    })
    .await;
    let token = app.token("alice");
    let body = |method: &str, alg: Option<&str>| {
        let mut b = json!({"profile": "image", "content_type": "image/png", "size": 900,
            "filename": "a.png", "method": method});
        if let Some(alg) = alg {
            let bytes = crate::helpers::media("image/png", 900);
            let alg_t =
                upcommit::domain::checksum::ChecksumAlgorithm::parse(alg).expect("an algorithm");
            let c = upcommit::domain::checksum::Checksum::of(alg_t, &bytes);
            b["checksum"] = json!({"algorithm": alg, "value": c.value});
        }
        b
    };
    let (status, code) = error_code(app.presign(&token, body("PUT", Some("SHA256"))).await).await;
    assert_eq!(
        (status, code.as_str()),
        (400, "checksum_algorithm_unavailable")
    );
    let (status, code) = error_code(app.presign(&token, body("POST", None)).await).await;
    assert_eq!((status, code.as_str()), (400, "post_upload_unavailable"));
    // What the store does enforce is still offered (RGW 16.2 keeps no checksum at all).
    if !crate::helpers::gap_accepted("checksum_crc32c") {
        assert_eq!(
            app.presign(&token, body("PUT", Some("CRC32C")))
                .await
                .status(),
            201
        );
    }
    assert_eq!(app.presign(&token, body("PUT", None)).await.status(), 201);
    // Refusals cost no quota and leave no upload behind.
    let offered = if crate::helpers::gap_accepted("checksum_crc32c") {
        1
    } else {
        2
    };
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, offered);
}

#[tokio::test]
async fn a_post_form_altered_after_signing_is_refused_where_the_store_verifies_signatures() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let bytes = crate::helpers::media("image/png", 900);
    let p = app
        .presign_ok(&token, "image", "image/png", 900, "POST")
        .await;
    let mut fields = p.fields.clone().expect("form fields");
    // Widen the signed size range and send more bytes than were declared and charged.
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::STANDARD;
    let mut policy: Value =
        serde_json::from_slice(&engine.decode(&fields["policy"]).expect("base64")).expect("json");
    for c in policy["conditions"].as_array_mut().expect("conditions") {
        if c.get(0).and_then(Value::as_str) == Some("content-length-range") {
            *c = json!(["content-length-range", 1, 10_000]);
        }
    }
    fields.insert("policy".into(), engine.encode(policy.to_string()));
    let mut more = bytes.clone();
    more.extend_from_slice(&bytes);
    let mut form = reqwest::multipart::Form::new();
    for (k, v) in &fields {
        form = form.text(k.clone(), v.clone());
    }
    form = form.part(
        "file",
        reqwest::multipart::Part::bytes(more).file_name("a.png"),
    );
    let resp = app
        .http
        .post(&p.url)
        .multipart(form)
        .send()
        .await
        .expect("POST");
    let status = resp.status().as_u16();
    if gap_names().contains("post_signature") {
        // The documented gap (LocalStack): the store keeps the altered form's bytes. The commit
        // still refuses them: they are not the declared size.
        assert!((200..300).contains(&status), "{status}");
        let (status, code) = error_code(app.commit(&token, &p.key, None).await).await;
        assert_eq!((status, code.as_str()), (422, "size_mismatch"));
    } else {
        assert_eq!(status, 403, "the store verifies the policy's signature");
        assert!(!app.object_exists(&p.key).await, "nothing stored");
    }
}

/// A proxy in front of the store under test that answers `answer` (status, error code; status 0:
/// no answer) to every request whose URI contains `fail` (the probe's keys name their round:
/// `…/r0-storage-class`), relaying the rest; returns its address and the paths it failed.
async fn failing_proxy(
    fail: &'static str,
    answer: (u16, &'static str),
) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::extract::{Request, State};
    use axum::response::{IntoResponse, Response};
    type Shared = (
        reqwest::Client,
        (&'static str, (u16, &'static str)),
        Arc<std::sync::Mutex<Vec<String>>>,
    );
    async fn handle(
        State((http, (fail, (status, code)), failed)): State<Shared>,
        req: Request,
    ) -> Response {
        let path = req.uri().path().to_owned();
        let whole = req.uri().to_string();
        if whole.contains(fail) {
            failed.lock().expect("lock").push(path);
            if status == 0 {
                // No answer at all: the store hangs.
                tokio::time::sleep(Duration::from_secs(300)).await;
            }
            return (
                axum::http::StatusCode::from_u16(status).expect("status"),
                [("content-type", "application/xml")],
                format!("<Error><Code>{code}</Code><Message>injected</Message></Error>"),
            )
                .into_response();
        }
        crate::s3_proxy::relay(&http, req).await
    }
    let failed = Arc::new(std::sync::Mutex::new(Vec::new()));
    let router = axum::Router::new().fallback(handle).with_state((
        crate::s3_proxy::relay_client(),
        (fail, answer),
        failed.clone(),
    ));
    (crate::helpers::serve(router).await, failed)
}

/// The probe's storage_class finding through a proxy that fails the calls matching `fail`.
async fn probe_through(
    app: &TestApp,
    fail: &'static str,
    answer: (u16, &'static str),
) -> (Finding, Vec<String>) {
    let (endpoint, failed) = failing_proxy(fail, answer).await;
    let mut env = app.env.clone();
    env.insert("UPCOMMIT_S3_ENDPOINT".into(), endpoint);
    let settings = Settings::from_sources(None, &|k| env.get(k).cloned()).expect("settings");
    let store = S3Store::connect(&settings.s3).await.expect("S3 client");
    let found = store.probe_archival("GLACIER_IR").await;
    let failed = failed.lock().expect("lock").clone();
    (
        found
            .get(Capability::StorageClass)
            .cloned()
            .expect("storage_class probed"),
        failed,
    )
}

/// Review 27: a store busy for a moment (503 SlowDown after the SDK's own retries) made a
/// capability *missing*, final, with no second round: the probe's rounds only asked again after
/// no answer at all. A 5xx now says nothing of the capability: the next round asks again and
/// finds what the store really does; a store that keeps failing leaves it unknown after three
/// rounds, which `serve` refuses like a missing one.
#[tokio::test]
async fn a_store_busy_during_the_probe_is_asked_again_and_never_judged_by_its_5xx() {
    let app = spawn_app().await;
    let direct = probe(&app).await;
    let truth = direct
        .get(Capability::StorageClass)
        .cloned()
        .expect("storage_class");
    assert!(!matches!(truth, Finding::Unknown(_)), "{truth:?}");

    // The first round's storage-class calls fail; the second round's go through. Throttled
    // (503 or 429 SlowDown) or timed out (S3's 400 RequestTimeout): none of them is an answer
    // about the capability (review 27, round 2: a 429 made a missing capability present).
    for answer in [
        (503, "SlowDown"),
        (429, "SlowDown"),
        (400, "RequestTimeout"),
    ] {
        let (found, failed) = probe_through(&app, "r0-storage-class", answer).await;
        assert_eq!(found, truth, "{answer:?}; failed calls: {failed:?}");
        assert!(
            !failed.is_empty(),
            "the proxy failed the first round's call"
        );
        assert!(failed.iter().all(|p| p.contains("/r0-")), "{failed:?}");
    }
}

#[tokio::test]
async fn a_store_failing_every_round_leaves_the_capability_unknown() {
    let app = spawn_app().await;
    let (found, failed) = probe_through(&app, "-storage-class", (503, "SlowDown")).await;
    assert!(
        matches!(&found, Finding::Unknown(why) if why.contains("503")),
        "{found:?}"
    );
    for round in ["/r0-", "/r1-", "/r2-"] {
        assert!(
            failed.iter().any(|p| p.contains(round)),
            "three rounds asked: {failed:?}"
        );
    }
}

/// Review 27, round 2: a store that stopped answering during the probe's cleanup held the
/// start for the SDK's 30 s per call. The cleanup has a budget of its own (10 s): here every
/// listing hangs, and the probe still returns with its findings, well before one SDK call's
/// 30 s would have ended. What is left is an unrecorded tmp object, removed by the tmp expiry
/// rule and the sweep.
#[tokio::test]
async fn a_store_hanging_during_the_cleanup_does_not_hold_the_probe() {
    let app = spawn_app().await;
    let started = std::time::Instant::now();
    let (found, hung) = probe_through(&app, "prefix=", (0, "")).await;
    let took = started.elapsed();
    assert!(
        !hung.is_empty(),
        "the cleanup listed under the probe prefix"
    );
    assert!(!matches!(found, Finding::Unknown(_)), "{found:?}");
    assert!(took < Duration::from_secs(25), "{took:?}");
}

/// Issue 35: `multipart_checksum` was probed with a full-object CRC64NVME only, yet it lets
/// presign offer multipart uploads declaring CRC32C too: a store that checks one full-object
/// algorithm and not the other was trusted for both. Here the store under test is made to lack
/// a full-object CRC32C (a proxy answers its CreateMultipartUpload 400 InvalidRequest, as such a
/// store does) while it keeps CRC64NVME: the capability is missing, naming CRC32C, and every
/// other finding is what the store itself answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_checksums_are_trusted_only_for_a_store_that_keeps_every_offered_algorithm() {
    let app = spawn_app().await;
    let direct = probe(&app).await;
    let (endpoint, failed) =
        failing_proxy("multipart-checksum-crc32c", (400, "InvalidRequest")).await;
    let mut env = app.env.clone();
    env.insert("UPCOMMIT_S3_ENDPOINT".into(), endpoint);
    let settings = Settings::from_sources(None, &|k| env.get(k).cloned()).expect("settings");
    let store = S3Store::connect(&settings.s3).await.expect("S3 client");
    let found = store.probe("GLACIER_IR").await;

    match found.get(Capability::MultipartChecksum) {
        Some(Finding::Missing(why)) if why.contains("CRC32C") => {}
        other => panic!("multipart_checksum: {other:?}, not missing for CRC32C"),
    }
    let failed = failed.lock().expect("lock").clone();
    assert!(!failed.is_empty(), "a full-object CRC32C was probed");
    for cap in Capability::ALL {
        if cap != Capability::MultipartChecksum {
            assert_eq!(found.get(cap), direct.get(cap), "{}", cap.name());
        }
    }
}

/// Review of issue 36: with the store unreachable, each probe finding quoted the HTTP client's
/// error, which names the presigned URL it sent — signature included, valid for minutes — in
/// doctor's text and JSON (and the startup log and the admin API, which show the same
/// findings). The findings say the store did not answer, without the URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_against_an_unreachable_store_name_no_presigned_url() {
    let app = spawn_app().await;
    let nowhere = format!("http://127.0.0.1:{}", crate::helpers::free_port());
    for args in [&["doctor"][..], &["doctor", "--json"][..]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"))
            .args(args)
            .envs(app.env.iter().filter(|(k, _)| *k != "UPCOMMIT_JWT_SECRET"))
            .env("UPCOMMIT_S3_ENDPOINT", &nowhere)
            .env("RUST_LOG", "warn")
            .output()
            .expect("run upcommit doctor");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "{text}");
        let untold = if args.len() == 1 {
            "could not be told"
        } else {
            "\"unknown\""
        };
        assert!(text.contains(untold), "{text}");
        for secret in ["X-Amz-Signature", "X-Amz-Credential", "?X-Amz-"] {
            assert!(!text.contains(secret), "{secret} in: {text}");
        }
        assert_no_debug_text(&text);
    }
}
