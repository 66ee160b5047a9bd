//! The HTTP envelope: every error, including framework-level ones, is `{"error": {code, message}}`.

use serde_json::Value;

use crate::helpers::{error_code, spawn_app};

#[tokio::test]
async fn health_and_readiness_answer() {
    let app = spawn_app().await;
    assert_eq!(app.get("/healthz", None).await.status(), 200);
    let ready = app.get("/readyz", None).await;
    assert_eq!(ready.status(), 200);
    let body: Value = ready.json().await.expect("json");
    assert_eq!(body["checks"]["database"], "ok");
    assert_eq!(body["checks"]["bucket"], "ok");
}

#[tokio::test]
async fn framework_errors_use_the_envelope_and_every_response_has_a_request_id() {
    let app = spawn_app().await;
    let token = app.token("alice");

    let resp = app.get("/v1/nothing-here", Some(&token)).await;
    assert!(resp.headers().contains_key("x-request-id"));
    assert_eq!(error_code(resp).await, (404, "not_found".to_owned()));
    assert_eq!(
        error_code(app.get("/v1/uploads", Some(&token)).await).await,
        (405, "method_not_allowed".to_owned())
    );

    let malformed = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("sent");
    let (status, code) = error_code(malformed).await;
    assert_eq!((status, code.as_str()), (400, "invalid_json"));

    let no_type = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .body("{}")
        .send()
        .await
        .expect("sent");
    assert_eq!(
        error_code(no_type).await,
        (415, "unsupported_media_type".to_owned())
    );

    let huge = format!(
        r#"{{"profile":"image","filename":"{}"}}"#,
        "a".repeat(10 * 1024 * 1024)
    );
    let too_big = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .expect("sent");
    assert_eq!(
        error_code(too_big).await,
        (413, "payload_too_large".to_owned())
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM uploads").await, 0);
}

/// The paths of every `.route("…", …)` under `src/http`.
fn declared_routes() -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read src/http") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source");
                for (i, _) in text.match_indices(".route(") {
                    let rest = text[i + ".route(".len()..].trim_start();
                    if let Some(lit) = rest.strip_prefix('"') {
                        if let Some(end) = lit.find('"') {
                            out.push(lit[..end].to_owned());
                        }
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src/http")),
        &mut out,
    );
    out.sort();
    out.dedup();
    out
}

/// Every path and method in `openapi.yaml` reaches a handler (not the router's fallbacks), and
/// every route the server answers is in the spec.
#[tokio::test]
async fn openapi_paths_and_server_routes_agree() {
    let mut documented: Vec<(String, String)> = crate::statuses::spec_operations()
        .into_iter()
        .map(|op| (op.method, op.path))
        .collect();
    documented.sort();
    // Every route the router declares, read from the source, so a new route cannot hide
    // from this test; the demo routes exist only when the demo (and its minting) is on, the
    // admin console's only when the console is on, which is never beside minting: a route is
    // served when either server serves it.
    let app = crate::demo::spawn_minting_demo().await;
    let console = crate::helpers::spawn_app_with(crate::helpers::Spawn {
        env: vec![("UPCOMMIT_ADMIN_CONSOLE", "true".to_owned())],
        ..crate::helpers::Spawn::default()
    })
    .await;
    let token = app.token("alice");
    let routes = declared_routes();
    assert!(routes.len() >= 20, "found the routes: {routes:?}");
    let mut served = Vec::new();
    for p in routes.iter().map(String::as_str) {
        for m in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
            let path = p
                .replace("{id}", &"a".repeat(32))
                .replace("{upload_id}", &"a".repeat(32))
                .replace("{object_type}", "post")
                .replace("{object_id}", "1")
                .replace("{n}", "0");
            let mut answered = false;
            for base in [&app.address, &console.address] {
                let method = reqwest::Method::from_bytes(m.as_bytes()).expect("method");
                let resp = app
                    .http
                    .request(method, format!("{base}{path}"))
                    .bearer_auth(&token)
                    .header("content-type", "application/json")
                    .body("{}")
                    .send()
                    .await
                    .expect("sent");
                let (_, code) = error_code(resp).await;
                answered |= code != "not_found" && code != "method_not_allowed";
            }
            if answered {
                served.push((m.to_owned(), p.to_owned()));
            }
        }
    }
    served.sort();
    assert_eq!(documented, served, "openapi.yaml and the router disagree");
}

#[tokio::test]
async fn the_server_serves_the_spec_it_implements() {
    let app = crate::helpers::spawn_app().await;
    let resp = app.get("/openapi.yaml", None).await;
    assert_eq!(resp.status(), 200);
    assert!(resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/yaml")));
    let served = resp.text().await.expect("body");
    let on_disk = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("spec");
    assert_eq!(served, on_disk);
}
