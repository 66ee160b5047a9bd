//! SQLite's WAL checkpoints, ahead of the request path.
//!
//! In WAL mode every committed page is appended to the `-wal` file, and a checkpoint copies
//! those pages back into the database file, syncing both. SQLite runs that checkpoint inside the
//! `COMMIT` that takes the WAL past 1,000 pages (`wal_autocheckpoint`): every sixty-odd commits
//! one request waited for two `fsync`s (5–6 ms on this machine's disk, against 0.4 ms for the
//! write itself — BENCHMARKS.md). Here a task of the catalog checkpoints every [`PERIOD`] on a
//! pooled connection of its own. A WAL starts over from its beginning only when a write begins
//! just after a checkpoint has copied every frame and while no reader still uses one: when the
//! writes leave such gaps (a client between two requests, the quiet moments of ordinary
//! traffic), the task's checkpoints keep the WAL far below 1,000 pages and no request
//! checkpoints. Under writes that never pause, or readers that always hold a snapshot, the WAL
//! climbs to 1,000 pages all the same and SQLite's own automatic checkpoint, left as it is,
//! takes over as before (raised to 10,000 pages, it let the WAL grow to that size; the test
//! `commit::sqlite_checkpoints_its_wal_in_the_background_not_in_a_commit` pins it).
//!
//! The checkpoint is `PASSIVE`: it never waits for, or blocks, a reader or a writer; a commit
//! appends to the WAL while it runs. Durability is unchanged: with `synchronous = NORMAL` a
//! commit is durable once its frames are in the WAL, whoever checkpoints them later. A reader
//! that keeps one transaction open holds every checkpoint back (SQLite's rule), this one too.

use std::time::Duration;

use sqlx::{Pool, Sqlite};
use tokio::sync::oneshot;

/// How often the task checkpoints (a presign and a commit together append about thirty pages).
pub(super) const PERIOD: Duration = Duration::from_millis(200);

/// Keeps the checkpoint task running; the task ends when this is dropped (with its catalog).
#[derive(Debug)]
pub(super) struct Checkpointer {
    _alive: oneshot::Sender<()>,
}

impl Checkpointer {
    pub(super) fn spawn(pool: Pool<Sqlite>) -> Self {
        let (alive, mut ended) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let mut failing = false;
            loop {
                tokio::select! {
                    _ = &mut ended => break,
                    () = tokio::time::sleep(PERIOD) => {}
                }
                if pool.is_closed() {
                    break;
                }
                match checkpoint(&pool).await {
                    Ok(()) => failing = false,
                    // Logged once per run of failures, not every period.
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(error = %e, "WAL checkpoint failed; commits checkpoint the WAL themselves past 1,000 pages");
                    }
                    Err(_) => {}
                }
            }
        });
        Self { _alive: alive }
    }
}

async fn checkpoint(pool: &Pool<Sqlite>) -> Result<(), sqlx::Error> {
    // (busy, WAL frames, frames checkpointed); busy = 1 only for the blocking modes.
    let (_, log, done): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(pool)
        .await?;
    if done < log {
        tracing::debug!(
            wal_frames = log,
            checkpointed = done,
            "WAL checkpoint left frames a reader still uses"
        );
    }
    Ok(())
}
