//! `upcommit sweep`, `reconcile`, `hygiene`, `prune` and `report`: the maintenance jobs from the command line, with
//! the service's settings.

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::config::Settings;
use crate::domain::jobs::{JobItem, RunState};
use crate::services::bucket_source::BucketSource;
use crate::services::inventory::InventorySource;
use crate::services::reconcile::{self, ReconcileOptions, ReconcileOutcome};
use crate::services::sweep::{self, SweepOutcome};
use crate::storage::{CopyLimits, ObjectStore, S3Store};

/// Items printed in text mode before pointing at `--json`.
const TEXT_ITEMS: usize = 200;

/// Exit codes: 0 finished, 1 failed, 2 cannot start, 3 refused (clock skew), 4 another replica
/// is sweeping.
pub async fn sweep(settings: &Settings, dry_run: bool, json: bool) -> i32 {
    let Some((catalog, store, _)) = connect("sweep", settings).await else {
        return 2;
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
    let verb = if dry_run { "would delete" } else { "deleted" };
    let headline = || {
        format!(
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
        )
    };
    print_run(
        &catalog,
        &run,
        &summary,
        json,
        headline,
        summary.error.as_deref(),
    )
    .await;
    match run.state {
        RunState::Finished => 0,
        RunState::Refused => 3,
        _ => 1,
    }
}

/// The catalog (migrations run) and the store, or a message and `None`.
pub(super) async fn connect(
    what: &str,
    settings: &Settings,
) -> Option<(Arc<dyn Catalog>, Arc<dyn ObjectStore>, aws_sdk_s3::Client)> {
    let catalog = match crate::catalog::connect(
        settings.database.url.expose(),
        settings.database.max_connections,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("upcommit {what}: database: {e}");
            return None;
        }
    };
    match S3Store::connect(&settings.s3).await {
        Ok(s) => {
            let s = s.with_copy_limits(CopyLimits::from_settings(&settings.uploads));
            let client = s.client().clone();
            Some((catalog, Arc::new(s), client))
        }
        Err(e) => {
            eprintln!("upcommit {what}: {e}");
            None
        }
    }
}

/// What `--quarantine` and `--quarantine-stray` ask to move, and whether
/// `--remove-orphan-renditions` asks to remove renditions of files that are gone.
#[derive(Debug, Clone, Copy)]
pub struct Quarantine {
    pub unindexed: bool,
    pub stray: bool,
    pub orphan_renditions: bool,
}

/// Exit codes: 0 finished, 1 failed, 2 cannot start, 3 refused (keys out of order), 4 another
/// replica is reconciling, 5 finished and file handles whose object is missing were found.
/// Stray objects are reported, not an alarm: they do not change the exit code.
pub async fn reconcile(
    settings: &Settings,
    grace: &str,
    inventory: Option<&str>,
    inventory_max_age: &str,
    quarantine: Quarantine,
    workers: usize,
    json: bool,
) -> i32 {
    let Some(grace) = crate::domain::duration::parse_span(grace) else {
        eprintln!(
            "upcommit reconcile: --grace: {}, got {grace:?}",
            crate::domain::duration::EXPECTED
        );
        return 2;
    };
    // Checked whether or not an inventory is given, or says when it was taken.
    let Some(max_age) = crate::domain::duration::parse_span(inventory_max_age) else {
        eprintln!(
            "upcommit reconcile: --inventory-max-age: {}, got {inventory_max_age:?}",
            crate::domain::duration::EXPECTED
        );
        return 2;
    };
    let Some((catalog, store, client)) = connect("reconcile", settings).await else {
        return 2;
    };
    let (source, inventory_taken_at): (Option<Box<dyn BucketSource>>, _) = match inventory {
        None => (None, None),
        Some(url) => {
            let source = match InventorySource::open(client, url).await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("upcommit reconcile: {e}");
                    return 2;
                }
            };
            match inventory_taken_at(&catalog, &source, max_age).await {
                Ok(taken_at) => (Some(Box::new(source) as Box<dyn BucketSource>), taken_at),
                Err(e) => {
                    eprintln!("upcommit reconcile: manifest {url}: {e}");
                    return 2;
                }
            }
        }
    };
    let options = ReconcileOptions {
        grace,
        quarantine: quarantine.unindexed,
        quarantine_stray: quarantine.stray,
        workers,
        inventory_taken_at,
        remove_orphan_renditions: quarantine.orphan_renditions,
    };
    let (run, summary) =
        match reconcile::reconcile(&catalog, &store, settings, &options, source).await {
            Ok(ReconcileOutcome::Ran { run, summary }) => (run, summary),
            Ok(ReconcileOutcome::Busy) => {
                eprintln!("upcommit reconcile: another replica is reconciling; nothing done");
                return 4;
            }
            Err(e) => {
                eprintln!("upcommit reconcile: {e}");
                return 1;
            }
        };
    let taken = summary.inventory_taken_at.map_or(String::new(), |t| {
        format!(
            "; the inventory was taken at {}: {} handles recorded since are left to a later one",
            t.to_rfc3339(),
            summary.recorded_after_inventory
        )
    });
    let headline = || {
        format!(
                "reconcile run {} {} ({}): {} keys listed, {} handles, {} matched; {} unindexed ({} bytes{}), {} missing ({} bytes), {} tmp objects past the lifecycle window, {} stray ({} bytes{}), {} renditions of files that are gone ({} bytes{}){taken}",
                run.id,
                run.state.as_str(),
                summary.source,
                summary.keys_listed,
                summary.handles_read,
                summary.matched,
                summary.unindexed,
                summary.unindexed_bytes,
                if quarantine.unindexed { format!(", {} quarantined", summary.quarantined) } else { String::new() },
                summary.missing,
                summary.missing_bytes,
                summary.tmp_past_lifecycle,
                summary.stray,
                summary.stray_bytes,
                if quarantine.stray { format!(", {} quarantined", summary.stray_quarantined) } else { String::new() },
                summary.orphan_renditions,
                summary.orphan_rendition_bytes,
                if quarantine.orphan_renditions { format!(", {} removed", summary.orphan_renditions_removed) } else { String::new() },
        )
    };
    print_run(
        &catalog,
        &run,
        &summary,
        json,
        headline,
        summary.error.as_deref(),
    )
    .await;
    match run.state {
        RunState::Finished if summary.missing > 0 => 5,
        RunState::Finished => 0,
        RunState::Refused => 3,
        _ => 1,
    }
}

/// When the inventory was taken, if its manifest says, checked against the database's clock
/// and `--inventory-max-age`.
async fn inventory_taken_at(
    catalog: &Arc<dyn Catalog>,
    source: &InventorySource,
    max_age: chrono::Duration,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, String> {
    let Some(taken_at) = source.taken_at()? else {
        return Ok(None);
    };
    let now = catalog.clock().await.map_err(|e| e.to_string())?;
    crate::domain::reconcile::inventory_taken_at(taken_at, now, max_age).map(Some)
}

/// Exit codes: 0 finished, 1 failed, 2 cannot start, 4 another replica runs it.
pub async fn hygiene(settings: &Settings, dry_run: bool, json: bool, at: Option<&str>) -> i32 {
    let at = match at {
        None => None,
        Some(t) => match chrono::DateTime::parse_from_rfc3339(t) {
            Ok(t) => Some(t.with_timezone(&chrono::Utc)),
            Err(e) => {
                eprintln!("upcommit hygiene: --at: expected RFC 3339, got {t:?}: {e}");
                return 2;
            }
        },
    };
    let Some((catalog, store, _)) = connect("hygiene", settings).await else {
        return 2;
    };
    // Ages are judged by the database's clock, the one every replica shares.
    let now = match at {
        Some(t) => t,
        None => match catalog.clock().await {
            Ok(t) => t,
            Err(e) => {
                eprintln!("upcommit hygiene: cannot read the database's clock: {e}");
                return 2;
            }
        },
    };
    let (run, summary) =
        match crate::services::hygiene::run(&catalog, &store, settings, dry_run, now).await {
            Ok(crate::services::hygiene::HygieneOutcome::Ran { run, summary }) => (run, summary),
            Ok(crate::services::hygiene::HygieneOutcome::Busy) => {
                eprintln!("upcommit hygiene: another replica is running it; nothing done");
                return 4;
            }
            Err(e) => {
                eprintln!("upcommit hygiene: {e}");
                return 1;
            }
        };
    let headline = || {
        format!(
                "unlinked-data run {} {}{} on profiles [{}]: {} unlinked, {} archived ({} bytes moved, {} kept in class), {} deleted ({} bytes), {} blocked, {} skipped (changed since read), {} failed",
                run.id,
                run.state.as_str(),
                if dry_run { " (dry run)" } else { "" },
                summary.profiles.join(", "),
                summary.unlinked,
                summary.archived,
                summary.archived_bytes,
                summary.archived_in_place,
                summary.deleted,
                summary.deleted_bytes,
                summary.blocked,
                summary.skipped,
                summary.failed,
        )
    };
    print_run(&catalog, &run, &summary, json, headline, None).await;
    match run.state {
        RunState::Finished => 0,
        _ => 1,
    }
}

/// Exit codes: 0 finished, 1 failed, 2 cannot start, 4 another replica is pruning.
pub async fn prune(settings: &Settings, dry_run: bool, json: bool) -> i32 {
    use crate::services::prune::{self, PruneOutcome};
    // The database only: pruning touches no object.
    let catalog = match crate::catalog::connect(
        settings.database.url.expose(),
        settings.database.max_connections,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("upcommit prune: database: {e}");
            return 2;
        }
    };
    let (run, summary) = match prune::prune(&catalog, settings, dry_run).await {
        Ok(PruneOutcome::Ran { run, summary }) => (run, summary),
        Ok(PruneOutcome::Busy) => {
            eprintln!("upcommit prune: another replica is pruning; nothing done");
            return 4;
        }
        Err(e) => {
            eprintln!("upcommit prune: {e}");
            return 1;
        }
    };
    let verb = if dry_run { "would prune" } else { "pruned" };
    let u = &summary.uploads;
    let headline = || {
        format!(
            "prune run {} {}{}: {verb} {} upload rows ({} committed, {} rejected, {} expired), {} multipart sessions, {} parts, {} quota rows (days before {}), {} delivered events, {} undelivered deliveries discarded, older than {}s; {} job runs ended before {}, {} link scans ({} superseded, {} abandoned) with {} batches and {} seen rows; in {} batches",
            run.id,
            run.state.as_str(),
            if dry_run { " (dry run)" } else { "" },
            u.uploads(),
            u.committed,
            u.rejected,
            u.expired,
            u.multipart_sessions,
            u.upload_parts,
            summary.quota_rows,
            summary.quota_before.map(|d| d.to_string()).unwrap_or_default(),
            summary.events,
            summary.discarded_deliveries.values().sum::<u64>(),
            summary.retention_secs,
            summary.job_runs,
            summary
                .job_history_cutoff
                .map(|t| t.to_rfc3339())
                .unwrap_or_default(),
            summary.link_scans.scans(),
            summary.link_scans.superseded,
            summary.link_scans.abandoned,
            summary.link_scans.batches,
            summary.link_scans.seen,
            summary.batches,
        )
    };
    print_run(
        &catalog,
        &run,
        &summary,
        json,
        headline,
        summary.error.as_deref(),
    )
    .await;
    match run.state {
        RunState::Finished => 0,
        _ => 1,
    }
}

/// Exit codes: 0 printed, 1 a read failed, 2 cannot start.
pub async fn report(settings: &Settings, json: bool) -> i32 {
    let Some((catalog, store, _)) = connect("report", settings).await else {
        return 2;
    };
    let report = match crate::services::report::storage_report(&catalog, &store, settings).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("upcommit report: {e}");
            return 1;
        }
    };
    if json {
        println!("{:#}", serde_json::json!(report));
        return 0;
    }
    println!(
        "storage report for bucket {} at {}",
        report.bucket, report.generated_at
    );
    for (status, a) in &report.handles {
        println!(
            "  handles {status:<10} {:>10} files {:>16} bytes",
            a.count, a.bytes
        );
    }
    for b in &report.tmp_by_age {
        println!(
            "  tmp     {:<10} {:>10} objects {:>14} bytes",
            b.age, b.objects, b.bytes
        );
    }
    match &report.unindexed {
        Some(u) => println!(
            "  unindexed (last reconcile) {} objects, {} bytes",
            u.count, u.bytes
        ),
        None => println!("  unindexed: no reconcile has run yet"),
    }
    println!(
        "  estimated monthly cost: {:.2}",
        report.estimated_monthly_cost
    );
    for t in &report.tables {
        println!(
            "  table   {:<18} {:>12} rows {:>14}",
            t.table,
            t.rows,
            t.bytes
                .map_or_else(|| "? bytes".to_owned(), |b| format!("{b} bytes"))
        );
    }
    0
}

/// Items read per catalog round trip when a report is printed.
const REPORT_PAGE: i64 = 1000;

/// A finished run: as JSON (the run, its summary and every item), or a headline, the first
/// items and the error if there was one. The items are read and printed a page at a time, so a
/// run of a million items is printed in constant memory.
pub(super) async fn print_run<S: serde::Serialize>(
    catalog: &Arc<dyn Catalog>,
    run: &crate::domain::jobs::JobRun,
    summary: &S,
    json: bool,
    headline: impl FnOnce() -> String,
    error: Option<&str>,
) {
    if json {
        let head = serde_json::json!({ "run": run, "summary": summary }).to_string();
        // `{"run":…,"summary":…,"items":[` then one item a line, then `]}`.
        println!("{},\"items\":[", head.strip_suffix('}').unwrap_or(&head));
        let mut first = true;
        for_each_item(catalog, &run.id, |_, item| {
            let line = serde_json::to_string(item).unwrap_or_default();
            println!("{}{line}", if first { "" } else { "," });
            first = false;
        })
        .await;
        println!("]}}");
        return;
    }
    println!("{}", printable(&headline()));
    let total = for_each_item(catalog, &run.id, |n, i| {
        if n <= TEXT_ITEMS {
            println!(
                "  {:<13} {}{}  {} B  {}",
                i.action,
                printable(&i.key),
                i.version_id
                    .as_deref()
                    .map(|v| format!(" (version {v})"))
                    .unwrap_or_default(),
                i.bytes,
                printable(&i.reason)
            );
        }
    })
    .await;
    if total > TEXT_ITEMS {
        println!("  … and {} more (--json lists all)", total - TEXT_ITEMS);
    }
    if let Some(e) = error {
        println!("error: {}", printable(e));
    }
}

/// `text` for a terminal: control characters (a line break, an escape sequence) and the
/// invisible marks that reorder or hide text are written as escapes (`\u{a}`, `\u{1b}`), so a
/// key cannot forge report lines or rewrite the screen. JSON output needs none of this.
pub(super) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(hidden) {
        return text.into();
    }
    text.chars()
        .map(|c| {
            if hidden(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// Calls `f` with each item of the run (numbered from 1), a page at a time; how many there were.
/// A catalog error ends the listing early (the run itself is already recorded).
async fn for_each_item(
    catalog: &Arc<dyn Catalog>,
    run_id: &str,
    mut f: impl FnMut(usize, &JobItem),
) -> usize {
    let (mut after, mut n) = (0, 0);
    loop {
        let page = match catalog.job_items_page(run_id, after, REPORT_PAGE).await {
            Ok(page) => page,
            Err(e) => {
                eprintln!("upcommit: cannot read the run's items: {e}");
                return n;
            }
        };
        let Some((last, _)) = page.last() else {
            return n;
        };
        after = *last;
        for (_, item) in &page {
            n += 1;
            f(n, item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_and_direction_marks_are_escaped_for_the_terminal() {
        assert_eq!(printable("uploads/a/b.png"), "uploads/a/b.png");
        assert_eq!(
            printable("uploads/a\u{1b}[2J\nx\u{202e}.png"),
            "uploads/a\\u{1b}[2J\\u{a}x\\u{202e}.png"
        );
        assert_eq!(printable("uploads/é/ü.png"), "uploads/é/ü.png");
    }
}
