//! The state every handler shares: cheap to clone, `Arc`s inside. Beside the settings and the
//! adapters it holds the server's live caches, each the latest answer of one background read:
//! the bucket's checks ([`bucket_watch`]), the last job runs ([`job_gauges`]) and the readiness
//! probe ([`readiness`]); and the guard every background task runs under ([`supervise`]). They sit here, below the services, because they read only the catalog
//! and the store; the services use the state and never the other way round.

use std::sync::{Arc, Mutex};

use crate::auth::Verifier;
use crate::catalog::Catalog;
use crate::config::Settings;
use crate::domain::capabilities::Verdict;
use crate::domain::rate::RateLimiter;
use crate::domain::reserved::ReservedKeys;
use crate::metrics::Metrics;
use crate::storage::ObjectStore;

pub mod bucket_watch;
pub mod dry_runs;
pub mod job_gauges;
pub mod readiness;
pub mod renders;
pub mod supervise;

use bucket_watch::BucketWatch;
use dry_runs::DryRuns;
use job_gauges::JobGauges;
use readiness::Readiness;

#[derive(Clone)]
pub struct AppState {
    pub settings: Arc<Settings>,
    pub catalog: Arc<dyn Catalog>,
    pub store: Arc<dyn ObjectStore>,
    /// The latest check of the live bucket's configuration.
    pub bucket_watch: Arc<BucketWatch>,
    /// Presigns per user on this replica.
    pub presign_limiter: Arc<Mutex<RateLimiter>>,
    /// This server's counters and histograms (`GET /metrics`).
    pub metrics: Arc<Metrics>,
    /// The latest database and bucket probe, shared by every `/readyz`.
    pub readiness: Arc<Readiness>,
    /// The last job runs `/metrics` shows, refreshed in the background.
    pub job_gauges: Arc<JobGauges>,
    /// Checks bearer tokens; holds the identity provider's key cache.
    pub verifier: Arc<Verifier>,
    /// The process's one outgoing HTTP client (`crate::outbound`): the validation hook's.
    pub http: reqwest::Client,
    /// What the store was found to do at start, and the gaps accepted
    /// (`domain::capabilities`). Services ask it before relying on a capability.
    pub store_verdict: Arc<Verdict>,
    /// The admin API's dry run in flight on this replica (one at a time).
    pub dry_runs: Arc<DryRuns>,
    /// This replica's renders of image renditions: a bounded number at once, one per key.
    pub renders: Arc<renders::RenderGate>,
    /// This replica's render workers (issue 46): every decode in a process of its own.
    pub render_workers: Arc<crate::jail::Pool>,
}

/// The render workers of a replica with these settings: as many kept warm as it has render
/// slots, each limited to the renders' memory budget plus the worker's margin, at nice 10.
pub fn render_workers(settings: &Settings, metrics: Arc<Metrics>) -> Arc<crate::jail::Pool> {
    let program = settings
        .uploads
        .render_worker_bin
        .clone()
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| "upcommit".into());
    let budget = settings.uploads.render_memory_mib * 1024 * 1024;
    crate::jail::Pool::new(
        crate::jail::PoolConfig {
            program,
            warm: render_limit(settings),
            ceiling: budget + crate::jail::pool::margin(),
            renders_per_worker: settings.uploads.render_worker_renders,
            nice: RENDER_NICE,
            accept_unfiltered: settings.uploads.render_accept_unfiltered,
            env: vec![
                (
                    "TJ_OPTIMIZE".to_owned(),
                    std::env::var("TJ_OPTIMIZE").unwrap_or_else(|_| "1".to_owned()),
                ),
                ("GLIBC_TUNABLES".to_owned(), WORKER_MALLOC.to_owned()),
            ],
        },
        Arc::new(RenderEvents(metrics)),
    )
}

/// The render pool's events, counted in `/metrics`.
struct RenderEvents(Arc<Metrics>);

impl crate::jail::PoolEvents for RenderEvents {
    fn worker_started(&self) {
        self.0.render_worker_started();
    }
    fn worker_died(&self, death: crate::jail::Death) {
        self.0.render_worker_died(death);
    }
    fn worker_killed_at_limit(&self) {
        self.0.render_worker_killed_at_limit();
    }
}

/// glibc's allocator in a render worker: freed memory stays in the heap (no trim below 128 MiB,
/// no `mmap` below 32 MiB), so a warm worker's next render reuses its pages rather than faulting
/// fresh ones in: about 10 % of a render on sharp's benchmark task (BENCHMARKS.md). A worker is
/// replaced after a render that reserved more than 64 MiB, so what an idle one keeps is bounded.
pub const WORKER_MALLOC: &str =
    "glibc.malloc.trim_threshold=134217728:glibc.malloc.mmap_threshold=33554432";

/// The render workers' nice value: the CPU goes to presigns and commits first (issue 46).
pub const RENDER_NICE: i32 = 10;

/// Renders at once on a replica: `UPCOMMIT_RENDER_CONCURRENCY`, or one per core (a render
/// keeps one core busy).
pub fn render_limit(settings: &Settings) -> usize {
    match settings.uploads.render_concurrency {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => usize::try_from(n).unwrap_or(1),
    }
}

impl AppState {
    /// The state of an operator command that runs the services without serving (and of the
    /// sweep's stale-commit recovery): no bucket watch, rate limit or background job, metrics
    /// kept in memory and dropped, and an outgoing HTTP client of its own, built once per run.
    pub fn for_tool(
        settings: Settings,
        catalog: Arc<dyn Catalog>,
        store: Arc<dyn ObjectStore>,
    ) -> Self {
        let presign_limiter = Arc::new(Mutex::new(RateLimiter::new(
            settings.uploads.presign_rate_per_sec,
            settings.uploads.presign_burst,
        )));
        // Building it fails only when no TLS backend can start; the default client then
        // fails the same way, loudly, at its first use.
        let http = crate::outbound::client().unwrap_or_default();
        let render_slots = render_limit(&settings);
        let render_memory = settings.uploads.render_memory_mib * 1024 * 1024;
        let metrics = Arc::new(Metrics::new());
        let render_workers = render_workers(&settings, metrics.clone());
        Self {
            render_workers,
            verifier: Arc::new(Verifier::new(&settings.auth, http.clone())),
            http,
            settings: Arc::new(settings),
            catalog,
            store,
            bucket_watch: Arc::new(BucketWatch::new()),
            presign_limiter,
            metrics,
            readiness: Arc::new(Readiness::default()),
            job_gauges: Arc::new(JobGauges::new()),
            store_verdict: Arc::new(Verdict::unprobed()),
            dry_runs: Arc::new(DryRuns::new()),
            renders: Arc::new(renders::RenderGate::new(render_slots, render_memory)),
        }
    }

    /// The key space custom final keys may not take: the compiled rules' expiring prefixes,
    /// every profile's paired layout and, once the bucket watch has read it, every prefix the
    /// live lifecycle document expires.
    pub fn reserved_keys(&self) -> ReservedKeys {
        let reserved = self.settings.reserved_keys();
        match self.bucket_watch.latest() {
            Some(report) => match &report.lifecycle {
                Some(rules) => reserved.with_rules(rules),
                None => reserved,
            },
            None => reserved,
        }
    }
}
