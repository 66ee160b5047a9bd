//! A model-based test of issue 12's promises: a seeded random schedule interleaves presigns,
//! uploads (PUT and POST, with re-PUTs, re-posts and wrong bytes), commits on two replicas
//! whose clocks disagree (one is a real `upcommit serve` process 40 s ahead) — one at a time
//! and both at once —, links added and removed, link scans, restores, hygiene runs (every
//! stage), sweeps, reconcile with `--quarantine`, and the database clock moved forward. After
//! every step it checks:
//!
//! 1. every `available`, `unlinked` or `archived` handle has its object;
//! 2. no handle with a link has left `available`;
//! 3. no handle's key lies under a prefix an expiring lifecycle rule covers;
//! 4. no tmp key holds more than one copy of the declared size per PUT, or per post for a form,
//!    and every version is the declared size; once a sweep runs after a settled upload's URL has
//!    expired (plus the in-flight margin), its tmp key holds nothing;
//! 5. the quota ledger equals the recorded uploads (count and bytes);
//! 6. reconcile reports no `missing` handle;
//! 7. no call answers 5xx (but 503 `file_busy`, where documented);
//! 8. no key a handle of which the latest completed link scan saw is archived or deleted in S3
//!    after that scan completed (its object still there if a handle of it was live then, still
//!    in STANDARD if no archival had moved it then), wherever in a hygiene run the scan
//!    completed;
//! 9. every `available` handle's object is in STANDARD (never left archived).
//!
//! A second mix (`copies_and_scans_…`) makes copies (shared keys) and runs hygiene with a hook
//! that completes link scans at its pause points — after a claim, after the last check before
//! S3, after S3 changed — seeing the other handles of the keys hygiene holds right then
//! (tests/api/model_scans.rs): the order in which a scan and a copy's archival or deletion race.
//!
//! `UPCOMMIT_MODEL_SEED=<n>` replays a schedule; the seed, the step and the schedule so far are
//! in every failure message.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use upcommit::catalog::Catalog;
use upcommit::config::Settings;
use upcommit::domain::lifecycle::required_rules;
use upcommit::services::hygiene::{self, HygieneOutcome};
use upcommit::services::reconcile::{reconcile, ReconcileOptions, ReconcileOutcome};
use upcommit::services::sweep::{sweep_at, SweepOutcome};
use upcommit::services::tmp_cleanup::IN_FLIGHT_MARGIN;
use upcommit::storage::{ObjectStore, S3Store};

use crate::catalog_faults::{CatalogFaults, FaultyCatalog, Rng};
use crate::helpers::{media, server_process, spawn_app_with, Presigned, Spawn, TestApp};
use crate::model_scans::{scanning_hook, Completion, HookLog, Scanner, Snap};

const STEPS: usize = 120;
const USERS: [&str; 2] = ["mo", "lu"];
/// Hygiene periods short enough for the moved clock to walk files through every stage.
const DAY: i64 = 86_400;

fn seed() -> u64 {
    std::env::var("UPCOMMIT_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(7, |d| d.as_nanos() as u64)
        })
}

/// Which steps a schedule draws, and how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mix {
    /// Issue 12's: uploads, commits on two replicas, links, jobs and clocks.
    Uploads,
    /// Copies, links, scans and hygiene runs interrupted by scans, with the clock moving fast.
    Copies,
}

/// One presigned upload as the model believes it to be.
struct Up {
    p: Presigned,
    user: &'static str,
    size: usize,
    /// Successful PUTs or posts (each one a version under tmp/).
    stored: usize,
    /// The bytes sent were not the declared type (the commit must refuse them).
    bad_bytes: bool,
    file_id: Option<String>,
    /// Links the model added and did not remove.
    links: BTreeSet<String>,
    /// The URL's expiry, from the presign answer.
    expires_at: DateTime<Utc>,
}

struct Model {
    app: TestApp,
    b_base: String,
    jobs: Arc<dyn Catalog>,
    faults: Arc<Mutex<CatalogFaults>>,
    store: Arc<dyn ObjectStore>,
    settings: Settings,
    ups: Vec<Up>,
    rng: Rng,
    seed: u64,
    log: Vec<String>,
    next_link: u64,
    /// Copies made through the API: (the upload whose object they share, handle id).
    copies: Vec<(usize, String)>,
    /// The latest completed link scan's snapshot (8).
    latest_scan: Option<Snap>,
    /// Hygiene runs interrupt themselves with scans (the `Copies` mix).
    hooked: bool,
}

impl Model {
    fn ctx(&self) -> String {
        let tail: Vec<&String> = self.log.iter().rev().take(12).collect();
        format!(
            "seed {} (UPCOMMIT_MODEL_SEED={}), step {}, last steps (newest first): {tail:?}",
            self.seed,
            self.seed,
            self.log.len()
        )
    }

    fn token(&self, user: &str) -> String {
        self.app.token(user)
    }

    async fn db_now(&self) -> DateTime<Utc> {
        self.jobs.clock().await.expect("clock")
    }

    fn no_5xx(&self, what: &str, status: u16, body: &Value) {
        if status == 503 && body["error"]["code"] == "file_busy" {
            return;
        }
        assert!(
            status < 500,
            "{what} answered {status} {body}: {}",
            self.ctx()
        );
    }

    fn pick(&mut self, pred: impl Fn(&Up) -> bool) -> Option<usize> {
        let ids: Vec<usize> = (0..self.ups.len())
            .filter(|&i| pred(&self.ups[i]))
            .collect();
        if ids.is_empty() {
            return None;
        }
        Some(ids[usize::try_from(self.rng.below(ids.len() as u64)).unwrap_or(0)])
    }

    async fn presign(&mut self) {
        let user = USERS[usize::try_from(self.rng.below(2)).unwrap_or(0)];
        let method = if self.rng.chance(50) { "PUT" } else { "POST" };
        let size = 200 + usize::try_from(self.rng.below(3000)).unwrap_or(0);
        let resp = self
            .app
            .presign(
                &self.token(user),
                json!({"profile": "image", "content_type": "image/png", "size": size, "filename": "m.png", "method": method}),
            )
            .await;
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        self.no_5xx("presign", status, &body);
        assert_eq!(status, 201, "presign: {body} {}", self.ctx());
        let p: Presigned = serde_json::from_value(body.clone()).expect("presign shape");
        let expires_at = body["expires_at"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .expect("expires_at")
            .with_timezone(&Utc);
        self.log.push(format!("presign {method} {size} for {user}"));
        let upload_now = self.rng.chance(70);
        self.ups.push(Up {
            p,
            user,
            size,
            stored: 0,
            bad_bytes: false,
            file_id: None,
            links: BTreeSet::new(),
            expires_at,
        });
        if upload_now {
            // Most apps upload right after presigning.
            self.upload_one(self.ups.len() - 1).await;
        }
    }

    /// PUT or POST (again, possibly): a PUT after the first must be refused; a post is stored.
    /// Only the database's clock moves, S3's does not: a URL whose tmp object a job removed
    /// because the moved clock says the URL expired is not used again (S3 would still take it,
    /// which no real schedule can do: the jobs act only after the URL's real expiry).
    async fn upload(&mut self) {
        let gone: BTreeSet<String> = self
            .app
            .db
            .strings(
                "SELECT id FROM uploads WHERE tmp_cleared_at IS NOT NULL OR swept_at IS NOT NULL",
            )
            .await
            .into_iter()
            .collect();
        let now = Utc::now();
        let Some(i) =
            self.pick(|u| u.stored < 3 && now < u.expires_at && !gone.contains(&u.p.upload_id))
        else {
            return;
        };
        self.upload_one(i).await;
    }

    async fn upload_one(&mut self, i: usize) {
        let bad = self.rng.chance(15);
        let (p, size, before) = (self.ups[i].p.clone(), self.ups[i].size, self.ups[i].stored);
        let bytes = media(if bad { "image/jpeg" } else { "image/png" }, size);
        let status = self.app.upload(&p, bytes, "image/png").await.as_u16();
        self.log
            .push(format!("{} #{i} (bad bytes: {bad}) → {status}", p.method));
        assert!(status < 500, "upload answered {status}: {}", self.ctx());
        // A store without conditional PUTs (Garage, the gap `conditional_put` accepted) stores
        // a URL's bytes again, as documented: exactly the declared size and type (signed), as a
        // post is; the model then holds such a URL to what it holds a post to.
        let single_use = !crate::helpers::gap_accepted("conditional_put");
        if p.method == "PUT" && before > 0 && single_use {
            assert!(
                status == 412 || status == 403,
                "a PUT URL stored bytes a second time ({status}): {}",
                self.ctx()
            );
            return;
        }
        assert!(
            (200..300).contains(&status),
            "the first PUT or a post of a valid URL was refused ({status}): {}",
            self.ctx()
        );
        self.ups[i].stored += 1;
        self.ups[i].bad_bytes = bad;
    }

    async fn commit(&mut self, on_b: bool) {
        let Some(i) = self.pick(|_| true) else {
            return;
        };
        self.commit_one(i, on_b).await;
    }

    /// A new file: presigned, uploaded and committed at once (as most apps do).
    async fn new_file(&mut self) {
        self.presign().await;
        let i = self.ups.len() - 1;
        if self.ups[i].stored == 0 {
            self.upload_one(i).await;
        }
        self.commit_one(i, false).await;
    }

    async fn commit_one(&mut self, i: usize, on_b: bool) {
        let base = if on_b {
            self.b_base.clone()
        } else {
            self.app.address.clone()
        };
        let token = self.token(self.ups[i].user);
        let key = self.ups[i].p.key.clone();
        let resp = self.app.commit_at(&base, &token, &key, None).await;
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        self.log.push(format!(
            "commit #{i} on {} → {status} {}",
            if on_b { "B (clock +40 s)" } else { "A" },
            body["error"]["code"].as_str().unwrap_or("")
        ));
        self.no_5xx("commit", status, &body);
        self.settle_commit(i, status, &body);
    }

    /// The same commit on both replicas at once: one handle, both answers name it.
    async fn commit_both(&mut self) {
        let Some(i) = self.pick(|u| u.stored > 0 && u.file_id.is_none()) else {
            return;
        };
        let token = self.token(self.ups[i].user);
        let key = self.ups[i].p.key.clone();
        let (a, b) = tokio::join!(
            self.app.commit_at(&self.app.address, &token, &key, None),
            self.app.commit_at(&self.b_base, &token, &key, None)
        );
        let (sa, sb) = (a.status().as_u16(), b.status().as_u16());
        let ba: Value = a.json().await.unwrap_or(Value::Null);
        let bb: Value = b.json().await.unwrap_or(Value::Null);
        self.log
            .push(format!("commit #{i} on A and B at once → {sa}, {sb}"));
        self.no_5xx("commit A", sa, &ba);
        self.no_5xx("commit B", sb, &bb);
        if sa < 300 && sb < 300 {
            assert_eq!(
                ba["id"],
                bb["id"],
                "two handles for one upload: {}",
                self.ctx()
            );
            assert_eq!(
                u16::from(sa == 201) + u16::from(sb == 201),
                1,
                "exactly one call creates: {}",
                self.ctx()
            );
        }
        self.settle_commit(i, sa, &ba);
        self.settle_commit(i, sb, &bb);
    }

    fn settle_commit(&mut self, i: usize, status: u16, body: &Value) {
        let ctx = self.ctx();
        let up = &mut self.ups[i];
        if status == 200 || status == 201 {
            let id = body["id"].as_str().expect("handle id").to_owned();
            if let Some(known) = &up.file_id {
                assert_eq!(known, &id, "a commit named another handle: {ctx}");
            }
            assert!(
                status == 200 || !up.bad_bytes,
                "bytes of the wrong type were committed: {ctx}"
            );
            up.file_id = Some(id);
        } else {
            assert!(
                up.file_id.is_none() || status == 409,
                "a committed upload answered {status} {body}: {ctx}"
            );
        }
    }

    async fn link(&mut self, add: bool) {
        let Some(i) = self.pick(|u| u.file_id.is_some() && (add || !u.links.is_empty())) else {
            return;
        };
        let id = self.ups[i].file_id.clone().expect("file");
        let object = if add {
            self.next_link += 1;
            format!("p{}", self.next_link)
        } else {
            self.ups[i].links.iter().next().cloned().expect("a link")
        };
        let url = format!("{}/v1/files/{id}/links/post/{object}", self.app.address);
        let token = self.token(self.ups[i].user);
        let req = if add {
            self.app.http.put(url)
        } else {
            self.app.http.delete(url)
        };
        let resp = req.bearer_auth(token).send().await.expect("link call");
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        self.log.push(format!(
            "{} link {object} on #{i} → {status} {}",
            if add { "add" } else { "remove" },
            body["error"]["code"].as_str().unwrap_or("")
        ));
        self.no_5xx("link", status, &body);
        if status == 204 {
            if add {
                self.ups[i].links.insert(object);
            } else {
                self.ups[i].links.remove(&object);
            }
        } else {
            assert!(
                add && status == 410,
                "link call answered {status} {body}: {}",
                self.ctx()
            );
        }
    }

    /// Every handle the model knows: (owner, id), uploads' first, then copies.
    fn handles(&self) -> Vec<(&'static str, String)> {
        let mut all: Vec<(&'static str, String)> = self
            .ups
            .iter()
            .filter_map(|u| u.file_id.clone().map(|id| (u.user, id)))
            .collect();
        all.extend(
            self.copies
                .iter()
                .map(|(i, id)| (self.ups[*i].user, id.clone())),
        );
        all
    }

    async fn restore(&mut self) {
        let all = self.handles();
        if all.is_empty() {
            return;
        }
        let (user, id) =
            all[usize::try_from(self.rng.below(all.len() as u64)).unwrap_or(0)].clone();
        let resp = self
            .app
            .http
            .post(format!("{}/v1/files/{id}/restore", self.app.address))
            .bearer_auth(self.token(user))
            .send()
            .await
            .expect("restore");
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        self.log.push(format!("restore {id} → {status}"));
        self.no_5xx("restore", status, &body);
        assert!(
            status == 200 || status == 410 || status == 503,
            "restore answered {status} {body}: {}",
            self.ctx()
        );
    }

    fn scanner(&self) -> Scanner {
        Scanner {
            http: self.app.http.clone(),
            address: self.app.address.clone(),
            admin: self.app.admin_token("ops"),
            db: self.app.db.clone(),
        }
    }

    /// What the app uses: the files with links, and (used elsewhere than links can say) each
    /// other handle with probability `percent`.
    fn in_use(&mut self, percent: u64) -> BTreeSet<String> {
        let mut used: BTreeSet<String> = self
            .ups
            .iter()
            .filter(|u| !u.links.is_empty())
            .filter_map(|u| u.file_id.clone())
            .collect();
        for (_, id) in self.handles() {
            if self.rng.chance(percent) {
                used.insert(id);
            }
        }
        used
    }

    /// A scan that saw what the app uses; completed, it is the latest (8).
    async fn scan(&mut self) {
        let used = self.in_use(if self.hooked { 30 } else { 0 });
        match self.scanner().scan(&used, "between steps").await {
            Completion::Completed(snap) => {
                self.log.push(format!("link scan of {} files", used.len()));
                self.latest_scan = Some(snap);
            }
            Completion::Busy => self
                .log
                .push(format!("link scan of {} files → 503 file_busy", used.len())),
        }
    }

    /// A copy of an available handle (its owner's): a new handle of the same key.
    async fn copy(&mut self) {
        let available: BTreeSet<String> = self
            .app
            .db
            .strings("SELECT id FROM file_handles WHERE status = 'available'")
            .await
            .into_iter()
            .collect();
        let candidates: Vec<(usize, String)> = self
            .ups
            .iter()
            .enumerate()
            .filter_map(|(i, u)| u.file_id.clone().map(|id| (i, id)))
            .chain(self.copies.iter().cloned())
            .filter(|(_, id)| available.contains(id))
            .collect();
        if candidates.is_empty() {
            return;
        }
        let pick = usize::try_from(self.rng.below(candidates.len() as u64)).unwrap_or(0);
        let (i, id) = candidates[pick].clone();
        let resp = self
            .app
            .post_json(
                &format!("/v1/files/{id}/copies"),
                Some(&self.token(self.ups[i].user)),
                &json!({}),
            )
            .await;
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        self.log.push(format!(
            "copy #{i} → {status} {}",
            body["error"]["code"].as_str().unwrap_or("")
        ));
        self.no_5xx("copy", status, &body);
        match status {
            201 => {
                let copy = body["id"].as_str().expect("copy id").to_owned();
                self.copies.push((i, copy));
            }
            // Not available (unlinked, archived, deleted) or hygiene holds its key.
            409 | 410 | 503 => {}
            _ => panic!("copy answered {status} {body}: {}", self.ctx()),
        }
    }

    async fn hygiene(&mut self) {
        let now = self.db_now().await;
        let log = Arc::new(Mutex::new(HookLog::default()));
        let hook = if self.hooked && self.rng.chance(70) {
            let base = self.in_use(20);
            Some(scanning_hook(
                self.scanner(),
                base,
                self.rng.next(),
                log.clone(),
            ))
        } else {
            None
        };
        let run = hygiene::run(&self.jobs, &self.store, &self.settings, false, now);
        let out = match hook {
            Some(hook) => upcommit::pause::with_hook(hook, run).await,
            None => run.await,
        }
        .expect("hygiene");
        let hooked = std::mem::take(&mut *log.lock().expect("hook log"));
        if let Some(snap) = hooked.snaps.last() {
            self.latest_scan = Some(snap.clone());
        }
        if !hooked.scans.is_empty() {
            self.log.push(format!(
                "scans completed inside the run: {:?}",
                hooked.scans
            ));
        }
        let HygieneOutcome::Ran { summary, .. } = out else {
            panic!("hygiene busy: {}", self.ctx());
        };
        assert!(
            summary.error.is_none(),
            "hygiene: {summary:?} {}",
            self.ctx()
        );
        self.log.push(format!(
            "hygiene at {now}: {} unlinked, {} archived, {} deleted",
            summary.unlinked, summary.archived, summary.deleted
        ));
    }

    async fn sweep(&mut self) {
        let now = self.db_now().await;
        let out = sweep_at(&self.jobs, &self.store, &self.settings, false, now)
            .await
            .expect("sweep");
        let SweepOutcome::Ran { summary, .. } = out else {
            panic!("sweep busy: {}", self.ctx());
        };
        assert!(summary.error.is_none(), "sweep: {summary:?} {}", self.ctx());
        self.log.push(format!(
            "sweep at {now}: {} tmp versions of settled uploads, {} in old partitions",
            summary.settled_tmp.versions_deleted, summary.deleted_versions
        ));
        // Settled uploads whose URL expired (plus the margin) before this sweep hold nothing.
        for i in 0..self.ups.len() {
            let settled = self.upload_state(i).await;
            if (settled == "committed" || settled == "rejected")
                && self.ups[i].expires_at + IN_FLIGHT_MARGIN < now
            {
                let left = self.object_versions(i).await;
                assert!(
                    left.is_empty(),
                    "settled upload #{i} still holds {left:?} under tmp/ after the sweep: {}",
                    self.ctx()
                );
            }
        }
    }

    async fn reconcile(&mut self) {
        let out = reconcile(
            &self.jobs,
            &self.store,
            &self.settings,
            &ReconcileOptions {
                grace: Duration::hours(1),
                quarantine: true,
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
            panic!("reconcile busy: {}", self.ctx());
        };
        self.log.push(format!(
            "reconcile --quarantine: {} matched, {} missing, {} quarantined",
            summary.matched, summary.missing, summary.quarantined
        ));
        assert!(
            summary.error.is_none(),
            "reconcile: {summary:?} {}",
            self.ctx()
        );
        assert_eq!(
            summary.missing,
            0,
            "reconcile reports missing files: {summary:?} {}",
            self.ctx()
        );
    }

    fn advance(&mut self) {
        let by =
            Duration::seconds(3600 + i64::try_from(self.rng.below(2 * DAY as u64)).unwrap_or(0));
        if let Ok(mut f) = self.faults.lock() {
            f.clock_offset += by;
        }
        self.log
            .push(format!("database clock +{} h", by.num_hours()));
    }

    async fn upload_state(&self, i: usize) -> String {
        self.app.db.upload_state(&self.ups[i].p.upload_id).await
    }

    /// Sizes of every version (delete markers as -1) of upload `i`'s tmp key.
    async fn object_versions(&self, i: usize) -> Vec<i64> {
        let versions = self.app.version_sizes(&self.ups[i].p.key).await;
        versions
            .into_iter()
            .map(|(size, marker)| if marker { -1 } else { size })
            .collect()
    }

    /// The object's storage class (None: STANDARD, as S3 leaves it unsaid); None if absent.
    async fn class_of(&self, key: &str) -> Option<String> {
        match self
            .app
            .s3
            .head_object()
            .bucket(&self.app.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(h) => h.storage_class().map(|c| c.as_str().to_owned()),
            Err(_) => None,
        }
    }

    async fn check(&self) {
        let ctx = self.ctx();
        // 1 and 3: handles that must have their object do; none under an expiring prefix.
        let expiring: Vec<&str> = required_rules()
            .iter()
            .filter(|r| r.expiration_days.is_some())
            .map(|r| r.prefix.as_str())
            .collect();
        let rows = self
            .app
            .db
            .strings("SELECT id || '|' || key || '|' || status FROM file_handles ORDER BY id")
            .await;
        for row in &rows {
            let mut parts = row.splitn(3, '|');
            let (id, key, status) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
            );
            assert!(
                !expiring.iter().any(|p| key.starts_with(p)),
                "handle {id} recorded under an expiring prefix: {key} ({ctx})"
            );
            if matches!(status, "available" | "unlinked" | "archived") {
                assert!(
                    self.app.object_exists(key).await,
                    "{status} handle {id} has no object at {key} ({ctx})"
                );
            }
        }
        // 2: a linked handle never leaves `available`.
        let linked = self
            .app
            .db
            .strings(
                "SELECT h.id || '|' || h.status FROM file_handles h \
                 WHERE EXISTS (SELECT 1 FROM file_links l WHERE l.file_id = h.id)",
            )
            .await;
        for row in &linked {
            assert!(
                row.ends_with("|available"),
                "linked handle not available: {row} ({ctx})"
            );
        }
        // The model's links are the database's links.
        let model_links: usize = self.ups.iter().map(|u| u.links.len()).sum();
        assert_eq!(
            self.app.db.count("SELECT COUNT(*) FROM file_links").await,
            model_links as i64,
            "{ctx}"
        );
        // 4: what tmp/ holds per upload.
        let single_use = !crate::helpers::gap_accepted("conditional_put");
        for (i, up) in self.ups.iter().enumerate() {
            let versions = self.object_versions(i).await;
            let copies = versions.iter().filter(|s| **s >= 0).count();
            let bound = if up.p.method == "PUT" && single_use {
                1
            } else {
                up.stored
            };
            assert!(
                copies <= bound,
                "upload #{i} ({}) holds {copies} copies under tmp/, bound {bound} ({ctx})",
                up.p.method
            );
            assert!(
                versions.iter().all(|s| *s < 0 || *s == up.size as i64),
                "upload #{i} holds a version of another size than declared: {versions:?} ({ctx})"
            );
        }
        // 8: what the latest completed scan vouched for was not archived or deleted since.
        if let Some(snap) = &self.latest_scan {
            for (key, then) in &snap.keys {
                if then.live {
                    assert!(
                        self.app.object_exists(key).await,
                        "{key} was deleted after a scan that saw a handle of it completed \
                         (at {}): {ctx}",
                        snap.at
                    );
                }
                if then.live && !then.moved {
                    let class = self.class_of(key).await;
                    assert!(
                        class.is_none() || class.as_deref() == Some("STANDARD"),
                        "{key} was archived ({class:?}) after a scan that saw a handle of it \
                         completed (at {}): {ctx}",
                        snap.at
                    );
                }
            }
        }
        // 9: an available handle's object is in STANDARD.
        let available = self
            .app
            .db
            .strings("SELECT DISTINCT key FROM file_handles WHERE status = 'available'")
            .await;
        for key in &available {
            let class = self.class_of(key).await;
            assert!(
                class.is_none() || class.as_deref() == Some("STANDARD"),
                "an available handle's object {key} is in {class:?}: {ctx}"
            );
        }
        // 5: the ledger charged exactly the recorded uploads.
        let charged = self
            .app
            .db
            .count("SELECT CAST(COALESCE(SUM(uploads), 0) AS BIGINT) FROM quota_usage")
            .await;
        let bytes = self
            .app
            .db
            .count("SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM quota_usage")
            .await;
        assert_eq!(
            charged,
            self.app.db.count("SELECT COUNT(*) FROM uploads").await,
            "{ctx}"
        );
        assert_eq!(
            bytes,
            self.app
                .db
                .count("SELECT CAST(COALESCE(SUM(declared_size), 0) AS BIGINT) FROM uploads")
                .await,
            "{ctx}"
        );
    }
}

async fn run_schedule(seed: u64, mix: Mix) {
    let faults = Arc::new(Mutex::new(CatalogFaults::default()));
    let hygiene_env: Vec<(&'static str, String)> = vec![
        // The app tracks its links for the image profile: hygiene may act on it.
        ("UPCOMMIT_TRACKS_LINKS", "image".into()),
        ("UPCOMMIT_UNLINKED_GRACE_SECS", DAY.to_string()),
        ("UPCOMMIT_ARCHIVE_AFTER_SECS", DAY.to_string()),
        ("UPCOMMIT_DELETE_AFTER_SECS", (2 * DAY).to_string()),
        ("UPCOMMIT_HYGIENE_INTERVAL_SECS", "0".into()),
        ("UPCOMMIT_SWEEP_INTERVAL_SECS", "0".into()),
        ("UPCOMMIT_PRESIGN_EXPIRY_SECS", "300".into()),
        // Most of the model's files are archived by a real rewrite in the archive class.
        ("UPCOMMIT_ARCHIVE_MIN_BYTES", "1000".into()),
    ];
    let app = spawn_app_with(Spawn {
        env: hygiene_env,
        ..Spawn::default()
    })
    .await;
    let jobs: Arc<dyn Catalog> = Arc::new(FaultyCatalog::new(app.catalog.clone(), faults.clone()));
    let settings = Settings::from_map(&app.env).expect("settings");
    let store: Arc<dyn ObjectStore> =
        Arc::new(S3Store::connect(&settings.s3).await.expect("store"));
    let (mut b, b_base) = server_process(
        &app,
        &[("UPCOMMIT_CLOCK_SKEW_SECS", "40"), ("RUST_LOG", "warn")],
        Stdio::null(),
    )
    .await;
    let mut m = Model {
        app,
        b_base,
        jobs,
        faults,
        store,
        settings,
        ups: Vec::new(),
        rng: Rng::new(seed),
        seed,
        log: Vec::new(),
        next_link: 0,
        copies: Vec::new(),
        latest_scan: None,
        hooked: mix == Mix::Copies,
    };
    eprintln!("model schedule {mix:?}, seed {seed} (UPCOMMIT_MODEL_SEED={seed} replays it)");
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for _ in 0..STEPS {
        let roll = m.rng.below(100);
        let name = match mix {
            Mix::Uploads => uploads_step(&mut m, roll, seed).await,
            Mix::Copies => copies_step(&mut m, roll).await,
        };
        *counts.entry(name).or_default() += 1;
        m.check().await;
    }

    // Finally every URL expires and every job runs once more.
    if let Ok(mut f) = m.faults.lock() {
        f.clock_offset += Duration::hours(3);
    }
    m.sweep().await;
    m.hygiene().await;
    m.reconcile().await;
    m.check().await;
    let _ = b.kill();
    let _ = b.wait();
    let handles = m.app.db.count("SELECT COUNT(*) FROM file_handles").await;
    if std::env::var("UPCOMMIT_MODEL_VERBOSE").is_ok() {
        for (n, line) in m.log.iter().enumerate() {
            eprintln!("  {n:3} {line}");
        }
    }
    eprintln!(
        "model seed {seed}: {STEPS} steps {counts:?}; {} uploads, {handles} handles",
        m.ups.len()
    );
}

/// One step of issue 12's mix.
async fn uploads_step(m: &mut Model, roll: u64, seed: u64) -> &'static str {
    match roll {
        0..=11 => {
            m.presign().await;
            "presign"
        }
        12..=29 => {
            m.upload().await;
            "upload"
        }
        30..=39 => {
            m.commit(false).await;
            "commit A"
        }
        40..=47 => {
            m.commit(true).await;
            "commit B"
        }
        48..=52 => {
            m.commit_both().await;
            "commit A+B"
        }
        53..=61 => {
            m.link(true).await;
            "link"
        }
        62..=66 => {
            m.link(false).await;
            "unlink"
        }
        67..=70 => {
            m.restore().await;
            "restore"
        }
        71..=73 if seed % 2 == 0 => {
            // Even seeds run link scans; odd seeds rely on the links API alone.
            m.scan().await;
            "scan"
        }
        71..=73 => {
            m.hygiene().await;
            "hygiene"
        }
        74..=81 => {
            m.hygiene().await;
            "hygiene"
        }
        82..=86 => {
            m.sweep().await;
            "sweep"
        }
        87..=90 => {
            m.reconcile().await;
            "reconcile"
        }
        _ => {
            m.advance();
            "clock"
        }
    }
}

/// One step of the copies mix: files are committed, copied, linked and scanned, and hygiene
/// (interrupted by scans) walks them through every stage as the clock runs.
async fn copies_step(m: &mut Model, roll: u64) -> &'static str {
    match roll {
        0..=19 => {
            m.new_file().await;
            "new file"
        }
        20..=24 => {
            m.presign().await;
            "presign"
        }
        25..=29 => {
            m.commit(false).await;
            "commit A"
        }
        30..=39 => {
            m.copy().await;
            "copy"
        }
        40..=46 => {
            m.link(true).await;
            "link"
        }
        47..=51 => {
            m.link(false).await;
            "unlink"
        }
        52..=55 => {
            m.restore().await;
            "restore"
        }
        56..=62 => {
            m.scan().await;
            "scan"
        }
        63..=78 => {
            m.hygiene().await;
            "hygiene"
        }
        79..=81 => {
            m.reconcile().await;
            "reconcile"
        }
        82..=83 => {
            m.sweep().await;
            "sweep"
        }
        _ => {
            m.advance();
            "clock"
        }
    }
}

#[tokio::test]
async fn a_seeded_schedule_of_uploads_jobs_and_clocks_keeps_every_promise() {
    run_schedule(seed(), Mix::Uploads).await;
}

#[tokio::test]
async fn copies_and_scans_completing_at_every_hygiene_step_never_lose_an_object_a_scan_saw() {
    run_schedule(seed(), Mix::Copies).await;
}
