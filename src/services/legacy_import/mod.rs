//! `upcommit legacy import`: records the objects of the layout that predates `tmp/` as uploads
//! of their owners and commits them in place, through the same commit as `POST /v1/files`.
//!
//! The keys come from a listing of each legacy prefix (or an S3 Inventory), in key order. Each
//! key is judged by `domain::legacy::decide` (only unrecorded keys under a legacy prefix, with an
//! owner the pattern or CSV gives, are imported); an imported key's object is checked against
//! its profile as a presign would be (type, size), recorded without a quota charge
//! (`Catalog::import_upload`), then committed (type sniff, size, stored checksum), unless
//! `--no-commit`. Nothing is ever copied, moved or deleted: a refused object stays where it is.
//!
//! A real run holds the `legacy_import` job lease (a second run is refused) and checkpoints the
//! last judged key, with the totals so far, every [`CHECKPOINT_EVERY`] keys; a run that stopped
//! is resumed after its checkpoint only when every option that decides an outcome (source,
//! prefixes, owners, profile, `--no-commit`) is the same, and what it recorded but did not
//! commit is committed then. Keys must arrive in byte order, each once: otherwise the run is
//! refused before it judges a key out of order. Ctrl-C or SIGTERM ([`ImportOptions::stop`])
//! ends a real run at its next checkpoint and gives the lease back. Dry runs (the default) read
//! only.

mod judge;
mod source;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::catalog::CatalogError;
use crate::domain::jobs::{JobItem, JobRun, RunState};
use crate::domain::legacy::OwnerSource;
use crate::domain::records;
use crate::services::bucket_source::BucketSource;
use crate::services::jobs::{self, Begin};
use crate::state::AppState;
use crate::storage::StoreError;

pub use source::keys_in_order;

pub const JOB: &str = crate::domain::jobs::LEGACY_IMPORT;
/// Keys judged between checkpoints.
pub const CHECKPOINT_EVERY: usize = 100;

/// What the operator asked for.
#[derive(Clone)]
pub struct ImportOptions {
    pub owners: OwnerSource,
    /// Listing prefixes (each under a legacy prefix): `domain::legacy::listing_prefixes`.
    pub prefixes: Vec<String>,
    /// Commit each imported upload in place (off with `--no-commit`).
    pub commit: bool,
    /// Keys judged at once.
    pub concurrency: usize,
    pub dry_run: bool,
    /// Items reported before the keys are walked (the owners CSV's bad rows).
    pub upfront: Vec<JobItem>,
    /// Where the owners come from, as a resume compares it: the pattern and profile, or the
    /// CSV's path, content digest and default profile.
    pub mapping: String,
    /// Set on Ctrl-C / SIGTERM: the run stops at its next checkpoint.
    pub stop: Arc<AtomicBool>,
}

/// The run's totals.
/// The run's totals (a resumed run's include what it counted before it stopped).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ImportSummary {
    pub source: String,
    pub dry_run: bool,
    pub resumed: bool,
    pub commit: bool,
    pub prefixes: Vec<String>,
    /// The owner mapping ([`ImportOptions::mapping`]).
    pub mapping: String,
    pub keys_listed: u64,
    /// Upload rows written (in a dry run: that would be).
    pub imported: u64,
    /// Imported uploads committed in place (this run's, or an earlier run's left issued).
    pub committed: u64,
    /// Recorded already (or imported and not committed, with `--no-commit`).
    pub skipped: u64,
    /// Inventory keys under `tmp/`, outside every legacy prefix or outside `--prefix`: counted
    /// only.
    pub outside_legacy_prefixes: u64,
    pub refused: u64,
    /// Keys an S3 or database error stopped; a rerun tries them again.
    pub failed: u64,
    /// Imported keys whose commit another call holds right now (`commit_in_progress`): a
    /// rerun commits them.
    pub retry_later: u64,
    /// Refusals by code (`pattern_mismatch`, `owner_invalid`, `content_type_not_allowed`,
    /// `content_mismatch`, …).
    pub refusals: BTreeMap<String, u64>,
    /// Stopped by Ctrl-C or SIGTERM at a checkpoint: a rerun resumes after it.
    pub interrupted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub enum ImportOutcome {
    Ran {
        run: Box<JobRun>,
        summary: Box<ImportSummary>,
    },
    /// Another operator's run holds the lease.
    Busy,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Runs an import. `inventory`: the keys from an S3 Inventory instead of listing.
#[tracing::instrument(skip_all, fields(job = JOB, dry_run = options.dry_run))]
pub async fn run(
    state: &AppState,
    options: &ImportOptions,
    inventory: Option<Box<dyn BucketSource>>,
) -> Result<ImportOutcome, ImportError> {
    let catalog = &state.catalog;
    let mut job = match jobs::begin(
        catalog,
        JOB,
        options.dry_run,
        state.settings.jobs.lease_secs,
    )
    .await?
    {
        Begin::Started(job) => job,
        Begin::Busy => return Ok(ImportOutcome::Busy),
    };
    let source = if inventory.is_some() {
        "inventory"
    } else {
        "listing"
    };
    let mut summary = ImportSummary {
        source: source.to_owned(),
        dry_run: options.dry_run,
        resumed: job.resumed,
        commit: options.commit,
        prefixes: options.prefixes.clone(),
        mapping: options.mapping.clone(),
        ..ImportSummary::default()
    };
    if job.resumed && !same_scope(job.run.summary.as_deref(), &summary) {
        // Its checkpoint says "judged" of keys judged under other options (other keys, other
        // owners, another profile, without committing): resuming would skip keys this run must
        // judge. It is closed (what it recorded stays recorded) and this run starts afresh.
        tracing::warn!(run.id = %job.run.id, "the stopped legacy import ran with other options; starting afresh");
        let now = records::now();
        catalog
            .update_run(
                &job.run.id,
                RunState::Failed,
                job.run.checkpoint.as_deref(),
                r#"{"error":"superseded by a run with other options"}"#,
                now,
            )
            .await?;
        job.run = JobRun::start(JOB, false, now);
        catalog.insert_run(&job.run).await?;
        job.resumed = false;
        summary.resumed = false;
    }
    if job.resumed {
        // The totals go on from where it stopped: the final summary counts the whole run.
        let before: ImportSummary = job
            .run
            .summary
            .as_deref()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default();
        summary.carry(&before);
    }
    let resume_after = job.run.checkpoint.clone();
    let mut keys = keys_in_order(
        state.store.clone(),
        &options.prefixes,
        inventory,
        resume_after.clone(),
    );
    let mut items = Vec::new();
    if !job.resumed {
        for item in &options.upfront {
            summary.refused += 1;
            *summary
                .refusals
                .entry(code_of(&item.reason).to_owned())
                .or_default() += 1;
        }
        // Written at once, with the options it runs under: a run stopped before its first
        // checkpoint still reported them, and a rerun knows whether it may resume it.
        if !options.upfront.is_empty() {
            catalog.add_job_items(&job.run.id, &options.upfront).await?;
        }
        if !options.dry_run {
            catalog
                .update_run(
                    &job.run.id,
                    RunState::Running,
                    None,
                    &serde_json::to_string(&summary).unwrap_or_default(),
                    records::now(),
                )
                .await?;
        }
    }
    let shared = Arc::new(options.clone());
    let result: Result<(), String> = async {
        loop {
            let batch = keys
                .next_batch(CHECKPOINT_EVERY)
                .await
                .map_err(|e| e.to_string())?;
            summary.outside_legacy_prefixes += keys.take_outside();
            let Some(last) = batch.last().map(|k| k.key.clone()) else {
                return Ok(());
            };
            summary.keys_listed += batch.len() as u64;
            // In key order, `concurrency` at a time: the checkpoint is the batch's last key,
            // so a stop mid-batch judges the whole batch again (recorded keys are skipped).
            let judged = judge_all(state, &shared, batch).await?;
            for verdict in judged {
                verdict.count(&mut summary);
                if let Some(item) = verdict.item {
                    items.push(item);
                }
            }
            job.checkpoint(catalog, &items, &last, &summary)
                .await
                .map_err(|e| e.to_string())?;
            items.clear();
            tracing::info!(
                checkpoint = %last,
                listed = summary.keys_listed,
                imported = summary.imported,
                committed = summary.committed,
                skipped = summary.skipped,
                refused = summary.refused,
                failed = summary.failed,
                "legacy import progress"
            );
            crate::pause::point("legacy_import_checkpoint").await;
            if job.lost() {
                return Err("lost the job's lease to another run".into());
            }
            if options.stop.load(Ordering::SeqCst) {
                summary.interrupted = true;
                return Ok(());
            }
        }
    }
    .await;
    let state_now = match result {
        Ok(()) if summary.interrupted && options.dry_run => {
            summary.error = Some("interrupted".into());
            RunState::Failed
        }
        Ok(()) if summary.interrupted => {
            tracing::warn!(checkpoint = ?job.run.checkpoint, "legacy import interrupted; a rerun resumes after its checkpoint");
            let run = job.suspend(catalog, &summary).await?;
            return Ok(ImportOutcome::Ran {
                run: Box::new(run),
                summary: Box::new(summary),
            });
        }
        Ok(()) => RunState::Finished,
        Err(e) if e.contains(source::OUT_OF_ORDER) => {
            tracing::error!(error = %e, "legacy import refused");
            summary.error = Some(e);
            RunState::Refused
        }
        Err(e) => {
            tracing::error!(error = %e, "legacy import failed");
            summary.error = Some(e);
            RunState::Failed
        }
    };
    let run = job.finish(catalog, state_now, &items, &summary).await?;
    Ok(ImportOutcome::Ran {
        run: Box::new(run),
        summary: Box::new(summary),
    })
}

impl ImportSummary {
    /// Adds the totals a stopped run stored at its last checkpoint.
    fn carry(&mut self, before: &ImportSummary) {
        self.keys_listed += before.keys_listed;
        self.imported += before.imported;
        self.committed += before.committed;
        self.skipped += before.skipped;
        self.outside_legacy_prefixes += before.outside_legacy_prefixes;
        self.refused += before.refused;
        self.failed += before.failed;
        self.retry_later += before.retry_later;
        for (code, n) in &before.refusals {
            *self.refusals.entry(code.clone()).or_default() += n;
        }
    }
}

/// Judges a batch, `concurrency` keys at a time; the verdicts in the batch's (key) order.
async fn judge_all(
    state: &AppState,
    options: &Arc<ImportOptions>,
    batch: Vec<crate::domain::reconcile::BucketKey>,
) -> Result<Vec<judge::Verdict>, String> {
    let permits = Arc::new(Semaphore::new(options.concurrency.max(1)));
    let mut tasks = JoinSet::new();
    for (i, key) in batch.into_iter().enumerate() {
        let (state, options, permits) = (state.clone(), options.clone(), permits.clone());
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            (i, judge::judge(&state, &options, key).await)
        });
    }
    let mut judged = Vec::new();
    while let Some(done) = tasks.join_next().await {
        judged.push(done.map_err(|e| format!("judging a key failed: {e}"))?);
    }
    judged.sort_by_key(|(i, _)| *i);
    Ok(judged.into_iter().map(|(_, v)| v).collect())
}

/// Whether a stopped run's stored summary was made under the same options as this run (source,
/// prefixes, owner mapping, `--no-commit`): only then does its checkpoint mean "everything
/// before it was judged as this run would". A run without a summary (stopped before it wrote
/// one) has no checkpoint either, and is not resumed.
fn same_scope(stored: Option<&str>, now: &ImportSummary) -> bool {
    let Some(before) = stored.and_then(|t| serde_json::from_str::<ImportSummary>(t).ok()) else {
        return false;
    };
    before.source == now.source
        && before.prefixes == now.prefixes
        && before.mapping == now.mapping
        && before.commit == now.commit
}

/// The code an item's reason starts with (`code: detail`).
fn code_of(reason: &str) -> &str {
    reason.split_once(':').map_or(reason, |(c, _)| c)
}
