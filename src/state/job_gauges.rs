//! The last runs of the sweep, reconcile, hygiene and prune (any replica's, dry runs left out),
//! read from the catalog by a
//! background task every [`EVERY`] and kept in memory, so `GET /metrics` — which needs no token —
//! answers from memory and a flood of scrapes never reaches the database.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::catalog::{Catalog, CatalogError};
use crate::domain::jobs::{self, JobRun};

/// How often the job gauges are read from the catalog.
pub const EVERY: Duration = Duration::from_secs(5);

/// The latest runs the gauges show.
#[derive(Debug, Clone, Default)]
pub struct LastRuns {
    pub sweep: Option<JobRun>,
    /// The last reconcile run, whatever its end: when it ran and whether it succeeded.
    pub reconcile: Option<JobRun>,
    /// The last reconcile run that finished: its findings (a failed run's counts are partial,
    /// and a missing object it did not reach again must not clear the alarm).
    pub reconcile_finished: Option<JobRun>,
    pub hygiene: Option<JobRun>,
    pub prune: Option<JobRun>,
}

#[derive(Debug, Default)]
pub struct JobGauges {
    latest: RwLock<Arc<LastRuns>>,
}

impl JobGauges {
    pub fn new() -> Self {
        Self::default()
    }

    /// What the last refresh read (empty before the first).
    pub fn latest(&self) -> Arc<LastRuns> {
        match self.latest.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reads the runs once; on an error the previous values stay.
    pub async fn refresh(&self, catalog: &dyn Catalog) -> Result<(), CatalogError> {
        let runs = Arc::new(LastRuns {
            sweep: catalog.last_run(jobs::SWEEP).await?,
            reconcile: catalog.last_run(jobs::RECONCILE).await?,
            reconcile_finished: catalog.last_finished_run(jobs::RECONCILE).await?,
            hygiene: catalog.last_run(jobs::HYGIENE).await?,
            prune: catalog.last_run(jobs::PRUNE).await?,
        });
        match self.latest.write() {
            Ok(mut guard) => *guard = runs,
            Err(poisoned) => *poisoned.into_inner() = runs,
        }
        Ok(())
    }

    /// Refreshes now, then every `every`, until the task is aborted.
    pub fn spawn(
        self: Arc<Self>,
        catalog: Arc<dyn Catalog>,
        every: Duration,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let refresh = self.refresh(catalog.as_ref());
                if let Some(Err(e)) =
                    crate::state::supervise::catching("job_gauges", Some(&metrics), refresh).await
                {
                    tracing::warn!(error = %e, "cannot read the last job runs for /metrics");
                }
            }
        })
    }
}
