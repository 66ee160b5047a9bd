//! `upcommit legacy import`: the operator's path from the layout that predates `tmp/`.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Subcommand};

use crate::config::Settings;
use crate::domain::jobs::{JobItem, RunState};
use crate::domain::legacy::{check_header, listing_prefixes, KeyPattern, OwnerSource, OwnerTable};
use crate::services::inventory::{csv_fields, InventorySource};
use crate::services::legacy_import::{self, ImportOptions, ImportOutcome};
use crate::services::reconcile::BucketSource;
use crate::state::AppState;

#[derive(Debug, Subcommand)]
pub enum LegacyCommand {
    /// Record the objects under the legacy prefixes as their owners' uploads and commit them in
    /// place (the checks of POST /v1/files; nothing is copied, moved or deleted). Dry run
    /// unless --yes. Exit 0 finished, 1 failed (or keys failed), 2 usage, 4 another run holds
    /// the lease.
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

/// The owners CSV: the mapping, and its bad rows as report items.
fn read_owners(path: &PathBuf, settings: &Settings) -> Result<(OwnerTable, Vec<JobItem>), String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--owners {}: {e}", path.display()))?;
    // A spreadsheet's export may start with a byte-order mark; `lines` drops CRLF's CR.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, csv_fields(l)));
    let header_ok = lines.next().is_some_and(|(_, h)| check_header(&h).is_ok());
    if !header_ok {
        return Err(format!(
            "--owners {}: the first line must be the header key,owner[,profile]",
            path.display()
        ));
    }
    let table = OwnerTable::from_rows(lines, &settings.uploads.legacy_prefixes);
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
    Ok((table, upfront))
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
    let (owners, upfront) = match (&args.owner_pattern, &args.owners) {
        (Some(raw), None) => {
            let pattern = match KeyPattern::parse(raw) {
                Ok(p) => p,
                Err(e) => return usage(&format!("--owner-pattern {raw:?}: {}", e.message())),
            };
            let Some(profile) = args.profile.clone() else {
                return usage("--owner-pattern needs --profile");
            };
            (OwnerSource::Pattern { pattern, profile }, Vec::new())
        }
        (None, Some(path)) => match read_owners(path, &settings) {
            Ok((table, upfront)) => (
                OwnerSource::Table {
                    table,
                    default_profile: args.profile.clone(),
                },
                upfront,
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
            "legacy import run {} {}{}{} ({} of {}): {} keys listed; {} {}, {} {}; {} skipped (recorded already), {} outside the legacy prefixes; {} refused{}; {} failed",
            run.id,
            run.state.as_str(),
            if dry_run { " (dry run: nothing changed; --yes imports)" } else { "" },
            if summary.resumed { " (resumed after its checkpoint)" } else { "" },
            summary.source,
            summary.prefixes.join(", "),
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
    match run.state {
        RunState::Finished if summary.failed == 0 => 0,
        _ => 1,
    }
}
