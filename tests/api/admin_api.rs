//! The admin API behind the console (issue 29): storage broken down, the bucket's checks and
//! capabilities, finding files, a file's copies, links and events, an endpoint's deliveries
//! with retry and replay, the job history with hygiene's dry run, and the history's retention.
//! Every route is tried as a stranger and as a user first, and each filter and cursor with what
//! an attacker would send.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};
use upcommit::config::Settings;
use upcommit::services::prune::{prune_at, PruneOutcome};

use crate::helpers::{
    error_code, free_port, server_process, spawn_app, spawn_app_with, Spawn, TestApp,
};

/// Every route the admin API added, with a body where it takes one.
fn admin_routes() -> Vec<(&'static str, String, Option<Value>)> {
    vec![
        ("GET", "/v1/admin/bucket".into(), None),
        ("GET", "/v1/admin/storage-report".into(), None),
        ("GET", "/v1/admin/jobs".into(), None),
        ("GET", "/v1/admin/jobs/runs".into(), None),
        ("GET", "/v1/admin/jobs/runs/nope".into(), None),
        ("POST", "/v1/admin/jobs/hygiene/dry-run".into(), None),
        ("GET", "/v1/admin/files".into(), None),
        ("GET", format!("/v1/admin/files/{}", "0".repeat(32)), None),
        ("GET", "/v1/admin/webhooks/w1/deliveries".into(), None),
        ("POST", "/v1/admin/webhooks/w1/retry".into(), None),
        (
            "POST",
            "/v1/admin/webhooks/w1/replay".into(),
            Some(json!({ "after": "0" })),
        ),
    ]
}

async fn call(
    app: &TestApp,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> reqwest::Response {
    let url = format!("{}{path}", app.address);
    let mut req = match method {
        "GET" => app.http.get(url),
        "POST" => app.http.post(url),
        other => panic!("method {other}"),
    };
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    req.send().await.expect("request sent")
}

async fn admin_get(app: &TestApp, path: &str) -> Value {
    let resp = app.get(path, Some(&app.admin_token("ops"))).await;
    let status = resp.status();
    let body: Value = resp.json().await.expect("json");
    assert_eq!(status, 200, "{path}: {body}");
    body
}

#[tokio::test]
async fn every_admin_route_refuses_strangers_and_users_and_shows_them_nothing() {
    let app = spawn_app().await;
    let user = app.token("mallory");
    // Something to leak, were a route to answer.
    let (_, committed) = app
        .upload_and_commit(&app.token("alice"), "image", "image/png", 300)
        .await;
    let id = committed["id"].as_str().expect("id");
    let mut routes = admin_routes();
    routes.push(("GET", format!("/v1/admin/files/{id}"), None));
    routes.push(("GET", format!("/v1/admin/files?owner=alice&id={id}"), None));
    for (method, path, body) in &routes {
        let resp = call(&app, method, path, None, body.as_ref()).await;
        let (status, code) = error_code(resp).await;
        assert_eq!(
            (status, code.as_str()),
            (401, "unauthorized"),
            "{method} {path}"
        );
        let resp = call(&app, method, path, Some(&user), body.as_ref()).await;
        let text = resp.text().await.expect("body");
        let v: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(
            v["error"]["code"], "admin_required",
            "{method} {path}: {text}"
        );
        assert!(
            !text.contains(id),
            "{method} {path} showed a file id: {text}"
        );
        assert!(
            !text.contains("alice"),
            "{method} {path} showed an owner: {text}"
        );
    }
    // A user learns nothing of a route's body or path from its refusal: 403 before either is
    // read (review 36: 415, or 400 naming the expected fields).
    for (path, body) in [
        ("/v1/admin/webhooks/nope/replay", "{bad"),
        ("/v1/admin/webhooks/nope/replay", r#"{"after":"0","x":1}"#),
        ("/v1/admin/webhooks/%FF/retry", "{}"),
    ] {
        for content_type in ["application/json", "text/plain"] {
            let resp = app
                .http
                .post(format!("{}{path}", app.address))
                .bearer_auth(&user)
                .header("content-type", content_type)
                .body(body)
                .send()
                .await
                .expect("sent");
            let (status, code) = error_code(resp).await;
            assert_eq!(
                (status, code.as_str()),
                (403, "admin_required"),
                "{path} {body}"
            );
        }
    }
    for path in [
        "/v1/admin/jobs/runs/%FF%FE",
        "/v1/admin/files/%C0",
        "/v1/admin/files?limit=x",
    ] {
        let resp = app.get(path, Some(&user)).await;
        let (status, code) = error_code(resp).await;
        assert_eq!((status, code.as_str()), (403, "admin_required"), "{path}");
    }
    // A user's dry run would have been a run: none was started.
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM job_runs WHERE job = 'hygiene'")
            .await,
        0
    );
}

/// Ids of every page of `/v1/admin/files?{query}` followed by `next_before`, in order.
async fn all_pages(app: &TestApp, query: &str, limit: usize) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let mut before: Option<String> = None;
    for _ in 0..100 {
        let mut path = format!("/v1/admin/files?{query}&limit={limit}");
        if let Some(b) = &before {
            path.push_str(&format!("&before={b}"));
        }
        let page = admin_get(app, &path).await;
        let files = page["files"].as_array().expect("files");
        assert!(files.len() <= limit);
        for f in files {
            seen.push((
                f["created_at"].as_str().expect("created_at").to_owned(),
                f["id"].as_str().expect("id").to_owned(),
            ));
        }
        match page["next_before"].as_str() {
            Some(b) => before = Some(b.to_owned()),
            None => return seen,
        }
    }
    panic!("more than 100 pages");
}

#[tokio::test]
async fn files_are_found_by_each_filter_and_paged_newest_first_without_gaps_or_repeats() {
    let app = spawn_app().await;
    let (alice, bob) = (app.token("alice"), app.token("bob"));
    let mut alices = Vec::new();
    for size in [300, 400, 500] {
        let (_, h) = app
            .upload_and_commit(&alice, "image", "image/png", size)
            .await;
        alices.push(h);
    }
    for size in [600, 700] {
        app.upload_and_commit(&bob, "image", "image/png", size)
            .await;
    }
    let source = alices[0]["id"].as_str().expect("id").to_owned();
    let key = alices[0]["key"].as_str().expect("key").to_owned();
    let resp = app
        .post_json(
            &format!("/v1/files/{source}/copies"),
            Some(&alice),
            &json!({}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let copy: Value = resp.json().await.expect("copy");
    let copy_id = copy["id"].as_str().expect("id").to_owned();
    let resp = app
        .http
        .put(format!("{}/v1/files/{source}/links/post/p1", app.address))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("link");
    assert_eq!(resp.status(), 204);

    // Every handle, newest first, whatever the page size, each once.
    let everything: BTreeSet<String> = app
        .db
        .strings("SELECT id FROM file_handles")
        .await
        .into_iter()
        .collect();
    assert_eq!(everything.len(), 6);
    for limit in [1, 2, 5, 50] {
        let pages = all_pages(&app, "", limit).await;
        let ids: Vec<&String> = pages.iter().map(|(_, id)| id).collect();
        let unique: BTreeSet<String> = ids.iter().map(|s| (*s).clone()).collect();
        assert_eq!(ids.len(), unique.len(), "limit {limit}: repeated {ids:?}");
        assert_eq!(unique, everything, "limit {limit}");
        let times: Vec<chrono::DateTime<chrono::Utc>> = pages
            .iter()
            .map(|(t, _)| t.parse().expect("time"))
            .collect();
        assert!(
            times.windows(2).all(|w| w[0] >= w[1]),
            "not newest first: {times:?}"
        );
    }

    // Each filter against the catalog's own answer.
    let ids_of = |page: &Value| -> BTreeSet<String> {
        page["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| f["id"].as_str().expect("id").to_owned())
            .collect()
    };
    let by_owner = admin_get(&app, "/v1/admin/files?owner=alice").await;
    let want: BTreeSet<String> = app
        .db
        .strings("SELECT id FROM file_handles WHERE created_by = 'alice'")
        .await
        .into_iter()
        .collect();
    assert_eq!(want.len(), 4, "three commits and a copy");
    assert_eq!(ids_of(&by_owner), want);
    let by_id = admin_get(&app, &format!("/v1/admin/files?id={copy_id}")).await;
    assert_eq!(ids_of(&by_id), BTreeSet::from([copy_id.clone()]));
    // The key's own prefix finds the file and its copy (they share the object), nothing else.
    let by_key = admin_get(
        &app,
        &format!("/v1/admin/files?key_prefix={}", urlencoding(&key)),
    )
    .await;
    assert_eq!(
        ids_of(&by_key),
        BTreeSet::from([source.clone(), copy_id.clone()])
    );
    // LIKE's wildcards are plain characters in a prefix.
    let head: String = key.chars().take(3).collect();
    let some = admin_get(
        &app,
        &format!("/v1/admin/files?key_prefix={}", urlencoding(&head)),
    )
    .await;
    assert_eq!(ids_of(&some), everything);
    for wild in ["%", "_", "%25", "_%"] {
        let probe = format!("{}{wild}", &head[..2]);
        let none = admin_get(
            &app,
            &format!("/v1/admin/files?key_prefix={}", urlencoding(&probe)),
        )
        .await;
        assert_eq!(
            ids_of(&none),
            BTreeSet::new(),
            "{probe:?} matched as a pattern"
        );
    }
    let by_status = admin_get(&app, "/v1/admin/files?status=available&profile=image").await;
    assert_eq!(ids_of(&by_status), everything);
    let none = admin_get(&app, "/v1/admin/files?status=deleted").await;
    assert_eq!(ids_of(&none), BTreeSet::new());
    let blank = admin_get(
        &app,
        "/v1/admin/files?id=&owner=&status=&profile=&key_prefix=",
    )
    .await;
    assert_eq!(ids_of(&blank), everything, "empty fields are no filter");
    // Text that would be SQL is a value.
    for evil in [
        "alice' OR '1'='1",
        "alice\" OR 1=1 --",
        "' UNION SELECT id FROM file_handles --",
    ] {
        let page = admin_get(
            &app,
            &format!("/v1/admin/files?owner={}", urlencoding(evil)),
        )
        .await;
        assert_eq!(ids_of(&page), BTreeSet::new(), "{evil}");
    }

    // Bad queries are refused with the code, never read as "everything".
    let admin = app.admin_token("ops");
    for bad in [
        "id=not-an-id",
        "id=ABCDEF0123456789ABCDEF0123456789",
        "status=gone",
        "limit=0",
        "limit=201",
        "limit=x",
        "before=yesterday",
        "before=1-UPPER",
        "before=-1-abc",
        "before=99999999999999999999-abc",
        "before=",
        // Another list's cursor, and a time past the year 9999 (the databases order those
        // differently: review 36).
        "before=r1764820000000000-abc",
        "before=1764820000000000-abc",
        "before=f262143999999999999-a",
        // No key, owner or profile holds a control character (PostgreSQL refuses a NUL).
        "owner=%00",
        "owner=a%00b",
        "key_prefix=%00",
        "profile=%0A",
    ] {
        let resp = app
            .get(&format!("/v1/admin/files?{bad}"), Some(&admin))
            .await;
        let (status, code) = error_code(resp).await;
        assert_eq!((status, code.as_str()), (400, "invalid_request"), "{bad}");
    }
    let long = "a".repeat(1025);
    let resp = app
        .get(&format!("/v1/admin/files?key_prefix={long}"), Some(&admin))
        .await;
    assert_eq!(error_code(resp).await.0, 400);

    // A file's page: its copies (both ways), links and events.
    let detail = admin_get(&app, &format!("/v1/admin/files/{source}")).await;
    assert_eq!(detail["file"]["id"], source.as_str());
    let copies: Vec<&str> = detail["copies"]
        .as_array()
        .expect("copies")
        .iter()
        .map(|c| c["id"].as_str().expect("id"))
        .collect();
    assert_eq!(copies, vec![copy_id.as_str()]);
    assert_eq!(detail["links"][0]["object_type"], "post");
    assert_eq!(detail["links"][0]["object_id"], "p1");
    let events = detail["events"].as_array().expect("events");
    assert_eq!(events[0]["type"], "file.committed", "{events:?}");
    assert_eq!(events[0]["data"]["id"], source.as_str());
    assert!(events[0]["id"]
        .as_str()
        .is_some_and(|e| e.starts_with("evt_")));
    let other_way = admin_get(&app, &format!("/v1/admin/files/{copy_id}")).await;
    assert_eq!(other_way["copies"][0]["id"], source.as_str());
    assert_eq!(other_way["file"]["copied_from"], source.as_str());
    for missing in ["0".repeat(32), "nope".into(), "A".repeat(32), "%00".into()] {
        let resp = app
            .get(&format!("/v1/admin/files/{missing}"), Some(&admin))
            .await;
        let (status, code) = error_code(resp).await;
        assert_eq!(
            (status, code.as_str()),
            (404, "file_not_found"),
            "{missing}"
        );
    }
}

/// Percent-encodes a query value (every byte but unreserved ones).
fn urlencoding(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn deliveries(app: &TestApp, endpoint: &str, state: &str) -> Vec<Value> {
    admin_get(
        app,
        &format!("/v1/admin/webhooks/{endpoint}/deliveries?state={state}"),
    )
    .await["deliveries"]
        .as_array()
        .expect("deliveries")
        .clone()
}

#[tokio::test]
async fn failed_deliveries_show_their_error_and_retry_and_replay_make_them_due_again() {
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_EVENT_RETRY_WINDOW", "1s".into()),
            ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "1".into()),
        ],
        ..Spawn::default()
    })
    .await;
    let admin = app.admin_token("ops");
    // Nothing listens there: every attempt fails to connect.
    let dead = format!("http://127.0.0.1:{}/hook", free_port());
    let resp = app
        .post_json(
            "/v1/admin/webhooks",
            Some(&admin),
            &json!({ "id": "dead", "url": dead, "types": ["*"] }),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let (_, committed) = app
        .upload_and_commit(&app.token("alice"), "image", "image/png", 300)
        .await;
    let id = committed["id"].as_str().expect("id");
    let mut failed = Vec::new();
    for _ in 0..150 {
        failed = deliveries(&app, "dead", "failed").await;
        if !failed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let d = failed.first().expect("a failed delivery within 30 s");
    assert_eq!(d["type"], "file.committed");
    assert_eq!(d["subject"], id);
    assert_eq!(d["state"], "failed");
    assert!(d["attempts"].as_i64().is_some_and(|n| n >= 1), "{d}");
    assert!(
        d["last_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{d}"
    );
    assert!(
        d["cursor"]
            .as_str()
            .is_some_and(|c| c.parse::<i64>().is_ok()),
        "{d}"
    );
    // The same numbers in the endpoint list, with the outbox's age.
    let listed = admin_get(&app, "/v1/admin/webhooks").await;
    let dead_row = listed["webhooks"]
        .as_array()
        .expect("webhooks")
        .iter()
        .find(|w| w["id"] == "dead")
        .expect("listed")
        .clone();
    let failed_now = app
        .db
        .count(
            "SELECT COUNT(*) FROM event_deliveries WHERE endpoint_id = 'dead' AND state = 'failed'",
        )
        .await;
    assert!(
        dead_row["failed"].as_i64().is_some_and(|n| n >= 1),
        "{dead_row}"
    );
    assert!(dead_row["oldest_undelivered_at"].is_string(), "{dead_row}");
    // Paging by cursor: after a delivery, only later ones.
    let position = |v: &Value| -> i64 {
        v["cursor"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .expect("a numeric cursor")
    };
    let first = position(d);
    let rest = admin_get(
        &app,
        &format!("/v1/admin/webhooks/dead/deliveries?after={first}"),
    )
    .await;
    let rest = rest["deliveries"].as_array().expect("deliveries");
    assert!(rest.iter().all(|x| position(x) > first), "{rest:?}");
    // Retry: each failed one is due again (pending) at once.
    let resp = app
        .post_json("/v1/admin/webhooks/dead/retry", Some(&admin), &json!({}))
        .await;
    assert_eq!(resp.status(), 200);
    let retried: Value = resp.json().await.expect("json");
    assert_eq!(retried["endpoint"], "dead");
    assert!(
        retried["due_again"]
            .as_i64()
            .is_some_and(|n| n >= 1 && n >= failed_now),
        "{retried} (failed before: {failed_now})"
    );
    // Replay from the start: every event the endpoint subscribes to.
    let events = app
        .db
        .count("SELECT COUNT(*) FROM events WHERE position IS NOT NULL")
        .await;
    let resp = app
        .post_json(
            "/v1/admin/webhooks/dead/replay",
            Some(&admin),
            &json!({ "after": "0" }),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let replayed: Value = resp.json().await.expect("json");
    assert_eq!(replayed["due_again"].as_i64(), Some(events), "{replayed}");
    assert_eq!(replayed["pruned_through"], Value::Null);

    // What an attacker or a typo sends.
    for (body, want) in [
        (json!({ "after": "x" }), "invalid_request"),
        (json!({ "after": "-1" }), "invalid_request"),
        (json!({ "after": "1", "endpoint": "other" }), "invalid_json"),
        (json!({}), "invalid_json"),
    ] {
        let resp = app
            .post_json("/v1/admin/webhooks/dead/replay", Some(&admin), &body)
            .await;
        let (status, code) = error_code(resp).await;
        assert_eq!((status, code.as_str()), (400, want), "{body}");
    }
    for path in [
        "/v1/admin/webhooks/ghost/retry",
        "/v1/admin/webhooks/ghost/replay",
    ] {
        let resp = app
            .post_json(path, Some(&admin), &json!({ "after": "0" }))
            .await;
        let (status, code) = error_code(resp).await;
        assert_eq!(
            (status, code.as_str()),
            (404, "webhook_not_found"),
            "{path}"
        );
    }
    for ghost in ["ghost", "%00", "a%00b", "UPPER"] {
        let resp = app
            .get(
                &format!("/v1/admin/webhooks/{ghost}/deliveries"),
                Some(&admin),
            )
            .await;
        assert_eq!(
            error_code(resp).await,
            (404, "webhook_not_found".into()),
            "{ghost}"
        );
        let resp = app
            .delete(&format!("/v1/admin/webhooks/{ghost}"), Some(&admin))
            .await;
        assert_eq!(
            error_code(resp).await,
            (404, "webhook_not_found".into()),
            "{ghost}"
        );
    }
    for bad in ["state=lost", "after=abc", "limit=0"] {
        let resp = app
            .get(
                &format!("/v1/admin/webhooks/dead/deliveries?{bad}"),
                Some(&admin),
            )
            .await;
        assert_eq!(
            error_code(resp).await,
            (400, "invalid_request".into()),
            "{bad}"
        );
    }

    // Disabled: nothing would send them, so neither call changes a row.
    assert_eq!(
        app.delete("/v1/admin/webhooks/dead", Some(&admin))
            .await
            .status(),
        204
    );
    let before = app
        .db
        .strings("SELECT state || ':' || attempts || ':' || next_attempt_at FROM event_deliveries ORDER BY position")
        .await;
    for (path, body) in [
        ("/v1/admin/webhooks/dead/retry", json!({})),
        ("/v1/admin/webhooks/dead/replay", json!({ "after": "0" })),
    ] {
        let resp = app.post_json(path, Some(&admin), &body).await;
        let (status, code) = error_code(resp).await;
        assert_eq!((status, code.as_str()), (409, "webhook_disabled"), "{path}");
    }
    let after = app
        .db
        .strings("SELECT state || ':' || attempts || ':' || next_attempt_at FROM event_deliveries ORDER BY position")
        .await;
    assert_eq!(before, after);
}

async fn run_until_ended(app: &TestApp, location: &str) -> Value {
    for _ in 0..150 {
        let body = admin_get(app, location).await;
        if body["run"]["state"] != "running" {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{location} still running after 30 s");
}

async fn dry_run(app: &TestApp) -> (String, Value) {
    let resp = app
        .post_json(
            "/v1/admin/jobs/hygiene/dry-run",
            Some(&app.admin_token("ops")),
            &json!({}),
        )
        .await;
    assert_eq!(resp.status(), 202);
    let location = resp
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .expect("Location")
        .to_owned();
    let body: Value = resp.json().await.expect("json");
    let run_id = body["run_id"].as_str().expect("run_id").to_owned();
    assert_eq!(location, format!("/v1/admin/jobs/runs/{run_id}"));
    (run_id, run_until_ended(app, &location).await)
}

/// A server where hygiene tracks `image` with a 1-second grace and no schedule of its own, and
/// one image committed past that grace (an unlink candidate): the committed handle.
async fn app_with_an_unlink_candidate(extra: &[(&'static str, &str)]) -> (TestApp, Value) {
    let mut env = vec![
        ("UPCOMMIT_TRACKS_LINKS", "image".to_owned()),
        ("UPCOMMIT_UNLINKED_GRACE_SECS", "1".to_owned()),
        ("UPCOMMIT_HYGIENE_INTERVAL_SECS", "0".to_owned()),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let app = spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await;
    let (_, committed) = app
        .upload_and_commit(&app.token("alice"), "image", "image/png", 300)
        .await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    (app, committed)
}

/// Runs `upcommit hygiene` (a real run) against the app; its run id.
async fn run_hygiene(app: &TestApp) -> String {
    let out = crate::helpers::hygiene_cli(app, None).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    v["run"]["id"].as_str().expect("run id").to_owned()
}

/// Waits (the gauges are read every 5 s) until `/metrics` has the series.
async fn wait_for_metric(app: &TestApp, series: &str) {
    for _ in 0..80 {
        if app.metrics_text().await.contains(series) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{series} never on /metrics");
}

#[tokio::test(flavor = "multi_thread")]
async fn hygiene_dry_run_from_the_api_is_a_run_in_the_history_with_its_findings_and_changes_nothing(
) {
    let (app, committed) = app_with_an_unlink_candidate(&[]).await;
    let id = committed["id"].as_str().expect("id");
    let key = committed["key"].as_str().expect("key");

    let (run_id, ended) = dry_run(&app).await;
    let run = &ended["run"];
    assert_eq!(run["state"], "finished", "{ended}");
    assert_eq!(run["job"], "hygiene");
    assert_eq!(run["dry_run"], true);
    assert_eq!(run["summary"]["unlinked"], 1, "{ended}");
    let items = ended["items"].as_array().expect("items");
    assert!(
        items.iter().any(|i| i["action"] == "would_unlink"
            && i["key"] == key
            && i["reason"].as_str().is_some_and(|r| r.contains(id))),
        "{items:?}"
    );
    // A dry run: the file is as it was.
    let status = app
        .db
        .strings(&format!(
            "SELECT status FROM file_handles WHERE id = '{id}'"
        ))
        .await;
    assert_eq!(status, vec!["available".to_owned()]);

    // A dry run is in the history, never the job's last run: nothing ran for real, and the
    // jobs list and /metrics (whose alerts watch the job) say so.
    let jobs = admin_get(&app, "/v1/admin/jobs").await;
    let names: Vec<&str> = jobs["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["job"].as_str().expect("job"))
        .collect();
    assert_eq!(
        names,
        ["sweep", "hygiene", "reconcile", "prune", "legacy_import"]
    );
    assert_eq!(jobs["jobs"][1]["last_run"], Value::Null, "{jobs}");
    assert_eq!(jobs["jobs"][1]["interval_secs"], Value::Null);
    assert_eq!(jobs["jobs"][1]["next_due_at"], Value::Null);
    assert_eq!(jobs["jobs"][0]["interval_secs"], 3600, "{jobs}");
    let gauge = "upcommit_job_last_run_ok{job_name=\"hygiene\"} 1";
    // A real run is.
    let real = run_hygiene(&app).await;
    let jobs = admin_get(&app, "/v1/admin/jobs").await;
    assert_eq!(jobs["jobs"][1]["last_run"]["id"], real.as_str(), "{jobs}");
    assert_eq!(jobs["jobs"][1]["last_run"]["dry_run"], false);
    wait_for_metric(&app, gauge).await;

    // The history, paged newest first, each run once.
    let (second, _) = dry_run(&app).await;
    let (third, _) = dry_run(&app).await;
    let mut seen = Vec::new();
    let mut path = "/v1/admin/jobs/runs?job=hygiene&limit=1".to_owned();
    loop {
        let page = admin_get(&app, &path).await;
        for r in page["runs"].as_array().expect("runs") {
            seen.push(r["id"].as_str().expect("id").to_owned());
        }
        match page["next_before"].as_str() {
            Some(b) => path = format!("/v1/admin/jobs/runs?job=hygiene&limit=1&before={b}"),
            None => break,
        }
        assert!(seen.len() <= 4, "{seen:?}");
    }
    assert_eq!(seen, vec![third, second, real, run_id.clone()]);
    // Item paging: one at a time reaches the same items.
    let one = admin_get(&app, &format!("/v1/admin/jobs/runs/{run_id}?limit=1")).await;
    assert_eq!(one["items"].as_array().expect("items").len(), 1);
    let admin = app.admin_token("ops");
    for bad in ["job=cleanup", "limit=0", "before=abc", "before=1-A"] {
        let resp = app
            .get(&format!("/v1/admin/jobs/runs?{bad}"), Some(&admin))
            .await;
        assert_eq!(
            error_code(resp).await,
            (400, "invalid_request".into()),
            "{bad}"
        );
    }
    for bad in ["after=-1", "after=x", "limit=500"] {
        let resp = app
            .get(&format!("/v1/admin/jobs/runs/{run_id}?{bad}"), Some(&admin))
            .await;
        assert_eq!(
            error_code(resp).await,
            (400, "invalid_request".into()),
            "{bad}"
        );
    }
    for missing in ["0000", "%00", "a%00", &"0".repeat(32), &"A".repeat(32)] {
        let resp = app
            .get(&format!("/v1/admin/jobs/runs/{missing}"), Some(&admin))
            .await;
        assert_eq!(
            error_code(resp).await,
            (404, "job_run_not_found".into()),
            "{missing}"
        );
    }
    // A files cursor is no runs cursor.
    let files = admin_get(&app, "/v1/admin/files?limit=1").await;
    if let Some(c) = files["next_before"].as_str() {
        let resp = app
            .get(&format!("/v1/admin/jobs/runs?before={c}"), Some(&admin))
            .await;
        assert_eq!(error_code(resp).await.1, "invalid_request");
    }
}

#[tokio::test]
async fn prune_lets_old_runs_go_with_their_findings_but_keeps_each_jobs_newest() {
    let (app, _) = app_with_an_unlink_candidate(&[("UPCOMMIT_JOB_HISTORY_RETENTION", "30d")]).await;
    let (oldest, _) = dry_run(&app).await;
    let (middle, _) = dry_run(&app).await;
    let (newest, _) = dry_run(&app).await;
    let items_of = |run: &str| format!("SELECT COUNT(*) FROM job_items WHERE run_id = '{run}'");
    assert!(app.db.count(&items_of(&oldest)).await >= 1);
    let settings = Settings::from_map(&app.env).expect("settings");

    // Within the retention, nothing goes.
    let soon = chrono::Utc::now() + chrono::Duration::days(29);
    let PruneOutcome::Ran { summary, .. } = prune_at(&app.catalog, &settings, false, soon)
        .await
        .expect("prune")
    else {
        panic!("busy");
    };
    assert_eq!(summary.job_runs, 0);

    // Past it: a dry run counts the two older hygiene dry runs — not the first prune's run,
    // the newest real prune that finished — and, 31 days on, its own row: a dry run still
    // `running` since before the cutoff is one whose process died.
    let later = chrono::Utc::now() + chrono::Duration::days(31);
    let PruneOutcome::Ran { summary, .. } = prune_at(&app.catalog, &settings, true, later)
        .await
        .expect("dry prune")
    else {
        panic!("busy");
    };
    assert_eq!(summary.job_runs, 3, "{summary:?}");
    assert!(
        app.db.count(&items_of(&oldest)).await >= 1,
        "a dry run deletes nothing"
    );
    let PruneOutcome::Ran { summary, .. } = prune_at(&app.catalog, &settings, false, later)
        .await
        .expect("prune")
    else {
        panic!("busy");
    };
    // The same two: the first prune and the dry one are each the newest of their kind.
    assert_eq!(summary.job_runs, 2, "{summary:?}");
    let left: BTreeSet<String> = app
        .db
        .strings("SELECT id FROM job_runs WHERE job = 'hygiene'")
        .await
        .into_iter()
        .collect();
    assert_eq!(left, BTreeSet::from([newest.clone()]));
    assert_eq!(app.db.count(&items_of(&oldest)).await, 0);
    assert_eq!(app.db.count(&items_of(&middle)).await, 0);
    assert!(app.db.count(&items_of(&newest)).await >= 1);
    let resp = app
        .get(
            &format!("/v1/admin/jobs/runs/{oldest}"),
            Some(&app.admin_token("ops")),
        )
        .await;
    assert_eq!(error_code(resp).await.1, "job_run_not_found");
    // The history shows what is kept.
    let history = admin_get(&app, "/v1/admin/jobs/runs?job=hygiene").await;
    assert_eq!(
        history["runs"].as_array().map(Vec::len),
        Some(1),
        "{history}"
    );
    assert_eq!(history["runs"][0]["id"], newest.as_str());
}

/// The history's retention never lets a real run still `running` go, however old: it is the
/// checkpoint the next run resumes from. Here one is held at its first unlink while a prune
/// runs 400 days on.
#[tokio::test(flavor = "multi_thread")]
async fn prune_never_lets_a_real_run_in_flight_go() {
    let (app, _) = app_with_an_unlink_candidate(&[("UPCOMMIT_JOB_HISTORY_RETENTION", "1d")]).await;
    let in_flight =
        crate::hygiene::Paused::start_with(&app, &["hygiene", "--json"], "hygiene_unlink").await;
    let running = "SELECT COUNT(*) FROM job_runs WHERE job = 'hygiene' AND dry_run = FALSE AND state = 'running'";
    assert_eq!(app.db.count(running).await, 1);
    let settings = Settings::from_map(&app.env).expect("settings");
    let later = chrono::Utc::now() + chrono::Duration::days(400);
    // A real prune (a dry one would count its own `running` row, 400 days on).
    for dry_run in [false] {
        let PruneOutcome::Ran { summary, .. } = prune_at(&app.catalog, &settings, dry_run, later)
            .await
            .expect("prune")
        else {
            panic!("busy");
        };
        assert_eq!(summary.job_runs, 0, "dry run {dry_run}: {summary:?}");
    }
    assert_eq!(
        app.db.count(running).await,
        1,
        "the run in flight is still there"
    );
    let out = in_flight.finish();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let finished = "SELECT COUNT(*) FROM job_runs WHERE job = 'hygiene' AND state = 'finished'";
    assert_eq!(app.db.count(finished).await, 1, "and ends as it would have");
}

#[tokio::test]
async fn the_storage_report_breaks_objects_down_by_status_class_profile_and_day() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let (_, a) = app
        .upload_and_commit(&alice, "image", "image/png", 300)
        .await;
    app.upload_and_commit(&alice, "image", "image/png", 500)
        .await;
    // A presign never committed counts as presigned only.
    app.presign_ok(&alice, "image", "image/png", 200, "PUT")
        .await;
    let id = a["id"].as_str().expect("id");
    let resp = app
        .post_json(&format!("/v1/files/{id}/copies"), Some(&alice), &json!({}))
        .await;
    assert_eq!(resp.status(), 201);
    let report = admin_get(&app, "/v1/admin/storage-report").await;
    let share = |list: &str, name: &str| {
        report[list]
            .as_array()
            .expect(list)
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| {
                (
                    s["count"].as_i64().expect("count"),
                    s["bytes"].as_i64().expect("bytes"),
                )
            })
    };
    // Two objects (the copy shares the first one's), 800 bytes.
    assert_eq!(share("by_profile", "image"), Some((2, 800)), "{report}");
    assert_eq!(share("by_status", "available"), Some((2, 800)));
    assert_eq!(share("by_storage_class", "STANDARD"), Some((2, 800)));
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let days = report["uploads_per_day"].as_array().expect("days");
    let day = days
        .iter()
        .find(|d| d["day"] == today.as_str())
        .expect("today");
    assert_eq!(day["presigned"], 3, "{days:?}");
    assert_eq!(day["committed"], 2, "copies are not commits: {days:?}");
    assert_eq!(day["committed_bytes"], 800);
}

#[tokio::test]
async fn the_bucket_view_is_the_watchs_verdict_and_the_stores_capabilities() {
    let app = spawn_app().await;
    // The watch's first run ends soon after start: until then both say `pending`.
    let mut bucket = admin_get(&app, "/v1/admin/bucket").await;
    for _ in 0..100 {
        if bucket["verdict"] != "pending" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        bucket = admin_get(&app, "/v1/admin/bucket").await;
    }
    assert_eq!(bucket["bucket"], app.bucket.as_str());
    let ready: Value = app.get("/readyz", None).await.json().await.expect("json");
    assert_eq!(
        bucket["verdict"], ready["checks"]["bucket_config"],
        "{bucket}\n{ready}"
    );
    // The report itself is the admin view's only (issue 35: /readyz showed it to anyone).
    assert!(ready.get("bucket_config").is_none(), "{ready}");
    let results = bucket["report"]["results"].as_array().expect("results");
    assert!(results
        .iter()
        .any(|r| r["check"] == "lifecycle_required_rules"));
    let metrics = app.metrics_text().await;
    let lines = bucket["capabilities"].as_array().expect("capabilities");
    assert!(!lines.is_empty());
    for line in lines {
        let series = format!(
            "upcommit_store_capability{{capability=\"{}\",standing=\"{}\"}} 1",
            line["capability"].as_str().expect("capability"),
            line["standing"].as_str().expect("standing")
        );
        assert!(metrics.contains(&series), "{series} not on /metrics");
        assert!(line["promise"].as_str().is_some_and(|p| !p.is_empty()));
    }
}

/// Review 36: the endpoint was checked in one statement and written in another, so a disable
/// landing in between was not seen — retry and replay answered with rows nothing would send.
/// Each now holds at the point between them while the endpoint is disabled through the API.
#[tokio::test(flavor = "multi_thread")]
async fn a_disable_between_the_check_and_the_write_leaves_retry_and_replay_refused() {
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_EVENT_RETRY_WINDOW", "1s".into())],
        ..Spawn::default()
    })
    .await;
    let admin = app.admin_token("ops");
    for (i, args) in [
        vec![
            "events",
            "replay",
            "--endpoint",
            "EP",
            "--after",
            "0",
            "--yes",
        ],
        vec!["events", "retry", "--endpoint", "EP", "--yes"],
    ]
    .into_iter()
    .enumerate()
    {
        let ep = format!("dead{i}");
        let url = format!("http://127.0.0.1:{}/x", free_port());
        let resp = app
            .post_json(
                "/v1/admin/webhooks",
                Some(&admin),
                &json!({ "id": ep, "url": url, "types": ["*"] }),
            )
            .await;
        assert_eq!(resp.status(), 201);
        app.upload_and_commit(&app.token("alice"), "image", "image/png", 300)
            .await;
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "EP" { ep.as_str() } else { a })
            .collect();
        let paused = crate::hygiene::Paused::start_with(&app, &args, "redeliver_checked").await;
        assert_eq!(
            app.delete(&format!("/v1/admin/webhooks/{ep}"), Some(&admin))
                .await
                .status(),
            204
        );
        let before = app
            .db
            .strings(&format!(
                "SELECT state || ':' || attempts || ':' || next_attempt_at FROM event_deliveries WHERE endpoint_id = '{ep}' ORDER BY position"
            ))
            .await;
        let out = paused.finish();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
        assert!(stderr.contains("is disabled"), "{stderr}");
        let after = app
            .db
            .strings(&format!(
                "SELECT state || ':' || attempts || ':' || next_attempt_at FROM event_deliveries WHERE endpoint_id = '{ep}' ORDER BY position"
            ))
            .await;
        assert_eq!(
            before, after,
            "{args:?} changed a disabled endpoint's deliveries"
        );
    }
}

/// Review 36: dry runs were spawned without bound (669 in 0.7 s) and a shutdown left the one in
/// flight `running` for good. Now a replica runs one at a time (a second request gets the
/// running one's id) and a stopping server records the one it had to stop as failed.
#[tokio::test(flavor = "multi_thread")]
async fn dry_runs_run_one_at_a_time_and_a_shutdown_records_the_one_it_stopped_as_failed() {
    let (app, _) = app_with_an_unlink_candidate(&[]).await;
    // A server process whose dry run holds at its first unlink until a gate that never opens.
    let gate =
        std::env::temp_dir().join(format!("upcommit-gate-{}", uuid::Uuid::new_v4().simple()));
    let gate_text = gate.to_str().expect("path").to_owned();
    let (mut child, base) = server_process(
        &app,
        &[
            ("UPCOMMIT_PAUSE_AT", "hygiene_unlink"),
            ("UPCOMMIT_PAUSE_GATE", &gate_text),
        ],
        std::process::Stdio::null(),
    )
    .await;
    let admin = app.admin_token("ops");
    let start = || async {
        let resp = app
            .http
            .post(format!("{base}/v1/admin/jobs/hygiene/dry-run"))
            .bearer_auth(&admin)
            .send()
            .await
            .expect("sent");
        assert_eq!(resp.status(), 202);
        let v: Value = resp.json().await.expect("json");
        v["run_id"].as_str().expect("run_id").to_owned()
    };
    let first = start().await;
    let reached = gate.with_extension("reached");
    for _ in 0..500 {
        if reached.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        reached.exists(),
        "the dry run never reached its first unlink"
    );
    for _ in 0..5 {
        assert_eq!(
            start().await,
            first,
            "a second dry run while one is in flight"
        );
    }
    let runs = "SELECT COUNT(*) FROM job_runs WHERE job = 'hygiene'";
    assert_eq!(app.db.count(runs).await, 1);
    // SIGTERM: the server waits a few seconds for the run, then stops it and says so.
    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(term.success());
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("joined")
        .expect("exited");
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_file(&reached);
    let state = app
        .db
        .strings(&format!("SELECT state FROM job_runs WHERE id = '{first}'"))
        .await;
    assert_eq!(state, vec!["failed".to_owned()]);
    let summary = app
        .db
        .strings(&format!(
            "SELECT summary FROM job_runs WHERE id = '{first}'"
        ))
        .await;
    assert!(summary[0].contains("the server stopped"), "{summary:?}");
}

#[tokio::test]
async fn prune_is_reported_on_the_sweeps_schedule_which_runs_it() {
    // The server runs prune after every sweep: the jobs list says so, with its next run due
    // one sweep interval after its last.
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_SWEEP_INTERVAL_SECS", "1800".into())],
        ..Spawn::default()
    })
    .await;
    let settings = Settings::from_map(&app.env).expect("settings");
    let ran = prune_at(&app.catalog, &settings, false, chrono::Utc::now())
        .await
        .expect("prune");
    let PruneOutcome::Ran { run, .. } = ran else {
        panic!("prune busy")
    };
    let jobs = admin_get(&app, "/v1/admin/jobs").await;
    let prune = &jobs["jobs"][3];
    assert_eq!(prune["job"], "prune");
    assert_eq!(prune["interval_secs"], 1800, "{jobs}");
    assert_eq!(prune["schedule"], "after each sweep", "{jobs}");
    let due: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(prune["next_due_at"].clone()).expect("next_due_at");
    let ended = run.finished_at.expect("ended");
    assert_eq!((due - ended).num_seconds(), 1800, "{jobs}");
    assert_eq!(jobs["jobs"][0]["schedule"], "every 1800 s", "{jobs}");
    assert_eq!(
        jobs["jobs"][2]["schedule"],
        "the operator's (cron, a systemd timer)"
    );

    // With the sweep off, prune is the operator's to schedule too.
    let off = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_SWEEP_INTERVAL_SECS", "0".into())],
        ..Spawn::default()
    })
    .await;
    let jobs = admin_get(&off, "/v1/admin/jobs").await;
    assert_eq!(jobs["jobs"][3]["interval_secs"], Value::Null, "{jobs}");
    assert_eq!(
        jobs["jobs"][3]["schedule"],
        "the operator's (cron, a systemd timer)"
    );
}
