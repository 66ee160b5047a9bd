//! `upcommit legacy import`: the operator's path from the layout that predates `tmp/`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::{ArgGroup, Args, Subcommand};
use sha2::Digest;

use crate::config::Settings;
use crate::domain::jobs::{JobItem, RunState};
use crate::domain::legacy::{
    check_header, listing_prefixes, BadRow, KeyPattern, OwnerSource, OwnerTable, Refusal,
};
use crate::services::bucket_source::BucketSource;
use crate::services::inventory::{csv_record, InventorySource};
use crate::services::legacy_import::{self, ImportOptions, ImportOutcome};
use crate::state::AppState;

#[derive(Debug, Subcommand)]
pub enum LegacyCommand {
    /// Record the objects under the legacy prefixes as their owners' uploads and commit them in
    /// place (the checks of POST /v1/files; nothing is copied, moved or deleted). Dry run
    /// unless --yes. Exit 0 finished, 1 failed (or keys failed or to retry), 2 usage, 3
    /// refused (keys out of order), 4 another run holds the lease, 130 interrupted (Ctrl-C or
    /// SIGTERM: checkpointed and the lease given back; a rerun resumes).
    #[command(group(ArgGroup::new("mapping").required(true).args(["owner_pattern", "owners"])))]
    #[command(group(ArgGroup::new("mode").args(["dry_run", "yes"])))]
    Import(ImportArgs),
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Where the owner sits in a key, e.g. 'uploads/{owner}/*' (needs --profile).
    #[arg(long)]
    owner_pattern: Option<String>,
    /// A CSV with the header key,owner[,profile], one key a row.
    #[arg(long)]
    owners: Option<PathBuf>,
    /// The upload profile of the imported keys (with --owners: of rows without a profile).
    #[arg(long)]
    profile: Option<String>,
    /// Only keys under this prefix (within a legacy prefix).
    #[arg(long)]
    prefix: Option<String>,
    /// Read the keys from an S3 Inventory (CSV) instead of listing: s3://bucket/path/manifest.json.
    #[arg(long)]
    inventory: Option<String>,
    /// Record the uploads only; do not commit them (a later run without it commits them).
    #[arg(long)]
    no_commit: bool,
    /// Keys judged at once (1 to 64).
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Import: without it, the run is a dry run.
    #[arg(long)]
    yes: bool,
    /// Report what would be imported, skipped and refused; change nothing (the default).
    #[arg(long)]
    dry_run: bool,
    /// Print the run, its totals and every item as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(settings: Settings, command: LegacyCommand) -> i32 {
    match command {
        LegacyCommand::Import(args) => import(settings, args).await,
    }
}

fn usage(msg: &str) -> i32 {
    eprintln!("upcommit legacy import: {msg}");
    2
}

/// The owners CSV: the mapping, its bad rows as report items, and its content's SHA-256 (hex).
fn read_owners(
    path: &PathBuf,
    settings: &Settings,
) -> Result<(OwnerTable, Vec<JobItem>, String), String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--owners {}: {e}", path.display()))?;
    let digest: String = sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    // A spreadsheet's export may start with a byte-order mark; `lines` drops CRLF's CR.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, csv_record(l)));
    let header_ok = lines
        .next()
        .is_some_and(|(_, (h, closed))| closed && check_header(&h).is_ok());
    if !header_ok {
        return Err(format!(
            "--owners {}: the first line must be the header key,owner[,profile]",
            path.display()
        ));
    }
    // A key or owner never holds a line break: a row whose quote is still open at the end of
    // its line is refused whole (and so is the line the quote runs on into), never read as if
    // the quote had been closed.
    let mut open_quotes = Vec::new();
    let rows = lines.filter_map(|(line, (fields, closed))| {
        if closed {
            return Some((line, fields));
        }
        open_quotes.push(BadRow {
            line,
            key: fields.into_iter().next().unwrap_or_default(),
            refusal: Refusal::MappingInvalid {
                line,
                reason: "a quoted field is not closed on its line (a key or owner never holds a line break)".into(),
            },
        });
        None
    });
    let mut table = OwnerTable::from_rows(rows, &settings.uploads.legacy_prefixes);
    table.bad_rows.append(&mut open_quotes);
    table.bad_rows.sort_by_key(|b| b.line);
    let upfront = table
        .bad_rows
        .iter()
        .map(|b| JobItem {
            action: "refused".into(),
            key: b.key.clone(),
            version_id: None,
            bytes: 0,
            reason: format!("{} (owners CSV line {})", b.refusal.reason(), b.line),
        })
        .collect();
    Ok((table, upfront, digest))
}

async fn import(settings: Settings, args: ImportArgs) -> i32 {
    let legacy = &settings.uploads.legacy_prefixes;
    if legacy.is_empty() {
        return usage(
            "no legacy prefixes are configured (UPCOMMIT_LEGACY_PREFIXES): nothing is eligible",
        );
    }
    let prefixes = listing_prefixes(legacy, args.prefix.as_deref());
    if prefixes.is_empty() {
        return usage("--prefix is not within any legacy prefix");
    }
    if !(1..=64).contains(&args.concurrency) {
        return usage("--concurrency must be 1 to 64");
    }
    if let Some(p) = args.profile.as_deref() {
        if settings.profile(p).is_none() {
            return usage(&format!("--profile: unknown upload profile {p:?}"));
        }
    }
    let profile_text = args.profile.as_deref().unwrap_or("-");
    let (owners, upfront, mapping) = match (&args.owner_pattern, &args.owners) {
        (Some(raw), None) => {
            let pattern = match KeyPattern::parse(raw) {
                Ok(p) => p,
                Err(e) => return usage(&format!("--owner-pattern {raw:?}: {}", e.message())),
            };
            let Some(profile) = args.profile.clone() else {
                return usage("--owner-pattern needs --profile");
            };
            let mapping = format!("--owner-pattern {raw} --profile {profile}");
            (
                OwnerSource::Pattern { pattern, profile },
                Vec::new(),
                mapping,
            )
        }
        (None, Some(path)) => match read_owners(path, &settings) {
            Ok((table, upfront, digest)) => (
                OwnerSource::Table {
                    table,
                    default_profile: args.profile.clone(),
                },
                upfront,
                format!(
                    "--owners {} (sha256 {digest}) --profile {profile_text}",
                    path.display()
                ),
            ),
            Err(e) => return usage(&e),
        },
        _ => return usage("give exactly one of --owner-pattern and --owners"),
    };
    let dry_run = !args.yes;
    let Some((catalog, store, client)) = super::jobs::connect("legacy import", &settings).await
    else {
        return 2;
    };
    let inventory: Option<Box<dyn BucketSource>> = match args.inventory.as_deref() {
        None => None,
        Some(url) => match InventorySource::open(client, url).await {
            Ok(s) => Some(Box::new(s)),
            Err(e) => {
                eprintln!("upcommit legacy import: {e}");
                return 2;
            }
        },
    };
    let options = ImportOptions {
        owners,
        prefixes,
        commit: !args.no_commit,
        concurrency: args.concurrency,
        dry_run,
        upfront,
        mapping,
        stop: stop_on_signal(),
    };
    let state = AppState::for_tool(settings, catalog.clone(), store);
    let (run, summary) = match legacy_import::run(&state, &options, inventory).await {
        Ok(ImportOutcome::Ran { run, summary }) => (run, summary),
        Ok(ImportOutcome::Busy) => {
            eprintln!(
                "upcommit legacy import: another legacy import is running (it holds the job's lease); nothing done"
            );
            return 4;
        }
        Err(e) => {
            eprintln!("upcommit legacy import: {e}");
            return 1;
        }
    };
    let headline = || {
        let refusals = summary
            .refusals
            .iter()
            .map(|(code, n)| format!("{code} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "legacy import run {} {}{}{} ({} of {}): {} keys listed; {} {}, {} {}; {} skipped (recorded already), {} outside the legacy prefixes; {} refused{}; {} failed; {} to retry (a commit in progress){}",
            run.id,
            run.state.as_str(),
            if dry_run { " (dry run: nothing changed; --yes imports)" } else { "" },
            if summary.resumed { " (resumed after its checkpoint)" } else { "" },
            summary.source,
            super::jobs::printable(&summary.prefixes.join(", ")),
            summary.keys_listed,
            if dry_run { "would import" } else { "imported" },
            summary.imported,
            if dry_run { "would commit" } else { "committed" },
            summary.committed,
            summary.skipped,
            summary.outside_legacy_prefixes,
            summary.refused,
            if refusals.is_empty() { String::new() } else { format!(" ({refusals})") },
            summary.failed,
            summary.retry_later,
            if summary.interrupted { "; interrupted at its checkpoint: run it again to resume" } else { "" },
        )
    };
    super::jobs::print_run(
        &catalog,
        &run,
        &summary,
        args.json,
        headline,
        summary.error.as_deref(),
    )
    .await;
    if summary.interrupted {
        eprintln!(
            "upcommit legacy import: interrupted; {}",
            if dry_run {
                "a dry run: nothing changed"
            } else {
                "stopped at its checkpoint and gave the lease back: run it again to resume"
            }
        );
        return 130;
    }
    match run.state {
        RunState::Finished if summary.failed == 0 && summary.retry_later == 0 => 0,
        RunState::Refused => 3,
        _ => 1,
    }
}

/// A flag Ctrl-C (SIGINT) or SIGTERM sets: the run stops taking keys at its next checkpoint,
/// writes it and gives the lease back. A second signal ends the process at once (exit 130).
fn stop_on_signal() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    tokio::spawn(async move {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return;
        };
        for _ in 0..2 {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            if flag.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
            eprintln!(
                "upcommit legacy import: stopping at the next checkpoint (again to quit now)"
            );
        }
    });
    stop
}
