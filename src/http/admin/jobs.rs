//! The maintenance jobs through the API (admins): `GET /v1/admin/jobs` (each job's last run
//! and when the next is due), `GET /v1/admin/jobs/runs` (the history, newest first),
//! `GET /v1/admin/jobs/runs/{id}` (a run with its findings) and
//! `POST /v1/admin/jobs/hygiene/dry-run` (what hygiene's next run would do, in the background).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::bad_query;
use crate::catalog::Before;
use crate::domain::jobs::{JobItem, JobRun, HYGIENE, LEGACY_IMPORT, PRUNE, RECONCILE, SWEEP};
use crate::domain::paging;
use crate::error::AppError;
use crate::http::extract::{Admin, ApiPath};
use crate::services::hygiene::{self, HygieneError};
use crate::state::AppState;

/// The jobs, in the order an operator reads them.
const JOBS: [&str; 5] = [SWEEP, HYGIENE, RECONCILE, PRUNE, LEGACY_IMPORT];

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/admin/jobs", get(list))
        .route("/v1/admin/jobs/runs", get(runs))
        .route("/v1/admin/jobs/runs/{id}", get(run))
        .route("/v1/admin/jobs/hygiene/dry-run", post(hygiene_dry_run))
}

/// A run as the API shows it: the summary parsed (the job's own totals).
#[derive(Debug, Serialize)]
pub(super) struct RunView {
    id: String,
    job: String,
    dry_run: bool,
    state: &'static str,
    started_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    summary: serde_json::Value,
}

impl From<JobRun> for RunView {
    fn from(r: JobRun) -> Self {
        Self {
            summary: r
                .summary
                .as_deref()
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or(serde_json::Value::Null),
            id: r.id,
            job: r.job,
            dry_run: r.dry_run,
            state: r.state.as_str(),
            started_at: r.started_at,
            updated_at: r.updated_at,
            finished_at: r.finished_at,
        }
    }
}

#[derive(Serialize)]
struct JobView {
    job: &'static str,
    /// How often `serve` runs it (seconds), or `None` when it runs on the operator's schedule
    /// (cron, a systemd timer) or the in-server schedule is off. Prune runs after every sweep,
    /// so it has the sweep's.
    interval_secs: Option<u64>,
    /// The schedule in words: `every N s`, `after each sweep`, or the operator's.
    schedule: String,
    /// The newest run that ended (finished, failed or refused), dry runs included.
    last_run: Option<RunView>,
    /// The last run's end plus the interval: when `serve`'s schedule starts the next (on
    /// whichever replica holds the lease); `None` without an in-server schedule.
    next_due_at: Option<DateTime<Utc>>,
}

async fn list(
    _admin: Admin,
    State(state): State<AppState>,
) -> Result<Json<serde_json::Value>, AppError> {
    let jobs = &state.settings.jobs;
    let mut out = Vec::with_capacity(JOBS.len());
    for job in JOBS {
        let interval_secs = match job {
            SWEEP | PRUNE => Some(jobs.sweep_interval_secs),
            HYGIENE => Some(jobs.hygiene_interval_secs),
            _ => None,
        }
        .filter(|s| *s > 0);
        let schedule = match (job, interval_secs) {
            (_, None) => "the operator's (cron, a systemd timer)".to_owned(),
            (PRUNE, Some(_)) => "after each sweep".to_owned(),
            (_, Some(secs)) => format!("every {secs} s"),
        };
        let last = state.catalog.last_run(job).await?;
        let next_due_at = match (&last, interval_secs) {
            (Some(r), Some(secs)) => {
                let ended = r.finished_at.unwrap_or(r.updated_at);
                Some(crate::domain::duration::after(ended, secs))
            }
            _ => None,
        };
        out.push(JobView {
            job,
            interval_secs,
            schedule,
            last_run: last.map(RunView::from),
            next_due_at,
        });
    }
    Ok(Json(serde_json::json!({ "jobs": out })))
}

#[derive(Debug, Deserialize)]
struct RunsQuery {
    job: Option<String>,
    before: Option<String>,
    limit: Option<i64>,
}

async fn runs(
    _admin: Admin,
    State(state): State<AppState>,
    query: Result<Query<RunsQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, AppError> {
    let Query(q) = query.map_err(|e| bad_query(&e.body_text()))?;
    if let Some(job) = &q.job {
        if !JOBS.contains(&job.as_str()) {
            return Err(AppError::InvalidRequest(format!(
                "job: one of {}",
                JOBS.join(", ")
            )));
        }
    }
    let before = match q.before.as_deref() {
        None => None,
        Some(c) => {
            let (at, id) = paging::parse_before(paging::List::JobRuns, c).ok_or_else(|| {
                AppError::InvalidRequest("before: a next_before this list returned".into())
            })?;
            Some(Before { at, id })
        }
    };
    let limit = paging::page_size(q.limit)
        .ok_or_else(|| AppError::InvalidRequest(format!("limit: 1..={}", paging::MAX_PAGE)))?;
    let rows = state
        .catalog
        .runs_page(q.job.as_deref(), before.as_ref(), limit)
        .await?;
    let next_before = match rows.last() {
        Some(r) if i64::try_from(rows.len()).unwrap_or(i64::MAX) == limit => Some(
            paging::before_cursor(paging::List::JobRuns, r.started_at, &r.id),
        ),
        _ => None,
    };
    let runs: Vec<RunView> = rows.into_iter().map(RunView::from).collect();
    Ok(Json(
        serde_json::json!({ "runs": runs, "next_before": next_before }),
    ))
}

#[derive(Debug, Deserialize)]
struct ItemsQuery {
    after: Option<i64>,
    limit: Option<i64>,
}

#[derive(Serialize)]
struct Item {
    action: String,
    key: String,
    version_id: Option<String>,
    bytes: i64,
    reason: String,
}

impl From<JobItem> for Item {
    fn from(i: JobItem) -> Self {
        Self {
            action: i.action,
            key: i.key,
            version_id: i.version_id,
            bytes: i.bytes,
            reason: i.reason,
        }
    }
}

async fn run(
    _admin: Admin,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<ItemsQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, AppError> {
    let Query(q) = query.map_err(|e| bad_query(&e.body_text()))?;
    let after = q.after.unwrap_or(0);
    if after < 0 {
        return Err(AppError::InvalidRequest(
            "after: a next_after this run returned".into(),
        ));
    }
    let limit = paging::page_size(q.limit)
        .ok_or_else(|| AppError::InvalidRequest(format!("limit: 1..={}", paging::MAX_PAGE)))?;
    // Run ids are 32 lowercase hex digits; anything else is no run (and a NUL byte would be
    // refused by PostgreSQL as text).
    if id.len() != 32
        || !id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(AppError::JobRunNotFound);
    }
    let run = state
        .catalog
        .run_by_id(&id)
        .await?
        .ok_or(AppError::JobRunNotFound)?;
    let page = state.catalog.job_items_page(&run.id, after, limit).await?;
    let next_after = match page.last() {
        Some((n, _)) if i64::try_from(page.len()).unwrap_or(i64::MAX) == limit => Some(*n),
        _ => None,
    };
    let items: Vec<Item> = page.into_iter().map(|(_, i)| Item::from(i)).collect();
    Ok(Json(serde_json::json!({
        "run": RunView::from(run),
        "items": items,
        "next_after": next_after,
    })))
}

/// Starts hygiene's dry run and answers at once: 202 with the run's id and its address — the
/// run this replica already has in flight, if any (one at a time).
async fn hygiene_dry_run(
    _admin: Admin,
    State(state): State<AppState>,
) -> Result<impl IntoResponse, AppError> {
    let (run_id, started) = state
        .dry_runs
        .one_at_a_time(
            || {
                hygiene::start_dry_run(
                    state.catalog.clone(),
                    state.store.clone(),
                    state.settings.clone(),
                    Some(state.metrics.clone()),
                )
            },
            |id| {
                let catalog = state.catalog.clone();
                async move {
                    matches!(
                        catalog.run_by_id(&id).await,
                        Ok(Some(run)) if run.state != crate::domain::jobs::RunState::Running
                    )
                }
            },
        )
        .await
        .map_err(|e| match e {
            HygieneError::Catalog(e) => e.into(),
            HygieneError::Store(e) => e.into(),
            HygieneError::Busy => AppError::Unavailable("another run holds the job".into()),
        })?;
    if started {
        tracing::info!(run.id = %run_id, "hygiene dry run started through the API");
    }
    let location = format!("/v1/admin/jobs/runs/{run_id}");
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(serde_json::json!({ "run_id": run_id })),
    ))
}
