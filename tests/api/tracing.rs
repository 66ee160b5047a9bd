//! Tracing: the real `upcommit serve` binary, with the standard OpenTelemetry variables in its
//! environment, exports to an OTLP/HTTP receiver that decodes every export with
//! `opentelemetry-proto` from PyPI (`tests/api/otlp_receiver.py`, in the venv
//! `UPCOMMIT_TEST_OTLP_PYTHON` names; scripts/test.sh makes it with
//! `ensure_otlp_receiver_installed`). Each test stops the server with SIGTERM before reading
//! what arrived, so the spans it finds went through the flush on shutdown.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use crate::helpers::{media, server_process_from, spawn_app, Presigned, TestApp};

/// A client's trace: the ids a caller's own tracing would have put in `traceparent`.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
const CLIENT_STATE: &str = "vendor=opaque-value,other=1";

/// The OTLP/HTTP receiver: a Python process that writes each span it decodes as a JSON line.
struct Receiver {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Receiver {
    fn start() -> Self {
        Self::start_on(0).expect("the receiver listens on a free port")
    }

    /// `None` when `port` is taken.
    fn start_on(port: u16) -> Option<Self> {
        let python = std::env::var("UPCOMMIT_TEST_OTLP_PYTHON").unwrap_or_else(|_| {
            format!(
                "{}/.cache/upcommit/otlp-venv/bin/python",
                std::env::var("HOME").unwrap_or_default()
            )
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = Command::new(&python)
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/otlp_receiver.py"))
            .arg(dir.path().join("spans.jsonl"))
            .arg(dir.path().join("requests.jsonl"))
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{python}: {e} (set UPCOMMIT_TEST_OTLP_PYTHON to a python with opentelemetry-proto; scripts/test.sh does)"));
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        let _ = BufReader::new(stdout).read_line(&mut line);
        match line.trim().parse() {
            Ok(port) => Some(Self { child, port, dir }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                None
            }
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn lines(&self, file: &str) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join(file))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("receiver line is JSON"))
            .collect()
    }

    /// Every span received, decoded.
    fn spans(&self) -> Vec<Value> {
        self.lines("spans.jsonl")
    }

    /// Every export request received: path, content type, the `x-test-key` header.
    fn requests(&self) -> Vec<Value> {
        self.lines("requests.jsonl")
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the real `upcommit serve` on the test's database and bucket with exactly these
/// OpenTelemetry variables: any `OTEL_*` of the test runner's own environment is removed.
async fn traced_server(app: &TestApp, otel: &[(&str, &str)]) -> (Child, String) {
    traced_server_logging(app, otel, Stdio::null()).await
}

/// [`traced_server`] with its log going to `stderr`.
async fn traced_server_logging(
    app: &TestApp,
    otel: &[(&str, &str)],
    stderr: Stdio,
) -> (Child, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_upcommit"));
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("OTEL_")) {
        command.env_remove(k);
    }
    // Spans leave only with the flush on shutdown: a scheduled export would hide a lost flush.
    let mut env = vec![("OTEL_BSP_SCHEDULE_DELAY", "600000")];
    env.extend(otel.iter().copied());
    server_process_from(app, command, &env, stderr).await
}

/// The names of the server process's threads (Linux shortens them to 15 bytes).
fn thread_names(child: &Child) -> Vec<String> {
    let tasks = format!("/proc/{}/task", child.id());
    std::fs::read_dir(&tasks)
        .expect("the server's threads")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

fn has_exporter_thread(child: &Child) -> bool {
    thread_names(child)
        .iter()
        .any(|name| name.starts_with("OpenTelemetry"))
}

/// Graceful stop, as an orchestrator does it; the exit must be clean.
fn stop(mut child: Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    assert!(child.wait().expect("wait").success());
}

async fn presign(
    app: &TestApp,
    base: &str,
    request_id: &str,
    traceparent: Option<&str>,
) -> Presigned {
    let mut req = app
        .http
        .post(format!("{base}/v1/uploads"))
        .bearer_auth(app.token("alice"))
        .header("x-request-id", request_id)
        .json(&json!({"profile": "image", "content_type": "image/png", "size": 2048, "method": "PUT"}));
    if let Some(tp) = traceparent {
        req = req.header("traceparent", tp);
    }
    let resp = req.send().await.expect("presign");
    assert_eq!(resp.status(), 201, "{request_id}");
    resp.json().await.expect("presign JSON")
}

/// Presigns on `base` (request id `request_id`, outside any client trace) and uploads the
/// file's bytes.
async fn uploaded(app: &TestApp, base: &str, request_id: &str) -> Presigned {
    let p = presign(app, base, request_id, None).await;
    assert!(app
        .upload(&p, media("image/png", 2048), "image/png")
        .await
        .is_success());
    p
}

/// Commits `p` on `base` inside the client's trace (its sampled `traceparent`), with `headers`
/// besides.
async fn commit_in_client_trace(
    app: &TestApp,
    base: &str,
    p: &Presigned,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = app
        .http
        .post(format!("{base}/v1/files"))
        .bearer_auth(app.token("alice"))
        .header("traceparent", format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.json(&json!({"key": p.key}))
        .send()
        .await
        .expect("commit")
}

/// The request span of the request with this `x-request-id`, asserting there is exactly one.
fn request_span<'a>(spans: &'a [Value], request_id: &str) -> &'a Value {
    let found: Vec<&Value> = spans
        .iter()
        .filter(|s| s["attributes"]["request_id"] == request_id)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one request span for {request_id}: {found:#?}"
    );
    found[0]
}

#[tokio::test]
async fn commit_joins_the_clients_trace_with_its_s3_and_catalog_calls_inside_it() {
    let receiver = Receiver::start();
    let app = spawn_app().await;
    let endpoint = receiver.endpoint();
    let log = tempfile::NamedTempFile::new().expect("log file");
    let (child, base) = traced_server_logging(
        &app,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SERVICE_NAME", "upcommit-under-test"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-test-key=sesame"),
            ("UPCOMMIT_LOG_FORMAT", "json"),
            ("RUST_LOG", "info"),
        ],
        Stdio::from(log.reopen().expect("log")),
    )
    .await;
    assert!(
        has_exporter_thread(&child),
        "an endpoint starts the exporter: {:?}",
        thread_names(&child)
    );

    let p = uploaded(&app, &base, "presign-untraced").await;
    let resp = commit_in_client_trace(
        &app,
        &base,
        &p,
        &[
            ("x-request-id", "commit-traced"),
            ("tracestate", CLIENT_STATE),
        ],
    )
    .await;
    assert_eq!(resp.status(), 201);
    // A readiness probe pings the catalog and HEADs the bucket: neither may become a trace.
    let ready = app
        .http
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), 200);
    stop(child);

    let spans = receiver.spans();
    let requests = receiver.requests();
    assert!(!requests.is_empty(), "nothing was exported");
    for r in &requests {
        // OTEL_EXPORTER_OTLP_ENDPOINT gets the signal's path; the body is protobuf; the
        // standard headers variable is sent.
        assert_eq!(r["path"], "/v1/traces", "{r}");
        assert_eq!(r["content_type"], "application/x-protobuf", "{r}");
        assert_eq!(r["x_test_key"], "sesame", "{r}");
    }
    assert!(spans.iter().all(|s| s["service"] == "upcommit-under-test"));

    // The commit's request span joined the client's trace, under the client's span.
    let request = request_span(&spans, "commit-traced");
    assert_eq!(request["trace_id"], CLIENT_TRACE);
    assert_eq!(request["parent_span_id"], CLIENT_SPAN);
    assert_eq!(request["trace_state"], CLIENT_STATE);
    assert_eq!(request["name"], "POST /v1/files");
    assert_eq!(request["kind"], "SPAN_KIND_SERVER");
    assert_eq!(request["attributes"]["http.request.method"], "POST");
    assert_eq!(request["attributes"]["http.route"], "/v1/files");
    assert_eq!(request["attributes"]["http.response.status_code"], 201);

    // One trace for the commit: every span of the client's trace descends from the request
    // span, and only the request span has its parent outside the server.
    let trace: Vec<&Value> = spans
        .iter()
        .filter(|s| s["trace_id"] == CLIENT_TRACE)
        .collect();
    let by_id: HashMap<&str, &Value> = trace
        .iter()
        .map(|s| (s["span_id"].as_str().expect("span id"), *s))
        .collect();
    assert_eq!(by_id.len(), trace.len(), "span ids are unique");
    for span in &trace {
        let mut at = *span;
        let mut hops = 0;
        while at["span_id"] != request["span_id"] {
            let parent = at["parent_span_id"].as_str().expect("parent id");
            at = by_id.get(parent).unwrap_or_else(|| {
                panic!(
                    "{} does not descend from the request span: {at}",
                    span["name"]
                )
            });
            hops += 1;
            assert!(hops < 64, "a parent cycle");
        }
    }
    let (req_start, req_end) = (request["start"].as_u64(), request["end"].as_u64());

    // The commit's S3 calls, named as the AWS SDK conventions say, inside the request.
    let s3: Vec<&&Value> = trace
        .iter()
        .filter(|s| s["attributes"]["rpc.system"] == "aws-api")
        .collect();
    let operations: BTreeSet<&str> = s3
        .iter()
        .map(|s| s["attributes"]["rpc.method"].as_str().expect("rpc.method"))
        .collect();
    assert!(operations.contains("CopyObject"), "{operations:?}");
    assert!(s3.len() >= 2, "the commit reads and copies: {operations:?}");
    for span in &s3 {
        let op = span["attributes"]["rpc.method"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(span["name"], format!("S3.{op}"));
        assert_eq!(span["kind"], "SPAN_KIND_CLIENT");
        assert_eq!(span["attributes"]["rpc.service"], "S3");
        assert!(
            span["attributes"]["http.response.status_code"].is_i64(),
            "{span}"
        );
        assert!(
            span["start"].as_u64() >= req_start && span["end"].as_u64() <= req_end,
            "{span}"
        );
    }
    // The catalog calls too: the commit looks the upload up and leases it.
    let catalog: BTreeSet<&str> = trace
        .iter()
        .filter_map(|s| s["attributes"]["db.operation.name"].as_str())
        .collect();
    for op in ["upload_by_key", "take_lease"] {
        assert!(catalog.contains(op), "{op} not in {catalog:?}");
    }

    // Every trace starts at a request (or a job run): the pollers' catalog and S3 calls (the
    // job gauges read the catalog at start and every 5 s) are not a trace each.
    for root in spans.iter().filter(|s| s["parent_span_id"] == "") {
        assert_eq!(
            root["kind"], "SPAN_KIND_SERVER",
            "a root that is no request: {root}"
        );
    }

    // The start-up wait polled /healthz, and /readyz was asked: probes are not traced.
    assert!(
        !spans.iter().any(|s| s["attributes"]["route"] == "/healthz"
            || s["attributes"]["route"] == "/readyz"
            || s["attributes"]["db.operation.name"] == "ping"),
        "a probe was exported"
    );

    // The log is what it was without export: the spans made for the exporter are not in it,
    // and the commit's lines still carry its request id.
    let text = std::fs::read_to_string(log.path()).expect("log");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for l in &lines {
        let name = l["span"]["name"].as_str().unwrap_or_default();
        assert!(!["catalog", "s3", "job"].contains(&name), "{l}");
    }
    assert!(lines
        .iter()
        .any(|l| l["span"]["request_id"] == "commit-traced"));

    // The presign had no traceparent: a trace of its own, rooted in the server.
    let presign = request_span(&spans, "presign-untraced");
    assert_ne!(presign["trace_id"], CLIENT_TRACE);
    assert_eq!(presign["parent_span_id"], "");
    assert_eq!(presign["name"], "POST /v1/uploads");
}

#[tokio::test]
async fn an_invalid_traceparent_starts_a_new_trace_and_the_request_still_succeeds() {
    let receiver = Receiver::start();
    let app = spawn_app().await;
    // The traces endpoint is used as given: no path is appended to it.
    let endpoint = format!("{}/collector/traces", receiver.endpoint());
    let (child, base) =
        traced_server(&app, &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &endpoint)]).await;
    let invalid = [
        // version ff is forbidden
        format!("ff-{CLIENT_TRACE}-{CLIENT_SPAN}-01"),
        // all-zero trace id, all-zero span id
        format!("00-{}-{CLIENT_SPAN}-01", "0".repeat(32)),
        format!("00-{CLIENT_TRACE}-{}-01", "0".repeat(16)),
        // upper-case hex, a missing field, a short trace id, not hex, not a traceparent
        format!("00-{}-{CLIENT_SPAN}-01", CLIENT_TRACE.to_uppercase()),
        format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}"),
        format!("00-{}-{CLIENT_SPAN}-01", &CLIENT_TRACE[..30]),
        format!("00-{}-{CLIENT_SPAN}-01", "zz".repeat(16)),
        "not a traceparent".to_owned(),
        String::new(),
    ];
    for (i, tp) in invalid.iter().enumerate() {
        presign(&app, &base, &format!("invalid-{i}"), Some(tp.as_str())).await;
    }
    presign(&app, &base, "no-traceparent", None).await;
    // A valid traceparent whose caller did not sample: the default parent-based sampler
    // follows the caller, so this request is not exported.
    presign(
        &app,
        &base,
        "not-sampled",
        Some(&format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-00")),
    )
    .await;
    stop(child);

    let spans = receiver.spans();
    assert!(receiver
        .requests()
        .iter()
        .all(|r| r["path"] == "/collector/traces"));
    let mut traces = BTreeSet::new();
    for (i, tp) in invalid.iter().enumerate() {
        let span = request_span(&spans, &format!("invalid-{i}"));
        assert_eq!(span["parent_span_id"], "", "{tp}: {span}");
        assert_ne!(span["trace_id"], CLIENT_TRACE, "{tp}");
        assert_ne!(span["trace_id"], "0".repeat(32));
        assert_eq!(span["attributes"]["http.response.status_code"], 201);
        traces.insert(span["trace_id"].as_str().unwrap_or_default().to_owned());
    }
    let fresh = request_span(&spans, "no-traceparent");
    assert_eq!(fresh["parent_span_id"], "");
    traces.insert(fresh["trace_id"].as_str().unwrap_or_default().to_owned());
    assert_eq!(
        traces.len(),
        invalid.len() + 1,
        "each request its own trace"
    );
    assert!(
        !spans.iter().any(
            |s| s["attributes"]["request_id"] == "not-sampled" || s["trace_id"] == CLIENT_TRACE
        ),
        "an unsampled caller's request was exported"
    );
}

#[tokio::test]
async fn without_an_endpoint_nothing_is_exported_and_no_exporter_runs() {
    // Where the SDK would send by default (localhost:4318), when that port is free here.
    let default_receiver = Receiver::start_on(4318);
    let app = spawn_app().await;
    let (child, base) = traced_server(
        &app,
        &[
            // Empty is the same as unset.
            ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
            ("OTEL_SERVICE_NAME", "upcommit-under-test"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-test-key=sesame"),
            ("OTEL_TRACES_SAMPLER", "always_on"),
            ("OTEL_BSP_SCHEDULE_DELAY", "10"),
        ],
    )
    .await;
    let p = uploaded(&app, &base, "untraced").await;
    let resp = commit_in_client_trace(&app, &base, &p, &[]).await;
    assert_eq!(resp.status(), 201);
    assert!(
        !has_exporter_thread(&child),
        "an exporter runs without an endpoint: {:?}",
        thread_names(&child)
    );
    stop(child);
    if let Some(r) = default_receiver {
        assert!(r.requests().is_empty(), "{:?}", r.requests());
    }
}

#[tokio::test]
async fn the_standard_sampler_variable_is_honoured() {
    let receiver = Receiver::start();
    let app = spawn_app().await;
    let endpoint = receiver.endpoint();
    let (child, base) = traced_server(
        &app,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_TRACES_SAMPLER", "always_off"),
        ],
    )
    .await;
    // Even a caller that sampled its trace: always_off is not parent-based.
    presign(
        &app,
        &base,
        "sampled-caller",
        Some(&format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01")),
    )
    .await;
    stop(child);
    assert!(receiver.spans().is_empty(), "{:?}", receiver.spans());
}

#[tokio::test]
async fn a_sweep_run_is_one_trace_with_its_catalog_and_s3_calls() {
    let receiver = Receiver::start();
    let app = spawn_app().await;
    let endpoint = receiver.endpoint();
    let (child, _base) = traced_server(
        &app,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("UPCOMMIT_SWEEP_INTERVAL_SECS", "1"),
        ],
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    stop(child);

    let spans = receiver.spans();
    let sweeps: Vec<&Value> = spans.iter().filter(|s| s["name"] == "sweep").collect();
    assert!(!sweeps.is_empty(), "no sweep run traced: {spans:#?}");
    for sweep in sweeps {
        assert_eq!(sweep["parent_span_id"], "", "a job run is a trace's root");
        assert_eq!(sweep["attributes"]["job.name"], "sweep");
        let inside: Vec<&Value> = spans
            .iter()
            .filter(|s| s["trace_id"] == sweep["trace_id"] && s["span_id"] != sweep["span_id"])
            .collect();
        assert!(
            inside
                .iter()
                .any(|s| s["attributes"]["db.operation.name"] == "acquire_job_lock"),
            "the sweep's lease is in its trace: {inside:#?}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_collector_costs_no_request_and_no_clean_stop() {
    let app = spawn_app().await;
    // A port nobody listens on, and that no test's receiver can take meanwhile: receivers
    // bind ephemeral ports, and a free ephemeral port picked here was once handed to the next
    // test's receiver, which then received this server's exports without the headers it
    // checks (a README test-command run, 2026-12-04).
    let endpoint = "http://127.0.0.1:1".to_owned();
    let (child, base) = traced_server(&app, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]).await;
    let p = uploaded(&app, &base, "collector-down").await;
    let resp = commit_in_client_trace(&app, &base, &p, &[]).await;
    assert_eq!(resp.status(), 201);
    // The flush on shutdown fails fast and the exit is still clean.
    let started = std::time::Instant::now();
    stop(child);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "the stop waited {:?} on a collector that is not there",
        started.elapsed()
    );
}

/// A page whose fetch instrumentation sends the trace headers must get past the preflight:
/// otherwise tracing a browser would block its uploads.
#[tokio::test]
async fn a_browser_may_send_the_trace_headers() {
    let app = spawn_app().await;
    let pre = app
        .http
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/v1/files", app.address),
        )
        .header("origin", crate::helpers::TEST_ORIGIN)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type,traceparent,tracestate",
        )
        .send()
        .await
        .expect("preflight");
    assert!(pre.status().is_success(), "{}", pre.status());
    let allowed = pre
        .headers()
        .get("access-control-allow-headers")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    for h in ["traceparent", "tracestate", "authorization"] {
        assert!(
            allowed.split(',').any(|a| a.trim() == h),
            "{h} not in {allowed}"
        );
    }
}
