//! Link scans for the model test (tests/api/model.rs): scans the model runs between steps, and
//! scans that complete *inside* a hygiene run, at its pause points (through
//! `pause::with_hook`), seeing what an adversary would pick — the other handles of the keys
//! hygiene holds a claim on at that moment. Each completed scan leaves a snapshot of what the
//! catalog said of the keys it saw when it completed, against which the model checks that no
//! object a scan vouched for was archived or deleted after the scan completed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use upcommit::pause::Hook;

use crate::catalog_faults::Rng;
use crate::helpers::TestDb;

/// What the catalog said of one key when a scan that saw a handle of it completed.
#[derive(Debug, Clone, Copy)]
pub struct KeyThen {
    /// Some handle of the key was not deleted: its object was there to keep.
    pub live: bool,
    /// A settled archival had moved the object out of STANDARD.
    pub moved: bool,
}

/// A completed scan: where it completed and the keys it vouched for.
#[derive(Debug, Clone)]
pub struct Snap {
    pub at: String,
    pub keys: BTreeMap<String, KeyThen>,
}

/// How a scan's completion was answered.
pub enum Completion {
    Completed(Snap),
    /// 503 `file_busy`: a deletion past its last check holds a key the scan saw.
    Busy,
}

/// Everything a scan needs, cheap to clone into a hook.
#[derive(Clone)]
pub struct Scanner {
    pub http: reqwest::Client,
    pub address: String,
    pub admin: String,
    pub db: TestDb,
}

impl Scanner {
    /// Opens a scan, sends `seen` as one batch and completes it.
    pub async fn scan(&self, seen: &BTreeSet<String>, at: &str) -> Completion {
        let open = self
            .http
            .post(format!("{}/v1/link-scans", self.address))
            .bearer_auth(&self.admin)
            .json(&json!({}))
            .send()
            .await
            .expect("open scan");
        assert_eq!(open.status(), 201, "open scan at {at}");
        let open: Value = open.json().await.expect("scan");
        let id = open["id"].as_str().expect("scan id").to_owned();
        let batch = self
            .http
            .put(format!("{}/v1/link-scans/{id}/batches/0", self.address))
            .bearer_auth(&self.admin)
            .json(&json!({ "file_ids": seen }))
            .send()
            .await
            .expect("scan batch");
        assert_eq!(batch.status(), 200, "scan batch at {at}");
        let done = self
            .http
            .post(format!("{}/v1/link-scans/{id}/complete", self.address))
            .bearer_auth(&self.admin)
            .json(&json!({}))
            .send()
            .await
            .expect("complete scan");
        let status = done.status().as_u16();
        let body: Value = done.json().await.unwrap_or(Value::Null);
        if status == 503 {
            assert_eq!(
                body["error"]["code"], "file_busy",
                "scan completion at {at}: {body}"
            );
            return Completion::Busy;
        }
        assert_eq!(status, 200, "scan completion at {at}: {body}");
        Completion::Completed(self.snapshot(seen, at).await)
    }

    /// The catalog's view of the keys `seen` names, right after the completion (the run that
    /// a hook interrupts is held where it is, so nothing moves meanwhile).
    async fn snapshot(&self, seen: &BTreeSet<String>, at: &str) -> Snap {
        let mut keys = BTreeMap::new();
        for id in seen {
            let rows = self
                .db
                .strings(&format!(
                    "SELECT key FROM file_handles WHERE id = '{}'",
                    id.replace('\'', "")
                ))
                .await;
            let Some(key) = rows.into_iter().next() else {
                continue;
            };
            let k = key.replace('\'', "''");
            let live = self
                .db
                .count(&format!(
                    "SELECT COUNT(*) FROM file_handles WHERE key = '{k}' AND status <> 'deleted'"
                ))
                .await
                > 0;
            let moved = self
                .db
                .count(&format!(
                    "SELECT COUNT(*) FROM file_handles WHERE key = '{k}' \
                     AND COALESCE(storage_class, 'STANDARD') <> 'STANDARD'"
                ))
                .await
                > 0;
            keys.insert(key, KeyThen { live, moved });
        }
        Snap {
            at: at.to_owned(),
            keys,
        }
    }

    /// The other live handles of every key some handle of which holds a claim now.
    async fn siblings_of_claimed(&self) -> Vec<String> {
        self.db
            .strings(
                "SELECT o.id FROM file_handles o WHERE o.status <> 'deleted' AND EXISTS \
                 (SELECT 1 FROM file_handles d WHERE d.key = o.key AND d.id <> o.id \
                 AND d.claim IS NOT NULL)",
            )
            .await
    }
}

/// What the hook of one hygiene run did: where its scan completed (or was refused), and the
/// snapshot of a completed one.
#[derive(Default)]
pub struct HookLog {
    pub scans: Vec<(String, bool)>,
    pub snaps: Vec<Snap>,
}

/// The points a hooked run's one scan may complete at.
const POINTS: [&str; 6] = [
    "hygiene_unlink",
    "hygiene_archive_claimed",
    "hygiene_archive_s3",
    "hygiene_archive_changed",
    "hygiene_delete_claimed",
    "hygiene_delete_s3",
];

/// A hook that completes one scan in the run, at a point drawn from [`POINTS`]: the first time
/// the run reaches it while hygiene holds a claim on a key with other live handles (the race
/// an adversary would pick: the scan sees those other handles), or, failing that, the first
/// time at all with probability one in three. The scan sees `base` plus those other handles.
/// One scan at most, so "the latest completed scan" is that one for the rest of the run.
pub fn scanning_hook(
    scanner: Scanner,
    base: BTreeSet<String>,
    seed: u64,
    log: Arc<Mutex<HookLog>>,
) -> Hook {
    let mut rng = Rng::new(seed);
    let target = POINTS[usize::try_from(rng.below(POINTS.len() as u64)).unwrap_or(0)];
    let state = Arc::new(Mutex::new((rng, false)));
    Arc::new(move |point: &str| {
        if point != target {
            return Box::pin(async {});
        }
        let (scanner, base, log, state, point) = (
            scanner.clone(),
            base.clone(),
            log.clone(),
            state.clone(),
            point.to_owned(),
        );
        Box::pin(async move {
            let siblings = scanner.siblings_of_claimed().await;
            let go = match state.lock() {
                Ok(mut st) => {
                    let (rng, done) = &mut *st;
                    let go = !*done && (!siblings.is_empty() || rng.chance(33));
                    *done |= go;
                    go
                }
                Err(_) => false,
            };
            if !go {
                return;
            }
            let mut seen = base;
            seen.extend(siblings);
            let done = scanner.scan(&seen, &point).await;
            if let Ok(mut l) = log.lock() {
                match done {
                    Completion::Completed(snap) => {
                        l.scans.push((point, true));
                        l.snaps.push(snap);
                    }
                    Completion::Busy => l.scans.push((point, false)),
                }
            }
        })
    })
}
