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

/// Every path and method in `openapi.yaml` reaches a handler (not the router's fallbacks), and
/// every route the server answers is in the spec.
#[tokio::test]
async fn openapi_paths_and_server_routes_agree() {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("spec");
    let mut documented = Vec::new();
    let mut in_paths = false;
    let mut path = String::new();
    for line in spec.lines() {
        if line == "paths:" {
            in_paths = true;
        } else if !line.starts_with(' ') && !line.is_empty() {
            in_paths = false;
        } else if in_paths && line.starts_with("  /") {
            path = line.trim().trim_end_matches(':').to_owned();
        } else if in_paths {
            for m in ["get", "post", "put", "delete", "patch"] {
                if line == format!("    {m}:") {
                    documented.push((m.to_uppercase(), path.clone()));
                }
            }
        }
    }
    documented.sort();
    let app = spawn_app().await;
    let token = app.token("alice");
    let mut served = Vec::new();
    for p in [
        "/v1/uploads",
        "/v1/uploads/{upload_id}",
        "/v1/uploads/{upload_id}/parts",
        "/v1/uploads/{upload_id}/complete",
        "/v1/files",
        "/v1/files/{id}",
        "/v1/files/{id}/content",
        "/v1/files/{id}/links/{object_type}/{object_id}",
        "/v1/files/{id}/restore",
        "/v1/link-scans",
        "/v1/link-scans/{id}/batches/{n}",
        "/v1/link-scans/{id}/complete",
        "/v1/admin/storage-report",
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.yaml",
    ] {
        for m in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
            let url = format!(
                "{}{}",
                app.address,
                p.replace("{id}", &"a".repeat(32))
                    .replace("{upload_id}", &"a".repeat(32))
                    .replace("{object_type}", "post")
                    .replace("{object_id}", "1")
                    .replace("{n}", "0")
            );
            let method = reqwest::Method::from_bytes(m.as_bytes()).expect("method");
            let resp = app
                .http
                .request(method, url)
                .bearer_auth(&token)
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .expect("sent");
            let (_, code) = error_code(resp).await;
            if code != "not_found" && code != "method_not_allowed" {
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
