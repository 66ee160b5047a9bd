//! A hung OSD, not a dead one (`kill -STOP`: its sockets stay open and nothing on them is
//! answered, as with a stalled disk or kernel), in the middle of uploads, commits (some copied
//! in parts) and copies. Writes to its placement groups wait until the monitor marks it down
//! (`osd heartbeat grace`, 20 s); upcommit's calls to the store give up before that (10 s an
//! attempt, 30 s in all) and answer 503 with `Retry-After`. Every answer is a success or a
//! documented retryable error, no handle is left without its object, reconcile is clean, and
//! nothing multipart is left open once the OSD runs again. The figures are printed.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::balancer::Balancer;
use super::cluster::Ceph;
use super::workload::{files_done, worker, Tally, MIB};
use super::{probe_client, secs, FILES, WORKERS};
use crate::helpers::{spawn_app_with, Spawn};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Ceph (scripts/ceph.sh): run with --ignored and UPCOMMIT_TEST_STORE=rgw"]
async fn a_hung_osd_stalls_writes_until_it_is_marked_down_and_loses_nothing() {
    let _alone = super::ONE_CLUSTER.lock().await;
    let root = tempfile::tempdir().expect("cluster dir");
    let ceph = Ceph::start(root.path());
    let balancer = Balancer::start(&ceph.endpoints());
    let app = Arc::new(
        spawn_app_with(Spawn {
            env: vec![
                ("UPCOMMIT_S3_ENDPOINT", balancer.url.clone()),
                ("UPCOMMIT_MAX_SINGLE_COPY_BYTES", (5 * MIB).to_string()),
                ("UPCOMMIT_COPY_PART_SIZE_BYTES", (5 * MIB).to_string()),
                ("UPCOMMIT_MULTIPART_PART_SIZE_BYTES", (5 * MIB).to_string()),
            ],
            ..Spawn::default()
        })
        .await,
    );
    let tally = Arc::new(Tally::default());
    tally.limit.store(FILES, Ordering::SeqCst);
    let run = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| tokio::spawn(worker(app.clone(), tally.clone())))
        .collect();

    files_done(&tally, &workers, 6).await;
    let at_hang = tally.in_flight();
    ceph.signal("osd.2", "STOP");
    let hung = Instant::now();
    tally.phase.store(1, Ordering::SeqCst);
    let marked_down = ceph.marked_down_after(hung).await;
    files_done(&tally, &workers, 24).await;
    // Running again: it boots back into the map ("wrongly marked me down") and peers.
    ceph.signal("osd.2", "CONT");
    tally.phase.store(2, Ordering::SeqCst);
    for w in workers {
        w.await.expect("worker");
    }
    let run_time = run.elapsed();

    let (answers, handles) = super::every_answer_documented(&tally);
    let s3 = probe_client(&balancer.url).await;
    for h in &handles {
        let key = h["key"].as_str().expect("key");
        let head = s3
            .head_object()
            .bucket(&app.bucket)
            .key(key)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{key}: {e:?}"));
        assert_eq!(
            head.content_length(),
            h["size"].as_i64(),
            "{key}: the object and its handle"
        );
    }
    super::assert_reconciled(&app).await;
    assert!(
        app.open_multipart_uploads().await.is_empty(),
        "multipart uploads left open"
    );

    eprintln!(
        "ceph cluster, an OSD hung (started in {}): {FILES} files by {WORKERS} workers in {}, {} answers from upcommit",
        secs(ceph.started_in),
        secs(run_time),
        answers.len()
    );
    eprintln!(
        "  hung with files in flight {at_hang}; marked down by the monitor after {}",
        secs(marked_down)
    );
    super::print_phases(
        &answers,
        &tally,
        ["healthy", "OSD hung", "OSD running again"],
    );
}
