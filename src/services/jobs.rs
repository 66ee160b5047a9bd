//! Running a maintenance job safely across replicas: one lease row per job in the catalog
//! (taken with a conditional upsert, renewed while the job runs, released at the end), a run
//! record with a checkpoint, and resumption of a run that a crash left unfinished.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::task::JoinHandle;

use crate::catalog::{Catalog, CatalogError};
use crate::domain::jobs::{JobItem, JobRun, RunState};
use crate::domain::records;

/// A job run in progress, holding its lease (dry runs hold none).
pub struct JobHandle {
    pub run: JobRun,
    /// The run continues one that a crash left unfinished.
    pub resumed: bool,
    holder: Option<String>,
    renew: Option<JoinHandle<()>>,
    lost: Arc<AtomicBool>,
    /// For recording the run failed if a panic drops the handle ([`Drop`]).
    catalog: Arc<dyn Catalog>,
    /// The summary as last written, kept in a panicked run's record.
    summary: Option<String>,
    /// Its end (finished, failed, refused) or its suspension is recorded: a panic after that
    /// changes nothing of the run's record.
    settled: bool,
}

// A `Begin` lives for the one `match` after `begin`; boxing the handle would only add an
// allocation per run.
#[allow(clippy::large_enum_variant)]
pub enum Begin {
    Started(JobHandle),
    /// Another replica holds the job's lease.
    Busy,
}

/// Starts (or resumes) a run of `job`. Real runs take the job's lease first; dry runs change
/// nothing and run beside anything.
pub async fn begin(
    catalog: &Arc<dyn Catalog>,
    job: &str,
    dry_run: bool,
    lease_secs: u64,
) -> Result<Begin, CatalogError> {
    let now = records::now();
    if dry_run {
        let run = JobRun::start(job, true, now);
        catalog.insert_run(&run).await?;
        return Ok(Begin::Started(JobHandle {
            run,
            resumed: false,
            holder: None,
            renew: None,
            lost: Arc::new(AtomicBool::new(false)),
            catalog: catalog.clone(),
            summary: None,
            settled: false,
        }));
    }
    let holder = uuid::Uuid::new_v4().simple().to_string();
    if !catalog.acquire_job_lock(job, &holder, lease_secs).await? {
        return Ok(Begin::Busy);
    }
    // Until the handle holds it, an error or a panic below gives the lease back.
    let held = HeldLease {
        catalog: catalog.clone(),
        job: job.to_owned(),
        holder: Some(holder.clone()),
    };
    let (run, resumed) = match catalog.unfinished_run(job).await? {
        Some(run) => {
            tracing::warn!(job, run.id = %run.id, checkpoint = run.checkpoint.as_deref().unwrap_or(""), "resuming a run that did not finish");
            (run, true)
        }
        None => {
            let run = JobRun::start(job, false, now);
            catalog.insert_run(&run).await?;
            (run, false)
        }
    };
    let lost = Arc::new(AtomicBool::new(false));
    let renew = {
        let (catalog, job, holder, lost) = (
            catalog.clone(),
            job.to_owned(),
            holder.clone(),
            lost.clone(),
        );
        tokio::spawn(async move {
            let every = Duration::from_secs((lease_secs / 3).max(1));
            loop {
                tokio::time::sleep(every).await;
                match catalog.acquire_job_lock(&job, &holder, lease_secs).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::error!(job, "lost the job's lease to another replica");
                        lost.store(true, Ordering::SeqCst);
                        return;
                    }
                    Err(e) => tracing::warn!(job, error = %e, "could not renew the job's lease"),
                }
            }
        })
    };
    let summary = run.summary.clone();
    held.disarm();
    Ok(Begin::Started(JobHandle {
        run,
        resumed,
        holder: Some(holder),
        renew: Some(renew),
        lost,
        catalog: catalog.clone(),
        summary,
        settled: false,
    }))
}

/// A lease taken whose run has no handle yet.
struct HeldLease {
    catalog: Arc<dyn Catalog>,
    job: String,
    holder: Option<String>,
}

impl HeldLease {
    fn disarm(mut self) {
        self.holder = None;
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        release_later(&self.catalog, &self.job, self.holder.take());
    }
}

/// Gives `holder`'s lease on `job` back from a task (a drop cannot wait); if the database is
/// unreachable, the lease runs out instead.
fn release_later(catalog: &Arc<dyn Catalog>, job: &str, holder: Option<String>) {
    let (Some(holder), Ok(rt)) = (holder, tokio::runtime::Handle::try_current()) else {
        return;
    };
    let (catalog, job) = (catalog.clone(), job.to_owned());
    rt.spawn(async move {
        if let Err(e) = catalog.release_job_lock(&job, &holder).await {
            tracing::warn!(job, error = %e, "could not give the job's lease back; it runs out");
        }
    });
}

impl JobHandle {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run.id
    }

    /// The lease went to another replica: stop at the next checkpoint.
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Records items and progress; a crash after this resumes from `checkpoint`.
    pub async fn checkpoint<S: Serialize>(
        &mut self,
        catalog: &Arc<dyn Catalog>,
        items: &[JobItem],
        checkpoint: &str,
        summary: &S,
    ) -> Result<(), CatalogError> {
        if !items.is_empty() {
            catalog.add_job_items(&self.run.id, items).await?;
        }
        let text = serde_json::to_string(summary).unwrap_or_default();
        catalog
            .update_run(
                &self.run.id,
                RunState::Running,
                Some(checkpoint),
                &text,
                records::now(),
            )
            .await?;
        self.run.checkpoint = Some(checkpoint.to_owned());
        self.summary = Some(text);
        Ok(())
    }

    /// Records the end state and summary and gives the lease back.
    pub async fn finish<S: Serialize>(
        mut self,
        catalog: &Arc<dyn Catalog>,
        state: RunState,
        items: &[JobItem],
        summary: &S,
    ) -> Result<JobRun, CatalogError> {
        if let Some(task) = self.renew.take() {
            task.abort();
        }
        if !items.is_empty() {
            catalog.add_job_items(&self.run.id, items).await?;
        }
        let text = serde_json::to_string(summary).unwrap_or_default();
        let now = records::now();
        catalog
            .update_run(
                &self.run.id,
                state,
                self.run.checkpoint.as_deref(),
                &text,
                now,
            )
            .await?;
        self.settled = true;
        if let Some(holder) = self.holder.clone() {
            catalog.release_job_lock(&self.run.job, &holder).await?;
            self.holder = None;
        }
        self.run.state = state;
        self.run.summary = Some(text);
        self.run.finished_at = Some(now);
        Ok(self.run.clone())
    }
}

impl JobHandle {
    /// Stops a run at its last checkpoint, left `running` with the summary so far so that the
    /// next run resumes it, and gives the lease back at once (Ctrl-C, SIGTERM): a rerun need
    /// not wait for the lease to run out. Call it only right after a checkpoint.
    pub async fn suspend<S: Serialize>(
        mut self,
        catalog: &Arc<dyn Catalog>,
        summary: &S,
    ) -> Result<JobRun, CatalogError> {
        if let Some(task) = self.renew.take() {
            task.abort();
        }
        let text = serde_json::to_string(summary).unwrap_or_default();
        catalog
            .update_run(
                &self.run.id,
                RunState::Running,
                self.run.checkpoint.as_deref(),
                &text,
                records::now(),
            )
            .await?;
        self.settled = true;
        if let Some(holder) = self.holder.clone() {
            catalog.release_job_lock(&self.run.job, &holder).await?;
            self.holder = None;
        }
        self.run.summary = Some(text);
        Ok(self.run.clone())
    }
}

impl Drop for JobHandle {
    /// Dropped unsettled by an error (`?`) or a cancellation, the run stays `running`, its
    /// lease is given back, and the next run resumes it from its checkpoint (a crash's path,
    /// where the lease runs out instead).
    /// Dropped by a panic, it is recorded `failed` with the panic's message and its lease
    /// given back (`state::supervise`): the code that panicked would panic again where it
    /// resumed.
    fn drop(&mut self) {
        if let Some(task) = self.renew.take() {
            task.abort();
        }
        if !self.settled && std::thread::panicking() {
            crate::state::supervise::Abandoned {
                catalog: self.catalog.clone(),
                job: self.run.job.clone(),
                run_id: self.run.id.clone(),
                checkpoint: self.run.checkpoint.clone(),
                summary: self.summary.take(),
                holder: self.holder.take(),
            }
            .report();
            return;
        }
        // Unsettled by an error or a cancellation (the run stays `running` for the next to
        // resume), or settled but the release failed: the lease goes back now, or runs out.
        release_later(&self.catalog, &self.run.job, self.holder.take());
    }
}
