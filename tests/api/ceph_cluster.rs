//! A Ceph cluster (`scripts/ceph.sh`: three OSDs, pool size 3 and min size 2, two RADOS
//! Gateways) behind a TCP balancer that skips a gateway it cannot connect to, as HAProxy
//! does; upcommit and the presigned URLs point at the balancer. In the middle of a run of
//! uploads (single PUTs, some of 12 MiB that the commit copies in parts, and multipart uploads),
//! commits, copies and hygiene (archival to GLACIER_IR), one OSD is killed (`kill -9`), then one
//! gateway. Every answer is a success or a documented retryable error (retried as docs/api.md
//! says, and counted), no handle is left without its object (read through the surviving
//! gateway), reconcile is clean and hygiene completes on a rerun. Last, a completion meets the
//! lock a gateway killed in the middle of CompleteMultipartUpload leaves (taken with `rados
//! lock`, held 10 s instead of RGW's 10 minutes): it answers 503 until the lock is gone, then
//! completes. The figures are printed. A hung OSD, not a dead one: `hung.rs`.
//!
//! Needs Ceph (`scripts/ceph.sh` installs Debian's packages when missing) and any
//! `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` (the cluster's S3 user gets them):
//!
//! ```text
//! UPCOMMIT_TEST_STORE=rgw UPCOMMIT_TEST_DATABASE=sqlite \
//! UPCOMMIT_TEST_ACCEPT_STORE_GAPS=<the store's gaps> AWS_ACCESS_KEY_ID=… AWS_SECRET_ACCESS_KEY=… \
//!   cargo test --locked --test api ceph_cluster -- --ignored --nocapture
//! ```

mod balancer;
mod cluster;
mod hung;
mod workload;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::helpers::{hygiene_cli, spawn_app_with, Spawn, TestApp};
use crate::hygiene::{hygiene_env, DAY};
use balancer::Balancer;
use cluster::Ceph;
use workload::{completion_behind_a_dead_gateways_lock, files_done, worker, Answer, Tally, MIB};

/// One cluster at a time: the two tests each start three OSDs and two gateways, more than two
/// cores run side by side without skewing what they measure.
static ONE_CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Files in the run, and how many workers upload them at once.
const FILES: usize = 36;
const WORKERS: usize = 3;
/// How long the completion lock of a gateway that died is held here (RGW: 600 s).
const LOCK_SECS: u32 = 10;
/// How long into a hygiene run a daemon is killed (such a run takes a second or more here).
const KILL_AFTER: Duration = Duration::from_millis(300);

/// One `upcommit hygiene --at` run: its exit code and report. It finishes (0), possibly with
/// files it failed to move (`summary.failed`), or fails as a whole (1): both are retried by
/// the next run (docs/operations.md). Anything else fails the test.
async fn hygiene_at(app: &TestApp, at: DateTime<Utc>) -> (i32, Value) {
    let out = hygiene_cli(app, Some(at)).await;
    let code = out.status.code().unwrap_or(-1);
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(
        code == 0 || code == 1,
        "hygiene exit {code}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (code, report)
}

/// [`hygiene_at`] in the background; also how long the run took.
fn spawn_hygiene(
    app: &Arc<TestApp>,
    at: DateTime<Utc>,
) -> tokio::task::JoinHandle<(i32, Value, Duration)> {
    let app = app.clone();
    tokio::spawn(async move {
        let began = Instant::now();
        let (code, report) = hygiene_at(&app, at).await;
        (code, report, began.elapsed())
    })
}

/// upcommit's S3 calls that failed (after the SDK's own retries), by operation, from
/// `/metrics`.
fn s3_errors(metrics: &str) -> std::collections::BTreeMap<String, f64> {
    let prefix = "upcommit_s3_request_duration_seconds_count{operation=\"";
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|l| {
            let (op, rest) = l.split_once('"')?;
            let n = rest.strip_prefix(",result=\"error\"} ")?.parse().ok()?;
            Some((op.to_owned(), n))
        })
        .collect()
}

/// A client of the balancer with no retries and a two-second deadline: for timing how long
/// the cluster takes to take writes again.
async fn probe_client(endpoint: &str) -> aws_sdk_s3::Client {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .region(aws_sdk_s3::config::Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .force_path_style(true)
            .retry_config(aws_sdk_s3::config::retry::RetryConfig::standard().with_max_attempts(1))
            .timeout_config(
                aws_sdk_s3::config::timeout::TimeoutConfig::builder()
                    .operation_timeout(Duration::from_secs(2))
                    .build(),
            )
            .build(),
    )
}

/// Writes a small object to `bucket` every 100 ms from `since` until one is taken: how long
/// the cluster took to serve again, and the errors of the writes that failed before.
async fn serves_again(
    s3: aws_sdk_s3::Client,
    bucket: String,
    since: Instant,
) -> (Duration, Vec<String>) {
    let mut failed = Vec::new();
    while since.elapsed() < Duration::from_secs(300) {
        let put = s3
            .put_object()
            .bucket(&bucket)
            .key(format!("probe-{}", uuid::Uuid::new_v4()))
            .body(b"probe".to_vec().into())
            .send()
            .await;
        match put {
            Ok(_) => return (since.elapsed(), failed),
            Err(e) => failed.push(format!("{}", aws_sdk_s3::error::DisplayErrorContext(e))),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the cluster took no write for 300 s: {failed:?}");
}

/// Every answer was a success or a documented retryable one, and every file has its handle:
/// the answers and the handles.
fn every_answer_documented(tally: &Tally) -> (Vec<Answer>, Vec<Value>) {
    let answers = tally.answers.lock().expect("answers").clone();
    let undocumented: Vec<&Answer> = answers.iter().filter(|a| !a.documented()).collect();
    assert!(
        undocumented.is_empty(),
        "undocumented answers: {undocumented:?}"
    );
    let handles = tally.handles.lock().expect("handles").clone();
    assert_eq!(handles.len(), FILES);
    (answers, handles)
}

/// Reconcile finds nothing missing and nothing unindexed.
async fn assert_reconciled(app: &Arc<TestApp>) {
    let reconcile = {
        let app = app.clone();
        tokio::task::spawn_blocking(move || crate::reconcile::reconcile_cli(&app, &[]))
            .await
            .expect("reconcile thread")
    };
    assert_eq!(reconcile.code, 0, "{}", reconcile.body);
    for found in ["missing", "unindexed"] {
        assert_eq!(reconcile.body["summary"][found], 0, "{}", reconcile.body);
    }
}

/// The figures of each phase (named by `names`), then the longest a call took to settle.
fn print_phases(answers: &[Answer], tally: &Tally, names: [&str; 3]) {
    for (phase, name) in names.iter().enumerate() {
        eprintln!(
            "  {name}: {} answers, {} of them 503 retried, {} requests unanswered in 120 s, {} presigned PUTs sent again",
            answers.iter().filter(|a| a.phase == phase).count(),
            answers.iter().filter(|a| a.phase == phase && a.status == 503).count(),
            tally.unanswered[phase].load(Ordering::Relaxed),
            tally.store_retries[phase].load(Ordering::Relaxed),
        );
    }
    let (waited, retries, call) = *tally.longest_wait.lock().expect("longest wait");
    eprintln!(
        "  the longest a call took to settle: {call}, {} with {retries} 503s retried",
        secs(waited)
    );
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Ceph (scripts/ceph.sh): run with --ignored and UPCOMMIT_TEST_STORE=rgw"]
async fn an_osd_and_a_gateway_killed_mid_run_lose_nothing_and_every_answer_is_documented() {
    let _alone = ONE_CLUSTER.lock().await;
    let root = tempfile::tempdir().expect("cluster dir");
    let ceph = Ceph::start(root.path());
    let gateways = ceph.endpoints();
    assert_eq!(gateways.len(), 2, "{gateways:?}");
    let balancer = Balancer::start(&gateways);
    let mut env = hygiene_env(DAY);
    env.extend([
        ("UPCOMMIT_S3_ENDPOINT", balancer.url.clone()),
        ("UPCOMMIT_MAX_SINGLE_COPY_BYTES", (5 * MIB).to_string()),
        ("UPCOMMIT_COPY_PART_SIZE_BYTES", (5 * MIB).to_string()),
        ("UPCOMMIT_MULTIPART_PART_SIZE_BYTES", (5 * MIB).to_string()),
        ("UPCOMMIT_ARCHIVE_STORAGE_CLASS", "GLACIER_IR".to_owned()),
    ]);
    let app = Arc::new(
        spawn_app_with(Spawn {
            env,
            ..Spawn::default()
        })
        .await,
    );
    let probe = probe_client(&balancer.url).await;
    let probe_bucket = format!("probe-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    probe
        .create_bucket()
        .bucket(&probe_bucket)
        .send()
        .await
        .expect("the probe's bucket");
    // Hygiene's clock: unlinked two days on, archived a day after that (hygiene_env).
    let t0 = Utc::now();
    let day = move |d: i64, s: i64| t0 + chrono::Duration::seconds(d * DAY + s);

    let tally = Arc::new(Tally::default());
    tally.limit.store(18, Ordering::SeqCst);
    let s3_errors_before = s3_errors(&app.metrics_text().await);
    let run = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| tokio::spawn(worker(app.clone(), tally.clone())))
        .collect();

    // Healthy: the first files are committed, then hygiene marks them unlinked.
    files_done(&tally, &workers, 8).await;
    let (code, unlinking) = hygiene_at(&app, day(2, 0)).await;
    assert_eq!(code, 0, "{unlinking}");

    // An OSD dies while archival moves those files to GLACIER_IR and files are in flight.
    files_done(&tally, &workers, 12).await;
    let archival = spawn_hygiene(&app, day(3, 5));
    tokio::time::sleep(KILL_AFTER).await;
    let at_osd_kill = tally.in_flight();
    ceph.kill("osd.2");
    let osd_killed = Instant::now();
    tally.phase.store(1, Ordering::SeqCst);
    let osd_back = tokio::spawn(serves_again(
        probe.clone(),
        probe_bucket.clone(),
        osd_killed,
    ));
    let osd_down = ceph.marked_down_after(osd_killed).await;
    let archival_during_osd = archival.await.expect("hygiene task");
    tally.limit.store(30, Ordering::SeqCst);

    // Then a gateway dies, the OSD still down, during the next archival and more files.
    files_done(&tally, &workers, 24).await;
    let archival = spawn_hygiene(&app, day(4, 10));
    tally.limit.store(FILES, Ordering::SeqCst);
    tokio::time::sleep(KILL_AFTER).await;
    let at_gw_kill = tally.in_flight();
    let open: Vec<u64> = balancer
        .counts
        .open
        .iter()
        .map(|n| n.load(Ordering::SeqCst))
        .collect();
    ceph.kill("client.rgw.gw1");
    let gw_killed = Instant::now();
    tally.phase.store(2, Ordering::SeqCst);
    let gw_back = tokio::spawn(serves_again(probe.clone(), probe_bucket.clone(), gw_killed));
    let archival_during_gw = archival.await.expect("hygiene task");
    for w in workers {
        w.await.expect("worker");
    }
    let run_time = run.elapsed();
    let lock_held = completion_behind_a_dead_gateways_lock(&app, &tally, &ceph, LOCK_SECS).await;
    let refused_behind_lock = tally
        .answers
        .lock()
        .expect("answers")
        .iter()
        .filter(|a| a.what == "complete (lock held)" && a.status == 503)
        .count();
    assert!(
        refused_behind_lock > 0 && lock_held >= Duration::from_secs(u64::from(LOCK_SECS) - 1),
        "the completion went through the lock: {refused_behind_lock} refusals, {}",
        secs(lock_held)
    );
    let (osd_back, osd_probe_failures) = osd_back.await.expect("probe");
    let (gw_back, gw_probe_failures) = gw_back.await.expect("probe");

    // Hygiene, run again at the last run's time, completes: one run with nothing failed, then
    // nothing left to do.
    let mut reruns = 0;
    let settled_at = loop {
        reruns += 1;
        assert!(reruns <= 6, "hygiene never completed");
        let (code, report) = hygiene_at(&app, day(4, 10)).await;
        let summary = &report["summary"];
        if code == 0
            && summary["failed"] == 0
            && summary["archived"] == 0
            && summary["unlinked"] == 0
        {
            break report;
        }
    };

    // Every answer was a success or a documented retryable one.
    let (answers, _) = every_answer_documented(&tally);

    // No handle without its object, read through the gateway that survived.
    let survivor = probe_client(&gateways[1]).await;
    let rows = app
        .db
        .strings("SELECT key || ' ' || CAST(size AS TEXT) || ' ' || status FROM file_handles WHERE status <> 'deleted'")
        .await;
    assert!(rows.len() > FILES, "{rows:?}");
    let mut by_status: HashMap<String, usize> = HashMap::new();
    for row in &rows {
        let mut fields = row.rsplitn(3, ' ');
        let (status, size, key) = (
            fields.next().expect("status"),
            fields.next().expect("size"),
            fields.next().expect("key"),
        );
        *by_status.entry(status.to_owned()).or_default() += 1;
        let head = survivor
            .head_object()
            .bucket(&app.bucket)
            .key(key)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{key} ({status}) via the surviving gateway: {e:?}"));
        assert_eq!(
            head.content_length().map(|l| l.to_string()).as_deref(),
            Some(size),
            "{key}"
        );
        if status == "archived" {
            assert_eq!(
                head.storage_class().map(|c| c.as_str()),
                Some("GLACIER_IR"),
                "{key}"
            );
        }
    }
    assert!(
        by_status.get("archived").is_some_and(|n| *n > 0),
        "{by_status:?}"
    );
    assert_reconciled(&app).await;

    // The figures.
    let counts = &balancer.counts;
    eprintln!("ceph cluster (started in {}): {FILES} files by {WORKERS} workers in {}, {} answers from upcommit; {} handles ({by_status:?})",
        secs(ceph.started_in), secs(run_time), answers.len(), rows.len());
    print_phases(
        &answers,
        &tally,
        ["healthy", "OSD down", "OSD and gateway down"],
    );
    let mut codes: HashMap<(&str, u16, &str), usize> = HashMap::new();
    for a in answers.iter().filter(|a| a.status >= 300) {
        *codes
            .entry((a.what, a.status, a.code.as_str()))
            .or_default() += 1;
    }
    eprintln!("  error answers (call, status, code): {codes:?}");
    eprintln!(
        "  OSD killed {} into an archival run that took {}, files in flight {at_osd_kill}: marked down by the monitor after {}, writes taken again after {} (probe writes failed before: {osd_probe_failures:?})",
        secs(KILL_AFTER),
        secs(archival_during_osd.2),
        secs(osd_down),
        secs(osd_back)
    );
    eprintln!(
        "  gateway killed {} into an archival run that took {}, files in flight {at_gw_kill}, connections open through each gateway {open:?}: writes taken again after {} (probe writes failed before: {gw_probe_failures:?})",
        secs(KILL_AFTER),
        secs(archival_during_gw.2),
        secs(gw_back)
    );
    eprintln!(
        "  hygiene: during the OSD kill exit {} {}; during the gateway kill exit {} {}; complete after {} rerun(s): {}",
        archival_during_osd.0,
        archival_during_osd.1["summary"],
        archival_during_gw.0,
        archival_during_gw.1["summary"],
        reruns,
        settled_at["summary"]
    );
    eprintln!(
        "  balancer: {} connections, {} connects to a dead gateway skipped, {} unserved",
        counts.connections.load(Ordering::Relaxed),
        counts.skipped.load(Ordering::Relaxed),
        counts.unserved.load(Ordering::Relaxed)
    );
    let mut s3_failed = s3_errors(&app.metrics_text().await);
    for (op, n) in &s3_errors_before {
        if let Some(m) = s3_failed.get_mut(op) {
            *m -= n;
        }
    }
    s3_failed.retain(|_, n| *n > 0.0);
    // HeadObject counts one 404 per commit: the final key is looked up before the copy.
    eprintln!("  the server's S3 calls that failed after the SDK's retries (3 attempts), by operation: {s3_failed:?}");
    eprintln!(
        "  a completion behind a dead gateway's lock (held {LOCK_SECS} s here; RGW holds it rgw_mp_lock_max_time, 600 s): {refused_behind_lock} answers 503, completed after {}",
        secs(lock_held)
    );
    // Each of upcommit's completions is the SDK's three attempts, each refused by RGW.
    eprintln!(
        "  completions the surviving gateway refused for another's lock ('failed to acquire lock' in its log): {}",
        ceph.log_lines("client.rgw.gw2", "failed to acquire lock").len()
    );
    eprintln!(
        "  multipart uploads left open in the bucket: {}",
        app.open_multipart_uploads().await.len()
    );
}
