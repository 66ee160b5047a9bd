//! Table-driven refusals from `shared/reference/security-cases.md`: each bad request gets its
//! exact status and code, and nothing changes — the bucket's keys, the catalog's rows and the
//! quota ledger are the same after as before. (Cases that need an upload step, a race or a
//! fault have their own tests: upload_step.rs, concurrency.rs, replicas.rs, faults.rs.)

use serde_json::{json, Value};

use crate::helpers::{error_code, TestApp, SECRET};

/// What "nothing changed" compares: every key in the bucket and every row count that a
/// request could touch, with the quota ledger's sums.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    keys: Vec<String>,
    uploads: i64,
    handles: i64,
    quota_uploads: i64,
    quota_bytes: i64,
    links: i64,
}

async fn snapshot(app: &TestApp) -> Snapshot {
    Snapshot {
        keys: app.keys().await,
        uploads: app.db.count("SELECT COUNT(*) FROM uploads").await,
        handles: app.db.count("SELECT COUNT(*) FROM file_handles").await,
        quota_uploads: app
            .db
            .count("SELECT CAST(COALESCE(SUM(uploads), 0) AS BIGINT) FROM quota_usage")
            .await,
        quota_bytes: app
            .db
            .count("SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM quota_usage")
            .await,
        links: app.db.count("SELECT COUNT(*) FROM file_links").await,
    }
}

fn presign_body(over: &[(&str, Value)]) -> Value {
    let mut b =
        json!({"profile": "image", "content_type": "image/png", "size": 100, "filename": "a.png"});
    for (k, v) in over {
        b[*k] = v.clone();
    }
    b
}

#[tokio::test]
async fn bad_presign_requests_are_refused_with_their_code_and_change_nothing() {
    let app = crate::helpers::spawn_app().await;
    let token = app.token("alice");
    // Something in the catalog and the bucket to be left as it is.
    app.upload_and_commit(&token, "image", "image/png", 300)
        .await;
    let before = snapshot(&app).await;

    let long = "a".repeat(256);
    let huge = "b".repeat(4096);
    let cases: Vec<(&str, Value, (u16, &str))> = vec![
        (
            "2 NUL in filename",
            presign_body(&[("filename", json!("a\u{0}.png"))]),
            (400, "filename_invalid"),
        ),
        (
            "2 CRLF header injection",
            presign_body(&[("filename", json!("a\r\nContent-Type: text/html"))]),
            (400, "filename_invalid"),
        ),
        (
            "2 other control character",
            presign_body(&[("filename", json!("a\u{7}.png"))]),
            (400, "filename_invalid"),
        ),
        (
            "3 filename of 256 bytes",
            presign_body(&[("filename", json!(long))]),
            (400, "filename_too_long"),
        ),
        (
            "3 filename of 4 KiB",
            presign_body(&[("filename", json!(huge))]),
            (400, "filename_too_long"),
        ),
        (
            "5 text/html",
            presign_body(&[("content_type", json!("text/html"))]),
            (400, "content_type_not_allowed"),
        ),
        (
            "5 image/svg+xml",
            presign_body(&[("content_type", json!("image/svg+xml"))]),
            (400, "content_type_not_allowed"),
        ),
        (
            "5 application/xhtml+xml",
            presign_body(&[("content_type", json!("application/xhtml+xml"))]),
            (400, "content_type_not_allowed"),
        ),
        (
            "5 application/javascript",
            presign_body(&[("content_type", json!("application/javascript"))]),
            (400, "content_type_not_allowed"),
        ),
        (
            "6 CRLF in content_type",
            presign_body(&[("content_type", json!("image/png\r\nX-Evil: 1"))]),
            (400, "content_type_invalid"),
        ),
        (
            "7 content_type missing",
            json!({"profile": "image", "size": 100}),
            (400, "content_type_required"),
        ),
        (
            "7 content_type empty",
            presign_body(&[("content_type", json!(""))]),
            (400, "content_type_required"),
        ),
        (
            "8 size 0",
            presign_body(&[("size", json!(0))]),
            (400, "size_invalid"),
        ),
        (
            "8 size negative",
            presign_body(&[("size", json!(-1))]),
            (400, "size_invalid"),
        ),
        (
            "8 size fractional",
            presign_body(&[("size", json!(1.5))]),
            (400, "size_invalid"),
        ),
        (
            "8 size over the profile max",
            presign_body(&[("size", json!(20 * 1024 * 1024 + 1))]),
            (400, "size_too_large"),
        ),
        (
            "8 size over 2^64 in exponent notation (not an integer literal)",
            presign_body(&[("size", json!(1e20))]),
            (400, "size_invalid"),
        ),
        (
            "unknown profile",
            presign_body(&[("profile", json!("../etc"))]),
            (400, "profile_unknown"),
        ),
        (
            "unknown method",
            presign_body(&[("method", json!("DELETE"))]),
            (400, "method_invalid"),
        ),
    ];
    for (name, body, want) in cases {
        let got = error_code(app.presign(&token, body).await).await;
        assert_eq!(got, (want.0, want.1.to_owned()), "case {name}");
    }

    // 10: tokens.
    let body = presign_body(&[]);
    let expired = upcommit::auth::issue(SECRET.as_bytes(), "alice", false, 60, 1_000_000_000);
    let forged = upcommit::auth::issue(
        b"not-the-secret-0123456789abcdef",
        "alice",
        true,
        3600,
        chrono::Utc::now().timestamp(),
    );
    let bearer_expired = format!("Bearer {expired}");
    let bearer_forged = format!("Bearer {forged}");
    for (name, auth) in [
        ("10 no token", None),
        ("10 malformed token", Some("Bearer abc.def")),
        ("10 not a bearer", Some("Basic YWxpY2U6cGFzcw==")),
        ("10 expired", Some(bearer_expired.as_str())),
        ("10 wrong signature", Some(bearer_forged.as_str())),
    ] {
        let mut req = app
            .http
            .post(format!("{}/v1/uploads", app.address))
            .json(&body);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let got = error_code(req.send().await.expect("sent")).await;
        assert_eq!(got, (401, "unauthorized".to_owned()), "case {name}");
    }

    // 11: body limit and malformed JSON.
    let big = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(vec![b' '; 10 * 1024 * 1024])
        .send()
        .await;
    assert_eq!(
        error_code(big.expect("the server answers before reading it all")).await,
        (413, "payload_too_large".to_owned()),
        "case 11 body"
    );
    let malformed = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{\"profile\": ")
        .send()
        .await
        .expect("sent");
    assert_eq!(
        error_code(malformed).await,
        (400, "invalid_json".to_owned()),
        "case 11 JSON"
    );

    // 36: spoofed identity headers are ignored; identity comes from the token only.
    let spoofed = app
        .http
        .post(format!("{}/v1/uploads", app.address))
        .header("x-user-id", "alice")
        .header("x-forwarded-for", "10.0.0.1")
        .json(&body)
        .send()
        .await
        .expect("sent");
    assert_eq!(
        error_code(spoofed).await,
        (401, "unauthorized".to_owned()),
        "case 36"
    );

    assert_eq!(snapshot(&app).await, before, "nothing changed");
}

#[tokio::test]
async fn bad_admin_final_keys_are_refused_and_change_nothing() {
    let app = crate::helpers::spawn_app().await;
    let admin = app.admin_token("root");
    let p = app.uploaded(&admin, "image", "image/png", 256, "PUT").await;
    let before = snapshot(&app).await;
    for key in crate::commit::TMP_SPELLINGS {
        let got = error_code(app.commit(&admin, &p.key, Some(key)).await).await;
        assert_eq!(got.0, 400, "case 24 {key:?}");
        assert!(
            got.1 == "final_key_reserved" || got.1 == "final_key_invalid",
            "case 24 {key:?}: {}",
            got.1
        );
    }
    let long = format!("media/{}", "a".repeat(1020));
    for key in [
        long.as_str(),
        "media/a\u{1}b",
        "",
        "media/images/",
        "media/./a",
        "media/../a",
    ] {
        let got = error_code(app.commit(&admin, &p.key, Some(key)).await).await;
        assert_eq!(
            got,
            (400, "final_key_invalid".to_owned()),
            "case 25 {key:?}"
        );
    }
    // 27: a non-admin sending final_key.
    let alice = app.token("alice");
    let mine = app.uploaded(&alice, "image", "image/png", 256, "PUT").await;
    let before_alice = snapshot(&app).await;
    assert_eq!(
        error_code(app.commit(&alice, &mine.key, Some("media/mine.png")).await).await,
        (403, "final_key_forbidden".to_owned()),
        "case 27"
    );
    assert_eq!(snapshot(&app).await, before_alice);
    assert_eq!(app.db.upload_state(&p.upload_id).await, "issued");
    assert!(app.object_exists(&p.key).await);
    let after: Snapshot = snapshot(&app).await;
    assert_eq!(after.handles, before.handles);
}
