//! The service's own counters and latency histograms, rendered in the Prometheus text format
//! by `GET /metrics`. One `Metrics` per running server (so tests that start several servers in
//! one process read only their own), shared by the request middleware, the S3 client's
//! interceptor and the catalog wrapper. Hand-written on purpose: a few mutex-guarded maps cost
//! less than a metrics framework and its dependency tree, and the label sets are small and
//! bounded (matched routes, error codes, operation names — never keys, ids or users).

mod renders;

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

pub use renders::RenderOutcome;

/// Upper bounds (seconds) of the latency buckets, shared by every histogram.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Clone, Default)]
struct Histogram {
    /// Non-cumulative counts per bucket; the last slot is `+Inf`.
    counts: [u64; BUCKETS.len() + 1],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        let slot = BUCKETS
            .iter()
            .position(|le| secs <= *le)
            .unwrap_or(BUCKETS.len());
        self.counts[slot] += 1;
        self.count += 1;
        self.sum += secs;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, le) in BUCKETS.iter().enumerate() {
            cumulative += self.counts[i];
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count
        );
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// One route's latencies by (method, status).
type ByMethodStatus = BTreeMap<(&'static str, u16), Histogram>;

/// The background tasks whose panic counters are shown from zero (so that `increase()` sees
/// the first one).
pub const TASKS: [&str; 7] = [
    "sweep",
    "prune",
    "hygiene",
    "bucket_watch",
    "event_sequencer",
    "event_delivery",
    "job_gauges",
];

/// Which flow an outcome counter belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flow {
    Presign,
    Commit,
}

impl Flow {
    fn name(self) -> &'static str {
        match self {
            Flow::Presign => "presign",
            Flow::Commit => "commit",
        }
    }
}

#[derive(Debug, Default)]
pub struct Metrics {
    /// matched route → (method, status) → latency. Keyed by route first so the hot path looks
    /// up with a borrowed `&str` and allocates only for a route's first request.
    requests: Mutex<BTreeMap<String, ByMethodStatus>>,
    /// (flow, outcome: `ok` or the error code) → count.
    outcomes: Mutex<BTreeMap<(Flow, String), u64>>,
    /// (S3 operation, `ok`/`error`) → latency.
    s3: Mutex<BTreeMap<(String, &'static str), Histogram>>,
    /// (catalog operation, `ok`/`error`) → latency.
    db: Mutex<BTreeMap<(&'static str, &'static str), Histogram>>,
    /// (profile, result: `allow`, `refuse`, `timeout`, `unreachable`, `status`, `malformed`)
    /// → latency of the validation hook's calls.
    hooks: Mutex<BTreeMap<(String, &'static str), Histogram>>,
    /// profile → commits that went on without the hook's answer (`on_error = "allow"`).
    hooks_failed_open: Mutex<BTreeMap<String, u64>>,
    /// (endpoint, result) → deliveries attempted.
    deliveries: Mutex<BTreeMap<(String, &'static str), u64>>,
    /// endpoint → one attempt's latency (request sent to answer or error).
    delivery_latency: Mutex<BTreeMap<String, Histogram>>,
    /// The outbox's depth and age, as the delivery task last read them from the catalog.
    outbox: Mutex<Option<OutboxGauges>>,
    /// (capability, standing) of the store as judged at start.
    store: Mutex<Vec<(&'static str, &'static str)>>,
    /// background task (a job, a loop) → panics caught by `state::supervise`.
    task_panics: Mutex<BTreeMap<&'static str, u64>>,
    renders: renders::RenderMetrics,
    quota_rejections: AtomicU64,
    bytes_committed: AtomicU64,
    files_committed: AtomicU64,
}

/// The outbox as last read: events not positioned yet, deliveries pending and failed, and the
/// age of the oldest event not delivered everywhere.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OutboxGauges {
    pub unsequenced: i64,
    pub pending: i64,
    pub failed: i64,
    /// Deliveries to disabled endpoints not delivered (the prune discards them once the
    /// endpoint has been disabled for the retention).
    pub disabled: i64,
    /// Deliveries the prune discarded undelivered, ever (a counter kept in the catalog).
    pub discarded: i64,
    pub oldest_undelivered_age_secs: f64,
}

/// The method as a label value without allocating; anything unusual is `other` (bounded labels).
fn static_method(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

fn result_label(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "error"
    }
}

/// Escapes a label value for the text format (backslash, quote, newline).
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// What the store was found to do at start (`domain::capabilities`).
    pub fn set_store_verdict(&self, verdict: &crate::domain::capabilities::Verdict) {
        use crate::domain::capabilities::Standing;
        if let Ok(mut store) = self.store.lock() {
            *store = verdict
                .lines
                .iter()
                .map(|l| {
                    let standing = match l.standing {
                        Standing::Present => "present",
                        Standing::NotNeeded => "not_needed",
                        Standing::Accepted => "accepted",
                        Standing::Refused => "refused",
                    };
                    (l.capability.name(), standing)
                })
                .collect();
        }
    }

    pub fn request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let method = static_method(method);
        if let Ok(mut map) = self.requests.lock() {
            let by_route = match map.get_mut(route) {
                Some(m) => m,
                None => map.entry(route.to_owned()).or_default(),
            };
            by_route
                .entry((method, status))
                .or_default()
                .observe(elapsed.as_secs_f64());
        }
    }

    /// One presign or commit answered: `outcome` is `ok` or the error code.
    pub fn outcome(&self, flow: Flow, outcome: &str) {
        if outcome == "quota_exceeded" {
            self.quota_rejections.fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(mut map) = self.outcomes.lock() {
            *map.entry((flow, outcome.to_owned())).or_default() += 1;
        }
    }

    /// A commit that created a file handle (not an idempotent replay).
    /// How a render request that missed the cache ended, and the render's own time when it
    /// ran.
    pub fn render_outcome(&self, outcome: RenderOutcome, ran_for: Option<Duration>) {
        self.renders.outcome(outcome, ran_for);
    }

    /// A rendition request answered from the cache (`true`) or that had to render.
    /// A render worker started (issue 46).
    pub fn render_worker_started(&self) {
        self.renders.worker_started();
    }

    /// A render worker died in a render, of `death`.
    pub fn render_worker_died(&self, death: crate::domain::variants::refusal::Death) {
        self.renders.worker_died(death.as_str());
    }

    /// A render worker was killed at the time limit.
    pub fn render_worker_killed_at_limit(&self) {
        self.renders.worker_killed_at_limit();
    }

    pub fn rendition_cache(&self, hit: bool) {
        self.renders.cache(hit);
    }

    pub fn committed(&self, bytes: u64) {
        self.files_committed.fetch_add(1, Ordering::Relaxed);
        self.bytes_committed.fetch_add(bytes, Ordering::Relaxed);
    }

    /// One call of a profile's validation hook and how it ended.
    pub fn validation_hook(&self, profile: &str, result: &'static str, elapsed: Duration) {
        if let Ok(mut map) = self.hooks.lock() {
            map.entry((profile.to_owned(), result))
                .or_default()
                .observe(elapsed.as_secs_f64());
        }
    }

    /// Starts the fail-open counter of each profile at 0, so that its first increase is seen:
    /// a counter series that appears already at 1 shows no `increase()` in Prometheus.
    pub fn validation_hooks_configured<'a>(&self, profiles: impl IntoIterator<Item = &'a str>) {
        if let Ok(mut map) = self.hooks_failed_open.lock() {
            for profile in profiles {
                map.entry(profile.to_owned()).or_default();
            }
        }
    }

    /// A commit that went on although the hook gave no answer (fail open).
    pub fn validation_hook_failed_open(&self, profile: &str) {
        if let Ok(mut map) = self.hooks_failed_open.lock() {
            *map.entry(profile.to_owned()).or_default() += 1;
        }
    }

    /// A background task panicked (and was kept alive).
    pub fn task_panicked(&self, task: &'static str) {
        if let Ok(mut map) = self.task_panics.lock() {
            *map.entry(task).or_default() += 1;
        }
    }

    pub fn s3_call(&self, operation: &str, ok: bool, elapsed: Duration) {
        if let Ok(mut map) = self.s3.lock() {
            map.entry((operation.to_owned(), result_label(ok)))
                .or_default()
                .observe(elapsed.as_secs_f64());
        }
    }

    pub fn db_call(&self, operation: &'static str, ok: bool, elapsed: Duration) {
        if let Ok(mut map) = self.db.lock() {
            map.entry((operation, result_label(ok)))
                .or_default()
                .observe(elapsed.as_secs_f64());
        }
    }

    /// Every (method, matched route, status) answered so far.
    pub fn request_statuses(&self) -> Vec<(String, String, u16)> {
        self.requests
            .lock()
            .map(|map| {
                map.iter()
                    .flat_map(|(route, m)| {
                        m.keys().map(move |(method, status)| {
                            ((*method).to_owned(), route.clone(), *status)
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// One delivery attempt to `endpoint`: `result` is `delivered`, `retry` (it failed and is
    /// due again later), `failed` (its retry window passed) or `lease_lost` (another worker
    /// took it over; its outcome is that worker's).
    pub fn delivery(&self, endpoint: &str, result: &'static str, elapsed: Duration) {
        if let Ok(mut map) = self.deliveries.lock() {
            *map.entry((endpoint.to_owned(), result)).or_default() += 1;
        }
        if let Ok(mut map) = self.delivery_latency.lock() {
            match map.get_mut(endpoint) {
                Some(h) => h.observe(elapsed.as_secs_f64()),
                None => {
                    let mut h = Histogram::default();
                    h.observe(elapsed.as_secs_f64());
                    map.insert(endpoint.to_owned(), h);
                }
            }
        }
    }

    pub fn set_outbox(&self, gauges: OutboxGauges) {
        if let Ok(mut g) = self.outbox.lock() {
            *g = Some(gauges);
        }
    }

    fn render_events(&self, out: &mut String) {
        header(
            out,
            "upcommit_event_deliveries_total",
            "counter",
            "Event delivery attempts by endpoint and result (delivered, retry, failed, lease_lost).",
        );
        if let Ok(map) = self.deliveries.lock() {
            for ((endpoint, result), n) in map.iter() {
                let _ = writeln!(
                    out,
                    "upcommit_event_deliveries_total{{endpoint=\"{}\",result=\"{result}\"}} {n}",
                    escape(endpoint)
                );
            }
        }
        header(
            out,
            "upcommit_event_delivery_duration_seconds",
            "histogram",
            "One delivery attempt, request to answer, by endpoint.",
        );
        if let Ok(map) = self.delivery_latency.lock() {
            for (endpoint, h) in map.iter() {
                let labels = format!("endpoint=\"{}\"", escape(endpoint));
                h.render(out, "upcommit_event_delivery_duration_seconds", &labels);
            }
        }
        let gauges = self.outbox.lock().ok().and_then(|g| *g);
        header(
            out,
            "upcommit_event_outbox_depth",
            "gauge",
            "Events not positioned yet (unsequenced), deliveries to enabled endpoints pending or failed, and undelivered ones to disabled endpoints, all replicas.",
        );
        if let Some(g) = gauges {
            for (stage, n) in [
                ("unsequenced", g.unsequenced),
                ("pending", g.pending),
                ("failed", g.failed),
                ("disabled", g.disabled),
            ] {
                let _ = writeln!(out, "upcommit_event_outbox_depth{{stage=\"{stage}\"}} {n}");
            }
        }
        header(
            out,
            "upcommit_event_deliveries_discarded_total",
            "counter",
            "Deliveries the prune discarded undelivered (endpoint disabled, or retry window closed, longer than the retention ago), all replicas.",
        );
        if let Some(g) = gauges {
            let _ = writeln!(
                out,
                "upcommit_event_deliveries_discarded_total {}",
                g.discarded
            );
        }
        header(
            out,
            "upcommit_event_oldest_undelivered_age_seconds",
            "gauge",
            "Age of the oldest event not positioned yet or with a delivery not delivered (pending or failed; 0 when none).",
        );
        if let Some(g) = gauges {
            let _ = writeln!(
                out,
                "upcommit_event_oldest_undelivered_age_seconds {}",
                g.oldest_undelivered_age_secs
            );
        }
    }

    /// Appends every metric in the Prometheus text format (version 0.0.4).
    pub fn render(&self, out: &mut String) {
        header(
            out,
            "upcommit_http_request_duration_seconds",
            "histogram",
            "HTTP requests by method, matched route and status.",
        );
        if let Ok(map) = self.requests.lock() {
            for (route, by_method) in map.iter() {
                for ((method, status), h) in by_method {
                    let labels = format!(
                        "method=\"{method}\",route=\"{}\",status=\"{status}\"",
                        escape(route)
                    );
                    h.render(out, "upcommit_http_request_duration_seconds", &labels);
                }
            }
        }
        header(
            out,
            "upcommit_outcomes_total",
            "counter",
            "Presigns and commits answered, by flow and outcome (ok or the error code).",
        );
        if let Ok(map) = self.outcomes.lock() {
            for ((flow, outcome), n) in map.iter() {
                let _ = writeln!(
                    out,
                    "upcommit_outcomes_total{{flow=\"{}\",outcome=\"{}\"}} {n}",
                    flow.name(),
                    escape(outcome)
                );
            }
        }
        for (name, kind, help, value) in [
            (
                "upcommit_quota_rejections_total",
                "counter",
                "Presigns refused because the user's daily quota was reached.",
                &self.quota_rejections,
            ),
            (
                "upcommit_committed_bytes_total",
                "counter",
                "Bytes of the files committed (first commits only, not replays).",
                &self.bytes_committed,
            ),
            (
                "upcommit_committed_files_total",
                "counter",
                "File handles created by commits.",
                &self.files_committed,
            ),
        ] {
            header(out, name, kind, help);
            let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
        }
        header(
            out,
            "upcommit_task_panics_total",
            "counter",
            "Panics caught in background tasks (scheduled jobs and loops), by task; the task runs again at its next tick.",
        );
        if let Ok(map) = self.task_panics.lock() {
            for task in TASKS {
                let n = map.get(task).copied().unwrap_or(0);
                let _ = writeln!(out, "upcommit_task_panics_total{{task=\"{task}\"}} {n}");
            }
            for (task, n) in map.iter().filter(|(t, _)| !TASKS.contains(t)) {
                let _ = writeln!(out, "upcommit_task_panics_total{{task=\"{task}\"}} {n}");
            }
        }
        header(
            out,
            "upcommit_s3_request_duration_seconds",
            "histogram",
            "S3 calls by operation and result, retries included.",
        );
        if let Ok(map) = self.s3.lock() {
            for ((operation, result), h) in map.iter() {
                let labels = format!("operation=\"{}\",result=\"{result}\"", escape(operation));
                h.render(out, "upcommit_s3_request_duration_seconds", &labels);
            }
        }
        header(
            out,
            "upcommit_validation_hook_duration_seconds",
            "histogram",
            "Validation hook calls by profile and result (allow, refuse, timeout, unreachable, status, malformed).",
        );
        if let Ok(map) = self.hooks.lock() {
            for ((profile, result), h) in map.iter() {
                let labels = format!("profile=\"{}\",result=\"{result}\"", escape(profile));
                h.render(out, "upcommit_validation_hook_duration_seconds", &labels);
            }
        }
        header(
            out,
            "upcommit_validation_hook_failed_open_total",
            "counter",
            "Commits that went on without the validation hook's answer (on_error = allow).",
        );
        if let Ok(map) = self.hooks_failed_open.lock() {
            for (profile, n) in map.iter() {
                let _ = writeln!(
                    out,
                    "upcommit_validation_hook_failed_open_total{{profile=\"{}\"}} {n}",
                    escape(profile)
                );
            }
        }
        header(
            out,
            "upcommit_db_query_duration_seconds",
            "histogram",
            "Catalog (database) calls by operation and result.",
        );
        if let Ok(map) = self.db.lock() {
            for ((operation, result), h) in map.iter() {
                let labels = format!("operation=\"{operation}\",result=\"{result}\"");
                h.render(out, "upcommit_db_query_duration_seconds", &labels);
            }
        }
        header(
            out,
            "upcommit_store_capability",
            "gauge",
            "What the object store was found to do at start: 1 for each capability's standing (present, accepted: running without it, not_needed).",
        );
        if let Ok(store) = self.store.lock() {
            for (capability, standing) in store.iter() {
                let _ = writeln!(
                    out,
                    "upcommit_store_capability{{capability=\"{capability}\",standing=\"{standing}\"}} 1"
                );
            }
        }
        self.render_events(out);
        self.renders.render(out);
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn histograms_are_cumulative_and_count_every_observation() {
        let m = Metrics::new();
        for ms in [0.2, 3.0, 3.0, 700.0, 20_000.0] {
            m.request(
                "POST",
                "/v1/files",
                201,
                Duration::from_secs_f64(ms / 1000.0),
            );
        }
        let mut out = String::new();
        m.render(&mut out);
        let series = |le: &str| {
            format!(
                "upcommit_http_request_duration_seconds_bucket{{method=\"POST\",route=\"/v1/files\",status=\"201\",le=\"{le}\"}}"
            )
        };
        assert_eq!(sample(&out, &series("0.0005")), Some(1.0));
        assert_eq!(sample(&out, &series("0.005")), Some(3.0));
        assert_eq!(sample(&out, &series("1")), Some(4.0));
        assert_eq!(sample(&out, &series("10")), Some(4.0));
        assert_eq!(sample(&out, &series("+Inf")), Some(5.0));
        assert_eq!(
            sample(
                &out,
                "upcommit_http_request_duration_seconds_count{method=\"POST\",route=\"/v1/files\",status=\"201\"}"
            ),
            Some(5.0)
        );
    }

    #[test]
    fn quota_rejections_are_counted_from_outcomes() {
        let m = Metrics::new();
        m.outcome(Flow::Presign, "ok");
        m.outcome(Flow::Presign, "quota_exceeded");
        m.outcome(Flow::Commit, "object_not_uploaded");
        m.committed(42);
        let mut out = String::new();
        m.render(&mut out);
        assert_eq!(sample(&out, "upcommit_quota_rejections_total"), Some(1.0));
        assert_eq!(
            sample(
                &out,
                "upcommit_outcomes_total{flow=\"commit\",outcome=\"object_not_uploaded\"}"
            ),
            Some(1.0)
        );
        assert_eq!(sample(&out, "upcommit_committed_bytes_total"), Some(42.0));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
