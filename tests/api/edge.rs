//! The HTTP edge (issue 12, items 13, 14, 17, 18): refused presigns cost no rate-limit token,
//! sizes are exact integers, every response says `nosniff`, CORS for the configured origins, and
//! slow or idle connections are closed without starving real requests.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{error_code, spawn_app_with, Spawn};

/// Item 17: three presigns with an unknown profile used to leave the user rate-limited.
#[tokio::test]
async fn refused_presigns_do_not_use_up_the_rate_limit() {
    let app = spawn_app_with(Spawn {
        env: vec![
            // One token every 1,000 s: a taken token does not come back during the test.
            ("UPCOMMIT_PRESIGN_RATE_PER_SEC", "0.001".into()),
            ("UPCOMMIT_PRESIGN_BURST", "2".into()),
        ],
        ..Default::default()
    })
    .await;
    let alice = app.token("alice");
    let refused = [
        json!({"profile": "video", "content_type": "image/png", "size": 10}),
        json!({"profile": "image", "content_type": "text/html", "size": 10}),
        json!({"profile": "image", "content_type": "image/png", "size": 0}),
        json!({"profile": "image", "content_type": "image/png", "size": 1.5}),
        json!({"profile": "image", "content_type": "image/png", "size": 10, "filename": "a\nb"}),
    ];
    for body in &refused {
        let (status, code) = error_code(app.presign(&alice, body.clone()).await).await;
        assert_eq!(status, 400, "{body}: {code}");
    }
    let ok = json!({"profile": "image", "content_type": "image/png", "size": 10});
    for _ in 0..2 {
        assert_eq!(
            app.presign(&alice, ok.clone()).await.status(),
            201,
            "the burst is intact after refused presigns"
        );
    }
    assert_eq!(
        error_code(app.presign(&alice, ok).await).await,
        (429, "rate_limited".to_owned()),
        "accepted presigns still take tokens"
    );
}

/// Item 17, found by the outside review: a presign refused for quota (or failing later for
/// any reason) gives its rate-limit token back. Mutation: drop `TakenToken`'s refund in
/// `services::presign` and the fourth call answers `rate_limited`.
#[tokio::test]
async fn presigns_refused_for_quota_do_not_use_up_the_rate_limit() {
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_PRESIGN_RATE_PER_SEC", "0.001".into()),
            ("UPCOMMIT_PRESIGN_BURST", "3".into()),
            ("UPCOMMIT_QUOTA_DAILY_BYTES", "1000".into()),
        ],
        ..Default::default()
    })
    .await;
    let alice = app.token("alice");
    let sized = |size: u64| json!({"profile": "image", "content_type": "image/png", "size": size});
    assert_eq!(app.presign(&alice, sized(900)).await.status(), 201);
    for _ in 0..4 {
        assert_eq!(
            error_code(app.presign(&alice, sized(200)).await).await,
            (429, "quota_exceeded".to_owned())
        );
    }
    assert_eq!(
        app.presign(&alice, sized(50)).await.status(),
        201,
        "quota refusals took no token: one of the burst is left for this"
    );
}

/// Item 18: a size that is not written as an integer is refused, even when its value is whole
/// or rounds to one; nothing is recorded or charged.
#[tokio::test]
async fn sizes_that_are_not_integer_literals_are_refused() {
    let app = crate::helpers::spawn_app().await;
    let token = app.token("alice");
    for size in [
        "1e3",
        "1E3",
        "1.0",
        "1000.000",
        "20971520.0000000001",
        "1e20",
    ] {
        let body = format!(r#"{{"profile":"image","content_type":"image/png","size":{size}}}"#);
        let resp = app
            .http
            .post(format!("{}/v1/uploads", app.address))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("sent");
        assert_eq!(
            error_code(resp).await,
            (400, "size_invalid".to_owned()),
            "size {size}"
        );
    }
    let resp = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(r#"{"profile":"image","content_type":"image/png","size":"1000"}"#)
        .send()
        .await
        .expect("sent");
    assert_eq!(
        error_code(resp).await,
        (400, "invalid_json".to_owned()),
        "a string is not a size"
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM quota_usage").await, 0);
    // The integer literal itself is still accepted, up to the maximum.
    let resp = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(r#"{"profile":"image","content_type":"image/png","size":20971520}"#)
        .send()
        .await
        .expect("sent");
    assert_eq!(resp.status(), 201);
}

/// Item 18: every API response, errors and unmatched routes included, carries
/// `X-Content-Type-Options: nosniff`.
#[tokio::test]
async fn every_response_says_nosniff() {
    let app = crate::helpers::spawn_app().await;
    let token = app.token("alice");
    let ok = json!({"profile": "image", "content_type": "image/png", "size": 10});
    let responses = [
        ("201 presign", app.presign(&token, ok.clone()).await),
        (
            "400 presign",
            app.presign(&token, json!({"profile": "video", "size": 10}))
                .await,
        ),
        ("401", app.post_json("/v1/uploads", None, &ok).await),
        ("404 route", app.get("/no/such/route", None).await),
        (
            "405",
            app.http
                .delete(format!("{}/v1/uploads", app.address))
                .send()
                .await
                .expect("sent"),
        ),
        ("200 health", app.get("/healthz", None).await),
        ("200 spec", app.get("/openapi.yaml", None).await),
    ];
    for (what, resp) in responses {
        assert_eq!(
            resp.headers()
                .get("x-content-type-options")
                .and_then(|v| v.to_str().ok()),
            Some("nosniff"),
            "{what}: {}",
            resp.status()
        );
    }
}

/// A raw client that sends `head` and nothing more, as a slowloris client does.
async fn slow_client(address: &str, head: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let addr = address.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(head.as_bytes()).await.expect("write");
    s
}

/// Reads until the server closes the connection; returns what it sent. The outer guard only
/// stops a test that would otherwise hang (the defect): it is not a latency assertion.
async fn read_until_closed(mut s: tokio::net::TcpStream, guard: Duration) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(guard, read).await.ok().map(|()| got)
}

const PARTIAL_HEAD: &str = "GET /healthz HTTP/1.1\r\nHost: x\r\n";

fn fast_timeouts(extra: &[(&'static str, &str)]) -> Spawn {
    let mut env = vec![("UPCOMMIT_HEADER_READ_TIMEOUT_SECS", "1".to_owned())];
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    Spawn {
        env,
        ..Default::default()
    }
}

/// Item 13: a client that never finishes its request head is disconnected, unanswered.
#[tokio::test]
async fn a_connection_that_never_finishes_its_head_is_closed() {
    let app = spawn_app_with(fast_timeouts(&[])).await;
    let s = slow_client(&app.address, PARTIAL_HEAD).await;
    let got = read_until_closed(s, Duration::from_secs(30))
        .await
        .expect("the server closed the connection");
    let text = String::from_utf8_lossy(&got);
    assert!(!text.contains("200 OK"), "it was not served: {text}");
}

/// Item 13: an idle keep-alive connection is closed too (the header clock restarts after each
/// response), after it was served.
#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_its_response() {
    let app = spawn_app_with(fast_timeouts(&[])).await;
    let s = slow_client(&app.address, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let got = read_until_closed(s, Duration::from_secs(30))
        .await
        .expect("the server closed the idle connection");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "served first: {text}");
}

/// Item 13: a thousand slow clients, ten times the connection limit, do not starve a real
/// request (each slow one is closed at the header timeout, freeing its slot), and all of them
/// are closed.
#[tokio::test]
async fn a_thousand_slow_clients_do_not_starve_a_real_request() {
    let app = spawn_app_with(fast_timeouts(&[("UPCOMMIT_MAX_CONNECTIONS", "100")])).await;
    let mut slow = Vec::with_capacity(1000);
    for _ in 0..1000 {
        slow.push(slow_client(&app.address, PARTIAL_HEAD).await);
    }
    let real = reqwest::Client::new()
        .get(format!("{}/healthz", app.address))
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .expect("the real request is answered");
    assert_eq!(real.status(), 200);
    let closed = futures::future::join_all(
        slow.into_iter()
            .map(|s| read_until_closed(s, Duration::from_secs(120))),
    )
    .await;
    let served = closed
        .iter()
        .filter(|c| {
            c.as_ref()
                .is_some_and(|b| String::from_utf8_lossy(b).contains("200 OK"))
        })
        .count();
    assert!(
        closed.iter().all(Option::is_some),
        "every slow connection was closed"
    );
    assert_eq!(served, 0, "no slow connection was served");
}

/// Item 13: at the connection limit a new connection waits (it is not refused) and is served
/// as soon as a slot frees.
#[tokio::test]
async fn at_the_connection_limit_a_new_request_waits_for_a_free_slot() {
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_HEADER_READ_TIMEOUT_SECS", "600".into()),
            ("UPCOMMIT_MAX_CONNECTIONS", "2".into()),
        ],
        ..Default::default()
    })
    .await;
    let held = [
        slow_client(&app.address, PARTIAL_HEAD).await,
        slow_client(&app.address, PARTIAL_HEAD).await,
    ];
    let mut real = tokio::spawn({
        let url = format!("{}/healthz", app.address);
        async move { reqwest::Client::new().get(url).send().await }
    });
    assert!(
        tokio::time::timeout(Duration::from_secs(1), &mut real)
            .await
            .is_err(),
        "both slots are held: the request waits"
    );
    drop(held);
    let resp = tokio::time::timeout(Duration::from_secs(30), real)
        .await
        .expect("served once a slot frees")
        .expect("task")
        .expect("answered");
    assert_eq!(resp.status(), 200);
}

fn header<'a>(resp: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    resp.headers().get(name).and_then(|v| v.to_str().ok())
}

async fn preflight(app: &crate::helpers::TestApp, origin: &str) -> reqwest::Response {
    app.http
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/v1/uploads", app.address),
        )
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .send()
        .await
        .expect("sent")
}

/// Item 14: a page on a configured origin may call the API with a bearer token: the preflight
/// is answered (it was 405) and responses, errors included, name the origin; another origin
/// gets no CORS headers; credentials are never allowed.
#[tokio::test]
async fn the_api_serves_cors_to_the_configured_origins_only() {
    let app = crate::helpers::spawn_app().await;
    let origin = crate::helpers::TEST_ORIGIN;

    let pre = preflight(&app, origin).await;
    assert!(pre.status().is_success(), "preflight: {}", pre.status());
    assert_eq!(header(&pre, "access-control-allow-origin"), Some(origin));
    let methods = header(&pre, "access-control-allow-methods").unwrap_or_default();
    assert!(methods.contains("POST"), "{methods}");
    let allowed = header(&pre, "access-control-allow-headers")
        .unwrap_or_default()
        .to_ascii_lowercase();
    assert!(
        allowed.contains("authorization") && allowed.contains("content-type"),
        "{allowed}"
    );
    assert_eq!(header(&pre, "access-control-allow-credentials"), None);
    assert!(header(&pre, "vary").is_some_and(|v| v.to_ascii_lowercase().contains("origin")));

    let token = app.token("alice");
    let ok = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .header("origin", origin)
        .bearer_auth(&token)
        .json(&json!({"profile": "image", "content_type": "image/png", "size": 10}))
        .send()
        .await
        .expect("sent");
    assert_eq!(ok.status(), 201);
    assert_eq!(header(&ok, "access-control-allow-origin"), Some(origin));
    assert!(header(&ok, "access-control-expose-headers")
        .is_some_and(|v| v.to_ascii_lowercase().contains("x-request-id")));
    let unauthorized = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .header("origin", origin)
        .json(&json!({"profile": "image", "content_type": "image/png", "size": 10}))
        .send()
        .await
        .expect("sent");
    assert_eq!(unauthorized.status(), 401);
    assert_eq!(
        header(&unauthorized, "access-control-allow-origin"),
        Some(origin),
        "the page can read the error"
    );

    // An OPTIONS that is no preflight is routed as before: this route has no OPTIONS.
    let plain = app
        .http
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/v1/uploads", app.address),
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(
        error_code(plain).await,
        (405, "method_not_allowed".to_owned())
    );

    let stranger = "http://evil.test";
    let pre = preflight(&app, stranger).await;
    assert_eq!(header(&pre, "access-control-allow-origin"), None);
    let other = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .header("origin", stranger)
        .bearer_auth(&token)
        .json(&json!({"profile": "video", "size": 10}))
        .send()
        .await
        .expect("sent");
    assert_eq!(header(&other, "access-control-allow-origin"), None);
}

/// Item 14: `*` lets any origin call the API, still without credentials.
#[tokio::test]
async fn a_wildcard_origin_is_served_without_credentials() {
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_CORS_ORIGINS", "*".into())],
        ..Default::default()
    })
    .await;
    let pre = preflight(&app, "http://anywhere.test").await;
    assert!(pre.status().is_success());
    assert_eq!(header(&pre, "access-control-allow-origin"), Some("*"));
    assert_eq!(header(&pre, "access-control-allow-credentials"), None);
}

/// Item 13 with graceful shutdown: SIGTERM does not wait for a client that never finishes its
/// request head (it is no in-flight request), even with a long header timeout.
#[tokio::test]
async fn sigterm_does_not_wait_for_a_half_sent_request_head() {
    let app = crate::helpers::spawn_app().await;
    let (mut child, base) = crate::helpers::server_process(
        &app,
        &[("UPCOMMIT_HEADER_READ_TIMEOUT_SECS", "600")],
        std::process::Stdio::null(),
    )
    .await;
    let slow = slow_client(&base, PARTIAL_HEAD).await;
    // Served once, so the connection is accepted and being read when the signal lands.
    let idle = slow_client(&base, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let exited = tokio::task::spawn_blocking(move || {
        for _ in 0..300 {
            if let Ok(Some(s)) = child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    })
    .await
    .expect("join");
    drop((slow, idle));
    assert!(
        exited.is_some_and(|s| s.success()),
        "the server exited cleanly without waiting out the 600 s header timeout: {exited:?}"
    );
}
