//! Maintenance job runs as records: every run has an id, a state, a checkpoint to resume from
//! and a summary; what it did or would do is reported item by item.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// The jobs' names, as runs, leases and checkpoints record them.
pub const SWEEP: &str = "sweep";
pub const RECONCILE: &str = "reconcile";
pub const HYGIENE: &str = "hygiene";
pub const PRUNE: &str = "prune";
pub const LEGACY_IMPORT: &str = "legacy_import";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Running,
    Finished,
    Failed,
    /// The job refused to act on doubtful inputs (say, partitions dated in the future).
    Refused,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Failed => "failed",
            Self::Refused => "refused",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => Self::Running,
            "finished" => Self::Finished,
            "failed" => Self::Failed,
            "refused" => Self::Refused,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobRun {
    pub id: String,
    pub job: String,
    pub dry_run: bool,
    pub state: RunState,
    /// Where a resumed run continues (job-specific text).
    pub checkpoint: Option<String>,
    /// The run's totals as JSON text.
    pub summary: Option<String>,
    pub started_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl JobRun {
    pub fn start(job: &str, dry_run: bool, now: DateTime<Utc>) -> Self {
        Self {
            id: uuid::Uuid::new_v4().simple().to_string(),
            job: job.to_owned(),
            dry_run,
            state: RunState::Running,
            checkpoint: None,
            summary: None,
            started_at: now,
            updated_at: now,
            finished_at: None,
        }
    }
}

/// One reported item: a key (and version) and what happened to it, or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobItem {
    /// `deleted`, `would_delete`, `skipped`, `unindexed`, `missing`, `quarantined`, …
    pub action: String,
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    pub bytes: i64,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_states_round_trip() {
        for s in [
            RunState::Running,
            RunState::Finished,
            RunState::Failed,
            RunState::Refused,
        ] {
            assert_eq!(RunState::parse(s.as_str()), Some(s));
        }
        assert_eq!(RunState::parse("done"), None);
    }

    #[test]
    fn runs_get_distinct_ids() {
        let now = Utc::now();
        assert_ne!(
            JobRun::start("sweep", false, now).id,
            JobRun::start("sweep", false, now).id
        );
    }
}
