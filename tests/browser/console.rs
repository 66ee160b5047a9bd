//! The admin console (`/admin`, `UPCOMMIT_ADMIN_CONSOLE=true`) in Chromium, on a real server
//! with real data made through the real API: committed uploads of two profiles (presign, PUT to
//! LocalStack, commit), one upload left uncommitted in `tmp/`, a link, a copy, a hygiene run of
//! the `upcommit` binary that unlinks files, a sweep, and a webhook endpoint whose receiver is a
//! closed port (a 6-second retry window, so its deliveries turn `failed` while the test waits).
//! `console.mjs` compares every page with the admin API's answers, clicks every action and
//! checks the changed numbers, reads each page at 375 px and by keyboard, and signs in with a
//! user token and a bad one; here the server's headers, the settings rule, and what the actions
//! left in the catalog are checked. Screenshots land in `target/test-artifacts/console/`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::helpers::{self, spawn_app_with, Spawn, TestApp};
use super::node;

const DAY: i64 = 86_400;

/// Where the console's screenshots are kept (docs/operations.md names it).
fn screenshot_dir() -> String {
    format!(
        "{}/target/test-artifacts/console",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `upcommit hygiene` (the binary, against the server's database and bucket) as of `days`
/// from now: files of the tracked profile with no link become unlinked.
async fn hygiene_run_days_later(app: &TestApp, days: i64) {
    let at = chrono::Utc::now() + chrono::Duration::seconds(days * DAY + 5);
    let out = helpers::hygiene_cli(app, Some(at)).await;
    assert!(
        out.status.success(),
        "hygiene: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn json_of(resp: reqwest::Response, want: u16, what: &str) -> Value {
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap_or_default();
    assert_eq!(status, want, "{what}: {body}");
    if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&body).expect("JSON")
    }
}

/// Waits until the endpoint's deliveries are settled: some failed, none being retried (every
/// pending one waits behind a failed one of its file), and the counts unchanged for 1.5 s.
async fn wait_for_failed_deliveries(app: &TestApp, admin: &str, endpoint: &str) {
    let started = Instant::now();
    let mut last: Option<Value> = None;
    loop {
        let list = json_of(
            app.get("/v1/admin/webhooks", Some(admin)).await,
            200,
            "webhooks",
        )
        .await;
        let row = list["webhooks"]
            .as_array()
            .and_then(|w| w.iter().find(|w| w["id"] == endpoint))
            .cloned()
            .expect("the endpoint is listed");
        let counts = json!([row["pending"], row["failed"], row["delivered"]]);
        let retrying = app
            .db
            .count(&format!(
                "SELECT COUNT(*) FROM event_deliveries WHERE endpoint_id = '{endpoint}' \
                 AND state = 'pending' AND attempts > 0"
            ))
            .await;
        if row["failed"].as_i64().unwrap_or(0) >= 2
            && retrying == 0
            && last.as_ref() == Some(&counts)
        {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the deliveries never settled: {row}, {retrying} being retried"
        );
        last = Some(counts);
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
}

/// Waits until the server's drift watch has checked the bucket once.
async fn wait_for_bucket_check(app: &TestApp, admin: &str) {
    let started = Instant::now();
    loop {
        let b = json_of(
            app.get("/v1/admin/bucket", Some(admin)).await,
            200,
            "bucket",
        )
        .await;
        if !b["report"].is_null() {
            assert_eq!(
                b["verdict"], "ok",
                "the test bucket is as infra/ makes it: {b}"
            );
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{b}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn the_admin_console_shows_the_servers_real_data_and_each_action_works() {
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_ADMIN_CONSOLE", "true".to_owned()),
            ("UPCOMMIT_EVENT_RETRY_WINDOW", "6s".to_owned()),
            ("UPCOMMIT_WEBHOOK_RETRY_BASE_MS", "200".to_owned()),
            ("UPCOMMIT_WEBHOOK_RETRY_CAP_SECS", "1".to_owned()),
            ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "1".to_owned()),
            ("UPCOMMIT_TRACKS_LINKS", "image".to_owned()),
            ("UPCOMMIT_UNLINKED_GRACE_SECS", DAY.to_string()),
        ],
        ..Spawn::default()
    })
    .await;
    let admin = app.admin_token("ops");
    let alice = app.token("alice");
    let bob = app.token("bob");

    // The page and its script: served with the console on, under the strict policy.
    let page = app.get("/admin", None).await;
    assert_eq!(page.status(), 200);
    let header = |name: &str| {
        page.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    assert_eq!(
        header("content-security-policy"),
        "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; \
         img-src 'self' data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    );
    assert_eq!(header("cache-control"), "no-store");
    assert!(header("content-type").starts_with("text/html"));
    let script = app.get("/admin/app.js", None).await;
    assert_eq!(script.status(), 200);
    assert!(script
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/javascript")));

    // A webhook whose receiver is a closed port: every delivery fails.
    let hook = format!("http://127.0.0.1:{}/hook", helpers::free_port());
    json_of(
        app.post_json(
            "/v1/admin/webhooks",
            Some(&admin),
            &json!({"id": "failing-hook", "url": hook, "types": ["*"]}),
        )
        .await,
        201,
        "create the webhook",
    )
    .await;

    // Uploads through the API: alice's three images, bob's recording, one left uncommitted.
    let mut ids = Vec::new();
    for size in [2_000, 3_500, 150_000] {
        let (_, handle) = app
            .upload_and_commit(&alice, "image", "image/png", size)
            .await;
        ids.push(handle["id"].as_str().expect("id").to_owned());
    }
    app.upload_and_commit(&bob, "recording", "audio/mpeg", 40_000)
        .await;
    app.uploaded(&alice, "image", "image/png", 5_000, "PUT")
        .await;
    let (linked, unlinked) = (ids[0].clone(), ids[1].clone());
    let resp = app
        .http
        .put(format!("{}/v1/files/{linked}/links/post/42", app.address))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("link");
    assert_eq!(resp.status(), 204);
    let copy = json_of(
        app.post_json(
            &format!("/v1/files/{unlinked}/copies"),
            Some(&alice),
            &json!({}),
        )
        .await,
        201,
        "copy",
    )
    .await["id"]
        .as_str()
        .expect("copy id")
        .to_owned();
    // Two days on, hygiene unlinks the images nothing links (the copy too); then the sweep.
    hygiene_run_days_later(&app, 2).await;
    assert_eq!(
        app.db
            .strings(&format!(
                "SELECT status FROM file_handles WHERE id IN ('{unlinked}', '{copy}', '{linked}') ORDER BY id = '{linked}'"
            ))
            .await,
        vec!["unlinked", "unlinked", "available"]
    );
    app.sweep_after_urls_expire().await;
    wait_for_bucket_check(&app, &admin).await;
    wait_for_failed_deliveries(&app, &admin, "failing-hook").await;

    let fixture = json!({
        "owner": "alice",
        "linked": linked,
        "unlinked": unlinked,
        "copy": copy,
        "endpoint": "failing-hook",
    });
    let shots = screenshot_dir();
    let result = node(
        "console.mjs",
        vec![
            app.address.clone(),
            admin.clone(),
            alice.clone(),
            shots.clone(),
            fixture.to_string(),
        ],
    )
    .await;

    // What the console's clicks did, in the catalog.
    assert_eq!(result["restored"], unlinked.as_str());
    assert_eq!(
        app.db
            .strings(&format!(
                "SELECT status FROM file_handles WHERE id = '{unlinked}'"
            ))
            .await,
        vec!["available"],
        "Restore made the file available"
    );
    let new_copy = result["new_copy"].as_str().expect("the copy's id");
    assert_eq!(
        app.db
            .strings(&format!(
                "SELECT copied_from FROM file_handles WHERE id = '{new_copy}'"
            ))
            .await,
        vec![unlinked.clone()],
        "Copy made a handle copied from the file"
    );
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM event_endpoints WHERE id = 'failing-hook' \
                 AND disabled_at IS NOT NULL"
            )
            .await,
        1,
        "Disable disabled the endpoint"
    );
    let dry_run = result["dry_run"].as_str().expect("the dry run's id");
    assert_eq!(
        app.db
            .strings(&format!(
                "SELECT job || ' ' || state FROM job_runs WHERE id = '{dry_run}'"
            ))
            .await,
        vec!["hygiene finished"],
        "the dry run the page started is in the job history"
    );
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT COUNT(*) FROM file_handles WHERE status = 'available' AND id = '{linked}'"
            ))
            .await,
        1,
        "a dry run changed nothing"
    );
    let shots_taken = result["screenshots"].as_array().expect("screenshots");
    for name in [
        "overview-375",
        "overview-desktop",
        "files-375",
        "file-375",
        "events-375",
        "endpoint-375",
        "jobs-375",
        "run-375",
        "refused-user",
    ] {
        let file = format!("{shots}/{name}.png");
        assert!(
            shots_taken.iter().any(|s| s == &json!(file)) && std::path::Path::new(&file).exists(),
            "{file} is kept"
        );
    }
}

/// Off by default: neither route exists (the router's 404 `not_found`), and the admin API is
/// there whatever the console's setting.
/// Issue 37: with a profile that has variants, an image's page has a button per variant that
/// shows the rendition from its presigned URL; the page's policy then allows images from the
/// bucket's origin (and without variants it stays `img-src 'self' data:`, checked above).
#[tokio::test]
async fn the_console_shows_a_files_rendition_under_its_policy() {
    let app = spawn_app_with(Spawn {
        config: Some(
            r#"
            [[profiles]]
            name = "image"
            content_types = ["image/png", "image/jpeg"]
            max_size = 1000000
            final_prefix = "media/images/"

            [[profiles.variants]]
            name = "thumb"
            width = 40
            height = 40
            fit = "inside"
            "#
            .to_owned(),
        ),
        env: vec![("UPCOMMIT_ADMIN_CONSOLE", "true".to_owned())],
        ..Spawn::default()
    })
    .await;
    let page = app.get("/admin", None).await;
    let csp = page
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let endpoint = reqwest::Url::parse(app.env.get("UPCOMMIT_S3_ENDPOINT").expect("endpoint"))
        .expect("url")
        .origin()
        .ascii_serialization();
    assert!(
        csp.contains(&format!("img-src 'self' data: {endpoint};"))
            && csp.contains("script-src 'self';")
            && csp.contains("connect-src 'self';"),
        "{csp}"
    );

    // A real 100 x 60 PNG of alice's.
    let mut png_bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut png_bytes, 100, 60);
        enc.set_color(png::ColorType::Rgb);
        let mut w = enc.write_header().expect("header");
        w.write_image_data(&vec![90u8; 100 * 60 * 3]).expect("data");
    }
    let alice = app.token("alice");
    let p = app
        .uploaded_bytes(&alice, "image", "image/png", png_bytes)
        .await;
    let handle = json_of(app.commit(&alice, &p.key, None).await, 201, "commit").await;
    let id = handle["id"].as_str().expect("id").to_owned();
    let detail = json_of(
        app.get(
            &format!("/v1/admin/files/{id}"),
            Some(&app.admin_token("ops")),
        )
        .await,
        200,
        "detail",
    )
    .await;
    assert_eq!(detail["variants"], json!(["thumb"]));

    let out = crate::node(
        "console_rendition.mjs",
        vec![app.address.clone(), app.admin_token("ops"), id.clone()],
    )
    .await;
    assert_eq!(out["shown"]["w"], 40, "{out}");
    assert_eq!(out["shown"]["h"], 24, "{out}");
    assert!(
        out["shown"]["src"]
            .as_str()
            .is_some_and(|s| s.starts_with(&endpoint) && s.contains(&format!("cache/{id}/"))),
        "{out}"
    );
}

#[tokio::test]
async fn the_console_is_absent_unless_turned_on() {
    let app = spawn_app_with(Spawn::default()).await;
    for path in ["/admin", "/admin/app.js"] {
        let (status, code) = helpers::error_code(app.get(path, None).await).await;
        assert_eq!((status, code.as_str()), (404, "not_found"), "{path}");
    }
    let admin = app.admin_token("ops");
    assert_eq!(
        app.get("/v1/admin/bucket", Some(&admin)).await.status(),
        200
    );
}

/// `tests/browser/oidc_provider.py` on `port`, for `redirect_uri`, giving `subject` the role
/// `role` ("-" for none), its token endpoint on `token_host`; killed when dropped.
struct Provider(std::process::Child);

impl Provider {
    fn start(port: u16, redirect_uri: &str, subject: &str, role: &str, token_host: &str) -> Self {
        use std::io::BufRead;
        let python = std::env::var("UPCOMMIT_TEST_PYJWT")
            .expect("UPCOMMIT_TEST_PYJWT: a Python with PyJWT and cryptography (scripts/test.sh)");
        let mut child = std::process::Command::new(python)
            .arg(format!(
                "{}/tests/browser/oidc_provider.py",
                env!("CARGO_MANIFEST_DIR")
            ))
            .args([
                &port.to_string(),
                "upcommit",
                "console",
                redirect_uri,
                subject,
                role,
                token_host,
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the identity provider");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read");
        assert_eq!(line.trim(), "ready");
        Self(child)
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Signing in through the identity provider (`UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID`): the
/// authorization code flow with PKCE in the browser, for a provider user with the admin claim
/// (the console opens on the page it left), one without (only the refusal shows), a provider
/// whose token endpoint is on another origin (refused before leaving: the page's CSP would
/// block it) and one whose token no header can carry (refused, not kept). The
/// provider is a real one over HTTP (`oidc_provider.py`: discovery, authorize, token, JWKS;
/// PKCE checked, codes single-use); the server verifies its RS256 tokens through its JWKS.
#[tokio::test]
async fn the_console_signs_in_through_the_identity_provider() {
    for (subject, role, token_host, want) in [
        ("ops", "upcommit-admin", "127.0.0.1", "admin"),
        ("mallory", "-", "127.0.0.1", "user"),
        ("ops", "upcommit-admin", "localhost", "foreign"),
        ("nonascii", "upcommit-admin", "127.0.0.1", "nonascii"),
    ] {
        let idp_port = helpers::free_port();
        let port = helpers::free_port();
        let idp = format!("http://127.0.0.1:{idp_port}");
        let base = format!("http://127.0.0.1:{port}");
        let _provider = Provider::start(
            idp_port,
            &format!("{base}/admin"),
            subject,
            role,
            token_host,
        );
        let app = spawn_app_with(Spawn {
            env: vec![
                ("UPCOMMIT_LISTEN", format!("127.0.0.1:{port}")),
                ("UPCOMMIT_ADMIN_CONSOLE", "true".into()),
                ("UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID", "console".into()),
                ("UPCOMMIT_JWKS_URL", format!("{idp}/jwks")),
                ("UPCOMMIT_JWT_ISSUER", idp.clone()),
                ("UPCOMMIT_JWT_AUDIENCE", "upcommit".into()),
                ("UPCOMMIT_JWT_ADMIN_CLAIM", "roles".into()),
                ("UPCOMMIT_JWT_ADMIN_VALUE", "upcommit-admin".into()),
            ],
            ..Spawn::default()
        })
        .await;
        assert_eq!(app.address, base);
        // The page may talk to the provider, and to nothing else.
        let page = app.get("/admin", None).await;
        let csp = page
            .headers()
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok())
            .expect("CSP")
            .to_owned();
        assert!(csp.contains(&format!("connect-src 'self' {idp};")), "{csp}");
        assert_eq!(
            page.headers()
                .get("referrer-policy")
                .and_then(|v| v.to_str().ok()),
            Some("no-referrer")
        );
        let config = json_of(app.get("/admin/config", None).await, 200, "config").await;
        assert_eq!(
            config,
            json!({ "sign_in": { "issuer": idp, "client_id": "console", "scope": "openid" } })
        );
        // Only the provider's tokens are taken now: the server's own HS256 ones are not.
        let (status, code) = helpers::error_code(
            app.get("/v1/admin/bucket", Some(&app.admin_token("root")))
                .await,
        )
        .await;
        assert_eq!(
            (status, code.as_str()),
            (401, "token_algorithm_not_allowed")
        );
        let shots = format!(
            "{}/target/test-artifacts/console-sign-in",
            env!("CARGO_MANIFEST_DIR")
        );
        let out = node(
            "console_sign_in.mjs",
            vec![base.clone(), idp.clone(), shots, want.into()],
        )
        .await;
        assert!(
            out["requests"].as_array().is_some_and(|r| !r.is_empty()),
            "{out}"
        );
    }
    // Without a client id the page offers pasting only.
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_ADMIN_CONSOLE", "true".into())],
        ..Spawn::default()
    })
    .await;
    let config = json_of(app.get("/admin/config", None).await, 200, "config").await;
    assert_eq!(config, json!({ "sign_in": null }));
}
