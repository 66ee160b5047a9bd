//! `Application`: what both `main` and the tests start. It binds the listener (port 0 allowed),
//! reports the real port, and serves until SIGTERM or Ctrl-C, finishing in-flight requests.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use crate::catalog::{self, Catalog, ObservedCatalog};
use crate::config::Settings;
use crate::domain::jobs::RunState;
use crate::metrics::Metrics;
use crate::state::bucket_watch::BucketWatch;
use crate::state::job_gauges::{self, JobGauges};
use crate::state::readiness::Readiness;
use crate::state::supervise::catching;
use crate::state::AppState;
use crate::storage::aws::AwsContext;
use crate::storage::{CopyLimits, ObjectStore, S3Store};

/// How often the sequencer looks for committed events.
const SEQUENCER_EVERY: Duration = Duration::from_millis(200);
/// How long a graceful stop waits for the catalog to close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How long a stopping server waits for a dry run the API started.
const DRY_RUN_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Catalog(#[from] crate::catalog::CatalogError),
    #[error(transparent)]
    Store(#[from] crate::storage::StoreError),
    /// The store lacks capabilities promises need, and the gaps were not accepted.
    #[error("{0}")]
    StoreGaps(String),
    /// No outgoing HTTP client (no TLS backend) or no AWS credentials.
    #[error("{0}")]
    Outbound(String),
    /// No render worker started, or none could be filtered and that was not accepted.
    #[error("render workers: {0}")]
    RenderWorkers(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

pub struct Application {
    listener: TcpListener,
    port: u16,
    router: axum::Router,
    state: AppState,
    /// The periodic bucket check; stopped with the server.
    watch_task: Option<JoinHandle<()>>,
    /// The periodic tmp sweep (one replica at a time, by the job's lease); stopped with the server.
    sweep_task: Option<JoinHandle<()>>,
    /// The periodic unlinked detection, archival and deletion.
    hygiene_task: Option<JoinHandle<()>>,
    /// Reads the last job runs for `/metrics`.
    gauges_task: JoinHandle<()>,
    /// The identity provider's scheduled JWKS refresh, when one is configured.
    jwks_task: Option<JoinHandle<()>>,
    /// Positions committed events and fans them out to deliveries.
    sequencer_task: JoinHandle<()>,
    /// Delivers them: one loop per enabled endpoint, and the outbox gauges.
    delivery_task: JoinHandle<()>,
}

impl Application {
    /// Connects the catalog (running migrations) and the object store named by the settings.
    pub async fn build(settings: Settings) -> Result<Self, StartupError> {
        let catalog = catalog::connect(
            settings.database.url.expose(),
            settings.database.max_connections,
        )
        .await?;
        let metrics = Arc::new(Metrics::new());
        let aws = Self::outbound(&settings).await?;
        let store = S3Store::connect_in(&aws, &settings.s3, Some(metrics.clone()))?
            .with_copy_limits(CopyLimits::from_settings(&settings.uploads));
        let store: Arc<dyn ObjectStore> = Arc::new(store);
        Self::build_with(settings, catalog, store, metrics, aws).await
    }

    /// What the process talks out with: the one HTTP client (`crate::outbound`) and the AWS
    /// context around it (the SDK's configuration and the one credentials cache), shared by
    /// the store, the SQS sender, the webhooks, the validation hook and the JWKS fetches.
    pub async fn outbound(settings: &Settings) -> Result<AwsContext, StartupError> {
        let http = crate::outbound::client()
            .map_err(|e| StartupError::Outbound(format!("no HTTP client: {e}")))?;
        AwsContext::load(&settings.s3, http)
            .await
            .map_err(|e| StartupError::Outbound(e.to_string()))
    }

    /// Builds on given parts: tests pass a fault-injecting wrapper around the real store here.
    /// The catalog is wrapped to time its calls into `metrics`; the store times itself when it
    /// was connected with metrics ([`S3Store::connect_in`]). `aws` is the store's context
    /// ([`Self::outbound`]), which the other outgoing callers share.
    pub async fn build_with(
        settings: Settings,
        catalog: Arc<dyn Catalog>,
        store: Arc<dyn ObjectStore>,
        metrics: Arc<Metrics>,
        aws: AwsContext,
    ) -> Result<Self, StartupError> {
        let catalog: Arc<dyn Catalog> = Arc::new(ObservedCatalog::new(catalog, metrics.clone()));
        let store_verdict = Arc::new(judge_store(&settings, store.as_ref()).await?);
        metrics.set_store_verdict(&store_verdict);
        metrics.validation_hooks_configured(
            settings
                .uploads
                .profiles
                .iter()
                .filter(|p| p.validation_hook.is_some())
                .map(|p| p.name.as_str()),
        );
        let listener = crate::http::bind(&settings.listen)
            .await
            .map_err(|source| StartupError::Bind {
                addr: settings.listen.clone(),
                source,
            })?;
        let port = listener
            .local_addr()
            .map_err(|source| StartupError::Bind {
                addr: settings.listen.clone(),
                source,
            })?
            .port();
        let bucket_watch = Arc::new(BucketWatch::with_outbox(catalog.clone()));
        let watch_task = match settings.bucket_check.interval_secs {
            0 => None,
            secs => Some(bucket_watch.clone().spawn(
                store.clone(),
                settings.bucket_expectations_for(&store_verdict),
                Duration::from_secs(secs),
                metrics.clone(),
            )),
        };
        let sweep_task = match settings.jobs.sweep_interval_secs {
            0 => None,
            secs => Some(spawn_sweeper(
                catalog.clone(),
                store.clone(),
                Arc::new(settings.clone()),
                Duration::from_secs(secs),
                metrics.clone(),
            )),
        };
        // Hygiene deletes files in the end: say which profiles' files it may act on.
        let hygiene_profiles = settings.hygiene_profiles();
        if hygiene_profiles.is_empty() {
            tracing::info!(
                "hygiene acts on no profile: none tracks links (tracks_links, UPCOMMIT_TRACKS_LINKS)"
            );
        } else {
            tracing::warn!(
                profiles = %hygiene_profiles.join(","),
                "hygiene may unlink, archive and delete the files of these profiles (they track links)"
            );
        }
        let hygiene_task = match settings.jobs.hygiene_interval_secs {
            0 => None,
            secs => Some(spawn_hygiene(
                catalog.clone(),
                store.clone(),
                Arc::new(settings.clone()),
                Duration::from_secs(secs),
                metrics.clone(),
            )),
        };
        let presign_limiter = Arc::new(std::sync::Mutex::new(
            crate::domain::rate::RateLimiter::new(
                settings.uploads.presign_rate_per_sec,
                settings.uploads.presign_burst,
            ),
        ));
        let job_gauges = Arc::new(JobGauges::new());
        let gauges_task =
            job_gauges
                .clone()
                .spawn(catalog.clone(), job_gauges::EVERY, metrics.clone());
        let http = aws.http().clone();
        let verifier = Arc::new(crate::auth::Verifier::new(&settings.auth, http.clone()));
        let jwks_task = verifier.spawn_refresh();
        // The settings' endpoints are written before any event is sequenced by this replica.
        crate::services::events::delivery::sync_endpoints(&catalog, &settings.events).await?;
        let sqs = if settings.events.queues.is_empty() {
            None
        } else {
            Some(Arc::new(crate::storage::sqs::SqsSender::new(
                &aws,
                settings.s3.endpoint.as_deref(),
            )))
        };
        let sequenced = Arc::new(crate::services::events::sequencer::Sequenced::new());
        let sequencer_task = crate::services::events::sequencer::spawn(
            catalog.clone(),
            Duration::from_secs(settings.events.retry_window_secs),
            SEQUENCER_EVERY,
            sequenced.clone(),
            metrics.clone(),
        );
        let delivery_task = crate::services::events::delivery::spawn(
            catalog.clone(),
            crate::services::events::delivery::DeliveryConfig::from_settings(
                &settings.events,
                sqs,
                http.clone(),
            ),
            sequenced.clone(),
            metrics.clone(),
        );
        let render_limit = crate::state::render_limit(&settings);
        let render_memory = settings.uploads.render_memory_mib * 1024 * 1024;
        // One worker now: what its kernel allows is said at start, and a replica that cannot
        // filter its workers refuses to serve unless told to accept it (issue 46).
        let render_workers = crate::state::render_workers(&settings, metrics.clone());
        match render_workers.probe().await {
            Ok(hello) if hello.jailed => {
                tracing::info!("render workers start under their seccomp filter and memory limit")
            }
            Ok(hello) => tracing::warn!(
                why = hello.why.as_deref().unwrap_or(""),
                "render workers run WITHOUT their seccomp filter (UPCOMMIT_RENDER_ACCEPT_GAPS=seccomp)"
            ),
            Err(why) => return Err(StartupError::RenderWorkers(why)),
        }
        let state = AppState {
            render_workers,
            verifier,
            http,
            settings: Arc::new(settings),
            catalog,
            store,
            bucket_watch,
            presign_limiter,
            metrics,
            readiness: Arc::new(Readiness::default()),
            job_gauges,
            store_verdict,
            dry_runs: Arc::new(crate::state::dry_runs::DryRuns::new()),
            renders: Arc::new(crate::state::renders::RenderGate::new(
                render_limit,
                render_memory,
            )),
        };
        let router = crate::http::router(state.clone());
        Ok(Self {
            listener,
            port,
            router,
            state,
            watch_task,
            sweep_task,
            hygiene_task,
            gauges_task,
            jwks_task,
            sequencer_task,
            delivery_task,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        tracing::info!(port = self.port, "listening");
        if self.state.settings.demo.mint_tokens {
            tracing::warn!(
                "UPCOMMIT_DEMO_MINT_TOKENS is on: anyone who reaches /demo/token gets a token; dev machines only"
            );
        }
        let served = crate::http::serve(
            self.listener,
            self.router,
            &self.state.settings.http,
            shutdown_signal(),
        )
        .await;
        for task in [
            self.watch_task,
            self.sweep_task,
            self.hygiene_task,
            self.jwks_task,
        ]
        .into_iter()
        .flatten()
        {
            task.abort();
        }
        self.gauges_task.abort();
        self.sequencer_task.abort();
        self.delivery_task.abort();
        // A dry run started through the API: a few seconds to end, else stopped and recorded
        // as failed (never left `running`: a dry run is never resumed).
        if let Some(id) = self.state.dry_runs.stop(DRY_RUN_WAIT).await {
            let summary =
                r#"{"dry_run":true,"error":"the server stopped before the dry run ended"}"#;
            match self
                .state
                .catalog
                .update_run(
                    &id,
                    RunState::Failed,
                    None,
                    summary,
                    crate::domain::records::now(),
                )
                .await
            {
                Ok(()) => {
                    tracing::warn!(run.id = %id, "dry run stopped by the shutdown; recorded as failed")
                }
                Err(e) => {
                    tracing::warn!(run.id = %id, error = %e, "dry run stopped by the shutdown; could not record it")
                }
            }
        }
        // Every request has been answered: close the catalog, so that SQLite merges its WAL into
        // the database file and a copy of that one file is a whole backup. A connection still
        // held (an aborted task's, not yet dropped) is waited for a few seconds at most.
        let closed = tokio::time::timeout(CLOSE_WAIT, self.state.catalog.close())
            .await
            .is_ok();
        if !closed {
            tracing::warn!("the catalog did not close within {CLOSE_WAIT:?}");
        } else if served.is_ok() {
            // The last line of a graceful stop: a supervisor's log shows the drain finished.
            tracing::info!("stopped: every in-flight request answered, catalog closed");
        }
        served
    }
}

/// Runs `job` every `every`, the first time one interval after start, until aborted. Each job
/// inside runs under `supervise::catching`, so a panic ends that run, never the schedule.
fn spawn_every<F, Fut>(every: Duration, job: F) -> JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            job().await;
        }
    })
}

/// The tmp sweep, then the prune of upload rows past their retention; another replica
/// holding a job's lease makes that job a no-op. A sweep that panicked does not keep the prune
/// from running.
fn spawn_sweeper(
    catalog: Arc<dyn Catalog>,
    store: Arc<dyn ObjectStore>,
    settings: Arc<Settings>,
    every: Duration,
    metrics: Arc<Metrics>,
) -> JoinHandle<()> {
    spawn_every(every, move || {
        let (catalog, store, settings, metrics) = (
            catalog.clone(),
            store.clone(),
            settings.clone(),
            metrics.clone(),
        );
        async move {
            let sweep = async {
                match crate::services::sweep::sweep(&catalog, &store, &settings, false).await {
                    Ok(crate::services::sweep::SweepOutcome::Busy) => {
                        tracing::debug!("another replica is sweeping")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = %e, "sweep failed"),
                }
            };
            catching("sweep", Some(&metrics), sweep)
                .instrument(crate::telemetry::spans::job("sweep"))
                .await;
            // Upload rows past their retention go after the sweep, which clears what they
            // wait for (tmp objects, open multipart sessions).
            let prune = async {
                match crate::services::prune::prune(&catalog, &settings, false).await {
                    Ok(crate::services::prune::PruneOutcome::Busy) => {
                        tracing::debug!("another replica is pruning")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = %e, "prune failed"),
                }
            };
            catching("prune", Some(&metrics), prune)
                .instrument(crate::telemetry::spans::job("prune"))
                .await;
        }
    })
}

/// Unlinked detection, archival and deletion.
fn spawn_hygiene(
    catalog: Arc<dyn Catalog>,
    store: Arc<dyn ObjectStore>,
    settings: Arc<Settings>,
    every: Duration,
    metrics: Arc<Metrics>,
) -> JoinHandle<()> {
    spawn_every(every, move || {
        let (catalog, store, settings, metrics) = (
            catalog.clone(),
            store.clone(),
            settings.clone(),
            metrics.clone(),
        );
        let span = crate::telemetry::spans::job("hygiene");
        let run = async move {
            // The database's clock: the one every replica shares.
            let now = match catalog.clock().await {
                Ok(now) => now,
                Err(e) => {
                    tracing::error!(error = %e, "unlinked-data run: cannot read the database's clock");
                    return;
                }
            };
            if let Err(e) =
                crate::services::hygiene::run(&catalog, &store, &settings, false, now).await
            {
                tracing::error!(error = %e, "unlinked-data run failed");
            }
        };
        async move {
            catching("hygiene", Some(&metrics), run)
                .instrument(span)
                .await;
        }
    })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}

/// Probes the store and judges it for these settings (`doctor` shows every line of it).
pub async fn store_verdict(
    settings: &Settings,
    store: &dyn ObjectStore,
) -> crate::domain::capabilities::Verdict {
    use crate::domain::capabilities::{judge, Needs};
    let findings = store.probe(&settings.jobs.archive_storage_class).await;
    let needs = Needs {
        archival: !settings.hygiene_profiles().is_empty(),
    };
    judge(&findings, needs, &settings.s3.accept_gaps)
}

/// [`store_verdict`], as `serve` takes it: the refusal when a capability a promise needs is
/// missing and not accepted; otherwise every accepted gap logged, once, at start.
pub async fn judge_store(
    settings: &Settings,
    store: &dyn ObjectStore,
) -> Result<crate::domain::capabilities::Verdict, StartupError> {
    use crate::domain::capabilities::Standing;
    let verdict = store_verdict(settings, store).await;
    if let Some(refusal) = verdict.refusal() {
        return Err(StartupError::StoreGaps(refusal));
    }
    for line in &verdict.lines {
        match line.standing {
            Standing::Accepted => tracing::warn!(
                capability = line.capability.name(),
                finding = %line.finding,
                promise = line.promise,
                without = line.without.unwrap_or(""),
                "running without a store capability: the gap is accepted (UPCOMMIT_ACCEPT_STORE_GAPS)"
            ),
            Standing::NotNeeded => tracing::info!(
                capability = line.capability.name(),
                finding = %line.finding,
                "the store lacks a capability nothing configured here relies on"
            ),
            Standing::Present | Standing::Refused => {}
        }
    }
    Ok(verdict)
}
