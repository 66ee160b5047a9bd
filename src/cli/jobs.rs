//! `upcommit sweep`: the tmp sweeper from the command line, with the service's settings.

use std::sync::Arc;

use crate::config::Settings;
use crate::domain::jobs::{JobItem, RunState};
use crate::services::sweep::{self, SweepOutcome};
use crate::storage::{ObjectStore, S3Store};

/// Items printed in text mode before pointing at `--json`.
const TEXT_ITEMS: usize = 200;

/// Exit codes: 0 finished, 1 failed, 2 cannot start, 3 refused (clock skew), 4 another replica
/// is sweeping.
pub async fn sweep(settings: &Settings, dry_run: bool, json: bool) -> i32 {
    let catalog = match crate::catalog::connect(
        settings.database.url.expose(),
        settings.database.max_connections,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("upcommit sweep: database: {e}");
            return 2;
        }
    };
    let store: Arc<dyn ObjectStore> = match S3Store::connect(&settings.s3).await {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("upcommit sweep: {e}");
            return 2;
        }
    };
    let (run, summary) = match sweep::sweep(&catalog, &store, settings, dry_run).await {
        Ok(SweepOutcome::Ran { run, summary }) => (run, summary),
        Ok(SweepOutcome::Busy) => {
            eprintln!("upcommit sweep: another replica is sweeping; nothing done");
            return 4;
        }
        Err(e) => {
            eprintln!("upcommit sweep: {e}");
            return 1;
        }
    };
    let items = catalog.job_items(&run.id).await.unwrap_or_default();
    if json {
        let body = serde_json::json!({ "run": run, "summary": summary, "items": items });
        println!("{body:#}");
    } else {
        let verb = if dry_run { "would delete" } else { "deleted" };
        println!(
            "sweep run {} {}{}: {} partitions swept, {} kept (too young); {verb} {} versions ({} bytes); {} keys skipped, {} failed, {} multipart uploads {}",
            run.id,
            run.state.as_str(),
            if dry_run { " (dry run)" } else { "" },
            summary.partitions_swept,
            summary.partitions_kept,
            summary.deleted_versions,
            summary.deleted_bytes,
            summary.skipped_keys,
            summary.failed_versions,
            summary.multipart_aborted,
            if dry_run { "to abort" } else { "aborted" },
        );
        print_items(&items);
        if let Some(e) = &summary.error {
            println!("error: {e}");
        }
    }
    match run.state {
        RunState::Finished => 0,
        RunState::Refused => 3,
        _ => 1,
    }
}

fn print_items(items: &[JobItem]) {
    for i in items.iter().take(TEXT_ITEMS) {
        println!(
            "  {:<13} {}{}  {} B  {}",
            i.action,
            i.key,
            i.version_id
                .as_deref()
                .map(|v| format!(" (version {v})"))
                .unwrap_or_default(),
            i.bytes,
            i.reason
        );
    }
    if items.len() > TEXT_ITEMS {
        println!(
            "  … and {} more (--json lists all)",
            items.len() - TEXT_ITEMS
        );
    }
}
