//! The command line: `serve`, `migrate`, `token`, `healthcheck`, `doctor`, `bucket
//! apply-lifecycle`, the maintenance jobs, `legacy import`, `events` and the `upload` client.
//! Each dispatches into library functions.

mod api_client;
mod bucket;
mod events;
mod healthcheck;
mod jobs;
mod legacy;
mod resume;
mod upload;
mod variant;

use clap::{ArgGroup, Parser, Subcommand};

use crate::config::Settings;

#[derive(Debug, Parser)]
#[command(
    name = "upcommit",
    version,
    about = "Direct-to-S3 uploads in two phases: presign, then commit"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service (runs the database migrations first).
    Serve,
    /// Run the database migrations and exit.
    Migrate,
    /// Print a bearer token for local use, signed with UPCOMMIT_JWT_SECRET.
    Token {
        /// The user id (`sub` claim).
        #[arg(long)]
        sub: String,
        /// Mark the token as an admin's.
        #[arg(long)]
        admin: bool,
        /// Lifetime: 90s, 30m, 1h30m, 2d or seconds (above 0).
        #[arg(long, default_value = "1h")]
        ttl: String,
    },
    /// Ask the server this host runs for /readyz (at the UPCOMMIT_LISTEN address; 0.0.0.0 and
    /// [::] are probed on loopback); exit 0 when it answers 2xx, 1 otherwise. For container
    /// health checks and other probes that can only run a command.
    Healthcheck {
        /// Probe this URL instead.
        #[arg(long)]
        url: Option<String>,
    },
    /// Check the live bucket (versioning, lifecycle rules, CORS, encryption); exit 1 on any failure.
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sweep abandoned uploads out of old tmp/ partitions (every version), abort abandoned
    /// multipart uploads, and store a report. Exit 3 when it refuses (clock skew), 4 when another
    /// replica is sweeping.
    Sweep {
        /// List what would go; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the run, its totals and every item as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Match the bucket's keys against the file handles: unindexed objects under final
    /// prefixes, handles whose object is missing, tmp objects past the lifecycle window, stray
    /// objects outside every known prefix, renditions of files that are gone. Reports; deletes
    /// nothing but, when asked, renditions of files that are gone. Exit 5 when an object is
    /// missing.
    Reconcile {
        /// Skip unindexed objects younger than this (0s, 30m, 1h30m, 2d or seconds): commits in flight.
        #[arg(long, default_value = "24h")]
        grace: String,
        /// Read the bucket's keys from an S3 Inventory (CSV) instead of listing:
        /// s3://bucket/path/manifest.json.
        #[arg(long)]
        inventory: Option<String>,
        /// Refuse an inventory taken longer ago than this (its manifest's creationTimestamp):
        /// the files committed since it was taken are left to a later inventory.
        #[arg(long, default_value = "10d")]
        inventory_max_age: String,
        /// Move unindexed objects under quarantine/ (which expires on its own rule).
        #[arg(long)]
        quarantine: bool,
        /// Also move stray objects (outside every known prefix) under quarantine/.
        #[arg(long)]
        quarantine_stray: bool,
        /// Remove the renditions (every version under cache/<file id>/) of files that are gone:
        /// not recorded, deleted or expired. Without it they are reported.
        #[arg(long)]
        remove_orphan_renditions: bool,
        /// Key ranges listed at once (1 to 64; default UPCOMMIT_RECONCILE_WORKERS, 1).
        #[arg(long)]
        workers: Option<usize>,
        /// Print the run, its totals and every finding as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Unlinked data: flag handles nothing uses (after the grace period), archive them (after a
    /// further period), delete archived objects (after retention). Staged and reported.
    Hygiene {
        /// Report what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the run, its totals and every item as JSON.
        #[arg(long)]
        json: bool,
        /// Judge the periods as of this time (RFC 3339) instead of now: what-if runs.
        #[arg(long)]
        at: Option<String>,
    },
    /// Prune the rows of finished uploads (with their multipart parts) and quota days older
    /// than UPCOMMIT_UPLOAD_RETENTION that nothing needs any more, and the job history and
    /// link scans past UPCOMMIT_JOB_HISTORY_RETENTION, in batches. Exit 4 when another replica
    /// is pruning.
    Prune {
        /// Count what would go; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the run and its totals as JSON.
        #[arg(long)]
        json: bool,
    },
    /// What storage holds: handles, tmp bytes by age, unindexed bytes, estimated cost, and the
    /// catalog's table sizes.
    Report {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Upload a file as a client does: presign, upload straight to S3 (multipart for large
    /// files), commit. Prints the file handle. Exit 2 usage, 3 refused, 4 token refused,
    /// 5 upload to storage failed, 6 service unreachable or failing.
    Upload(upload::UploadArgs),
    /// Print the short-lived URLs of files' renditions for one variant (rendering them first if
    /// need be), as an app asks for them. Exit 3 when a file is refused, 4 token refused,
    /// 6 service unreachable or failing.
    Variant(variant::VariantArgs),
    /// Bring the layout that predates `tmp/` under the catalog.
    Legacy {
        #[command(subcommand)]
        command: legacy::LegacyCommand,
    },
    /// Event endpoints and deliveries: list them, send failed ones again.
    Events {
        #[command(subcommand)]
        command: events::EventsCommand,
    },
    /// Operate on the bucket's configuration.
    Bucket {
        #[command(subcommand)]
        command: BucketCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum BucketCommand {
    /// Write our lifecycle rules into the bucket's whole lifecycle document, keeping every
    /// foreign rule. Only for buckets whose lifecycle terraform does not own.
    #[command(group(ArgGroup::new("mode").required(true).args(["dry_run", "yes"])))]
    ApplyLifecycle {
        /// Print the changes and write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Write the document.
        #[arg(long)]
        yes: bool,
    },
}

/// Runs a command; returns the process exit code.
/// The exit code of a job command that panicked (sysexits' EX_SOFTWARE).
pub const PANICKED: i32 = 70;

/// A job command run as `serve` runs a job: a panic records its run failed with the message
/// and gives the lease back before the process exits with [`PANICKED`].
async fn caught(task: &'static str, command: impl std::future::Future<Output = i32>) -> i32 {
    crate::state::supervise::catching(task, None, command)
        .await
        .unwrap_or(PANICKED)
}

pub async fn run(cli: Cli) -> i32 {
    // The uploader is a client: it needs no server settings at all.
    if let Command::Upload(args) = cli.command {
        return upload::run(args).await;
    }
    if let Command::Variant(args) = cli.command {
        return variant::run(args).await;
    }
    let loaded = match cli.command {
        // Operator commands never see a token: they need no JWT secret.
        Command::Healthcheck { .. }
        | Command::Doctor { .. }
        | Command::Bucket { .. }
        | Command::Sweep { .. }
        | Command::Reconcile { .. }
        | Command::Report { .. }
        | Command::Prune { .. }
        | Command::Hygiene { .. }
        | Command::Legacy { .. }
        | Command::Events { .. } => Settings::load_for_tools(),
        _ => Settings::load(),
    };
    let settings = match loaded {
        Ok(s) => s,
        Err(e) => {
            eprintln!("upcommit: {e}");
            return 2;
        }
    };
    crate::telemetry::init(settings.log_format);
    match cli.command {
        Command::Serve => match crate::startup::Application::build(settings).await {
            Ok(app) => match app.run_until_stopped().await {
                Ok(()) => 0,
                Err(e) => {
                    tracing::error!(error = %e, "server failed");
                    1
                }
            },
            Err(e) => {
                eprintln!("upcommit: cannot start: {e}");
                1
            }
        },
        Command::Migrate => match crate::catalog::migrate(settings.database.url.expose()).await {
            Ok(()) => {
                eprintln!("upcommit: migrations applied");
                0
            }
            Err(e) => {
                eprintln!("upcommit: migrations failed: {e}");
                1
            }
        },
        Command::Healthcheck { url } => healthcheck::run(&settings, url.as_deref()).await,
        Command::Doctor { json } => bucket::doctor(&settings, json).await,
        Command::Sweep { dry_run, json } => {
            caught("sweep", jobs::sweep(&settings, dry_run, json)).await
        }
        Command::Report { json } => jobs::report(&settings, json).await,
        Command::Prune { dry_run, json } => {
            caught("prune", jobs::prune(&settings, dry_run, json)).await
        }
        Command::Hygiene { dry_run, json, at } => {
            caught(
                "hygiene",
                jobs::hygiene(&settings, dry_run, json, at.as_deref()),
            )
            .await
        }
        Command::Reconcile {
            grace,
            inventory,
            inventory_max_age,
            quarantine,
            quarantine_stray,
            remove_orphan_renditions,
            workers,
            json,
        } => {
            let quarantine = jobs::Quarantine {
                unindexed: quarantine,
                stray: quarantine_stray,
                orphan_renditions: remove_orphan_renditions,
            };
            let workers = workers
                .unwrap_or(settings.jobs.reconcile_workers)
                .clamp(1, 64);
            let run = jobs::reconcile(
                &settings,
                &grace,
                inventory.as_deref(),
                &inventory_max_age,
                quarantine,
                workers,
                json,
            );
            caught("reconcile", run).await
        }
        Command::Bucket {
            command: BucketCommand::ApplyLifecycle { yes, .. },
        } => bucket::apply_lifecycle(&settings, yes).await,
        Command::Legacy { command } => {
            caught("legacy_import", legacy::run(settings, command)).await
        }
        Command::Events { command } => events::run(&settings, command).await,
        Command::Upload(_) | Command::Variant(_) => {
            unreachable!("handled before the settings load")
        }
        Command::Token { sub, admin, ttl } => {
            let Some(ttl) = crate::auth::parse_ttl(&ttl) else {
                eprintln!(
                    "upcommit: --ttl: {} (above 0), got {ttl:?}",
                    crate::domain::duration::EXPECTED
                );
                return 2;
            };
            if sub.is_empty() {
                eprintln!("upcommit: --sub must not be empty");
                return 2;
            }
            if settings.auth.jwt_secret.expose().is_empty() {
                eprintln!("upcommit: token mints HS256 tokens and needs UPCOMMIT_JWT_SECRET");
                return 2;
            }
            let token = crate::auth::issue(
                settings.auth.jwt_secret.expose().as_bytes(),
                &sub,
                admin,
                ttl,
                chrono::Utc::now().timestamp(),
            );
            println!("{token}");
            0
        }
    }
}
