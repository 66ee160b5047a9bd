use std::collections::HashSet;

use futures::future::join_all;
use serde_json::Value;

use crate::helpers::spawn_app;

#[tokio::test]
async fn twenty_concurrent_commits_of_one_upload_produce_one_handle_for_all() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let p = app
        .uploaded(&token, "image", "image/png", 4096, "PUT")
        .await;

    let responses = join_all((0..20).map(|_| app.commit(&token, &p.key, None))).await;
    let mut statuses = Vec::new();
    let mut ids = HashSet::new();
    for r in responses {
        statuses.push(r.status().as_u16());
        let body: Value = r.json().await.expect("json");
        ids.insert(body["id"].as_str().map(str::to_owned));
    }
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 201),
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(ids.len(), 1, "every caller got the same handle");
    assert!(ids.iter().all(Option::is_some));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
    assert_eq!(
        app.keys().await,
        vec![
            format!("media/images/{}/clip.bin", p.upload_id),
            p.key.clone()
        ],
        "one final object; the tmp object stays until its URL expires"
    );
}

#[tokio::test]
async fn concurrent_commits_of_different_uploads_all_succeed() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let mut uploads = Vec::new();
    for _ in 0..16 {
        let p = app.uploaded(&token, "image", "image/png", 256, "PUT").await;
        uploads.push(p);
    }
    let responses = join_all(uploads.iter().map(|p| app.commit(&token, &p.key, None))).await;
    let statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 16);
}

#[tokio::test]
async fn two_uploads_racing_for_one_admin_key_never_overwrite() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let admin = app.admin_token("root");
    let mut uploads = Vec::new();
    for i in 0..6 {
        let p = app
            .uploaded(&alice, "image", "image/png", 300 + i, "PUT")
            .await;
        uploads.push(p);
    }
    let responses = join_all(
        uploads
            .iter()
            .map(|p| app.commit(&admin, &p.key, Some("shared/key.png"))),
    )
    .await;
    let statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        5,
        "{statuses:?}"
    );
    let winner = statuses.iter().position(|s| *s == 201).expect("a winner");
    let size = i64::try_from(300 + winner).expect("fits");
    let stored = app
        .s3
        .head_object()
        .bucket(&app.bucket)
        .key("shared/key.png")
        .send()
        .await
        .expect("head");
    assert_eq!(
        stored.content_length(),
        Some(size),
        "the winner's bytes, not overwritten"
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
}

/// Presigns are written in shared transactions (group commit): a burst of concurrent presigns
/// by one user against a quota of 20 gets exactly 20 URLs, every other one 429, and the ledger
/// and the uploads table agree with the answers — each presign in the batch saw the charges of
/// the ones before it.
#[tokio::test]
async fn a_concurrent_presign_burst_is_charged_exactly_once_each() {
    let app = crate::helpers::spawn_app_with(crate::helpers::Spawn {
        env: vec![("UPCOMMIT_QUOTA_DAILY_UPLOADS", "20".to_owned())],
        ..crate::helpers::Spawn::default()
    })
    .await;
    let token = app.token("burst");
    let body = serde_json::json!({"profile": "image", "content_type": "image/png", "size": 100});
    let answers =
        futures::future::join_all((0..60).map(|_| app.presign(&token, body.clone()))).await;
    let mut ok = 0;
    let mut refused = 0;
    for resp in answers {
        match resp.status().as_u16() {
            201 => ok += 1,
            429 => refused += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((ok, refused), (20, 40));
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM uploads WHERE owner = 'burst'")
            .await,
        20
    );
    assert_eq!(
        app.db
            .count("SELECT CAST(SUM(uploads) AS BIGINT) FROM quota_usage WHERE owner = 'burst'")
            .await,
        20
    );
    assert_eq!(
        app.db
            .count("SELECT CAST(SUM(bytes) AS BIGINT) FROM quota_usage WHERE owner = 'burst'")
            .await,
        2000
    );
}

/// A batch holding a row that cannot be inserted (here, one upload submitted twice) is redone
/// item by item: the duplicate alone fails, the others are written, and the ledger is charged
/// once per written upload.
#[tokio::test]
async fn a_duplicate_in_a_presign_batch_fails_alone() {
    use chrono::Utc;
    use upcommit::catalog::CatalogError;
    use upcommit::domain::ids::UploadId;
    use upcommit::domain::quota::QuotaLimits;
    use upcommit::domain::records::{Upload, UploadState};

    let app = crate::helpers::spawn_app().await;
    let upload = |id: UploadId| {
        let key = format!("tmp/2026/01/01/{id}/a.png");
        crate::helpers::png_upload(id, "dup", key, 10, UploadState::Issued)
    };
    let twice = upload(UploadId::generate());
    let others: Vec<Upload> = (0..6).map(|_| upload(UploadId::generate())).collect();
    let day = Utc::now().date_naive();
    let limits = QuotaLimits {
        daily_uploads: 0,
        daily_bytes: 0,
    };
    let mut all = vec![twice.clone(), twice];
    all.extend(others);
    let results = futures::future::join_all(
        all.iter()
            .map(|u| app.catalog.create_upload(u, None, day, limits)),
    )
    .await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let duplicates = results
        .iter()
        .filter(|r| matches!(r, Err(CatalogError::Duplicate(_))))
        .count();
    assert_eq!((ok, duplicates), (7, 1), "{results:?}");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM uploads WHERE owner = 'dup'")
            .await,
        7
    );
    assert_eq!(
        app.db
            .count("SELECT CAST(SUM(uploads) AS BIGINT) FROM quota_usage WHERE owner = 'dup'")
            .await,
        7
    );
}
