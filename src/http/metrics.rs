//! `GET /metrics` in the Prometheus text format (version 0.0.4): the bucket checks and the
//! maintenance jobs as gauges, then this server's request, outcome, S3 and database metrics.
//! Everything comes from memory: no scrape touches the database or S3.

use std::fmt::Write;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::domain::bucket_check::Check;
use crate::domain::jobs::{self, JobRun, RunState};
use crate::state::job_gauges::LastRuns;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let mut out = String::new();
    let report = state.bucket_watch.latest();
    out.push_str("# HELP upcommit_bucket_check_ok 1 when the live bucket passes the check, 0 when it fails.\n");
    out.push_str("# TYPE upcommit_bucket_check_ok gauge\n");
    if let Some(r) = &report {
        for check in Check::ALL {
            let ok = r.results.iter().any(|x| x.check == check && x.ok);
            let _ = writeln!(
                out,
                "upcommit_bucket_check_ok{{check=\"{}\"}} {}",
                check.name(),
                u8::from(ok)
            );
        }
    }
    out.push_str("# HELP upcommit_bucket_check_last_run_timestamp_seconds When the bucket checks last ran (Unix time).\n");
    out.push_str("# TYPE upcommit_bucket_check_last_run_timestamp_seconds gauge\n");
    if let Some(r) = &report {
        let _ = writeln!(
            out,
            "upcommit_bucket_check_last_run_timestamp_seconds {}",
            r.checked_at.timestamp()
        );
    }
    job_gauges(&state.job_gauges.latest(), &mut out);
    out.push_str("# HELP upcommit_renders_in_flight Renders running on this replica now.\n");
    out.push_str("# TYPE upcommit_renders_in_flight gauge\n");
    let _ = writeln!(
        out,
        "upcommit_renders_in_flight {}",
        state.renders.in_flight()
    );
    out.push_str("# HELP upcommit_render_slots Renders this replica runs at once at most (UPCOMMIT_RENDER_CONCURRENCY).\n");
    out.push_str("# TYPE upcommit_render_slots gauge\n");
    let _ = writeln!(out, "upcommit_render_slots {}", state.renders.limit());
    out.push_str("# HELP upcommit_render_memory_held_bytes Memory this replica's running renders hold, as estimated before each decodes.\n");
    out.push_str("# TYPE upcommit_render_memory_held_bytes gauge\n");
    let _ = writeln!(
        out,
        "upcommit_render_memory_held_bytes {}",
        state.renders.memory_held()
    );
    out.push_str("# HELP upcommit_render_memory_budget_bytes Memory this replica's renders may hold at once (UPCOMMIT_RENDER_MEMORY_MIB).\n");
    out.push_str("# TYPE upcommit_render_memory_budget_bytes gauge\n");
    let _ = writeln!(
        out,
        "upcommit_render_memory_budget_bytes {}",
        state.renders.memory_budget()
    );
    state.metrics.render(&mut out);
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        out,
    )
}

/// The last sweep's and the last reconcile's outcome (any replica's run), from memory: a
/// background task reads them from the catalog (see `state::job_gauges`).
fn job_gauges(runs: &LastRuns, out: &mut String) {
    let summary = |run: &JobRun| -> serde_json::Value {
        run.summary
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or(serde_json::Value::Null)
    };
    out.push_str("# HELP upcommit_sweep_refused 1 when the last sweep refused to delete (tmp partitions dated in the future: clock skew).\n");
    out.push_str("# TYPE upcommit_sweep_refused gauge\n");
    if let Some(run) = &runs.sweep {
        let _ = writeln!(
            out,
            "upcommit_sweep_refused {}",
            u8::from(run.state == RunState::Refused)
        );
        out.push_str("# HELP upcommit_sweep_deleted_bytes Bytes the last sweep deleted.\n");
        out.push_str("# TYPE upcommit_sweep_deleted_bytes gauge\n");
        let _ = writeln!(
            out,
            "upcommit_sweep_deleted_bytes {}",
            summary(run)["deleted_bytes"].as_u64().unwrap_or(0)
        );
    }
    if let Some(run) = &runs.reconcile_finished {
        let s = summary(run);
        for (name, field, help) in [
            (
                "upcommit_reconcile_missing_objects",
                "missing",
                "File handles whose object the last reconcile did not find (data loss).",
            ),
            (
                "upcommit_reconcile_unindexed_objects",
                "unindexed",
                "Objects under final prefixes that no file handle records, at the last reconcile.",
            ),
            (
                "upcommit_reconcile_unindexed_bytes",
                "unindexed_bytes",
                "Bytes of those objects.",
            ),
            (
                "upcommit_reconcile_tmp_past_lifecycle_objects",
                "tmp_past_lifecycle",
                "Tmp objects older than the lifecycle rule allows, at the last reconcile.",
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {}", s[field].as_u64().unwrap_or(0));
        }
    }
    job_runs(runs, out);
}

/// When each job's last run ended and whether it finished, so an alert can tell a job that
/// stopped running (the timestamp ages) from one that runs and fails. Dry runs do not count (a
/// dry run changes nothing: `Catalog::last_run` leaves them out). The label is `job_name`,
/// not `job`: Prometheus sets `job` on every scraped series (the scrape job) and would rename
/// ours `exported_job`.
fn job_runs(runs: &LastRuns, out: &mut String) {
    let last = [
        (jobs::SWEEP, &runs.sweep),
        (jobs::RECONCILE, &runs.reconcile),
        (jobs::HYGIENE, &runs.hygiene),
        (jobs::PRUNE, &runs.prune),
    ];
    out.push_str("# HELP upcommit_job_last_run_timestamp_seconds When the job's last run (any replica's) ended, whatever its state (Unix time).\n");
    out.push_str("# TYPE upcommit_job_last_run_timestamp_seconds gauge\n");
    for (job, run) in last {
        if let Some(run) = run {
            let ended = run.finished_at.unwrap_or(run.updated_at);
            let _ = writeln!(
                out,
                "upcommit_job_last_run_timestamp_seconds{{job_name=\"{job}\"}} {}",
                ended.timestamp()
            );
        }
    }
    out.push_str("# HELP upcommit_job_last_run_ok 1 when the job's last run finished, 0 when it failed or refused.\n");
    out.push_str("# TYPE upcommit_job_last_run_ok gauge\n");
    for (job, run) in last {
        if let Some(run) = run {
            let _ = writeln!(
                out,
                "upcommit_job_last_run_ok{{job_name=\"{job}\"}} {}",
                u8::from(run.state == RunState::Finished)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    fn run(job: &str, state: RunState, ended: i64) -> JobRun {
        let at = Utc.timestamp_opt(ended, 0).single().expect("time");
        JobRun {
            state,
            finished_at: Some(at),
            updated_at: at,
            ..JobRun::start(job, false, at - chrono::Duration::seconds(60))
        }
    }

    #[test]
    fn each_jobs_last_run_shows_when_it_ended_and_whether_it_finished() {
        let runs = LastRuns {
            sweep: Some(run(jobs::SWEEP, RunState::Refused, 1_800_000_000)),
            reconcile: Some(run(jobs::RECONCILE, RunState::Finished, 1_800_000_100)),
            reconcile_finished: None,
            hygiene: Some(run(jobs::HYGIENE, RunState::Failed, 1_800_000_200)),
            prune: Some(run(jobs::PRUNE, RunState::Finished, 1_800_000_300)),
        };
        let mut out = String::new();
        job_gauges(&runs, &mut out);
        for line in [
            "upcommit_job_last_run_timestamp_seconds{job_name=\"sweep\"} 1800000000",
            "upcommit_job_last_run_timestamp_seconds{job_name=\"reconcile\"} 1800000100",
            "upcommit_job_last_run_ok{job_name=\"sweep\"} 0",
            "upcommit_job_last_run_ok{job_name=\"reconcile\"} 1",
            "upcommit_job_last_run_timestamp_seconds{job_name=\"hygiene\"} 1800000200",
            "upcommit_job_last_run_ok{job_name=\"hygiene\"} 0",
            "upcommit_job_last_run_timestamp_seconds{job_name=\"prune\"} 1800000300",
            "upcommit_job_last_run_ok{job_name=\"prune\"} 1",
            "upcommit_sweep_refused 1",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in {out}");
        }
    }

    #[test]
    fn a_job_that_never_ran_has_no_series() {
        let runs = LastRuns {
            sweep: Some(run(jobs::SWEEP, RunState::Failed, 1_800_000_000)),
            reconcile: None,
            reconcile_finished: None,
            hygiene: None,
            prune: None,
        };
        let mut out = String::new();
        job_gauges(&runs, &mut out);
        assert!(
            out.contains("upcommit_job_last_run_ok{job_name=\"sweep\"} 0"),
            "{out}"
        );
        assert!(!out.contains("job_name=\"reconcile\""), "{out}");
        assert!(!out.contains("upcommit_reconcile_missing_objects"), "{out}");
    }

    /// Review 35: a failed reconcile's partial counts replaced the last finished run's, so a
    /// failed run after one that found a missing object cleared the data-loss alert.
    #[test]
    fn the_findings_are_the_last_finished_reconciles_whatever_came_after() {
        let mut finished = run(jobs::RECONCILE, RunState::Finished, 1_800_000_000);
        finished.summary = Some(r#"{"missing":1,"unindexed":0}"#.into());
        let mut failed = run(jobs::RECONCILE, RunState::Failed, 1_800_000_100);
        failed.summary = Some(r#"{"missing":0,"unindexed":0}"#.into());
        let runs = LastRuns {
            sweep: None,
            reconcile: Some(failed),
            reconcile_finished: Some(finished),
            hygiene: None,
            prune: None,
        };
        let mut out = String::new();
        job_gauges(&runs, &mut out);
        for line in [
            "upcommit_reconcile_missing_objects 1",
            "upcommit_job_last_run_ok{job_name=\"reconcile\"} 0",
            "upcommit_job_last_run_timestamp_seconds{job_name=\"reconcile\"} 1800000100",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in {out}");
        }
    }
}
