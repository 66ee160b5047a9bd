//! Every operation answers the refusals its spec entry documents: 401 without a token, 415 for
//! a body that is not JSON, 413 for a body over the limit, 503 with the database down — each
//! with its code in the envelope. The operations and their statuses are read from
//! `openapi.yaml`, so a new operation is covered the day it is documented. Plus the specific
//! refusals no feature test reaches.

use serde_json::{json, Value};

use crate::helpers::{error_code, spawn_app, TestApp, TestDb};

/// One documented operation.
#[derive(Debug, Clone)]
pub struct SpecOperation {
    pub method: String,
    pub path: String,
    pub statuses: Vec<u16>,
    pub has_body: bool,
}

/// The operations of `openapi.yaml`, read line by line (the file keeps one layout: paths at
/// two spaces, methods at four, response codes quoted at eight).
pub fn spec_operations() -> Vec<SpecOperation> {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("spec");
    let mut ops: Vec<SpecOperation> = Vec::new();
    let mut in_paths = false;
    let mut path = String::new();
    for line in spec.lines() {
        if line == "paths:" {
            in_paths = true;
        } else if !line.starts_with(' ') && !line.is_empty() {
            in_paths = false;
        } else if !in_paths {
            continue;
        } else if line.starts_with("  /") {
            path = line.trim().trim_end_matches(':').to_owned();
        } else if let Some(m) = ["get", "post", "put", "delete", "patch"]
            .into_iter()
            .find(|m| line == format!("    {m}:"))
        {
            ops.push(SpecOperation {
                method: m.to_uppercase(),
                path: path.clone(),
                statuses: Vec::new(),
                has_body: false,
            });
        } else if let Some(op) = ops.last_mut() {
            if line == "      requestBody:" {
                op.has_body = true;
            }
            let status = line
                .strip_prefix("        '")
                .filter(|rest| rest.get(3..).is_some_and(|r| r.starts_with("':")))
                .and_then(|rest| rest[..3].parse().ok());
            if let Some(status) = status {
                op.statuses.push(status);
            }
        }
    }
    ops
}

fn url(app: &TestApp, path: &str) -> String {
    format!(
        "{}{}",
        app.address,
        path.replace("{id}", &"a".repeat(32))
            .replace("{upload_id}", &"b".repeat(32))
            .replace("{object_type}", "post")
            .replace("{object_id}", "1")
            .replace("{n}", "0")
            .replace("{name}", "thumb")
    )
}

/// A body each operation accepts as far as the database: the shape is right, so what answers
/// is the lookup.
fn valid_body(op: &SpecOperation) -> Value {
    match (op.method.as_str(), op.path.as_str()) {
        ("POST", "/v1/uploads") => {
            json!({"profile": "image", "content_type": "image/png", "size": 10})
        }
        ("POST", "/v1/files") => {
            json!({"key": format!("tmp/2026/01/01/{}/a.png", "c".repeat(32))})
        }
        ("POST", "/v1/uploads/{upload_id}/parts") => json!({"part_numbers": [1]}),
        ("POST", "/v1/uploads/{upload_id}/complete") => {
            json!({"parts": [{"part_number": 1, "etag": "\"x\""}]})
        }
        ("PUT", "/v1/link-scans/{id}/batches/{n}") => json!({"file_ids": []}),
        ("POST", "/demo/token") => json!({"sub": "someone"}),
        ("POST", "/v1/admin/webhooks/{id}/replay") => json!({"after": "0"}),
        ("POST", "/v1/files/variants/{name}") => json!({"ids": ["c".repeat(32)]}),
        _ => json!({}),
    }
}

async fn send(
    app: &TestApp,
    op: &SpecOperation,
    token: Option<&str>,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, String) {
    let method = reqwest::Method::from_bytes(op.method.as_bytes()).expect("method");
    let mut req = app.http.request(method, url(app, &op.path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if op.has_body {
        req = req.header("content-type", content_type).body(body);
    }
    error_code(req.send().await.expect("sent")).await
}

#[tokio::test]
async fn every_operation_answers_its_documented_generic_refusals() {
    let app = crate::demo::spawn_minting_demo().await;
    let admin = app.admin_token("root");
    let ops = spec_operations();
    assert!(ops.len() >= 20, "{ops:?}");
    let mut checked = 0;
    for op in &ops {
        let what = format!("{} {}", op.method, op.path);
        let body = serde_json::to_vec(&valid_body(op)).expect("json");
        if op.statuses.contains(&401) {
            let got = send(&app, op, None, "application/json", body.clone()).await;
            assert_eq!(got, (401, "unauthorized".to_owned()), "{what}");
            checked += 1;
        }
        if op.statuses.contains(&415) {
            let got = send(&app, op, Some(&admin), "text/plain", b"hello".to_vec()).await;
            assert_eq!(got, (415, "unsupported_media_type".to_owned()), "{what}");
            checked += 1;
        }
        if op.statuses.contains(&413) {
            let big = format!("{{\"pad\": \"{}\"}}", "a".repeat(2 * 1024 * 1024));
            let got = send(&app, op, Some(&admin), "application/json", big.into_bytes()).await;
            assert_eq!(got, (413, "payload_too_large".to_owned()), "{what}");
            checked += 1;
        }
    }

    // The database goes away under the server: every operation that documents 503 says so.
    match &app.db {
        TestDb::Sqlite(p) => p.close().await,
        TestDb::Postgres(p) => p.close().await,
    }
    for op in &ops {
        if !op.statuses.contains(&503) {
            continue;
        }
        let what = format!("{} {}", op.method, op.path);
        let body = serde_json::to_vec(&valid_body(op)).expect("json");
        let (status, code) = send(&app, op, Some(&admin), "application/json", body).await;
        assert_eq!(status, 503, "{what}");
        let expected = if op.path == "/readyz" {
            "not_ready"
        } else {
            "service_unavailable"
        };
        assert_eq!(code, expected, "{what}");
        checked += 1;
    }
    assert!(checked >= 40, "checked {checked}");
}

#[tokio::test]
async fn refusals_no_feature_test_reaches() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let admin = app.admin_token("root");
    let p = app.uploaded(&alice, "image", "image/png", 600, "PUT").await;
    let upload = |suffix: &str| format!("{}/v1/uploads/{}{suffix}", app.address, p.upload_id);

    // Multipart routes on a single-PUT upload.
    let abort = app
        .http
        .delete(upload(""))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("DELETE");
    assert_eq!(
        error_code(abort).await,
        (409, "upload_not_multipart".to_owned())
    );
    let list = app
        .get(&format!("/v1/uploads/{}/parts", p.upload_id), Some(&alice))
        .await;
    assert_eq!(
        error_code(list).await,
        (409, "upload_not_multipart".to_owned())
    );
    let bad_query = app
        .get(
            &format!("/v1/uploads/{}/parts?limit=0", p.upload_id),
            Some(&alice),
        )
        .await;
    assert_eq!(
        error_code(bad_query).await,
        (400, "invalid_request".to_owned())
    );
    let parts = json!({"parts": [{"part_number": 1, "etag": "\"x\""}]});
    let complete = app
        .post_json(
            &format!("/v1/uploads/{}/complete", p.upload_id),
            Some(&alice),
            &parts,
        )
        .await;
    assert_eq!(
        error_code(complete).await,
        (409, "upload_not_multipart".to_owned())
    );
    let unknown = app
        .post_json(
            &format!("/v1/uploads/{}/complete", "d".repeat(32)),
            Some(&alice),
            &parts,
        )
        .await;
    assert_eq!(
        error_code(unknown).await,
        (404, "upload_not_found".to_owned())
    );

    // A link with a malformed object type, removed.
    let (_, handle) = app
        .upload_and_commit(&alice, "image", "image/png", 700)
        .await;
    let id = handle["id"].as_str().expect("id");
    let unlink = app
        .http
        .delete(format!("{}/v1/files/{id}/links/bad%20type/1", app.address))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("DELETE link");
    assert_eq!(
        error_code(unlink).await,
        (400, "invalid_request".to_owned())
    );

    // Link scans: unknown, and batches from a non-admin.
    let unknown_scan = "e".repeat(32);
    let complete_scan = app
        .post_json(
            &format!("/v1/link-scans/{unknown_scan}/complete"),
            Some(&admin),
            &Value::Null,
        )
        .await;
    assert_eq!(
        error_code(complete_scan).await,
        (404, "link_scan_not_found".to_owned())
    );
    let batch = |token: String| {
        app.http
            .put(format!(
                "{}/v1/link-scans/{unknown_scan}/batches/0",
                app.address
            ))
            .bearer_auth(token)
            .json(&json!({"file_ids": []}))
            .send()
    };
    assert_eq!(
        error_code(batch(admin.clone()).await.expect("PUT")).await,
        (404, "link_scan_not_found".to_owned())
    );
    assert_eq!(
        error_code(batch(alice.clone()).await.expect("PUT")).await,
        (403, "admin_required".to_owned())
    );
    // A path parameter that does not parse is refused in the envelope (schemathesis found it
    // answered in axum's plain text).
    let not_a_number = app
        .http
        .put(format!(
            "{}/v1/link-scans/{unknown_scan}/batches/false",
            app.address
        ))
        .bearer_auth(&admin)
        .json(&json!({"file_ids": []}))
        .send()
        .await
        .expect("PUT");
    assert_eq!(
        error_code(not_a_number).await,
        (400, "invalid_request".to_owned())
    );
}
