//! A seeded history of uploads under injected faults, checked against the invariants that make
//! the service trustworthy. Faults: the catalog fails `create_upload`, `take_lease` and
//! `record_handle` before the database (nothing happened) or after it (the change is durable,
//! the caller sees an error); S3 copies happen but answer as a timeout; tmp deletes fail.
//!
//! The driver records every client call as ok (2xx), failed (a definite 4xx) or unknown (a 5xx
//! or no answer: the call may or may not have taken effect). A client that did not get a
//! definite answer retries its commit, faults off, until it does (as docs/api.md tells mobile
//! clients to) — except a quarter of them, whose app died for good: the recovery run inside the
//! sweep finishes or releases what they left. Then days pass for the sweeper and reconcile
//! runs, and the checks:
//! each ok commit has exactly one handle and every ok answer for an upload names it; each
//! upload whose commits were all unknown or failed has zero or one; the final keys in S3 are
//! exactly the handle keys; every handle's object is there with its size; no tmp object and no
//! `promoting` upload remains; the quota ledger charged exactly the recorded uploads.
//!
//! `UPCOMMIT_HISTORY_SEED=<n>` replays a history; the seed is printed and in every message.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use upcommit::config::Settings;
use upcommit::services::reconcile::{ReconcileOptions, ReconcileOutcome};
use upcommit::services::sweep::{sweep_at, SweepOutcome};
use upcommit::storage::{ObjectStore, S3Store};

use crate::catalog_faults::{CatalogFaults, FaultyCatalog, Rng};
use crate::faults::{faulty_store, Faults};
use crate::helpers::{media, spawn_app_with, Presigned, Spawn, TestApp};

const UPLOADS: usize = 24;
const USERS: [&str; 3] = ["ana", "bo", "cy"];

/// The fields are read through `Debug` in failure reports.
#[allow(dead_code)]
#[derive(Debug, Clone)]
enum Outcome {
    Ok(Value),
    Failed(u16, String),
    Unknown(String),
}

#[derive(Debug, Default)]
struct UploadHistory {
    user: &'static str,
    presign: Option<Outcome>,
    presigned: Option<Presigned>,
    uploaded: bool,
    /// The app was killed and the user never came back: no retry. The recovery run inside the
    /// sweep must finish (or release) what this client left.
    gives_up: bool,
    commits: Vec<Outcome>,
}

impl UploadHistory {
    fn definite(&self) -> bool {
        self.commits
            .iter()
            .any(|c| matches!(c, Outcome::Ok(_) | Outcome::Failed(..)))
    }
    fn ok_ids(&self) -> BTreeSet<String> {
        self.commits
            .iter()
            .filter_map(|c| match c {
                Outcome::Ok(h) => h["id"].as_str().map(str::to_owned),
                _ => None,
            })
            .collect()
    }
}

async fn classify(resp: Result<reqwest::Response, reqwest::Error>) -> Outcome {
    match resp {
        Err(e) => Outcome::Unknown(format!("no answer: {e}")),
        Ok(r) => {
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            match status {
                200..=299 => Outcome::Ok(body),
                500..=599 => Outcome::Unknown(format!(
                    "{status} {}",
                    body["error"]["code"].as_str().unwrap_or("?")
                )),
                _ => Outcome::Failed(
                    status,
                    body["error"]["code"].as_str().unwrap_or("?").to_owned(),
                ),
            }
        }
    }
}

fn seed() -> u64 {
    std::env::var("UPCOMMIT_HISTORY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

async fn commit(app: &TestApp, token: &str, key: &str) -> Outcome {
    classify(
        app.http
            .post(format!("{}/v1/files", app.address))
            .bearer_auth(token)
            .timeout(Duration::from_secs(30))
            .json(&json!({ "key": key }))
            .send()
            .await,
    )
    .await
}

#[tokio::test]
async fn a_seeded_history_under_faults_keeps_every_invariant() {
    let seed = seed();
    eprintln!("history seed: {seed} (replay with UPCOMMIT_HISTORY_SEED={seed})");
    let store_faults = Arc::new(Faults::default());
    let catalog_faults = Arc::new(Mutex::new(CatalogFaults::seeded(seed)));
    let cf = catalog_faults.clone();
    let app = spawn_app_with(Spawn {
        // A short lease so a retry takes over a commit whose caller saw an error at once.
        env: vec![("UPCOMMIT_COMMIT_LEASE_SECS", "1".to_owned())],
        wrap_store: Some(faulty_store(store_faults.clone())),
        wrap_catalog: Some(Box::new(move |real| Arc::new(FaultyCatalog::new(real, cf)))),
        config: None,
    })
    .await;
    let tokens: BTreeMap<&str, String> = USERS.iter().map(|u| (*u, app.token(u))).collect();
    let mut rng = Rng::new(seed ^ 0x5eed);
    let mut history: Vec<UploadHistory> = Vec::new();

    // Phase 1: faults on.
    if let Ok(mut f) = catalog_faults.lock() {
        f.before_percent = 12;
        f.after_percent = 12;
    }
    for i in 0..UPLOADS {
        let user = USERS[i % USERS.len()];
        let token = &tokens[user];
        let mut h = UploadHistory {
            user,
            ..UploadHistory::default()
        };
        let size = 1000 + i * 37;
        let presign = classify(
            app.http
                .post(format!("{}/v1/uploads", app.address))
                .bearer_auth(token)
                .json(&json!({"profile": "image", "content_type": "image/png", "size": size, "filename": "p.png", "method": "PUT"}))
                .send()
                .await,
        )
        .await;
        if let Outcome::Ok(body) = &presign {
            let p: Presigned = serde_json::from_value(body.clone()).expect("presign shape");
            // Some users leave before uploading.
            if !rng.chance(15) {
                let status = app.upload(&p, media("image/png", size), "image/png").await;
                assert!(status.is_success(), "seed {seed}: upload refused: {status}");
                h.uploaded = true;
            }
            let attempts = 1 + rng.below(2);
            for _ in 0..attempts {
                if rng.chance(20) {
                    store_faults
                        .copy_then_timeout
                        .store(1, std::sync::atomic::Ordering::SeqCst);
                }
                if rng.chance(20) {
                    store_faults
                        .fail_deletes
                        .store(1, std::sync::atomic::Ordering::SeqCst);
                }
                h.commits.push(commit(&app, token, &p.key).await);
                store_faults
                    .copy_then_timeout
                    .store(0, std::sync::atomic::Ordering::SeqCst);
                store_faults
                    .fail_deletes
                    .store(0, std::sync::atomic::Ordering::SeqCst);
            }
            h.presigned = Some(p);
            h.gives_up = rng.chance(25);
        }
        h.presign = Some(presign);
        history.push(h);
    }

    // Phase 2: faults off; every client without a definite answer retries until it has one.
    if let Ok(mut f) = catalog_faults.lock() {
        f.off();
    }
    for h in history.iter_mut().filter(|h| !h.gives_up) {
        let Some(p) = h.presigned.clone() else {
            continue;
        };
        let mut tries = 0;
        while !h.definite() {
            tries += 1;
            assert!(
                tries <= 20,
                "seed {seed}: upload {} never got a definite answer: {:?}",
                p.upload_id,
                h.commits
            );
            if tries > 1 {
                tokio::time::sleep(Duration::from_millis(600)).await;
            }
            let token = &tokens[h.user];
            h.commits.push(commit(&app, token, &p.key).await);
        }
    }
    let injected = catalog_faults
        .lock()
        .map(|f| f.injected.clone())
        .unwrap_or_default();
    let report = format!("seed {seed}; catalog faults injected: {injected:?}");
    let count_of = |f: &dyn Fn(&Outcome) -> bool| {
        history
            .iter()
            .flat_map(|h| h.commits.iter().chain(h.presign.iter()))
            .filter(|o| f(o))
            .count()
    };
    let unknown = count_of(&|o| matches!(o, Outcome::Unknown(_)));
    let ok = count_of(&|o| matches!(o, Outcome::Ok(_)));
    let failed = count_of(&|o| matches!(o, Outcome::Failed(..)));
    eprintln!(
        "history: {ok} ok, {failed} failed, {unknown} unknown calls; {} catalog faults injected",
        injected.len()
    );

    // Days pass: the sweeper and reconcile run until nothing changes.
    let settings = Settings::from_map(&app.env).expect("settings");
    let store: Arc<dyn ObjectStore> =
        Arc::new(S3Store::connect(&settings.s3).await.expect("store"));
    let later = chrono::Utc::now() + chrono::Duration::days(10);
    for round in 0..3 {
        let out = sweep_at(&app.catalog, &store, &settings, false, later)
            .await
            .expect("sweep");
        let SweepOutcome::Ran { summary, .. } = out else {
            panic!("{report}: sweep busy");
        };
        assert!(summary.error.is_none(), "{report}: {summary:?}");
        eprintln!("sweep round {round}: {:?}", summary.recovery);
        assert_eq!(summary.failed_versions, 0, "{report}");
        if summary.deleted_versions == 0 {
            break;
        }
        assert!(round < 2, "{report}: the sweep does not reach a fixpoint");
    }
    let out = upcommit::services::reconcile::reconcile(
        &app.catalog,
        &store,
        &settings,
        &ReconcileOptions {
            grace: chrono::Duration::zero(),
            quarantine: false,
            quarantine_stray: false,
            workers: 1,
            inventory_taken_at: None,
            remove_orphan_renditions: false,
        },
        None,
    )
    .await
    .expect("reconcile");
    let ReconcileOutcome::Ran { summary, .. } = out else {
        panic!("{report}: reconcile busy");
    };
    assert_eq!(
        (summary.missing, summary.unindexed),
        (0, 0),
        "{report}: {summary:?}"
    );

    // The invariants.
    let handles_of = |upload_id: &str| {
        let sql = format!("SELECT COUNT(*) FROM file_handles WHERE upload_id = '{upload_id}'");
        let db = &app.db;
        async move { db.count(&sql).await }
    };
    let mut committed_uploads = 0;
    for h in &history {
        let Some(p) = &h.presigned else { continue };
        let handles = handles_of(&p.upload_id).await;
        let ok_ids = h.ok_ids();
        if ok_ids.is_empty() {
            assert!(
                handles <= 1,
                "{report}: {} has {handles} handles",
                p.upload_id
            );
            if !h.uploaded {
                assert_eq!(
                    handles, 0,
                    "{report}: nothing was uploaded for {}",
                    p.upload_id
                );
            }
        } else {
            committed_uploads += 1;
            assert_eq!(
                handles, 1,
                "{report}: ok commit of {} → one handle",
                p.upload_id
            );
            assert_eq!(
                ok_ids.len(),
                1,
                "{report}: every ok answer names one handle: {ok_ids:?}"
            );
        }
        if h.uploaded && !h.gives_up {
            assert!(
                !ok_ids.is_empty(),
                "{report}: an uploaded file whose client retried to a definite answer is committed: {:?}",
                h.commits
            );
        }
    }
    assert!(committed_uploads > 0, "{report}: nothing committed at all");
    let promoting = app
        .db
        .strings("SELECT id FROM uploads WHERE state = 'promoting'")
        .await;
    let stuck: Vec<&UploadHistory> = history
        .iter()
        .filter(|h| {
            h.presigned
                .as_ref()
                .is_some_and(|p| promoting.contains(&p.upload_id))
        })
        .collect();
    assert!(
        stuck.is_empty(),
        "{report}: commits left unfinished: {stuck:#?}"
    );

    // S3 holds exactly the handles' objects under final prefixes, and nothing under tmp/.
    let keys = app.keys().await;
    let tmp: Vec<&String> = keys.iter().filter(|k| k.starts_with("tmp/")).collect();
    assert!(tmp.is_empty(), "{report}: tmp objects left: {tmp:?}");
    let finals: BTreeSet<String> = keys
        .iter()
        .filter(|k| k.starts_with("media/"))
        .cloned()
        .collect();
    let handle_keys: BTreeSet<String> = app
        .db
        .strings("SELECT key FROM file_handles")
        .await
        .into_iter()
        .collect();
    assert_eq!(
        finals, handle_keys,
        "{report}: final keys in S3 = handle keys"
    );
    for (key, size) in app.db.key_sizes().await {
        let head = app
            .s3
            .head_object()
            .bucket(&app.bucket)
            .key(&key)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{report}: the object of handle {key} is missing: {e}"));
        assert_eq!(head.content_length(), Some(size), "{report}: {key}");
    }

    // The quota ledger charged exactly the recorded uploads (and every ok presign is one).
    for user in USERS {
        let db = &app.db;
        let sum = |sql: String| async move { db.count(&sql).await };
        let count = sum(format!(
            "SELECT COUNT(*) FROM uploads WHERE owner = '{user}'"
        ))
        .await;
        let bytes = sum(format!(
            "SELECT CAST(COALESCE(SUM(declared_size), 0) AS BIGINT) FROM uploads WHERE owner = '{user}'"
        ))
        .await;
        let charged_count = sum(format!(
            "SELECT CAST(COALESCE(SUM(uploads), 0) AS BIGINT) FROM quota_usage WHERE owner = '{user}'"
        ))
        .await;
        let charged_bytes = sum(format!(
            "SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM quota_usage WHERE owner = '{user}'"
        ))
        .await;
        assert_eq!(
            (charged_count, charged_bytes),
            (count, bytes),
            "{report}: ledger of {user}"
        );
        let ok = history
            .iter()
            .filter(|h| h.user == user && matches!(h.presign, Some(Outcome::Ok(_))))
            .count() as i64;
        let unknown = history
            .iter()
            .filter(|h| h.user == user && matches!(h.presign, Some(Outcome::Unknown(_))))
            .count() as i64;
        assert!(
            (ok..=ok + unknown).contains(&count),
            "{report}: {user} has {count} uploads for {ok} ok and {unknown} unknown presigns"
        );
    }

    // The events: one to one with the changes the catalog holds, each with its change's facts.
    check_events_match_the_catalog(&app, &history, &report).await;
}

/// Every event the feed carries, in feed order, once the sequencer has positioned them all.
pub async fn all_events(app: &TestApp) -> Vec<Value> {
    sequence_all(app).await;
    let admin = app.admin_token("history-admin");
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let resp = app
            .get(
                &format!("/v1/events?after={cursor}&limit=1000"),
                Some(&admin),
            )
            .await;
        assert_eq!(resp.status(), 200);
        let page: Value = resp.json().await.expect("feed page");
        let events = page["events"].as_array().expect("events").clone();
        cursor = page["next_cursor"].as_str().expect("cursor").to_owned();
        if events.is_empty() {
            return out;
        }
        out.extend(events);
    }
}

/// Returns once every event written so far has its feed position. Sequences here too; another
/// replica's sequencer (the server's own) may hold the turn, so it waits until nothing written
/// is left unpositioned.
pub async fn sequence_all(app: &TestApp) {
    let sequenced = upcommit::services::events::sequencer::Sequenced::new();
    for attempt in 0.. {
        upcommit::services::events::sequencer::run_once(
            &app.catalog,
            Duration::from_secs(3600),
            &sequenced,
        )
        .await
        .expect("sequence events");
        if app
            .catalog
            .unsequenced_events()
            .await
            .expect("outbox depth")
            == 0
        {
            break;
        }
        assert!(attempt < 100, "events stay unsequenced");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn check_events_match_the_catalog(app: &TestApp, history: &[UploadHistory], report: &str) {
    let events = all_events(app).await;
    let ids: BTreeSet<&str> = events.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(ids.len(), events.len(), "{report}: an event id repeats");
    let cursors: Vec<i64> = events
        .iter()
        .map(|e| {
            e["cursor"]
                .as_str()
                .and_then(|c| c.parse().ok())
                .expect("cursor")
        })
        .collect();
    assert!(
        cursors.windows(2).all(|w| w[0] < w[1]),
        "{report}: the feed is not in cursor order"
    );
    let of_type = |t: &str| -> BTreeMap<String, Vec<Value>> {
        let mut m: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for e in events.iter().filter(|e| e["type"] == t) {
            let subject = e["data"]["id"]
                .as_str()
                .or_else(|| e["data"]["upload_id"].as_str())
                .expect("subject")
                .to_owned();
            m.entry(subject).or_default().push(e["data"].clone());
        }
        m
    };
    let committed = of_type("file.committed");
    let handles: BTreeSet<String> = app
        .db
        .strings("SELECT id FROM file_handles")
        .await
        .into_iter()
        .collect();
    assert_eq!(
        committed.keys().cloned().collect::<BTreeSet<_>>(),
        handles,
        "{report}: file.committed events = handles"
    );
    assert!(
        committed.values().all(|v| v.len() == 1),
        "{report}: a handle announced twice: {committed:?}"
    );
    // Every ok answer is exactly the handle its event carries.
    for h in history {
        for o in &h.commits {
            if let Outcome::Ok(body) = o {
                let id = body["id"].as_str().expect("handle id");
                assert_eq!(
                    &committed[id][0], body,
                    "{report}: event data = the API's handle"
                );
            }
        }
    }
    let rejected = of_type("upload.rejected");
    let rejected_rows: BTreeSet<String> = app
        .db
        .strings("SELECT id FROM uploads WHERE state = 'rejected'")
        .await
        .into_iter()
        .collect();
    assert_eq!(
        rejected.keys().cloned().collect::<BTreeSet<_>>(),
        rejected_rows,
        "{report}: upload.rejected events = rejected uploads"
    );
    let expired = of_type("upload.expired");
    let swept_rows: BTreeSet<String> = app
        .db
        .strings(
            "SELECT id FROM uploads WHERE swept_at IS NOT NULL AND state IN ('issued', 'promoting')",
        )
        .await
        .into_iter()
        .collect();
    assert_eq!(
        expired.keys().cloned().collect::<BTreeSet<_>>(),
        swept_rows,
        "{report}: upload.expired events = swept uploads"
    );
    assert!(
        rejected
            .values()
            .chain(expired.values())
            .all(|v| v.len() == 1),
        "{report}: an upload announced twice"
    );
    let others: Vec<&Value> = events
        .iter()
        .filter(|e| {
            !matches!(
                e["type"].as_str(),
                Some("file.committed" | "upload.rejected" | "upload.expired")
            )
        })
        .collect();
    assert!(
        others.is_empty(),
        "{report}: events of no change here: {others:?}"
    );
}
