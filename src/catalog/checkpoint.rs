//! SQLite's WAL checkpoints, off the request path.
//!
//! In WAL mode every committed page is appended to the `-wal` file, and a checkpoint copies
//! those pages back into the database file, syncing both. By default SQLite runs that checkpoint
//! inside the `COMMIT` that takes the WAL past 1,000 pages: every sixty-odd commits one request
//! waits for two `fsync`s (5–6 ms on this machine's disk, against 0.4 ms for the write itself —
//! BENCHMARKS.md). Here a task of the catalog checkpoints every [`PERIOD`] instead, on a pooled
//! connection of its own, and the automatic checkpoint stays only as a safety net at
//! [`SAFETY_NET_PAGES`]: if the task falls behind (a starved pool, a stuck disk), the WAL still
//! cannot grow past about 40 MiB before a commit checkpoints it as before.
//!
//! The checkpoint is `PASSIVE`: it never waits for, or blocks, a reader or a writer; a commit
//! appends to the WAL while it runs. Durability is unchanged: with `synchronous = NORMAL` a
//! commit is durable once its frames are in the WAL, whoever checkpoints them later.

use std::time::Duration;

use sqlx::{Pool, Sqlite};
use tokio::sync::oneshot;

/// How often the task checkpoints. At a thousand commits a second (about fifteen pages each)
/// that is some 3,000 pages a period, well under the safety net.
pub(super) const PERIOD: Duration = Duration::from_millis(200);

/// `wal_autocheckpoint`: the WAL size, in pages, at which a commit checkpoints by itself.
pub(super) const SAFETY_NET_PAGES: u32 = 10_000;

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
                        tracing::warn!(error = %e, "WAL checkpoint failed; commits will checkpoint the WAL themselves once it is large");
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
