//! The sweep over one large day of abandoned tmp uploads (filled by `bench/sweep_fill.py`), in
//! process so its own counters can be read: wall time, catalog round trips by operation, S3
//! calls by operation, and the process's peak resident memory (VmHWM). A fresh SQLite catalog in
//! a temp dir records none of the uploads, so every object is `unrecorded` and goes.
//! Usage: sweep_day BUCKET [--dry-run] (LocalStack on 127.0.0.1:4566, test credentials).
//! `RUST_LOG=sqlx::query=debug` logs every SQL statement to stderr (one line each): count them
//! for the database round trips.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use upcommit::catalog::{Catalog, ObservedCatalog};
use upcommit::config::Settings;
use upcommit::metrics::Metrics;
use upcommit::services::sweep::{sweep, SweepOutcome};
use upcommit::storage::{ObjectStore, S3Store};

/// Sums of `<metric>_count{operation="…",…}` by operation.
fn counts(text: &str, metric: &str) -> Vec<(String, u64)> {
    let mut by_op: std::collections::BTreeMap<String, u64> = Default::default();
    let prefix = format!("{metric}_count{{operation=\"");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(&prefix) {
            let op = rest.split('"').next().unwrap_or_default().to_owned();
            let n: u64 = line
                .rsplit_once(' ')
                .and_then(|(_, n)| n.parse().ok())
                .unwrap_or(0);
            *by_op.entry(op).or_default() += n;
        }
    }
    by_op.into_iter().collect()
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    upcommit::telemetry::init(upcommit::config::LogFormat::Text);
    let args: Vec<String> = std::env::args().collect();
    let bucket = args
        .get(1)
        .expect("usage: sweep_day BUCKET [--dry-run]")
        .clone();
    let dry_run = args.iter().any(|a| a == "--dry-run");
    let dir = std::env::temp_dir().join(format!("sweep-day-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let vars: HashMap<String, String> = [
        (
            "UPCOMMIT_JWT_SECRET",
            "bench-secret-0123456789abcdef".to_owned(),
        ),
        (
            "DATABASE_URL",
            format!("sqlite://{}/bench.db", dir.display()),
        ),
        ("UPCOMMIT_BUCKET", bucket.clone()),
        ("UPCOMMIT_S3_ENDPOINT", "http://127.0.0.1:4566".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let settings = Settings::from_map(&vars).expect("settings");
    let metrics = Arc::new(Metrics::new());
    let inner = upcommit::catalog::connect(settings.database.url.expose(), 4)
        .await
        .expect("catalog");
    let catalog: Arc<dyn Catalog> = Arc::new(ObservedCatalog::new(inner, metrics.clone()));
    let store: Arc<dyn ObjectStore> = Arc::new(
        S3Store::connect_observed(&settings.s3, metrics.clone())
            .await
            .expect("store"),
    );
    let started = Instant::now();
    let outcome = sweep(&catalog, &store, &settings, dry_run)
        .await
        .expect("sweep");
    let secs = started.elapsed().as_secs_f64();
    let SweepOutcome::Ran { summary, .. } = outcome else {
        panic!("busy");
    };
    let mut text = String::new();
    metrics.render(&mut text);
    let db = counts(&text, "upcommit_db_query_duration_seconds");
    let s3 = counts(&text, "upcommit_s3_request_duration_seconds");
    println!(
        "{}",
        serde_json::json!({
            "bucket": bucket,
            "dry_run": dry_run,
            "versions": summary.deleted_versions,
            "error": summary.error,
            "seconds": (secs * 10.0).round() / 10.0,
            "catalog_calls_total": db.iter().map(|(_, n)| n).sum::<u64>(),
            "catalog_calls": db.into_iter().collect::<HashMap<_, _>>(),
            "s3_calls": s3.into_iter().collect::<HashMap<_, _>>(),
            "peak_rss_mib": (peak_rss_kib() as f64 / 1024.0 * 10.0).round() / 10.0,
        })
    );
    let _ = std::fs::remove_dir_all(&dir);
}
