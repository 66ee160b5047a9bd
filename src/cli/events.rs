//! `upcommit events`: the event endpoints and their deliveries, and sending failed deliveries
//! again. Reads and writes the catalog only (no S3, no running server needed).

use clap::{ArgGroup, Subcommand};

use crate::config::Settings;

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
            let Some(c) = counts.iter().find(|c| c.id == endpoint) else {
                eprintln!(
                    "upcommit events replay: no endpoint {:?}",
                    super::jobs::printable(&endpoint)
                );
                return 3;
            };
            if !c.enabled {
                // Nothing delivers to a disabled endpoint: the rows would only wait for the
                // retention and then count as discarded (review 26).
                eprintln!(
                    "upcommit events replay: endpoint {} is disabled, so nothing would send these. One removed from the settings comes back when it is listed there again; one removed through the API cannot be enabled again: create an endpoint with another id and replay into it",
                    c.id
                );
                return 3;
            }
            let window = i64::try_from(settings.events.retry_window_secs).unwrap_or(i64::MAX / 4);
            // As the feed does: say so when events after the cursor were pruned.
            if let Ok(Some((first, _))) = catalog.event_positions().await {
                if after < first - 1 {
                    eprintln!(
                        "upcommit events replay: events after cursor {after} up to {} were pruned (retention); replaying from {} on",
                        first - 1,
                        first - 1
                    );
                }
            }
            match catalog.replay_deliveries(&c.id, after, window, !yes).await {
                Ok(n) if yes => {
                    println!("{n} events after cursor {after} are due again to {}", c.id);
                    0
                }
                Ok(n) => {
                    println!(
                        "{n} events after cursor {after} would be sent to {} again (dry run; --yes sends them)",
                        c.id
                    );
                    0
                }
                Err(e) => {
                    eprintln!("upcommit events replay: {e}");
                    1
                }
            }
        }
        EventsCommand::Retry { endpoint, yes, .. } => {
            let Some(c) = counts.iter().find(|c| c.id == endpoint) else {
                eprintln!(
                    "upcommit events retry: no endpoint {:?}",
                    super::jobs::printable(&endpoint)
                );
                return 3;
            };
            if !c.enabled {
                eprintln!(
                    "upcommit events retry: endpoint {} is disabled, so nothing would send these. One removed from the settings comes back when it is listed there again; one removed through the API cannot be enabled again: create an endpoint with another id and replay into it",
                    c.id
                );
                return 3;
            }
            if !yes {
                println!(
                    "{} failed deliveries of {} would be sent again (dry run; --yes sends them)",
                    c.failed, c.id
                );
                return 0;
            }
            let window = i64::try_from(settings.events.retry_window_secs).unwrap_or(i64::MAX / 4);
            match catalog.retry_failed_deliveries(&c.id, window).await {
                Ok(n) => {
                    println!("{n} failed deliveries of {} are due again", c.id);
                    0
                }
                Err(e) => {
                    eprintln!("upcommit events retry: {e}");
                    1
                }
            }
        }
    }
}
