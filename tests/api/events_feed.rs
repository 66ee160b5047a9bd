//! The outbox seen through the pull feed (`GET /v1/events`): each change the API makes is one
//! event with its facts, the feed is admin-only and pages with cursors that survive a restart
//! (another replica reads on from the same cursor), and a consumer polling while commits race on
//! two replicas sees every event exactly once — an event whose transaction commits after a
//! later-numbered one is not skipped by the cursor.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{error_code, media, spawn_app, TestApp};
use crate::history::all_events;

async fn feed(app: &TestApp, base: &str, after: &str, limit: usize) -> Value {
    let resp = app
        .http
        .get(format!("{base}/v1/events?after={after}&limit={limit}"))
        .bearer_auth(app.admin_token("ops"))
        .send()
        .await
        .expect("GET /v1/events");
    assert_eq!(resp.status(), 200);
    resp.json().await.expect("feed page")
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

#[tokio::test]
async fn each_change_the_api_makes_is_one_event_with_its_facts() {
    let app = spawn_app().await;
    let alice = app.token("alice");

    // A commit and a copy: the handle exactly as the API returned it.
    let (_, handle) = app
        .upload_and_commit(&alice, "image", "image/png", 300)
        .await;
    let id = handle["id"].as_str().expect("id");
    let resp = app
        .http
        .post(format!("{}/v1/files/{id}/copies", app.address))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("copy");
    assert_eq!(resp.status(), 201);
    let copy: Value = resp.json().await.expect("copy JSON");
    // A retried commit changes nothing and announces nothing.
    let p2 = app.uploaded(&alice, "image", "image/png", 200, "PUT").await;
    let first = app.commit(&alice, &p2.key, None).await;
    assert_eq!(first.status(), 201);
    let second: Value = first.json().await.expect("handle");
    assert_eq!(app.commit(&alice, &p2.key, None).await.status(), 200);

    // A rejection: bytes that are not what was declared.
    let mut html = b"<!DOCTYPE html><html></html>".to_vec();
    html.resize(200, b' ');
    let p = app.uploaded_bytes(&alice, "image", "image/png", html).await;
    assert_eq!(
        error_code(app.commit(&alice, &p.key, None).await).await,
        (422, "content_mismatch".to_owned())
    );
    assert_eq!(
        error_code(app.commit(&alice, &p.key, None).await).await,
        (422, "content_mismatch".to_owned()),
        "the verdict is final, and announced once"
    );

    // A multipart upload aborted (twice: the second changes nothing).
    let resp = app
        .presign(
            &alice,
            json!({"profile": "image", "content_type": "image/png", "size": 12 * 1024 * 1024, "multipart": true}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let mp: Value = resp.json().await.expect("multipart JSON");
    let mp_id = mp["upload_id"].as_str().expect("upload id");
    for _ in 0..2 {
        let status = app
            .delete(&format!("/v1/uploads/{mp_id}"), Some(&alice))
            .await
            .status();
        assert_eq!(status, 204);
    }

    let events = all_events(&app).await;
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        vec![
            "file.committed",
            "file.copied",
            "file.committed",
            "upload.rejected",
            "multipart.aborted"
        ],
        "{events:#?}"
    );
    let committed = of_type(&events, "file.committed");
    assert_eq!(committed[0]["data"], handle);
    assert_eq!(committed[1]["data"], second);
    assert_eq!(of_type(&events, "file.copied")[0]["data"], copy);
    let rejected = &of_type(&events, "upload.rejected")[0]["data"];
    assert_eq!(rejected["upload_id"], p.upload_id.as_str());
    assert_eq!(rejected["code"], "content_mismatch");
    assert_eq!(rejected["owner"], "alice");
    assert_eq!(rejected["key"], p.key.as_str());
    let aborted = &of_type(&events, "multipart.aborted")[0]["data"];
    assert_eq!(aborted["upload_id"], mp_id);
    assert!(aborted.get("code").is_none());
    for e in &events {
        let id = e["id"].as_str().expect("event id");
        assert!(id.starts_with("evt_") && id.len() == 36, "{id}");
        assert!(e["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
    }
}

#[tokio::test]
async fn the_feed_is_for_admins_and_refuses_cursors_it_never_gave() {
    let app = spawn_app().await;
    let resp = app.get("/v1/events", Some(&app.token("mallory"))).await;
    assert_eq!(error_code(resp).await, (403, "admin_required".to_owned()));
    let resp = app.get("/v1/events", None).await;
    assert_eq!(resp.status(), 401);
    let admin = app.admin_token("ops");
    for bad in [
        "after=-1",
        "after=abc",
        "after=1e3",
        "after=99999999999999999999",
        "limit=0",
        "limit=1001",
        "limit=x",
    ] {
        let resp = app.get(&format!("/v1/events?{bad}"), Some(&admin)).await;
        assert_eq!(
            error_code(resp).await,
            (400, "invalid_request".to_owned()),
            "{bad}"
        );
    }
    let page = feed(&app, &app.address, "", 10).await;
    assert_eq!(page["events"], json!([]));
    assert_eq!(page["next_cursor"], "0");

    // A cursor past the newest event was never given: reading on from it would skip every
    // event up to it without a word.
    app.upload_and_commit(&app.token("alice"), "image", "image/png", 200)
        .await;
    all_events(&app).await;
    for ahead in ["2", "99999", "9223372036854775807"] {
        let resp = app
            .get(&format!("/v1/events?after={ahead}"), Some(&admin))
            .await;
        assert_eq!(
            error_code(resp).await,
            (400, "invalid_request".to_owned()),
            "after={ahead}"
        );
    }
    let page = feed(&app, &app.address, "1", 10).await;
    assert_eq!(page["events"], json!([]));
    assert_eq!(page["next_cursor"], "1");
}

#[tokio::test]
async fn cursors_page_through_and_survive_a_restart() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let mut handles = Vec::new();
    for _ in 0..5 {
        let (_, h) = app
            .upload_and_commit(&alice, "image", "image/png", 200)
            .await;
        handles.push(h["id"].as_str().expect("id").to_owned());
    }
    let everything = all_events(&app).await;
    assert_eq!(everything.len(), 5);

    // Two at a time from this server, the rest from another replica (a restart, as far as
    // the cursor can tell: nothing of it lives in a process).
    let page = feed(&app, &app.address, "", 2).await;
    let mut seen: Vec<String> = page["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["data"]["id"].as_str().expect("id").to_owned())
        .collect();
    let cursor = page["next_cursor"].as_str().expect("cursor").to_owned();
    let other = app.replica().await;
    let mut cursor = cursor;
    loop {
        let page = feed(&app, &other, &cursor, 2).await;
        let events = page["events"].as_array().expect("events");
        if events.is_empty() {
            assert_eq!(
                page["next_cursor"],
                cursor.as_str(),
                "an empty page keeps the cursor"
            );
            break;
        }
        seen.extend(
            events
                .iter()
                .map(|e| e["data"]["id"].as_str().expect("id").to_owned()),
        );
        cursor = page["next_cursor"].as_str().expect("cursor").to_owned();
    }
    assert_eq!(seen, handles, "every commit once, in commit order");
}

#[tokio::test]
async fn a_consumer_polling_while_commits_race_on_two_replicas_misses_nothing() {
    let app = spawn_app().await;
    let other = app.replica().await;
    const N: usize = 24;
    let mut uploads = Vec::new();
    for i in 0..N {
        let token = app.token(&format!("user{}", i % 4));
        let p = app
            .presign_ok(&token, "image", "image/png", 200, "PUT")
            .await;
        assert!(app
            .upload(&p, media("image/png", 200), "image/png")
            .await
            .is_success());
        uploads.push((token, p));
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The poller: follows the feed with its cursor while the commits run, as a consumer would.
    let poller = {
        let http = app.http.clone();
        let base = app.address.clone();
        let admin = app.admin_token("ops");
        let done = done.clone();
        tokio::spawn(async move {
            let mut cursor = String::from("0");
            let mut ids = Vec::new();
            let mut quiet_after_done = 0;
            loop {
                let page: Value = http
                    .get(format!("{base}/v1/events?after={cursor}&limit=5"))
                    .bearer_auth(&admin)
                    .send()
                    .await
                    .expect("feed")
                    .json()
                    .await
                    .expect("page");
                let events = page["events"].as_array().expect("events").clone();
                cursor = page["next_cursor"].as_str().expect("cursor").to_owned();
                if events.is_empty() {
                    if done.load(std::sync::atomic::Ordering::SeqCst) {
                        quiet_after_done += 1;
                        if quiet_after_done > 10 {
                            return ids;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                ids.extend(
                    events
                        .iter()
                        .map(|e| e["data"]["id"].as_str().expect("id").to_owned()),
                );
            }
        })
    };
    let commits: Vec<_> = uploads
        .iter()
        .enumerate()
        .map(|(i, (token, p))| {
            let base = if i % 2 == 0 {
                app.address.clone()
            } else {
                other.clone()
            };
            let http = app.http.clone();
            let token = token.clone();
            let key = p.key.clone();
            tokio::spawn(async move {
                let resp = http
                    .post(format!("{base}/v1/files"))
                    .bearer_auth(token)
                    .json(&json!({"key": key}))
                    .send()
                    .await
                    .expect("commit");
                assert_eq!(resp.status(), 201);
                let h: Value = resp.json().await.expect("handle");
                h["id"].as_str().expect("id").to_owned()
            })
        })
        .collect();
    let mut committed = BTreeSet::new();
    for c in commits {
        committed.insert(c.await.expect("commit task"));
    }
    // The sequencers run every 200 ms; give them time to position the last events.
    tokio::time::sleep(Duration::from_millis(600)).await;
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let ids = poller.await.expect("poller");
    let unique: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(unique.len(), ids.len(), "an event read twice: {ids:?}");
    assert_eq!(unique, committed, "the poller saw exactly the commits");
}

#[tokio::test]
async fn a_feed_the_database_cannot_read_answers_503_and_loses_nothing() {
    use std::sync::{Arc, Mutex};

    use crate::catalog_faults::{CatalogFaults, FaultyCatalog};
    use crate::helpers::{spawn_app_with, Spawn};

    let faults = Arc::new(Mutex::new(CatalogFaults::seeded(11)));
    let cf = faults.clone();
    let app = spawn_app_with(Spawn {
        wrap_catalog: Some(Box::new(move |real| Arc::new(FaultyCatalog::new(real, cf)))),
        ..Spawn::default()
    })
    .await;
    let (_, handle) = app
        .upload_and_commit(&app.token("alice"), "image", "image/png", 200)
        .await;
    faults.lock().expect("faults").before_percent = 100;
    let resp = app.get("/v1/events", Some(&app.admin_token("ops"))).await;
    assert!(resp.headers().contains_key("retry-after"));
    assert_eq!(
        error_code(resp).await,
        (503, "service_unavailable".to_owned())
    );
    faults.lock().expect("faults").off();
    let events = all_events(&app).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["data"], handle);
}

/// An alarm whose id derives from its cause (a reconcile run's `reconcile.missing`) is recorded
/// once however often its cause records it — a resumed run records it again as a no-op — while
/// an alarm of another cause is its own event.
#[tokio::test]
async fn an_alarm_recorded_again_under_its_id_is_one_event() {
    use upcommit::domain::events::{EventType, NewEvent};

    let app = spawn_app().await;
    let alarm = |run: &str| {
        let mut e = NewEvent::new(
            EventType::ReconcileMissing,
            "reconcile",
            chrono::Utc::now(),
            &json!({"run_id": run, "missing": 1}),
        );
        e.id = format!("evt_reconcile_{run}");
        e
    };
    let (a, b) = (alarm("run1"), alarm("run2"));
    let (first, second) = tokio::join!(app.catalog.record_event(&a), app.catalog.record_event(&a));
    first.expect("record");
    second.expect("record again");
    app.catalog
        .record_event(&a)
        .await
        .expect("record a third time");
    app.catalog.record_event(&b).await.expect("another run's");
    let events = all_events(&app).await;
    let ids: Vec<&str> = events.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(ids, vec!["evt_reconcile_run1", "evt_reconcile_run2"]);
}

/// Review 26: the feed read the positions it holds, then the page. A prune committing between
/// the two reads (the retention removing the leading run) gave a 200 page that started after
/// what it removed: a consumer lagging by about the retention silently lost those events. The
/// page is now read first and the positions after it, so the same prune answers 410
/// `cursor_expired`. The reader is held between its two reads (`feed_between_reads`) while the
/// prune runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prune_between_the_feeds_two_reads_answers_410_never_a_page_with_a_gap() {
    let app = spawn_app().await;
    let token = app.token("alice");
    for _ in 0..3 {
        app.upload_and_commit(&token, "image", "image/png", 300)
            .await;
    }
    let events = all_events(&app).await;
    assert!(events.len() >= 3, "{events:?}");

    let dir = tempfile::tempdir().expect("gate dir");
    let gate = dir.path().join("gate");
    let (mut reader, base) = crate::helpers::server_process(
        &app,
        &[
            ("UPCOMMIT_PAUSE_AT", "feed_between_reads"),
            ("UPCOMMIT_PAUSE_GATE", gate.to_str().expect("path")),
            ("RUST_LOG", "warn"),
        ],
        std::process::Stdio::null(),
    )
    .await;
    let read = {
        let (http, admin) = (app.http.clone(), app.admin_token("ops"));
        tokio::spawn(async move {
            http.get(format!("{base}/v1/events?after=0&limit=100"))
                .bearer_auth(admin)
                .send()
                .await
                .expect("GET /v1/events")
        })
    };
    let reached = gate.with_extension("reached");
    for _ in 0..500 {
        if reached.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        reached.exists(),
        "the reader never reached the point between its reads"
    );
    // The retention removes every event but the last (no endpoint is owed any).
    let settings = upcommit::config::Settings::from_map(&app.env).expect("settings");
    let at = chrono::Utc::now() + chrono::Duration::days(400);
    let pruned = upcommit::services::prune::prune_at(&app.catalog, &settings, false, at)
        .await
        .expect("prune");
    assert!(
        matches!(pruned, upcommit::services::prune::PruneOutcome::Ran { .. }),
        "prune ran"
    );
    assert!(
        app.db.count("SELECT COUNT(*) FROM events").await < events.len() as i64,
        "the leading events were pruned"
    );
    std::fs::write(&gate, b"go").expect("open the gate");
    let resp = read.await.expect("reader");
    let _ = reader.kill();
    let _ = reader.wait();
    let (status, code) = error_code(resp).await;
    assert_eq!((status, code.as_str()), (410, "cursor_expired"));
}
