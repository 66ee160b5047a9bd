//! PostgreSQL, for production: several replicas share it, and its row-level conditional
//! updates and unique constraints are what make concurrent commits safe across them.

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::{Pool, Postgres};

use super::admin_queries::impl_admin_catalog;
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

/// How long a pooled connection may have been idle and still be handed out without a ping.
const PING_IF_IDLE_FOR: Duration = Duration::from_millis(500);

pub struct PostgresCatalog {
    pool: Pool<Postgres>,
    /// Presigns' writes, grouped into shared transactions.
    writer: GroupCommit,
}

impl PostgresCatalog {
    /// The graceful stop's close: see [`super::pool_closed`].
    async fn close_pool(&self) {
        super::pool_closed(&self.pool).await;
    }

    /// The database's clock (the time of the statement, not of its transaction).
    const DB_NOW: &'static str = "clock_timestamp()";

    /// The database's clock plus `secs` seconds: an integer of ours (never client input) or a
    /// bind parameter such as `$3`. Every lease and claim is written and judged with these two.
    fn db_now_plus(secs: impl std::fmt::Display) -> String {
        format!("(clock_timestamp() + make_interval(secs => CAST({secs} AS DOUBLE PRECISION)))")
    }

    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, CatalogError> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            // sqlx pings every connection before handing it out (a round trip before each
            // query: three on a commit's path). A connection that answered a query within the
            // last half second is taken as alive without one, as HikariCP does
            // (`aliveBypassWindowMs`, 500 ms); one idle for longer is pinged and, when it does
            // not answer, replaced before use. A hot connection that died since its last query
            // fails that query, which answers 503 (a client retries, docs/api.md) and is dropped.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= PING_IF_IDLE_FOR {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .acquire_timeout(Duration::from_secs(5))
            .connect(url)
            .await?;
        sqlx::migrate!("./migrations/postgres")
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

    /// The upload rows of a batch of keys: one array parameter, so one prepared statement
    /// whatever the batch size.
    async fn select_uploads_by_keys(
        pool: &Pool<Postgres>,
        keys: &[String],
    ) -> Result<Vec<sqlx::postgres::PgRow>, CatalogError> {
        let sql = format!(
            "SELECT {} FROM uploads WHERE key = ANY($1)",
            super::queries::UPLOAD_COLUMNS
        );
        Ok(sqlx::query(&sql).bind(keys).fetch_all(pool).await?)
    }

    /// `record_handle`'s write as one statement (`queries::record_handle_*!`): the handle is
    /// inserted only for the row the lease holder moved, the event only for the handle
    /// inserted. One statement is atomic without a transaction around it.
    const RECORD_HANDLE_SQL: &'static str = concat!(
        "WITH moved AS (",
        super::queries::record_handle_move!(),
        " RETURNING id), handle AS (",
        super::queries::record_handle_insert!(),
        " FROM moved RETURNING id) ",
        super::queries::record_handle_event!(),
        " FROM handle"
    );

    /// Runs `RECORD_HANDLE_SQL`: true when the handle was recorded, false when the lease was
    /// not held (nothing written).
    async fn write_handle(
        pool: &Pool<Postgres>,
        query: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<bool, CatalogError> {
        // The rows of the outer statement: the event, written only with its handle.
        Ok(query.execute(pool).await?.rows_affected() == 1)
    }

    pub fn pool(&self) -> &Pool<Postgres> {
        &self.pool
    }
}

// Presign batches lock the ledger rows they read, so replicas charging one user queue.
impl_catalog!(PostgresCatalog, Postgres, "BEGIN", " FOR UPDATE");
impl_multipart_catalog!(PostgresCatalog, Postgres, "BEGIN");
impl_render_failure_catalog!(PostgresCatalog, Postgres);
impl_admin_catalog!(
    PostgresCatalog,
    Postgres,
    "BEGIN",
    "to_char(COL AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
);
impl_job_catalog!(
    PostgresCatalog,
    Postgres,
    "BEGIN",
    "COLLATE \"C\"",
    "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
);
impl_hygiene_catalog!(
    PostgresCatalog,
    Postgres,
    "BEGIN",
    "to_char(status_changed_at AT TIME ZONE 'UTC', 'YYYY-MM')",
    "SELECT id FROM file_handles WHERE key = (SELECT key FROM file_handles WHERE id = $1) \
     ORDER BY id FOR UPDATE",
    " FOR UPDATE OF d"
);
impl_retention_catalog!(
    PostgresCatalog,
    Postgres,
    "BEGIN",
    " FOR UPDATE SKIP LOCKED",
    "SELECT pg_total_relation_size(CAST($1 AS regclass))"
);
// One sequencer at a time across replicas: a transaction-level advisory lock, taken without
// waiting (the replica that has it sequences everyone's events). The key is arbitrary and ours.
impl_event_outbox!(
    PostgresCatalog,
    Postgres,
    "BEGIN",
    "SELECT pg_try_advisory_xact_lock(7305712049)"
);
// Workers of other replicas skip the rows one claims instead of waiting for them.
impl_event_delivery_catalog!(
    PostgresCatalog,
    Postgres,
    "BEGIN",
    " FOR UPDATE SKIP LOCKED",
    " FOR SHARE"
);
