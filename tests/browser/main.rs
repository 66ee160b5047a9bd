//! The demo page, the browser client (`clients/js/upcommit.js`, also as the npm package an app
//! installs from `npm pack`'s tarball), the Uppy example and the admin console (`console.rs`
//! with `console.mjs`) in a real browser: Playwright (`playwright-core`) drives Debian's chromium,
//! headless and off the network, through `/demo` on the real server, uploading real PNGs to
//! LocalStack's S3 through CORS (preflight included). `demo.mjs` asserts what the page shows
//! (and the checksums it computed against Node's); this side checks the catalog and the bucket
//! afterwards. Needs `node`, `npm`, the packages of `tests/browser/package.json` and of
//! `clients/js/package.json` and `/usr/bin/chromium`: `scripts/test.sh` installs them and
//! runs this target; a missing piece fails the test rather than skipping it.

#[allow(dead_code)]
#[path = "../api/helpers.rs"]
mod helpers;

/// Browser tests' servers probe the store for real (few servers; see the api suite's).
fn probe_once(_key: &str) -> Option<helpers::StoreWrapper> {
    None
}

mod console;

use std::process::Command;

use aws_sdk_s3::types::{CorsConfiguration, CorsRule};
use helpers::{spawn_app_with, Spawn};
use upcommit::domain::checksum::{Checksum, ChecksumAlgorithm};

/// The bucket's CORS rule for pages on `origins`: PUT and POST with the headers the presigned
/// requests carry (checksums included), ETag exposed (multipart needs it).
async fn allow_uploads_from(app: &helpers::TestApp, origins: &[&str]) {
    let mut rule = CorsRule::builder();
    for origin in origins {
        rule = rule.allowed_origins(*origin);
    }
    let rule = rule
        .allowed_methods("PUT")
        .allowed_methods("POST")
        .allowed_headers("content-type")
        .allowed_headers("if-none-match")
        .allowed_headers("x-amz-checksum-sha256")
        .allowed_headers("x-amz-checksum-crc64nvme")
        .allowed_headers("x-amz-sdk-checksum-algorithm")
        .expose_headers("ETag")
        .max_age_seconds(600)
        .build()
        .expect("CORS rule");
    app.s3
        .put_bucket_cors()
        .bucket(&app.bucket)
        .cors_configuration(
            CorsConfiguration::builder()
                .cors_rules(rule)
                .build()
                .expect("CORS"),
        )
        .send()
        .await
        .expect("put CORS");
}

/// Runs `node tests/browser/<script> args…`; its stdout is JSON.
async fn node(script: &str, args: Vec<String>) -> serde_json::Value {
    let dir = env!("CARGO_MANIFEST_DIR");
    let mut cmd = Command::new("node");
    cmd.arg(format!("{dir}/tests/browser/{script}"))
        .args(args)
        .current_dir(format!("{dir}/tests/browser"));
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("run node (scripts/test.sh installs it)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed:\n{stderr}");
    serde_json::from_slice(&out.stdout).expect("the script prints its result as JSON")
}

#[tokio::test]
async fn the_demo_page_uploads_commits_and_shows_the_image() {
    // The built-in profiles, the image one with a variant the page shows.
    let config = r#"
        [[profiles]]
        name = "image"
        content_types = ["image/jpeg", "image/png", "image/webp", "image/heic"]
        max_size = 20971520
        final_prefix = "media/images/"

        [[profiles.variants]]
        name = "thumb"
        width = 48
        height = 48
        fit = "inside"

        [[profiles]]
        name = "recording"
        content_types = ["audio/mpeg", "audio/mp4", "audio/aac", "audio/ogg", "audio/webm", "audio/wav"]
        max_size = 524288000
        final_prefix = "media/recordings/"
    "#;
    let app = spawn_app_with(Spawn {
        config: Some(config.to_owned()),
        env: vec![
            ("UPCOMMIT_DEMO", "true".to_owned()),
            ("UPCOMMIT_DEMO_MINT_TOKENS", "true".to_owned()),
            ("UPCOMMIT_QUOTA_DAILY_UPLOADS", "3".to_owned()),
            (
                "UPCOMMIT_MULTIPART_PART_SIZE_BYTES",
                (5 * 1024 * 1024).to_string(),
            ),
        ],
        ..Spawn::default()
    })
    .await;
    // The page's own origin uploads straight to the bucket.
    allow_uploads_from(&app, &[&app.address]).await;

    let dir = env!("CARGO_MANIFEST_DIR");
    let shots = format!("{dir}/test-artifacts/browser");
    let mut cmd = Command::new("node");
    cmd.arg(format!("{dir}/tests/browser/demo.mjs"))
        .arg(&app.address)
        .arg(&shots)
        .current_dir(format!("{dir}/tests/browser"));
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("run node (scripts/test.sh installs it)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo.mjs failed:\n{stderr}");
    let result: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("demo.mjs prints its result as JSON");
    let uploads = result["uploads"].as_array().expect("uploads");
    assert_eq!(
        uploads.len(),
        3,
        "the PUT, the POST and the multipart upload were committed"
    );

    // Each committed file has its handle (owned by the minted user), its object, and the
    // checksum the page declared (Node's value, which is also that of the stored bytes).
    for u in uploads {
        let id = u["file_id"].as_str().expect("file id");
        let h = app
            .catalog
            .handle_by_id(&upcommit::domain::ids::FileId::parse(id).expect("file id"))
            .await
            .expect("catalog")
            .expect("the handle exists");
        assert_eq!(h.created_by, u["user"].as_str().expect("user"));
        assert_eq!(h.content_type, "image/png");
        assert!(h.key.starts_with("media/images/"), "{}", h.key);
        let algorithm = u["checksum"]["algorithm"].as_str().expect("algorithm");
        let value = u["checksum"]["value"].as_str().expect("value");
        let recorded = h.checksum.as_ref().expect("the handle records a checksum");
        assert_eq!(
            (recorded.algorithm.as_str(), recorded.value.as_str()),
            (algorithm, value),
            "{id}: the handle's checksum is the one computed in the test"
        );
        assert_eq!(
            app.db
                .strings(&format!(
                    "SELECT u.checksum_algorithm || ' ' || u.checksum_value FROM uploads u \
                     JOIN file_handles f ON f.upload_id = u.id WHERE f.id = '{id}'"
                ))
                .await,
            vec![format!("{algorithm} {value}")],
            "{id}: the page declared it at presign"
        );
        let algorithm = ChecksumAlgorithm::parse(algorithm).expect("algorithm");
        assert_eq!(
            Checksum::of(algorithm, &app.get_object(&h.key).await).value,
            value,
            "{}: the stored bytes have that checksum",
            h.key
        );
    }
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM file_handles").await,
        3,
        "the refused, too large and dropped uploads made no file"
    );
    assert!(
        std::path::Path::new(&format!("{shots}/demo-committed.png")).exists(),
        "the screenshot is kept"
    );
}

/// Serves a bare HTML page on its own port: an origin other than the API's.
async fn page_origin() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the page's port");
    let origin = format!(
        "http://127.0.0.1:{}",
        listener.local_addr().expect("addr").port()
    );
    let page = axum::Router::new().route(
        "/",
        axum::routing::get(|| async {
            axum::response::Html("<!doctype html><title>another origin</title><p>uploader</p>")
        }),
    );
    tokio::spawn(async move { axum::serve(listener, page).await });
    origin
}

/// Serves each (path, file, content type) on its own loopback port, reading the file at each
/// request (so a file written after the start is served); returns the origin.
async fn serve_files(files: Vec<(&'static str, String, &'static str)>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the page's port");
    let origin = format!(
        "http://127.0.0.1:{}",
        listener.local_addr().expect("addr").port()
    );
    let mut router = axum::Router::new();
    for (path, file, content_type) in files {
        router = router.route(
            path,
            axum::routing::get(move || async move {
                let body = tokio::fs::read(&file).await.expect("a served file");
                ([(axum::http::header::CONTENT_TYPE, content_type)], body)
            }),
        );
    }
    tokio::spawn(async move { axum::serve(listener, router).await });
    origin
}

/// Issue 12 item 14: a page on another origin (not the API's, as `docs/api.md` shows) presigns
/// with an `Authorization` header, PUTs to S3 and commits, in Chromium; a page on an origin not
/// in `UPCOMMIT_CORS_ORIGINS` is blocked by the browser before its presign is sent.
#[tokio::test]
async fn a_page_on_another_origin_uploads_through_the_api_with_cors() {
    let allowed = page_origin().await;
    let stranger = page_origin().await;
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_CORS_ORIGINS", allowed.clone())],
        ..Spawn::default()
    })
    .await;
    assert_ne!(allowed, app.address, "the page is not on the API's origin");
    // The bucket serves both pages, so only the API's CORS can block the stranger.
    let rule = CorsRule::builder()
        .allowed_origins(&allowed)
        .allowed_origins(&stranger)
        .allowed_methods("PUT")
        .allowed_headers("*")
        .expose_headers("ETag")
        .build()
        .expect("CORS rule");
    app.s3
        .put_bucket_cors()
        .bucket(&app.bucket)
        .cors_configuration(
            CorsConfiguration::builder()
                .cors_rules(rule)
                .build()
                .expect("CORS"),
        )
        .send()
        .await
        .expect("put CORS");

    let dir = env!("CARGO_MANIFEST_DIR");
    let mut cmd = Command::new("node");
    cmd.arg(format!("{dir}/tests/browser/cross_origin.mjs"))
        .arg(&app.address)
        .arg(format!("{allowed}/"))
        .arg(format!("{stranger}/"))
        .arg(app.token("page-user"))
        .current_dir(format!("{dir}/tests/browser"));
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("run node (scripts/test.sh installs it)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cross_origin.mjs failed:\n{stderr}");
    let result: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cross_origin.mjs prints its result as JSON");
    assert!(
        result["stranger"]
            .as_str()
            .is_some_and(|s| s.contains("Failed to fetch")),
        "{result}"
    );
    let id = result["file_id"].as_str().expect("file id");
    let h = app
        .catalog
        .handle_by_id(&upcommit::domain::ids::FileId::parse(id).expect("file id"))
        .await
        .expect("catalog")
        .expect("the handle exists");
    assert_eq!(h.created_by, "page-user");
    assert!(
        app.object_exists(&h.key).await,
        "{} is in the bucket",
        h.key
    );
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM uploads").await,
        1,
        "the stranger's presign never reached the handler"
    );
}

/// The browser client's promises against the network (issue 15): a multipart upload cut by a
/// page reload resumes from the parts S3 holds (parts 1 and 2 are not sent again, 3 and 4 once),
/// a part whose connection drops is sent again alone, and Cancel aborts the multipart upload
/// on the server. `resume.mjs` counts the part PUTs and downloads the committed bytes; here the
/// catalog and the bucket are checked.
#[tokio::test]
async fn the_browser_client_resumes_after_a_reload_and_retries_only_a_dropped_part() {
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_DEMO", "true".to_owned()),
            ("UPCOMMIT_DEMO_MINT_TOKENS", "true".to_owned()),
            (
                "UPCOMMIT_MULTIPART_PART_SIZE_BYTES",
                (5 * 1024 * 1024).to_string(),
            ),
        ],
        ..Spawn::default()
    })
    .await;
    allow_uploads_from(&app, &[&app.address]).await;
    let work = format!(
        "{}/test-artifacts/browser-resume",
        env!("CARGO_MANIFEST_DIR")
    );
    let result = node("resume.mjs", vec![app.address.clone(), work]).await;

    // One presign for the resumed upload: the reload did not start another.
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM uploads WHERE owner = 'resume-user'")
            .await,
        1
    );
    for (case, user) in [("reload", "resume-user"), ("drop", "drop-user")] {
        let id = result[case]["file_id"].as_str().expect("file id");
        let h = app
            .catalog
            .handle_by_id(&upcommit::domain::ids::FileId::parse(id).expect("file id"))
            .await
            .expect("catalog")
            .expect("the handle exists");
        assert_eq!(h.created_by, user);
        let file = std::fs::read(result[case]["path"].as_str().expect("path")).expect("the file");
        let stored = app.get_object(&h.key).await;
        assert!(
            stored == file,
            "{case}: the stored object is the file, byte for byte"
        );
        let recorded = h.checksum.as_ref().expect("a checksum");
        assert_eq!(
            recorded.value,
            Checksum::of(ChecksumAlgorithm::Crc64Nvme, &file).value,
            "{case}: the declared whole-file CRC64NVME, verified by S3"
        );
    }
    assert_eq!(
        result["reload"]["upload_id"].as_str(),
        Some(
            app.db
                .strings("SELECT upload_id FROM file_handles WHERE created_by = 'resume-user'")
                .await[0]
                .as_str()
        ),
        "the handle is the resumed upload's"
    );
    // Cancel aborted the multipart upload on the server: no handle, the session aborted.
    let aborted = result["abort"]["upload_id"].as_str().expect("upload id");
    assert_eq!(
        app.db
            .strings(&format!(
                "SELECT state FROM multipart_sessions WHERE upload_id = '{aborted}'"
            ))
            .await,
        vec!["aborted".to_owned()]
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM file_handles WHERE created_by = 'abort-user'")
            .await,
        0
    );
}

/// The Uppy 6 example (`clients/js/examples/uppy.*`, docs/clients.md): Uppy's S3 plugin sends
/// the bytes, upcommit presigns them (`signRequest`, with the file's SHA-256) and commits them
/// (`upload-success`), from a page on another origin. Here: each file's handle is the caller's
/// and its object has the checksum the page declared.
#[tokio::test]
async fn the_uppy_example_uploads_through_upcommit() {
    // The example page and the bundle uppy.mjs builds, served from their own origin (a real
    // server on the loopback: Chromium lets only such a page call the loopback API).
    let dir = env!("CARGO_MANIFEST_DIR");
    let out = format!("{dir}/test-artifacts/browser-uppy");
    std::fs::create_dir_all(&out).expect("artifacts dir");
    let bundle = format!("{out}/uppy.bundle.js");
    let origin = serve_files(vec![
        (
            "/uppy.html",
            format!("{dir}/clients/js/examples/uppy.html"),
            "text/html; charset=utf-8",
        ),
        ("/uppy.bundle.js", bundle.clone(), "text/javascript"),
    ])
    .await;
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_CORS_ORIGINS", origin.clone())],
        ..Spawn::default()
    })
    .await;
    allow_uploads_from(&app, &[&origin]).await;
    let result = node(
        "uppy.mjs",
        vec![
            app.address.clone(),
            origin.clone(),
            app.token("uppy-user"),
            bundle,
        ],
    )
    .await;
    let files = result["files"].as_array().expect("files");
    assert_eq!(files.len(), 3, "two by PUT, one by POST form");
    for f in files {
        let id = f["file_id"].as_str().expect("file id");
        let h = app
            .catalog
            .handle_by_id(&upcommit::domain::ids::FileId::parse(id).expect("file id"))
            .await
            .expect("catalog")
            .expect("the handle exists");
        assert_eq!(h.created_by, "uppy-user");
        assert_eq!(
            Checksum::of(ChecksumAlgorithm::Sha256, &app.get_object(&h.key).await).value,
            f["sha256"].as_str().expect("sha256"),
            "{}: the stored bytes are the page's file",
            h.key
        );
    }
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM uploads WHERE owner = 'uppy-user'")
            .await,
        3,
        "one presign per file"
    );
}

/// Issue 28 item 5: the browser client as an app gets it. `npm_package.mjs` runs `npm pack` in
/// `clients/js` (its `prepack` generates `upcommit.d.ts` from the JSDoc), installs the tarball
/// into a throwaway app outside the repository, type-checks a call against the installed types
/// (and sees a wrong one refused), bundles the app with esbuild through the package's bare name,
/// and uploads a PNG through the bundle in Chromium, from the app's own origin. Here: the tarball
/// is the crate's version and ships the module, its types and `package.json`, nothing else; the
/// handle the page shows is the one in the catalog; the bucket holds the file's bytes.
#[tokio::test]
async fn an_app_that_installs_the_packed_client_uploads_through_it_in_chromium() {
    let work = tempfile::Builder::new()
        .prefix("upcommit-npm-")
        .tempdir()
        .expect("a work dir");
    let app_dir = work.path().join("app");
    let served = |file: &str| app_dir.join(file).display().to_string();
    let origin = serve_files(vec![
        ("/", served("index.html"), "text/html; charset=utf-8"),
        ("/app.bundle.js", served("app.bundle.js"), "text/javascript"),
    ])
    .await;
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_CORS_ORIGINS", origin.clone())],
        ..Spawn::default()
    })
    .await;
    allow_uploads_from(&app, &[&origin]).await;

    let result = node(
        "npm_package.mjs",
        vec![
            app.address.clone(),
            origin.clone(),
            app.token("package-user"),
            work.path().display().to_string(),
        ],
    )
    .await;

    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        result["tarball"]["filename"],
        format!("upcommit-client-{version}.tgz"),
        "npm pack names the tarball after the package and the crate's version"
    );
    assert_eq!(result["installed_version"], version, "the app installed it");
    assert_eq!(
        result["tarball"]["files"],
        serde_json::json!(["package.json", "upcommit.d.ts", "upcommit.js"]),
        "the tarball ships the module, its generated types and package.json, nothing else"
    );
    let id = result["file_id"]
        .as_str()
        .expect("the page shows the file id");
    assert_eq!(
        app.db.strings("SELECT id FROM file_handles").await,
        vec![id.to_owned()],
        "the one handle in the catalog is the one the page shows"
    );
    let h = app
        .catalog
        .handle_by_id(&upcommit::domain::ids::FileId::parse(id).expect("file id"))
        .await
        .expect("catalog")
        .expect("the handle exists");
    assert_eq!(h.created_by, "package-user");
    assert_eq!(
        Some(h.upload_id.as_str()),
        result["handle"]["upload_id"].as_str()
    );
    let file = std::fs::read(result["file"]["path"].as_str().expect("path")).expect("the file");
    let head = app
        .s3
        .head_object()
        .bucket(&app.bucket)
        .key(&h.key)
        .send()
        .await
        .expect("HEAD the committed object");
    assert_eq!(head.content_length(), Some(file.len() as i64));
    assert_eq!(head.content_type(), Some("image/png"));
    assert!(
        app.get_object(&h.key).await == file,
        "{}: the bytes in S3 are the file's, byte for byte",
        h.key
    );
}

/// `clients/js/package.json` (and its lock file) carry the crate's version and licence, and the
/// package has no runtime dependencies: an app that installs it gets one module and its types.
#[test]
fn the_npm_package_has_the_crates_version_and_no_runtime_dependencies() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let read = |file: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(format!("{dir}/clients/js/{file}")).expect(file);
        serde_json::from_str(&text).expect(file)
    };
    let (package, lock) = (read("package.json"), read("package-lock.json"));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        package["version"], version,
        "clients/js/package.json's version is Cargo.toml's (npm version X.Y.Z in clients/js)"
    );
    assert_eq!(
        lock["version"], version,
        "clients/js/package-lock.json too (npm version X.Y.Z updates both)"
    );
    assert_eq!(lock["packages"][""]["version"], version);
    assert_eq!(package["license"], env!("CARGO_PKG_LICENSE"));
    assert!(
        package.get("dependencies").is_none() && package.get("peerDependencies").is_none(),
        "no runtime dependencies: {package}"
    );
}

/// The browser client's API-side rules (`tests/browser/client.test.mjs`, `node --test` against
/// a scripted fetch): what is retried and how long it waits, which resume records are followed
/// or dropped. The storage side is proven in Chromium above.
#[test]
fn the_browser_clients_retry_and_resume_rules_hold_in_node() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("node")
        .args(["--test", "client.test.mjs"])
        .current_dir(format!("{dir}/tests/browser"))
        .output()
        .expect("run node (scripts/test.sh installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client.test.mjs failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("# fail 0"), "{stdout}");
}

/// The client's JSDoc types hold: `tsc --checkJs --strict` (TypeScript from
/// `tests/browser/package.json`) over `clients/js/upcommit.js`, as an app's editor or build
/// would read them.
#[test]
fn the_browser_client_type_checks_strictly() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(format!("{dir}/tests/browser/node_modules/.bin/tsc"))
        .args([
            "--noEmit",
            "--allowJs",
            "--checkJs",
            "--strict",
            "--target",
            "es2022",
            "--lib",
            "es2022,dom",
            "--module",
            "esnext",
            "--moduleResolution",
            "bundler",
            "clients/js/upcommit.js",
        ])
        .current_dir(dir)
        .output()
        .expect("run tsc (scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "tsc:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
