//! The sequencer: every replica runs one; the catalog lets one at a time work (an advisory lock
//! on PostgreSQL, the write lock on SQLite). It positions the events whose transactions have
//! committed and creates their deliveries; delivery workers wait on [`Sequenced`] to hear of new
//! ones without polling the database every few milliseconds.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::catalog::{Catalog, CatalogError};

/// Events positioned per transaction at most.
pub const BATCH: i64 = 500;

/// Woken whenever this replica's sequencer positioned events (deliveries may be due).
#[derive(Debug, Default)]
pub struct Sequenced(Notify);

impl Sequenced {
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits for the next batch, or `at_most` (events another replica sequenced are found by
    /// that poll).
    pub async fn wait(&self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, self.0.notified()).await;
    }

    pub fn wake(&self) {
        self.0.notify_waiters();
    }
}

/// Positions every committed event waiting now, a batch per transaction; how many.
pub async fn run_once(
    catalog: &Arc<dyn Catalog>,
    retry_window: Duration,
    sequenced: &Sequenced,
) -> Result<u64, CatalogError> {
    let window = i64::try_from(retry_window.as_secs()).unwrap_or(i64::MAX / 2);
    let mut total = 0;
    loop {
        let n = catalog.sequence_events(BATCH, window).await?;
        total += n;
        if n > 0 {
            sequenced.wake();
        }
        if n < u64::try_from(BATCH).unwrap_or(0) {
            return Ok(total);
        }
    }
}

/// Sequences every `every` until aborted.
pub fn spawn(
    catalog: Arc<dyn Catalog>,
    retry_window: Duration,
    every: Duration,
    sequenced: Arc<Sequenced>,
    metrics: Arc<crate::metrics::Metrics>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        let mut panicking = false;
        loop {
            ticks.tick().await;
            let pass = run_once(&catalog, retry_window, &sequenced);
            // A panicking pass changed nothing it did not commit: the next one starts over.
            // Five passes a second: the first panic of a run of them is logged, each counted.
            let caught = crate::state::supervise::catching_logged(
                "event_sequencer",
                Some(&metrics),
                !panicking,
                pass,
            )
            .await;
            panicking = caught.is_none();
            let Some(outcome) = caught else {
                continue;
            };
            match outcome {
                Ok(_) => {
                    if failing {
                        tracing::info!("event sequencing works again");
                    }
                    failing = false;
                }
                // Nothing is lost: the events stay in the outbox until a run succeeds.
                Err(e) if !failing => {
                    tracing::warn!(error = %e, "could not sequence events; retrying");
                    failing = true;
                }
                Err(_) => {}
            }
        }
    })
}
