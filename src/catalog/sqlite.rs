//! SQLite, the embedded default: WAL mode, a busy timeout, and write transactions that take
//! the write lock up front (`BEGIN IMMEDIATE`) so concurrent commits queue rather than fail
//! with "database is locked".

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Pool, Sqlite};

use super::admin_queries::impl_admin_catalog;
use super::checkpoint::Checkpointer;
use super::delivery_queries::impl_event_delivery_catalog;
use super::event_queries::impl_event_outbox;
use super::group_commit::GroupCommit;
use super::hygiene_queries::impl_hygiene_catalog;
use super::job_queries::impl_job_catalog;
use super::multipart_queries::impl_multipart_catalog;
use super::queries::impl_catalog;
use super::render_failures::impl_render_failure_catalog;
use super::retention_queries::impl_retention_catalog;
use super::CatalogError;

pub struct SqliteCatalog {
    pool: Pool<Sqlite>,
    /// How the pool's connections are opened: the graceful stop opens one more, alone.
    options: SqliteConnectOptions,
    /// Presigns' writes, grouped into shared transactions.
    writer: GroupCommit,
    /// WAL checkpoints in the background, not inside a request's `COMMIT`.
    _checkpointer: Checkpointer,
}

impl SqliteCatalog {
    /// The database's clock, in the text form timestamps are stored in (RFC 3339, UTC), so it
    /// compares with them as text.
    const DB_NOW: &'static str = "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')";

    /// The database's clock plus `secs` seconds: an integer of ours (never client input) or a
    /// bind parameter such as `$3`. Every lease and claim is written and judged with these two.
    fn db_now_plus(secs: impl std::fmt::Display) -> String {
        format!("strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '+' || ({secs}) || ' seconds')")
    }

    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, CatalogError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| CatalogError::Other(format!("DATABASE_URL: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        if let Some(parent) = options
            .get_filename()
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|e| {
                CatalogError::Unavailable(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections)
            // A pooled SQLite connection is a handle to a file on a worker thread of this
            // process: nothing on a network can drop it, so sqlx's ping before each acquire
            // (its default) tests nothing and costs every query one more round trip to the
            // worker thread — three on a commit's path (BENCHMARKS.md). A worker that died
            // fails the query itself, which answers 503 like any database error.
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.clone())
            .await?;
        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .map_err(|e| CatalogError::Other(format!("migrations: {e}")))?;
        let batch_pool = pool.clone();
        let writer = GroupCommit::spawn(move |items| {
            let pool = batch_pool.clone();
            async move { Self::create_uploads_batch(&pool, items).await }
        });
        let _checkpointer = Checkpointer::spawn(pool.clone());
        Ok(Self {
            pool,
            options,
            writer,
            _checkpointer,
        })
    }

    /// The graceful stop's close, which leaves the database one whole file. SQLite merges the
    /// WAL into the database file and removes it when its last connection closes, but a
    /// connection sees itself as the last only when no other is open in the process: two of the
    /// pool's closing at the same moment (one returned by a task that was aborted, one idle) each
    /// see the other, and the WAL stays. So once every pooled connection is closed
    /// ([`super::pool_closed`]), one more is opened alone and closed: that one is the last.
    async fn close_pool(&self) {
        use sqlx::{ConnectOptions, Connection};
        super::pool_closed(&self.pool).await;
        match self.options.connect().await {
            Ok(last) => {
                if let Err(e) = last.close().await {
                    tracing::warn!(error = %e, "closing the database's last connection failed");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not open the database to merge its WAL"),
        }
        let mut wal = self.options.get_filename().as_os_str().to_owned();
        wal.push("-wal");
        if std::path::Path::new(&wal).exists() {
            tracing::warn!(
                wal = %std::path::Path::new(&wal).display(),
                "the WAL is still beside the database after the stop: copy both files for a backup"
            );
        }
    }

    /// The upload rows of up to [`super::KEY_BATCH`] keys: `IN (…)` with one bound parameter
    /// per key (SQLite has no array type).
    async fn select_uploads_by_keys(
        pool: &Pool<Sqlite>,
        keys: &[String],
    ) -> Result<Vec<sqlx::sqlite::SqliteRow>, CatalogError> {
        let mut qb = sqlx::QueryBuilder::<Sqlite>::new(format!(
            "SELECT {} FROM uploads WHERE key IN (",
            super::queries::UPLOAD_COLUMNS
        ));
        let mut list = qb.separated(", ");
        for key in keys {
            list.push_bind(key.as_str());
        }
        qb.push(")");
        Ok(qb.build().fetch_all(pool).await?)
    }

    /// `record_handle`'s write (`queries::record_handle_*!`) as one call to the connection's
    /// worker thread: the transaction's `BEGIN IMMEDIATE` and `COMMIT` travel with its three
    /// statements, each statement after the first writing only when the one before changed a
    /// row (`changes()`); the event's `RETURNING` row says the handle was recorded. (sqlx's
    /// own transactions cost one more trip each for `BEGIN` and `COMMIT`: a thread hand-off
    /// both ways, the largest part of a small write here — BENCHMARKS.md.)
    const RECORD_HANDLE_SQL: &'static str = concat!(
        "BEGIN IMMEDIATE;\n",
        super::queries::record_handle_move!(),
        ";\n",
        super::queries::record_handle_insert!(),
        " WHERE changes() = 1;\n",
        super::queries::record_handle_event!(),
        " WHERE changes() = 1 RETURNING id;\nCOMMIT"
    );

    /// Runs `RECORD_HANDLE_SQL`: true when the handle was recorded, false when the lease was
    /// not held (nothing written). A call that fails or is dropped part-way may leave its
    /// transaction open on the connection, which sqlx does not know about (the `BEGIN` is in
    /// our SQL): that connection is closed, never returned to the pool, and SQLite rolls back
    /// whatever it had written when it closes.
    async fn write_handle<'q>(
        pool: &Pool<Sqlite>,
        query: sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    ) -> Result<bool, CatalogError> {
        let mut conn = CloseUnlessSettled(None);
        let live = conn.0.insert(pool.acquire().await?);
        let rows = query.fetch_all(&mut **live).await?;
        // Every statement ran, `COMMIT` included: the connection is back to autocommit.
        conn.settled();
        Ok(rows.len() == 1)
    }

    /// The pool, for tests that inspect the real tables.
    pub fn pool(&self) -> &Pool<Sqlite> {
        &self.pool
    }
}

// SQLite's write transaction (BEGIN IMMEDIATE) already excludes every other writer.
impl_catalog!(SqliteCatalog, Sqlite, "BEGIN IMMEDIATE", "");
impl_multipart_catalog!(SqliteCatalog, Sqlite, "BEGIN IMMEDIATE");
impl_render_failure_catalog!(SqliteCatalog, Sqlite);
impl_admin_catalog!(
    SqliteCatalog,
    Sqlite,
    "BEGIN IMMEDIATE",
    "substr(COL, 1, 10)"
);
impl_job_catalog!(
    SqliteCatalog,
    Sqlite,
    "BEGIN IMMEDIATE",
    // TEXT columns compare as bytes already; an explicit COLLATE on the expression would make
    // the planner sort instead of reading the key index in order.
    "",
    "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
);
impl_hygiene_catalog!(
    SqliteCatalog,
    Sqlite,
    "BEGIN IMMEDIATE",
    "substr(status_changed_at, 1, 7)",
    // BEGIN IMMEDIATE already holds the database's one write lock.
    "SELECT id FROM file_handles WHERE id = $1",
    // ... and so a scan's completion needs no row locks to see a deletion's claim.
    ""
);
impl_retention_catalog!(
    SqliteCatalog,
    Sqlite,
    "BEGIN IMMEDIATE",
    "",
    "SELECT SUM(pgsize) FROM dbstat WHERE name IN (SELECT name FROM sqlite_schema WHERE tbl_name = $1)"
);
// BEGIN IMMEDIATE already makes this transaction the only writer.
impl_event_outbox!(SqliteCatalog, Sqlite, "BEGIN IMMEDIATE", "SELECT TRUE");
// BEGIN IMMEDIATE already excludes every other writer: no row locks needed.
impl_event_delivery_catalog!(SqliteCatalog, Sqlite, "BEGIN IMMEDIATE", "", "");

/// A pooled connection that goes back to the pool only when [`Self::settled`] says its SQL ran
/// to the end; dropped otherwise (an error, or the caller's future dropped mid-call), it is
/// detached and closed, which rolls back a transaction left open by SQL of ours.
struct CloseUnlessSettled(Option<sqlx::pool::PoolConnection<Sqlite>>);

impl CloseUnlessSettled {
    fn settled(mut self) {
        // Dropping the pooled connection returns it to the pool.
        drop(self.0.take());
    }
}

impl Drop for CloseUnlessSettled {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            tracing::warn!("closing a database connection whose write did not finish");
            // The detached connection's worker thread ends and closes it.
            drop(conn.detach());
        }
    }
}
