//! Every job broken at each of its catalog steps, in turn: the N-th catalog call of a run fails
//! as an unreachable database would, then (separately) panics, for N = 1, 2, … until a run
//! makes fewer than N calls. The job runs as `serve` runs it (inside
//! `state::supervise::catching`, the catalog behind `ObservedCatalog`, where
//! `pause::with_faults` decides each call). After each broken run:
//! - a panicked run is recorded `failed` with the panic's message, and its lease is free at once;
//! - a failed call leaves the run `failed` with its reason, or `running` for the next run to
//!   resume (the error path), and its lease is given back;
//! - the next, unbroken run is not turned away (no lease left held), ends `finished`, leaves no
//!   run `running`, and the job's work is done: nothing committed is lost (every committed
//!   file's bytes are still there) and what the job removes is removed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use upcommit::catalog::Catalog;
use upcommit::domain::jobs::RunState;
use upcommit::pause::{self, Fault};
use upcommit::state::supervise::catching;

use crate::helpers::{spawn_app_with, ObservedJob, Spawn, TestApp};

/// How a broken step breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Fail,
    Panic,
}

/// What one run of a job ended as, seen from its caller.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    Ran(RunState),
    Busy,
    /// The job returned an error (its run left for the next to resume, or never begun).
    Error(String),
    /// It panicked (caught as `serve` catches it).
    Panicked,
}

/// Faults the `n`-th catalog call (counting from 1) in `mode`; records which operation it was.
fn nth_call(
    n: usize,
    mode: Mode,
    seen: Arc<AtomicUsize>,
    hit: Arc<Mutex<Option<String>>>,
) -> pause::FaultHook {
    Arc::new(move |op: &str| {
        let i = seen.fetch_add(1, Ordering::SeqCst) + 1;
        if i != n {
            return Fault::Pass;
        }
        if let Ok(mut hit) = hit.lock() {
            *hit = Some(op.to_owned());
        }
        let why = format!("injected at catalog call {n} ({op})");
        match mode {
            Mode::Fail => Fault::Fail(why),
            Mode::Panic => Fault::Panic(why),
        }
    })
}

/// Whether another holder could take `job`'s lease now (and gives it straight back).
async fn lease_free(catalog: &Arc<dyn Catalog>, job: &str) -> bool {
    let probe = "job-faults-probe";
    let free = catalog
        .acquire_job_lock(job, probe, 60)
        .await
        .expect("acquire_job_lock");
    if free {
        catalog.release_job_lock(job, probe).await.expect("release");
    }
    free
}

/// The lease is free now, or within two seconds (an error path gives it back from a task).
async fn lease_given_back(catalog: &Arc<dyn Catalog>, job: &str) -> bool {
    for _ in 0..40 {
        if lease_free(catalog, job).await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

/// One job under test: how to give it work, run it once, and check that its work is done.
struct Subject<'a> {
    job: &'static str,
    app: &'a TestApp,
    parts: ObservedJob,
}

impl Subject<'_> {
    /// Runs the job once under `hook` (none: unbroken), as `serve` would.
    async fn run(&self, hook: Option<pause::FaultHook>, at: DateTime<Utc>) -> Ended {
        let (catalog, store, settings) =
            (&self.parts.catalog, &self.parts.store, &self.parts.settings);
        let job = self.job;
        let work = async move {
            match job {
                "sweep" => {
                    use upcommit::services::sweep::{sweep_at, SweepOutcome};
                    match Box::pin(sweep_at(catalog, store, settings, false, at)).await {
                        Ok(SweepOutcome::Ran { run, .. }) => Ended::Ran(run.state),
                        Ok(SweepOutcome::Busy) => Ended::Busy,
                        Err(e) => Ended::Error(e.to_string()),
                    }
                }
                "prune" => {
                    use upcommit::services::prune::{prune_at, PruneOutcome};
                    match Box::pin(prune_at(catalog, settings, false, at)).await {
                        Ok(PruneOutcome::Ran { run, .. }) => Ended::Ran(run.state),
                        Ok(PruneOutcome::Busy) => Ended::Busy,
                        Err(e) => Ended::Error(e.to_string()),
                    }
                }
                "hygiene" => {
                    use upcommit::services::hygiene::{run, HygieneOutcome};
                    match Box::pin(run(catalog, store, settings, false, at)).await {
                        Ok(HygieneOutcome::Ran { run, .. }) => Ended::Ran(run.state),
                        Ok(HygieneOutcome::Busy) => Ended::Busy,
                        Err(e) => Ended::Error(e.to_string()),
                    }
                }
                "reconcile" => {
                    use upcommit::services::reconcile::{
                        reconcile, ReconcileOptions, ReconcileOutcome,
                    };
                    let options = ReconcileOptions {
                        grace: chrono::Duration::zero(),
                        quarantine: false,
                        quarantine_stray: false,
                        workers: 1,
                        inventory_taken_at: None,
                        remove_orphan_renditions: false,
                    };
                    match Box::pin(reconcile(catalog, store, settings, &options, None)).await {
                        Ok(ReconcileOutcome::Ran { run, .. }) => Ended::Ran(run.state),
                        Ok(ReconcileOutcome::Busy) => Ended::Busy,
                        Err(e) => Ended::Error(e.to_string()),
                    }
                }
                other => panic!("no such job {other}"),
            }
        };
        // On the heap: a debug build's job futures are large, and the test thread's stack is
        // the default 2 MiB.
        let work = Box::pin(work);
        let caught = match hook {
            Some(hook) => {
                catching(
                    job,
                    Some(&self.parts.metrics),
                    pause::with_faults(hook, work),
                )
                .await
            }
            None => catching(job, Some(&self.parts.metrics), work).await,
        };
        caught.unwrap_or(Ended::Panicked)
    }

    /// Runs of this job left `running` (not dry runs).
    async fn running(&self) -> i64 {
        self.app
            .db
            .count(&format!(
                "SELECT COUNT(*) FROM job_runs WHERE job = '{}' AND state = 'running' AND dry_run = {}",
                self.job,
                if crate::helpers::on_postgres() { "false" } else { "0" }
            ))
            .await
    }
}

/// Work for every job: one committed file (which must survive every run), and two abandoned
/// uploads (one uploaded, one never) that the sweep removes once their window has passed.
/// Returns the committed file's key and bytes, and the abandoned upload's tmp key.
async fn give_work(app: &TestApp) -> (String, Vec<u8>, String) {
    let token = app.token("alice");
    let (_, h) = app
        .upload_and_commit(&token, "image", "image/png", 300)
        .await;
    let key = h["key"].as_str().expect("key").to_owned();
    let bytes = app.get_object(&key).await;
    let abandoned = app.uploaded(&token, "image", "image/png", 200, "PUT").await;
    let _never = app
        .presign_ok(&token, "image", "image/png", 100, "PUT")
        .await;
    (key, bytes, abandoned.key.clone())
}

/// Runs a test's body on a thread of its own with a 16 MiB stack (a current-thread runtime, as
/// `#[tokio::test]`'s): a debug build's job futures, polled with the fault hook and the guard
/// around them beside the test server's tasks, are deep — the 2 MiB of a test thread overflowed.
fn on_a_deep_stack<F, Fut>(body: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future,
{
    let thread = std::thread::Builder::new()
        .stack_size(16 * 1024 * 1024)
        .spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(body());
        })
        .expect("thread");
    if let Err(panic) = thread.join() {
        std::panic::resume_unwind(panic);
    }
}

/// Breaks `job` at each of its catalog steps in `mode`; returns how many steps were broken.
async fn break_each_step(job: &'static str, mode: Mode) -> usize {
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_JOB_LEASE_SECS", "300".into())],
        ..Spawn::default()
    })
    .await;
    let subject = Subject {
        job,
        parts: app.observed_job().await,
        app: &app,
    };
    let mut committed: Vec<(String, Vec<u8>)> = Vec::new();
    let mut broken = 0;
    let mut recorded = 0;
    for n in 1..=400 {
        let (key, bytes, abandoned) = give_work(&app).await;
        committed.push((key, bytes));
        // Far enough ahead that every upload's window (and the sweep's grace) has passed for
        // the whole of today's tmp partition: the cutoff is `at` − 2 days 15 min, and today's
        // partition ends at the next midnight (three days exactly left it unswept in the first
        // 15 minutes after midnight UTC).
        let at = chrono::Utc::now() + chrono::Duration::days(3) + chrono::Duration::hours(1);
        let before = app
            .catalog
            .last_run(job)
            .await
            .expect("last_run")
            .map(|r| r.id);
        let seen = Arc::new(AtomicUsize::new(0));
        let hit = Arc::new(Mutex::new(None));
        let ended = subject
            .run(Some(nth_call(n, mode, seen.clone(), hit.clone())), at)
            .await;
        let calls = seen.load(Ordering::SeqCst);
        let op = hit.lock().expect("hit").clone().unwrap_or_default();
        let step = format!("{job}, {mode:?} at catalog call {n} ({op}): ended {ended:?}");
        if calls < n {
            // The run made fewer than n calls: every step has been broken once.
            assert!(
                matches!(ended, Ended::Ran(RunState::Finished)),
                "{step}: an unbroken run must finish"
            );
            break;
        }
        broken += 1;
        match mode {
            Mode::Panic => {
                assert_eq!(ended, Ended::Panicked, "{step}");
                // A run that had begun is failed with the panic's message (one that panicked
                // before its run began left none).
                let run = app.catalog.last_run(job).await.expect("last_run");
                // A panic after the run's end was recorded (giving the lease back) leaves that
                // record as it is.
                if let Some(run) = run.filter(|r| Some(&r.id) != before.as_ref()) {
                    if run.state == RunState::Failed {
                        let said = run.summary.unwrap_or_default();
                        assert!(
                            said.contains(&format!(
                                "the run panicked: injected at catalog call {n} "
                            )),
                            "{step}: {said}"
                        );
                        recorded += 1;
                    } else {
                        assert_eq!(
                            (run.state, op.as_str()),
                            (RunState::Finished, "release_job_lock"),
                            "{step}: a run that panicked before its end was recorded"
                        );
                    }
                }
                assert_eq!(
                    subject.running().await,
                    0,
                    "{step}: a panicked run is left running"
                );
                assert!(
                    lease_given_back(&app.catalog, job).await,
                    "{step}: the lease is still held after a panic"
                );
            }
            Mode::Fail => {
                assert!(
                    matches!(ended, Ended::Ran(RunState::Failed) | Ended::Error(_)),
                    "{step}"
                );
                if let Ended::Ran(RunState::Failed) = ended {
                    let run = app
                        .catalog
                        .last_run(job)
                        .await
                        .expect("last_run")
                        .expect("a run");
                    assert!(
                        run.summary
                            .as_deref()
                            .is_some_and(|s| s.contains("injected")),
                        "{step}: the failed run does not say why: {:?}",
                        run.summary
                    );
                }
                assert!(
                    lease_given_back(&app.catalog, job).await,
                    "{step}: the lease is not given back"
                );
            }
        }
        // The next run, unbroken, is not turned away and finishes what was left.
        let next = subject.run(None, at).await;
        assert_eq!(next, Ended::Ran(RunState::Finished), "{step}: the next run");
        assert_eq!(
            subject.running().await,
            0,
            "{step}: a run is left running after the next run"
        );
        for (key, bytes) in &committed {
            assert_eq!(
                &app.get_object(key).await,
                bytes,
                "{step}: committed {key} changed or lost"
            );
        }
        if job == "sweep" {
            assert_eq!(
                app.versions(&abandoned).await,
                0,
                "{step}: the abandoned upload was not swept"
            );
        }
    }
    assert!(broken > 0, "{job}: no catalog step was broken");
    if mode == Mode::Panic {
        assert!(recorded > 0, "{job}: no panicked run was recorded failed");
        let text = {
            let mut out = String::new();
            subject.parts.metrics.render(&mut out);
            out
        };
        let counted = crate::helpers::series_value(
            &text,
            &format!("upcommit_task_panics_total{{task=\"{job}\"}}"),
        )
        .unwrap_or(0.0);
        assert_eq!(counted as usize, broken, "{job}: every panic is counted");
    }
    eprintln!("{job}: {mode:?} injected at each of {broken} catalog steps");
    broken
}

#[test]
fn a_sweep_broken_at_any_catalog_step_fails_cleanly_and_the_next_sweep_finishes() {
    on_a_deep_stack(|| break_each_step("sweep", Mode::Fail));
}

#[test]
fn a_sweep_that_panics_at_any_catalog_step_is_failed_its_lease_freed_and_the_next_finishes() {
    on_a_deep_stack(|| break_each_step("sweep", Mode::Panic));
}

#[test]
fn a_prune_broken_at_any_catalog_step_fails_cleanly_and_the_next_prune_finishes() {
    on_a_deep_stack(|| break_each_step("prune", Mode::Fail));
}

#[test]
fn a_prune_that_panics_at_any_catalog_step_is_failed_its_lease_freed_and_the_next_finishes() {
    on_a_deep_stack(|| break_each_step("prune", Mode::Panic));
}

#[test]
fn hygiene_broken_at_any_catalog_step_fails_cleanly_and_the_next_run_finishes() {
    on_a_deep_stack(|| break_each_step("hygiene", Mode::Fail));
}

#[test]
fn hygiene_that_panics_at_any_catalog_step_is_failed_its_lease_freed_and_the_next_finishes() {
    on_a_deep_stack(|| break_each_step("hygiene", Mode::Panic));
}

#[test]
fn a_reconcile_broken_at_any_catalog_step_fails_cleanly_and_the_next_finishes() {
    on_a_deep_stack(|| break_each_step("reconcile", Mode::Fail));
}

#[tokio::test]
async fn a_reconcile_that_panics_at_any_catalog_step_is_failed_its_lease_freed_and_the_next_finishes(
) {
    break_each_step("reconcile", Mode::Panic).await;
}
