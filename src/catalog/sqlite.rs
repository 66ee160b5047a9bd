//! SQLite, the embedded default: WAL mode, a busy timeout, and write transactions that take
//! the write lock up front (`BEGIN IMMEDIATE`) so concurrent commits queue rather than fail
//! with "database is locked".

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Pool, Sqlite};

use super::delivery_queries::impl_event_delivery_catalog;
use super::event_queries::impl_event_outbox;
use super::group_commit::GroupCommit;
use super::hygiene_queries::impl_hygiene_catalog;
use super::job_queries::impl_job_catalog;
use super::multipart_queries::impl_multipart_catalog;
use super::queries::impl_catalog;
use super::retention_queries::impl_retention_catalog;
use super::CatalogError;

pub struct SqliteCatalog {
    pool: Pool<Sqlite>,
    /// Presigns' writes, grouped into shared transactions.
    writer: GroupCommit,
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
            .connect_with(options)
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
        Ok(Self { pool, writer })
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

    /// The pool, for tests that inspect the real tables.
    pub fn pool(&self) -> &Pool<Sqlite> {
        &self.pool
    }
}

// SQLite's write transaction (BEGIN IMMEDIATE) already excludes every other writer.
impl_catalog!(SqliteCatalog, Sqlite, "BEGIN IMMEDIATE", "");
impl_multipart_catalog!(SqliteCatalog, Sqlite, "BEGIN IMMEDIATE");
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
    "SELECT id FROM file_handles WHERE id = $1"
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
impl_event_delivery_catalog!(SqliteCatalog, Sqlite, "BEGIN IMMEDIATE", "");
