//! `upcommit events`: the event endpoints and their deliveries, and sending failed deliveries
//! again. Reads and writes the catalog only (no S3, no running server needed).

use clap::{ArgGroup, Subcommand};

use crate::config::Settings;
use crate::services::events::redeliver::{self, RedeliverError};

#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// Every endpoint with its deliveries by state (pending, failed, delivered).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Make an endpoint's failed deliveries (past their retry window, kept) due again for
    /// another UPCOMMIT_EVENT_RETRY_WINDOW; the files they block move on once they are
    /// delivered. Dry run by default: `--yes` changes them.
    #[command(group(ArgGroup::new("mode").required(true).args(["dry_run", "yes"])))]
    Retry {
        /// The endpoint's id.
        #[arg(long)]
        endpoint: String,
        /// Count them; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Send them again.
        #[arg(long)]
        yes: bool,
    },
    /// Send an endpoint every event after a feed cursor again (same ids: receivers that
    /// deduplicate see nothing new; one that lost its state rebuilds it), in feed order per
    /// file. Dry run by default: `--yes` sends them.
    #[command(group(ArgGroup::new("mode").required(true).args(["dry_run", "yes"])))]
    Replay {
        /// The endpoint's id.
        #[arg(long)]
        endpoint: String,
        /// A cursor of `GET /v1/events` (the last position already handled); default: the
        /// start.
        #[arg(long, default_value = "")]
        after: String,
        /// Count them; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Send them.
        #[arg(long)]
        yes: bool,
    },
}

/// Exit codes: 0 done, 1 failed, 2 cannot start, 3 no such endpoint.
pub async fn run(settings: &Settings, command: EventsCommand) -> i32 {
    let catalog = match crate::catalog::connect(
        settings.database.url.expose(),
        settings.database.max_connections.min(2),
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("upcommit events: database: {e}");
            return 2;
        }
    };
    let counts = match catalog.endpoint_counts().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("upcommit events: {e}");
            return 1;
        }
    };
    match command {
        EventsCommand::List { json } => {
            if json {
                match serde_json::to_string_pretty(&serde_json::json!({ "endpoints": counts })) {
                    Ok(text) => println!("{text}"),
                    Err(e) => {
                        eprintln!("upcommit events: {e}");
                        return 1;
                    }
                }
            } else if counts.is_empty() {
                println!("no event endpoints");
            } else {
                for c in &counts {
                    println!(
                        "{} ({}, {}{}): {} pending, {} failed, {} delivered — {}",
                        c.id,
                        c.kind,
                        c.source,
                        if c.enabled { "" } else { ", disabled" },
                        c.pending,
                        c.failed,
                        c.delivered,
                        super::jobs::printable(&c.url)
                    );
                }
            }
            0
        }
        EventsCommand::Replay {
            endpoint,
            after,
            yes,
            ..
        } => {
            let Some(after) = crate::services::events::feed::parse_cursor(Some(&after)) else {
                eprintln!("upcommit events replay: --after: a cursor of GET /v1/events");
                return 2;
            };
            match redeliver::replay(&catalog, settings, &endpoint, after, !yes).await {
                Ok(r) => {
                    if let Some(through) = r.pruned_through {
                        eprintln!(
                            "upcommit events replay: events after cursor {after} up to {through} were pruned (retention); replaying from {through} on"
                        );
                    }
                    if yes {
                        println!(
                            "{} events after cursor {after} are due again to {endpoint}",
                            r.due_again
                        );
                    } else {
                        println!(
                            "{} events after cursor {after} would be sent to {endpoint} again (dry run; --yes sends them)",
                            r.due_again
                        );
                    }
                    0
                }
                Err(e) => redeliver_failed("replay", &endpoint, e),
            }
        }
        EventsCommand::Retry { endpoint, yes, .. } => {
            match redeliver::retry(&catalog, settings, &endpoint, !yes).await {
                Ok(n) if yes => {
                    println!("{n} failed deliveries of {endpoint} are due again");
                    0
                }
                Ok(n) => {
                    println!(
                        "{n} failed deliveries of {endpoint} would be sent again (dry run; --yes sends them)"
                    );
                    0
                }
                Err(e) => redeliver_failed("retry", &endpoint, e),
            }
        }
    }
}

/// Exit 3 for an endpoint that is missing or disabled, 1 for a failure.
fn redeliver_failed(verb: &str, endpoint: &str, e: RedeliverError) -> i32 {
    match e {
        RedeliverError::NotFound => {
            eprintln!(
                "upcommit events {verb}: no endpoint {:?}",
                super::jobs::printable(endpoint)
            );
            3
        }
        RedeliverError::Disabled(_) => {
            eprintln!("upcommit events {verb}: {e}");
            3
        }
        RedeliverError::Catalog(e) => {
            eprintln!("upcommit events {verb}: {e}");
            1
        }
    }
}
