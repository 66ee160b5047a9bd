//! Reconcile's merge-join on synthetic sorted keys: keys per second and peak memory.
//! `cargo run --release --example reconcile_join -- 1000000` (see bench/reconcile.sh).
//! Both sides are generated page by page, as the real sources deliver them, so the peak
//! resident memory shows what the join itself holds: it must stay flat as the key count grows.

use std::time::Instant;

use chrono::{Duration, Utc};
use upcommit::domain::reconcile::{join_pages, BucketKey, Finding, HandleKey, ReconcilePolicy};

const PAGE: u64 = 1000;

fn key(i: u64) -> String {
    format!("media/images/{i:012}/file.png")
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let old = Utc::now() - Duration::days(30);
    // Every 1000th key has no object (missing); every 997th object has no handle (unindexed).
    let bucket = (0..n).step_by(PAGE as usize).map(move |start| {
        (start..(start + PAGE).min(n))
            .filter(|i| i % 1000 != 0)
            .map(|i| BucketKey {
                key: key(i),
                size: 1000,
                last_modified: Some(old),
            })
            .collect::<Vec<_>>()
    });
    let catalog = (0..n).step_by(PAGE as usize).map(move |start| {
        (start..(start + PAGE).min(n))
            .filter(|i| i % 997 != 0)
            .map(|i| HandleKey {
                key: key(i),
                file_id: format!("{i:032x}"),
                size: 1000,
                handles: 1,
                recorded_at: old,
            })
            .collect::<Vec<_>>()
    });
    let policy = ReconcilePolicy {
        final_prefixes: vec!["media/images/".into()],
        known_prefixes: vec!["tmp/".into()],
        now: Utc::now(),
        grace: Duration::hours(24),
        tmp_max_age: Duration::days(8),
        taken_at: None,
    };
    let (mut unindexed, mut missing) = (0u64, 0u64);
    let started = Instant::now();
    let matched = join_pages(policy, bucket, catalog, |f| match f {
        Finding::Unindexed(_) => unindexed += 1,
        Finding::Missing(_) => missing += 1,
        Finding::TmpPastLifecycle(_) | Finding::Stray(_) | Finding::Rendition(_) => {}
    })
    .expect("sorted input");
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{{\"keys\": {n}, \"matched\": {matched}, \"unindexed\": {unindexed}, \"missing\": {missing}, \"seconds\": {secs:.3}, \"keys_per_second\": {:.0}, \"peak_rss_mib\": {:.1}}}",
        (2 * n) as f64 / secs,
        peak_rss_kib() as f64 / 1024.0
    );
}
