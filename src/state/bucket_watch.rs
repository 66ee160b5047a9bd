//! Checking the live bucket, not the plan: one run reads the bucket's configuration through the
//! object store and judges it ([`check`]); the server keeps the latest report ([`BucketWatch`]),
//! re-checks it on an interval and logs an error when a check starts failing, so a lifecycle
//! rule that a second writer erased is noticed within one interval.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::catalog::Catalog;
use crate::domain::bucket_check::{evaluate, Check, CheckResult, Expectations};
use crate::domain::events::{EventType, NewEvent};
use crate::domain::lifecycle::Rule;
use crate::storage::ObjectStore;

/// The verdicts of one run of every check.
#[derive(Debug, Clone, Serialize)]
pub struct BucketReport {
    pub bucket: String,
    pub checked_at: DateTime<Utc>,
    pub results: Vec<CheckResult>,
    /// The live lifecycle rules, when they could be read: their expiring prefixes are reserved
    /// from custom final keys (see `domain::reserved`).
    #[serde(skip)]
    pub lifecycle: Option<Vec<Rule>>,
}

impl BucketReport {
    pub fn ok(&self) -> bool {
        self.results.iter().all(|r| r.ok)
    }

    pub fn failed(&self) -> Vec<Check> {
        self.results
            .iter()
            .filter(|r| !r.ok)
            .map(|r| r.check)
            .collect()
    }

    fn passed(&self, check: Check) -> Option<bool> {
        self.results.iter().find(|r| r.check == check).map(|r| r.ok)
    }
}

/// The watch's verdict as `/readyz` and `GET /v1/admin/bucket` say it: `ok`, `failing`,
/// `pending` (no run yet) or `disabled` (`UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS=0`).
pub fn verdict(latest: Option<&BucketReport>, interval_secs: u64) -> &'static str {
    match latest {
        Some(r) if r.ok() => "ok",
        Some(_) => "failing",
        None if interval_secs == 0 => "disabled",
        None => "pending",
    }
}

/// Reads the live bucket and runs every check once.
pub async fn check(store: &dyn ObjectStore, want: &Expectations) -> BucketReport {
    let view = store.bucket_view().await;
    BucketReport {
        bucket: store.bucket().to_owned(),
        checked_at: crate::domain::records::now(),
        results: evaluate(&view, want),
        lifecycle: view.lifecycle.ok(),
    }
}

/// The latest report, shared by the readiness and metrics handlers.
#[derive(Default)]
pub struct BucketWatch {
    latest: RwLock<Option<Arc<BucketReport>>>,
    /// Where a check that starts failing is announced (`bucket.check_failed`).
    outbox: Option<Arc<dyn Catalog>>,
}

impl std::fmt::Debug for BucketWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketWatch")
            .field("latest", &self.latest)
            .finish_non_exhaustive()
    }
}

impl BucketWatch {
    pub fn new() -> Self {
        Self::default()
    }

    /// A watch that also records a `bucket.check_failed` event when a check starts failing.
    pub fn with_outbox(outbox: Arc<dyn Catalog>) -> Self {
        Self {
            latest: RwLock::default(),
            outbox: Some(outbox),
        }
    }

    /// `None` until the first run has finished (or when the watch is off).
    pub fn latest(&self) -> Option<Arc<BucketReport>> {
        match self.latest.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Runs the checks once, logs what changed since the previous run, keeps the report.
    pub async fn run_once(
        &self,
        store: &dyn ObjectStore,
        want: &Expectations,
    ) -> Arc<BucketReport> {
        let report = Arc::new(check(store, want).await);
        crate::pause::point("bucket_watch_checked").await;
        let previous = self.latest();
        log_changes(previous.as_deref(), &report);
        if let Some(outbox) = &self.outbox {
            let failing = newly_failing(previous.as_deref(), &report);
            if !failing.is_empty() {
                let event = NewEvent::new(
                    EventType::BucketCheckFailed,
                    &format!("bucket:{}", report.bucket),
                    report.checked_at,
                    &serde_json::json!({ "bucket": report.bucket, "checks": failing }),
                );
                // The log line above already says it; the event is the app's copy.
                if let Err(e) = outbox.record_event(&event).await {
                    tracing::warn!(error = %e, "could not record the bucket.check_failed event");
                }
            }
        }
        match self.latest.write() {
            Ok(mut guard) => *guard = Some(report.clone()),
            Err(poisoned) => *poisoned.into_inner() = Some(report.clone()),
        }
        report
    }

    /// Checks now, then every `every`, until the task is aborted.
    pub fn spawn(
        self: Arc<Self>,
        store: Arc<dyn ObjectStore>,
        want: Expectations,
        every: Duration,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                // A panicking check costs this pass, not the watch.
                crate::state::supervise::catching(
                    "bucket_watch",
                    Some(&metrics),
                    self.run_once(store.as_ref(), &want),
                )
                .await;
            }
        })
    }
}

/// The checks that fail now and did not fail in `previous` (all failing ones on a first run).
fn newly_failing<'a>(
    previous: Option<&BucketReport>,
    now: &'a BucketReport,
) -> Vec<&'a CheckResult> {
    now.results
        .iter()
        .filter(|r| !r.ok && previous.and_then(|p| p.passed(r.check)) != Some(false))
        .collect()
}

/// A check that fails now and did not fail before (or on the first run) is an error; one that
/// recovered is worth an info line; an unchanged state stays quiet.
fn log_changes(previous: Option<&BucketReport>, now: &BucketReport) {
    for r in &now.results {
        let before = previous.and_then(|p| p.passed(r.check));
        match (before, r.ok) {
            (Some(false), false) | (Some(true), true) => {}
            (_, false) => tracing::error!(
                bucket = %now.bucket,
                check = r.check.name(),
                detail = %r.detail,
                fix = r.fix.as_deref().unwrap_or(""),
                "bucket check failed"
            ),
            (Some(false), true) => tracing::info!(
                bucket = %now.bucket,
                check = r.check.name(),
                "bucket check recovered"
            ),
            (None, true) => {}
        }
    }
    if previous.is_none() && now.ok() {
        tracing::info!(bucket = %now.bucket, checks = now.results.len(), "bucket checks pass");
    }
}
