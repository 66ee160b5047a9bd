//! A Garage cluster of three nodes on loopback (replication factor 3), one of them killed
//! (`kill -9`) in the middle of a run of uploads, commits, copies and hygiene, then brought back.
//! Every commit either succeeds or answers a documented retryable error (retried as docs/api.md
//! says), no handle is left without its object, no object is lost, and reconcile is clean
//! afterwards. Needs the Garage binary (`UPCOMMIT_TEST_GARAGE_BIN`): scripts/test.sh runs it
//! with `--ignored` in its Garage step.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{free_port, media, spawn_app_with, Spawn, TestApp};
use crate::hygiene::{hygiene, hygiene_env, in_days, DAY};

struct Node {
    dir: PathBuf,
    s3: u16,
    rpc: u16,
    child: Option<Child>,
}

fn garage_bin() -> String {
    std::env::var("UPCOMMIT_TEST_GARAGE_BIN")
        .expect("UPCOMMIT_TEST_GARAGE_BIN: the garage binary (scripts/test.sh sets it)")
}

impl Node {
    fn create(root: &Path, n: usize, secret: &str) -> Self {
        let dir = root.join(format!("node{n}"));
        std::fs::create_dir_all(&dir).expect("node dir");
        let (s3, rpc, admin) = (free_port(), free_port(), free_port());
        let config = format!(
            "metadata_dir = \"{d}/meta\"\ndata_dir = \"{d}/data\"\ndb_engine = \"sqlite\"\n\
             replication_factor = 3\nrpc_bind_addr = \"127.0.0.1:{rpc}\"\n\
             rpc_public_addr = \"127.0.0.1:{rpc}\"\nrpc_secret = \"{secret}\"\n\n\
             [s3_api]\ns3_region = \"us-east-1\"\napi_bind_addr = \"127.0.0.1:{s3}\"\n\
             root_domain = \".s3.garage.localhost\"\n\n[admin]\napi_bind_addr = \"127.0.0.1:{admin}\"\n",
            d = dir.display()
        );
        let cfg = dir.join("garage.toml");
        std::fs::write(&cfg, config).expect("config");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let mut node = Self {
            dir,
            s3,
            rpc,
            child: None,
        };
        node.start();
        node
    }

    fn cfg(&self) -> PathBuf {
        self.dir.join("garage.toml")
    }

    fn start(&mut self) {
        let log = std::fs::File::create(self.dir.join("garage.log")).expect("log");
        self.child = Some(
            Command::new(garage_bin())
                .arg("-c")
                .arg(self.cfg())
                .arg("server")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start garage"),
        );
    }

    /// SIGKILL, as `kill -9`.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn cli(&self, args: &[&str]) -> String {
        for _ in 0..100 {
            let out = Command::new(garage_bin())
                .arg("-c")
                .arg(self.cfg())
                .args(args)
                .output()
                .expect("garage cli");
            if out.status.success() {
                return String::from_utf8_lossy(&out.stdout).into_owned();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("garage {args:?} kept failing");
    }

    fn id(&self) -> String {
        self.cli(&["node", "id", "-q"])
            .trim()
            .split('@')
            .next()
            .expect("id")
            .to_owned()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three nodes, one zone each, replication factor 3, the test key (the process's AWS key)
/// imported with the right to create buckets.
fn start_cluster(root: &Path) -> Vec<Node> {
    let secret: String = (0..32).map(|_| format!("{:02x}", rand_byte())).collect();
    let nodes: Vec<Node> = (1..=3).map(|n| Node::create(root, n, &secret)).collect();
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    for (node, id) in nodes.iter().zip(&ids).skip(1) {
        nodes[0].cli(&["node", "connect", &format!("{id}@127.0.0.1:{}", node.rpc)]);
    }
    for (n, id) in ids.iter().enumerate() {
        nodes[0].cli(&[
            "layout",
            "assign",
            "-z",
            &format!("dc{}", n + 1),
            "-c",
            "1G",
            id,
        ]);
    }
    nodes[0].cli(&["layout", "apply", "--version", "1"]);
    let key = std::env::var("AWS_ACCESS_KEY_ID").expect("AWS_ACCESS_KEY_ID");
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").expect("AWS_SECRET_ACCESS_KEY");
    nodes[0].cli(&[
        "key",
        "import",
        "--yes",
        "-n",
        "upcommit-test",
        &key,
        &secret,
    ]);
    nodes[0].cli(&["key", "allow", "--create-bucket", "upcommit-test"]);
    nodes
}

fn rand_byte() -> u8 {
    uuid::Uuid::new_v4().as_bytes()[0]
}

/// Sends `req` until it is not a documented retryable answer (503 with `Retry-After`), at most
/// 60 times; every answer is kept in `seen`.
async fn until_settled(
    seen: &mut Vec<(u16, String)>,
    mut req: impl FnMut() -> reqwest::RequestBuilder,
) -> (u16, Value) {
    for _ in 0..60 {
        let resp = req().send().await.expect("the server answers");
        let status = resp.status().as_u16();
        let retry = resp.headers().contains_key("retry-after");
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        let code = body["error"]["code"].as_str().unwrap_or("").to_owned();
        seen.push((status, code));
        if status == 503 && retry {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        return (status, body);
    }
    panic!("still retryable after 60 attempts: {seen:?}");
}

/// One file: presign, upload (a failed PUT is sent again, as a client does), commit.
async fn one_file(app: &TestApp, token: &str, n: usize, seen: &mut Vec<(u16, String)>) -> Value {
    let size = 1000 + n;
    let bytes = media("image/png", size);
    let body = json!({"profile": "image", "content_type": "image/png", "size": size,
        "filename": format!("f{n}.png"), "method": "PUT"});
    let (status, presigned) = until_settled(seen, || {
        app.http
            .post(format!("{}/v1/uploads", app.address))
            .bearer_auth(token)
            .json(&body)
    })
    .await;
    assert_eq!(status, 201, "{presigned}");
    let p: crate::helpers::Presigned = serde_json::from_value(presigned).expect("presign");
    let mut stored = false;
    for _ in 0..60 {
        let code = app.upload(&p, bytes.clone(), "image/png").await;
        if code.is_success() {
            stored = true;
            break;
        }
        assert!(
            code.is_server_error(),
            "the store refused the upload: {code}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(stored, "the upload never went through");
    let (status, handle) = until_settled(seen, || {
        app.http
            .post(format!("{}/v1/files", app.address))
            .bearer_auth(token)
            .json(&json!({ "key": p.key }))
    })
    .await;
    assert!(status == 201 || status == 200, "{status} {handle}");
    handle
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Garage binary: scripts/test.sh runs it with --ignored"]
async fn a_node_killed_mid_run_loses_nothing_and_every_answer_is_documented() {
    let root = tempfile::tempdir().expect("cluster dir");
    let mut nodes = start_cluster(root.path());
    let endpoint = format!("http://127.0.0.1:{}", nodes[0].s3);
    let mut env = hygiene_env(DAY);
    env.push(("UPCOMMIT_S3_ENDPOINT", endpoint.clone()));
    let app = spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await;
    // The cluster promises what a single node does (docs/stores.md's table).
    let findings = crate::store_capabilities::probe(&app).await;
    crate::store_capabilities::matches_row(
        &findings,
        &crate::store_capabilities::documented_row_named("Garage 2.5.0, three nodes"),
    );
    let token = app.token("alice");
    let mut seen = Vec::new();
    let mut handles = Vec::new();
    for n in 0..24 {
        if n == 8 {
            nodes[2].kill();
        }
        if n == 12 {
            // Hygiene runs while a node is down (unlinks what nothing uses, in the catalog).
            let run = hygiene(&app, Some(in_days(2)));
            assert!(run["summary"]["unlinked"].as_u64().is_some(), "{run}");
        }
        if n == 16 {
            nodes[2].start();
        }
        let handle = one_file(&app, &token, n, &mut seen).await;
        if n % 4 == 0 {
            let id = handle["id"].as_str().expect("id").to_owned();
            let (status, copy) = until_settled(&mut seen, || {
                app.http
                    .post(format!("{}/v1/files/{id}/copies", app.address))
                    .bearer_auth(&token)
            })
            .await;
            // A file hygiene unlinked meanwhile answers `file_not_available` (documented).
            assert!(
                status == 201 || (status == 409 && copy["error"]["code"] == "file_not_available"),
                "{status} {copy}"
            );
        }
        handles.push(handle);
    }
    // The node upcommit talks to dies between an upload and its commit: the commit answers
    // 503 with Retry-After while it is down (documented), and the retry after it is back
    // commits.
    let p = app
        .presign_ok(&token, "image", "image/png", 1500, "PUT")
        .await;
    assert!(app
        .upload(&p, media("image/png", 1500), "image/png")
        .await
        .is_success());
    nodes[0].kill();
    let down = app.commit(&token, &p.key, None).await;
    assert_eq!(down.status(), 503);
    assert!(down.headers().contains_key("retry-after"));
    let (_, code) = crate::helpers::error_code(down).await;
    assert_eq!(code, "service_unavailable");
    seen.push((503, code));
    nodes[0].start();
    let (status, handle) = until_settled(&mut seen, || {
        app.http
            .post(format!("{}/v1/files", app.address))
            .bearer_auth(&token)
            .json(&json!({ "key": p.key }))
    })
    .await;
    assert_eq!(status, 201, "{handle}");
    handles.push(handle);

    // Archival (catalog-only on Garage) after the node is back.
    let run = hygiene(&app, Some(in_days(3) + chrono::Duration::seconds(5)));
    assert!(run["summary"]["archived"].as_u64().is_some(), "{run}");

    // Every answer was a success or a documented retryable one.
    for (status, code) in &seen {
        assert!(
            (200..300).contains(status)
                || (*status == 503
                    && ["service_unavailable", "commit_in_progress"].contains(&code.as_str()))
                || (*status == 409 && code == "file_not_available"),
            "undocumented answer {status} {code}: {seen:?}"
        );
    }
    // No handle without its object, on the node that was killed too.
    let rows = app
        .db
        .strings(
            "SELECT key || ' ' || CAST(size AS TEXT) FROM file_handles WHERE status <> 'deleted'",
        )
        .await;
    assert!(rows.len() >= 25, "{rows:?}");
    let via_killed = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(
            &aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await,
        )
        .endpoint_url(format!("http://127.0.0.1:{}", nodes[2].s3))
        .force_path_style(true)
        .build(),
    );
    for row in &rows {
        let (key, size) = row.rsplit_once(' ').expect("key size");
        for (name, s3) in [("node 1", &app.s3), ("node 3", &via_killed)] {
            // A node just restarted answers 503 until it has caught up with the layout: read
            // again, as any client of a retryable answer does (at most a minute).
            let mut tries = 0;
            let head = loop {
                match s3.head_object().bucket(&app.bucket).key(key).send().await {
                    Ok(h) => break h,
                    Err(e)
                        if tries < 120
                            && e.raw_response().is_some_and(|r| r.status().as_u16() == 503) =>
                    {
                        tries += 1;
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    Err(e) => panic!("{key} via {name}: {e:?}"),
                }
            };
            assert_eq!(
                head.content_length().map(|l| l.to_string()).as_deref(),
                Some(size),
                "{key} via {name}"
            );
        }
    }
    let run = crate::reconcile::reconcile_cli(&app, &[]);
    assert_eq!(run.code, 0, "{}", run.body);
    assert_eq!(run.body["summary"]["missing"], 0, "{}", run.body);
    assert_eq!(run.body["summary"]["unindexed"], 0, "{}", run.body);
    let retried = seen.iter().filter(|(s, _)| *s == 503).count();
    eprintln!(
        "garage cluster: {} files, {} answers, {} of them 503 retried",
        handles.len(),
        seen.len(),
        retried
    );
}
