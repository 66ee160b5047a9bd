//! A panic in `serve`'s background work ends that run, never its schedule: the real binary runs
//! with `UPCOMMIT_PANIC_AT` (test builds only) naming a step every run of a job reaches, so
//! every run panics there. The schedule must go on — a run per tick, each recorded `failed`
//! with the panic's message, the lease given back at once (the default lease is 300 s: a second
//! run within seconds proves it) — the job that shares the loop must still run, the panics must
//! be counted on `/metrics`, and the server must stay up and ready.

use std::process::{Child, Stdio};
use std::time::Duration;

use crate::helpers::{on_postgres, series_value, server_process, spawn_app, TestApp};

/// Failed runs of `job` whose summary carries the panic `marker`, and runs of it left running.
async fn runs(app: &TestApp, job: &str, marker: &str) -> (i64, i64) {
    let dry = if on_postgres() { "false" } else { "0" };
    let failed = app
        .db
        .count(&format!(
            "SELECT COUNT(*) FROM job_runs WHERE job = '{job}' AND state = 'failed' AND dry_run = {dry} AND summary LIKE '%the run panicked: {marker}%'"
        ))
        .await;
    let running = app
        .db
        .count(&format!(
            "SELECT COUNT(*) FROM job_runs WHERE job = '{job}' AND state = 'running' AND dry_run = {dry}"
        ))
        .await;
    (failed, running)
}

async fn finished(app: &TestApp, job: &str) -> i64 {
    app.db
        .count(&format!(
            "SELECT COUNT(*) FROM job_runs WHERE job = '{job}' AND state = 'finished'"
        ))
        .await
}

/// Waits (30 s at most) until `job` has at least two failed runs carrying `marker`.
async fn two_panicked_runs(app: &TestApp, job: &str, marker: &str) -> (i64, i64) {
    let mut seen = (0, 0);
    for _ in 0..300 {
        seen = runs(app, job, marker).await;
        if seen.0 >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen
}

/// `upcommit serve` on the app's database and bucket with `extra` (errors only in its log).
async fn serving(app: &TestApp, extra: &[(&str, &str)]) -> (Child, String) {
    let mut env = extra.to_vec();
    env.push(("RUST_LOG", "error"));
    server_process(app, &env, Stdio::null()).await
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `task`'s panics on `/metrics` once they reach `at_least`, or after `secs` seconds.
async fn panics_reach(app: &TestApp, base: &str, task: &str, at_least: f64, secs: u32) -> f64 {
    let mut counted = 0.0;
    for _ in 0..secs * 10 {
        counted = panics_counted(app, base, task).await;
        if counted >= at_least {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    counted
}

async fn ready(app: &TestApp, base: &str) -> Option<u16> {
    let resp = app.http.get(format!("{base}/readyz")).send().await;
    resp.ok().map(|r| r.status().as_u16())
}

async fn panics_counted(app: &TestApp, base: &str, task: &str) -> f64 {
    let text = app.metrics_text_at(base).await;
    series_value(
        &text,
        &format!("upcommit_task_panics_total{{task=\"{task}\"}}"),
    )
    .unwrap_or(0.0)
}

#[tokio::test]
async fn a_sweep_that_panics_every_time_fails_each_run_and_the_schedule_and_prune_go_on() {
    let app = spawn_app().await;
    let (child, base) = serving(
        &app,
        &[
            ("UPCOMMIT_SWEEP_INTERVAL_SECS", "1"),
            // Every sweep reaches it (after its run began), nothing else calls it.
            ("UPCOMMIT_PANIC_AT", "catalog.mark_expired_handles"),
        ],
    )
    .await;
    let marker = "UPCOMMIT_PANIC_AT: catalog.mark_expired_handles";
    let (failed, _) = two_panicked_runs(&app, "sweep", marker).await;
    let counted = panics_counted(&app, &base, "sweep").await;
    let ready = ready(&app, &base).await;
    let (_, running) = runs(&app, "sweep", marker).await;
    let pruned = finished(&app, "prune").await;
    stop(child);

    assert!(
        failed >= 2,
        "a second sweep ran after the first panicked: {failed} failed runs"
    );
    // The run in progress at the moment of reading may be running; none is left behind.
    assert!(running <= 1, "{running} sweeps left running");
    assert!(
        counted >= 2.0,
        "the panics are counted on /metrics: {counted}"
    );
    assert!(
        pruned >= 1,
        "prune, which shares the sweep's loop, still ran"
    );
    assert_eq!(ready, Some(200), "the server stays ready");
}

#[tokio::test]
async fn hygiene_that_panics_every_time_fails_each_run_and_its_schedule_goes_on() {
    let app = spawn_app().await;
    let (child, base) = serving(
        &app,
        &[
            ("UPCOMMIT_HYGIENE_INTERVAL_SECS", "1"),
            ("UPCOMMIT_SWEEP_INTERVAL_SECS", "0"),
            ("UPCOMMIT_TRACKS_LINKS", "image"),
            // Every hygiene run reaches it after its run began, nothing else calls it.
            ("UPCOMMIT_PANIC_AT", "catalog.return_vouched"),
        ],
    )
    .await;
    let marker = "UPCOMMIT_PANIC_AT: catalog.return_vouched";
    let (failed, _) = two_panicked_runs(&app, "hygiene", marker).await;
    let counted = panics_counted(&app, &base, "hygiene").await;
    let (_, running) = runs(&app, "hygiene", marker).await;
    stop(child);

    assert!(
        failed >= 2,
        "a second hygiene run followed the first panic: {failed} failed runs"
    );
    assert!(running <= 1, "{running} hygiene runs left running");
    assert!(
        counted >= 2.0,
        "the panics are counted on /metrics: {counted}"
    );
}

#[tokio::test]
async fn an_event_delivery_loop_that_panics_is_started_again_and_counted() {
    let app = spawn_app().await;
    let (child, base) = serving(
        &app,
        &[
            // The delivery supervisor reads the endpoints every few seconds; every read panics.
            ("UPCOMMIT_PANIC_AT", "catalog.delivery_gauges"),
        ],
    )
    .await;
    let counted = panics_reach(&app, &base, "event_delivery", 2.0, 15).await;
    let ready = ready(&app, &base).await;
    stop(child);
    assert!(
        counted >= 2.0,
        "the loop went on after a panic and panicked again: {counted}"
    );
    assert_eq!(ready, Some(200));
}

#[tokio::test]
async fn a_bucket_watch_that_panics_is_counted_and_checks_again() {
    let app = spawn_app().await;
    let (child, base) = serving(
        &app,
        &[
            ("UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS", "1"),
            ("UPCOMMIT_PANIC_AT", "bucket_watch_checked"),
        ],
    )
    .await;
    let counted = panics_reach(&app, &base, "bucket_watch", 2.0, 10).await;
    stop(child);
    assert!(
        counted >= 2.0,
        "the watch checked again after a panic: {counted}"
    );
}

#[tokio::test]
async fn a_sweep_command_that_panics_records_its_run_failed_frees_the_lease_and_exits_70() {
    let app = spawn_app().await;
    let sweep = |panic_at: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"));
        cmd.args(["sweep", "--json"])
            .envs(&app.env)
            .env("RUST_LOG", "error")
            .stderr(Stdio::null());
        if let Some(at) = panic_at {
            cmd.env("UPCOMMIT_PANIC_AT", at);
        }
        cmd.output().expect("run upcommit sweep")
    };
    // The command's catalog is not the server's (no ObservedCatalog): a pause point it is.
    let out = sweep(Some("sweep_began"));
    assert_eq!(out.status.code(), Some(70), "{out:?}");
    let (failed, running) = runs(&app, "sweep", "UPCOMMIT_PANIC_AT: sweep_began").await;
    assert_eq!(
        (failed, running),
        (1, 0),
        "the panicked run is recorded failed, none left running"
    );
    // The lease (300 s by default) was given back: the next sweep runs at once, not busy (4).
    let out = sweep(None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(finished(&app, "sweep").await, 1);
}

/// Outside review of issue 35: a bug that panics where the run is recorded (every
/// `update_run`) panicked again inside the guard's own record of the failure, escaped it, and
/// ended the sweep's loop for good with the run `running` and the lease held. The record's
/// write and the lease's release are each caught now: the loop goes on, the lease comes back
/// (a held one would make the next tick "busy", which panics nowhere), and prune still runs
/// after each sweep.
#[tokio::test]
async fn a_panic_while_recording_the_panicked_run_still_frees_the_lease_and_keeps_the_loop() {
    let app = spawn_app().await;
    let (child, base) = serving(
        &app,
        &[
            ("UPCOMMIT_SWEEP_INTERVAL_SECS", "1"),
            ("UPCOMMIT_PANIC_AT", "catalog.update_run"),
        ],
    )
    .await;
    let sweeps = panics_reach(&app, &base, "sweep", 3.0, 20).await;
    let prunes = panics_reach(&app, &base, "prune", 3.0, 10).await;
    stop(child);
    assert!(
        sweeps >= 3.0,
        "the sweep's loop went on, each run taking the lease again: {sweeps}"
    );
    assert!(prunes >= 3.0, "prune ran after each sweep: {prunes}");
}

/// Outside review of issue 35: the admin API's hygiene dry run ran outside the guard, so its
/// panic was recorded without its message and counted nowhere.
#[tokio::test]
async fn a_dry_run_started_from_the_admin_api_that_panics_is_recorded_with_its_message_and_counted()
{
    let app = spawn_app().await;
    let (child, base) = serving(
        &app,
        &[
            ("UPCOMMIT_TRACKS_LINKS", "image"),
            ("UPCOMMIT_PANIC_AT", "catalog.unlinked_candidates"),
        ],
    )
    .await;
    let admin = app.admin_token("ops");
    let started = app
        .http
        .post(format!("{base}/v1/admin/jobs/hygiene/dry-run"))
        .bearer_auth(&admin)
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("dry run");
    assert_eq!(started.status(), 202);
    let run_id = started.json::<serde_json::Value>().await.expect("json")["run_id"]
        .as_str()
        .expect("run_id")
        .to_owned();
    let mut run = serde_json::Value::Null;
    for _ in 0..100 {
        run = app
            .http
            .get(format!("{base}/v1/admin/jobs/runs/{run_id}"))
            .bearer_auth(&admin)
            .send()
            .await
            .expect("run")
            .json()
            .await
            .expect("json");
        if run["run"]["state"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let counted = panics_counted(&app, &base, "hygiene").await;
    stop(child);
    assert_eq!(run["run"]["state"], "failed", "{run}");
    assert_eq!(
        run["run"]["summary"]["error"],
        "the run panicked: UPCOMMIT_PANIC_AT: catalog.unlinked_candidates",
        "{run}"
    );
    assert_eq!(counted, 1.0, "counted on /metrics");
}
