//! The database going away: presign issues no URL, commit changes nothing in S3, readiness
//! reports it. The fault is real: the pool the server uses is closed under it.

use crate::helpers::{error_code, spawn_app, TestDb};

async fn take_database_down(db: &TestDb) {
    match db {
        TestDb::Sqlite(p) => p.close().await,
        TestDb::Postgres(p) => p.close().await,
    }
}

#[tokio::test]
async fn with_the_database_down_presign_answers_503_and_issues_no_url() {
    let app = spawn_app().await;
    let token = app.token("alice");
    take_database_down(&app.db).await;

    let resp = app
        .presign(
            &token,
            serde_json::json!({"profile": "image", "content_type": "image/png", "size": 10}),
        )
        .await;
    assert!(resp.headers().contains_key("retry-after"));
    let body = resp.text().await.expect("body");
    assert!(
        !body.contains("X-Amz-Signature"),
        "no URL may leave the server: {body}"
    );
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["code"], "service_unavailable");

    let ready = app.get("/readyz", None).await;
    assert_eq!(ready.status(), 503);
    let v: serde_json::Value = ready.json().await.expect("json");
    assert_eq!(
        (
            v["checks"]["database"].as_str(),
            v["checks"]["bucket"].as_str()
        ),
        (Some("unavailable"), Some("ok"))
    );
    assert_eq!(v["error"]["code"], "not_ready");
}

#[tokio::test]
async fn with_the_database_down_commit_answers_503_before_touching_s3() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "image", "image/png", 500, "PUT").await;
    take_database_down(&app.db).await;

    assert_eq!(
        error_code(app.commit(&token, &p.key, None).await).await,
        (503, "service_unavailable".to_owned())
    );
    assert_eq!(
        app.keys().await,
        vec![p.key.clone()],
        "tmp intact, nothing promoted"
    );
}

/// PostgreSQL: every server connection killed under the pool (a failover, a proxy restart);
/// how many there were.
async fn kill_server_connections(db: &TestDb) -> i64 {
    let TestDb::Postgres(p) = db else {
        return 0;
    };
    sqlx::query_scalar::<_, i64>(
        "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_one(p)
    .await
    .expect("terminate")
}

/// A pooled connection is handed out unpinged only when it answered within the last half
/// second: after the pool's connections were all killed and a second passed, a burst of
/// commits (more than the background tasks' few calls can have cleared) is served as if
/// nothing happened, each dead connection pinged and replaced first. A call that lands on a
/// connection killed a moment after its last query may fail — then with 503 and a code, and
/// the next call succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_killed_under_the_pool_are_replaced_before_use() {
    let app = spawn_app().await;
    if !crate::helpers::on_postgres() {
        return;
    }
    let token = app.token("alice");
    let burst = |n: usize| {
        let (app, token) = (&app, &token);
        async move {
            let mut uploads = Vec::new();
            for _ in 0..n {
                uploads.push(app.uploaded(token, "image", "image/png", 1024, "PUT").await);
            }
            uploads
        }
    };
    // Fill the pool: commits at once open connections side by side.
    let warm = burst(12).await;
    let answers =
        futures::future::join_all(warm.iter().map(|p| app.commit(&token, &p.key, None))).await;
    assert!(answers.iter().all(|r| r.status() == 201));
    let waiting = burst(12).await;
    let killed = kill_server_connections(&app.db).await;
    assert!(
        killed >= 6,
        "only {killed} pooled connections to kill: the test proves little"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let answers =
        futures::future::join_all(waiting.iter().map(|p| app.commit(&token, &p.key, None))).await;
    let statuses: Vec<u16> = answers.iter().map(|r| r.status().as_u16()).collect();
    assert!(
        statuses.iter().all(|s| *s == 201),
        "commits after {killed} pooled connections were killed: {statuses:?}"
    );

    // Killed right after use: at most a 503 with its code, then served.
    let p = app
        .uploaded(&token, "image", "image/png", 1024, "PUT")
        .await;
    kill_server_connections(&app.db).await;
    let mut statuses = Vec::new();
    for _ in 0..10 {
        let resp = app.commit(&token, &p.key, None).await;
        if resp.status() == 201 {
            statuses.push((201, String::new()));
            break;
        }
        statuses.push(error_code(resp).await);
    }
    assert_eq!(statuses.last().map(|s| s.0), Some(201), "{statuses:?}");
    for (status, code) in &statuses[..statuses.len() - 1] {
        assert_eq!(
            (*status, code.as_str()),
            (503, "service_unavailable"),
            "{statuses:?}"
        );
    }
}
