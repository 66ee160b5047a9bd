//! Two replicas on one database and one bucket, as production runs them behind a load balancer:
//! the database's conditional updates and unique keys are the only coordination.

use std::collections::HashSet;

use futures::future::join_all;
use serde_json::Value;

use crate::helpers::{error_code, media, spawn_app};

#[tokio::test]
async fn a_hundred_commits_of_one_upload_across_two_replicas_make_one_handle_for_all() {
    let app = spawn_app().await;
    let second = app.replica().await;
    let token = app.token("alice");
    let p = app
        .uploaded(&token, "image", "image/png", 4096, "PUT")
        .await;
    let calls = (0..100).map(|i| {
        let base = if i % 2 == 0 {
            app.address.clone()
        } else {
            second.clone()
        };
        let (app, token, key) = (&app, token.clone(), p.key.clone());
        async move { app.commit_at(&base, &token, &key, None).await }
    });
    let mut created = 0;
    let mut ids = HashSet::new();
    for r in join_all(calls).await {
        let status = r.status().as_u16();
        assert!(status == 200 || status == 201, "status {status}");
        created += usize::from(status == 201);
        let body: Value = r.json().await.expect("handle");
        ids.insert(body["id"].as_str().expect("id").to_owned());
    }
    assert_eq!(created, 1);
    assert_eq!(
        ids.len(),
        1,
        "every caller was answered with the same handle"
    );
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
async fn fifty_uploads_racing_for_one_admin_key_across_replicas_never_overwrite() {
    let app = spawn_app().await;
    let second = app.replica().await;
    let admin = app.admin_token("root");
    let mut uploads = Vec::new();
    for i in 0..50 {
        // Distinct sizes tell the uploads apart in the bucket.
        uploads.push(
            app.uploaded(&admin, "image", "image/png", 1000 + i, "PUT")
                .await,
        );
    }
    let target = "media/images/contested/cover.png";
    let calls = uploads.iter().enumerate().map(|(i, p)| {
        let base = if i % 2 == 0 {
            app.address.clone()
        } else {
            second.clone()
        };
        let (app, admin, key) = (&app, admin.clone(), p.key.clone());
        async move { app.commit_at(&base, &admin, &key, Some(target)).await }
    });
    let mut winner = None;
    let mut conflicts = 0;
    for r in join_all(calls).await {
        match r.status().as_u16() {
            201 => {
                assert!(winner.is_none(), "two winners");
                let body: Value = r.json().await.expect("handle");
                winner = Some(body);
            }
            _ => {
                assert_eq!(error_code(r).await, (409, "final_key_conflict".to_owned()));
                conflicts += 1;
            }
        }
    }
    let winner = winner.expect("one winner");
    assert_eq!(conflicts, 49);
    let size = winner["size"].as_u64().expect("size") as usize;
    assert_eq!(
        app.get_object(target).await,
        media("image/png", size),
        "the object is the winner's bytes, never overwritten"
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 1);
    // The losers' tmp objects are intact: nothing of theirs was touched.
    for p in uploads
        .iter()
        .filter(|p| p.upload_id != winner["upload_id"])
    {
        assert!(app.object_exists(&p.key).await);
    }
}

#[tokio::test]
async fn sixty_four_commits_of_different_uploads_across_replicas_all_succeed() {
    let app = spawn_app().await;
    let second = app.replica().await;
    let token = app.token("alice");
    let mut keys = Vec::new();
    for _ in 0..64 {
        keys.push(
            app.uploaded(&token, "image", "image/png", 256, "PUT")
                .await
                .key,
        );
    }
    let calls = keys.iter().enumerate().map(|(i, key)| {
        let base = if i % 2 == 0 {
            app.address.clone()
        } else {
            second.clone()
        };
        let (app, token) = (&app, token.clone());
        async move { app.commit_at(&base, &token, key, None).await }
    });
    let statuses: Vec<u16> = join_all(calls)
        .await
        .iter()
        .map(|r| r.status().as_u16())
        .collect();
    assert!(
        statuses.iter().all(|s| *s == 201),
        "no 'database is locked', no 503: {statuses:?}"
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 64);
}
