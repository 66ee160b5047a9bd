//! The SQL of upload retention, shared by both backends: which terminal upload rows nothing
//! needs any more, deleting them (with their multipart sessions and parts) in short batches,
//! pruning quota days that can no longer be charged, and the tables' sizes for the report.

/// The uploads nothing reads any more, as of the cutoff `$1` (now minus the retention):
/// - only keys this service generated under `tmp/` (legacy imports, committed in place, stay);
/// - created, last changed, URL expired and commit window closed before the cutoff, so no
///   commit, retry or URL can still use the row;
/// - committed (with the handle its commit made, which keeps the upload id: the unique index
///   on it covers that handle only, not copies sharing the id) or rejected, and the tmp object's
///   every version is gone (`tmp_cleared_at`: the single-use URL guard and the sweep's cleanup
///   are done with it); or never committed (`issued`, expired);
/// - no multipart session still open (the sweep aborts those first).
///
/// `promoting` rows are never pruned: a commit or its recovery still owns them.
pub(super) const PRUNABLE: &str = "substr(u.key, 1, 4) = 'tmp/' \
     AND u.created_at < $1 AND u.updated_at < $1 AND u.expires_at < $1 AND u.commit_deadline < $1 \
     AND ((u.state = 'committed' AND u.tmp_cleared_at IS NOT NULL \
           AND EXISTS (SELECT 1 FROM file_handles h WHERE h.upload_id = u.id AND h.copied_from IS NULL)) \
          OR (u.state = 'rejected' AND u.tmp_cleared_at IS NOT NULL) \
          OR u.state = 'issued') \
     AND NOT EXISTS (SELECT 1 FROM multipart_sessions s WHERE s.upload_id = u.id AND s.state = 'open')";

/// The tables the report sizes: every table of the schema.
pub(super) const TABLES: [&str; 16] = [
    "uploads",
    "multipart_sessions",
    "upload_parts",
    "file_handles",
    "file_links",
    "quota_usage",
    "job_runs",
    "job_items",
    "job_locks",
    "link_scans",
    "link_scan_batches",
    "link_scan_seen",
    "events",
    "event_endpoints",
    "event_deliveries",
    "render_failures",
];

/// The undelivered deliveries (alias `d`) the retention lets go, as of the cutoff `$1` (now
/// minus the retention): those of an endpoint disabled before the cutoff (removed from the
/// settings or through the admin API, and not back since), and those whose retry window closed
/// before it (failed and not retried, or pending behind a failed one of their file). Until then
/// they are kept: an endpoint enabled again gets them, `upcommit events retry` resends failed
/// ones. A macro so that [`PRUNABLE_EVENTS`] can include it.
macro_rules! discardable {
    () => {
        "d.state <> 'delivered' AND (d.deadline_at < $1 \
         OR d.endpoint_id IN (SELECT ep.id FROM event_endpoints ep WHERE ep.disabled_at < $1))"
    };
}
pub(super) const DISCARDABLE: &str = discardable!();

/// The events nothing needs any more, as of the cutoff `$1`: the leading run of positions before
/// the first event that must stay — one younger than the cutoff, or still owed to an endpoint (a
/// pending or failed delivery the retention does not let go yet, [`DISCARDABLE`]: those are
/// discarded first) — and never the last one (its position is where the next one continues).
/// Only a leading run goes, so the positions kept stay contiguous and a cursor before the oldest
/// one is the only way to have missed an event (the feed answers it 410).
pub(super) const PRUNABLE_EVENTS: &str = concat!(
    "e.position IS NOT NULL AND e.position < COALESCE(\
     (SELECT MIN(k.position) FROM events k WHERE k.position IS NOT NULL AND (k.occurred_at >= $1 \
     OR EXISTS (SELECT 1 FROM event_deliveries d WHERE d.position = k.position \
     AND d.state <> 'delivered' AND NOT (",
    discardable!(),
    ")))), (SELECT MAX(m.position) FROM events m))"
);

/// The link scans (alias `ls`) the prune deletes as of the cutoff `$1`: those it expired, and
/// the completed ones completed before the cutoff that are not the latest completed scan — the
/// one hygiene judges by ([`super::hygiene_conditions::LATEST_COMPLETED_SCAN`], the same words
/// as its statements). Neither kind can become that scan again (an expired scan is never
/// completed; a newer completed one stays newer), so deleting their rows in several
/// transactions changes no hygiene decision, even half done.
pub(super) fn retired_scans() -> String {
    format!(
        "(ls.state = 'expired' OR (ls.state = 'completed' AND ls.completed_at < $1 \
         AND ls.id <> ({})))",
        super::hygiene_conditions::LATEST_COMPLETED_SCAN
    )
}

/// Open scans (alias `ls`) abandoned as of the cutoff `$1`: started before it, and no batch
/// received since. The prune expires them before deleting anything of theirs.
pub(super) const IDLE_OPEN_SCANS: &str = "ls.state = 'open' AND ls.started_at < $1 \
     AND NOT EXISTS (SELECT 1 FROM link_scan_batches b WHERE b.scan_id = ls.id \
     AND b.received_at >= $1)";

/// Implements [`super::RetentionCatalog`] for a struct with a `pool: sqlx::Pool<$db>` field.
/// `$lock` locks the rows a batch selects (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so a batch
/// never waits on a row another transaction holds; SQLite's write transaction excludes every
/// other writer already). `$bytes` is the SQL of one table's size in bytes, its name in `$1`.
macro_rules! impl_retention_catalog {
    ($ty:ty, $db:ty, $begin:expr, $lock:expr, $bytes:expr) => {
        #[async_trait::async_trait]
        impl super::RetentionCatalog for $ty {
            async fn prunable_uploads(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
            ) -> Result<super::PruneCounts, CatalogError> {
                use sqlx::Row;
                let sql = format!(
                    "SELECT u.state, COUNT(*) AS n, \
                     CAST(SUM((SELECT COUNT(*) FROM multipart_sessions s WHERE s.upload_id = u.id)) AS BIGINT) AS sessions, \
                     CAST(SUM((SELECT COUNT(*) FROM upload_parts p WHERE p.upload_id = u.id)) AS BIGINT) AS parts \
                     FROM uploads u WHERE {} GROUP BY u.state",
                    super::retention_queries::PRUNABLE
                );
                let rows = sqlx::query(&sql).bind(cutoff).fetch_all(&self.pool).await?;
                let mut counts = super::PruneCounts::default();
                for r in &rows {
                    let state: String = r.try_get("state")?;
                    let n: i64 = r.try_get("n")?;
                    let sessions: Option<i64> = r.try_get("sessions")?;
                    let parts: Option<i64> = r.try_get("parts")?;
                    counts.add_state(&state, u64::try_from(n).unwrap_or(0));
                    counts.multipart_sessions += u64::try_from(sessions.unwrap_or(0)).unwrap_or(0);
                    counts.upload_parts += u64::try_from(parts.unwrap_or(0)).unwrap_or(0);
                }
                Ok(counts)
            }

            #[tracing::instrument(skip_all, fields(limit))]
            async fn prune_uploads(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
                limit: i64,
            ) -> Result<super::PruneCounts, CatalogError> {
                use sqlx::Row;
                let mut tx = self.pool.begin_with($begin).await?;
                let sql = format!(
                    "SELECT u.id, u.state FROM uploads u WHERE {} LIMIT $2{}",
                    super::retention_queries::PRUNABLE,
                    $lock
                );
                let rows = sqlx::query(&sql)
                    .bind(cutoff)
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?;
                let mut counts = super::PruneCounts::default();
                if rows.is_empty() {
                    tx.commit().await?;
                    return Ok(counts);
                }
                let mut ids = Vec::with_capacity(rows.len());
                for r in &rows {
                    let state: String = r.try_get("state")?;
                    counts.add_state(&state, 1);
                    ids.push(r.try_get::<String, _>("id")?);
                }
                // Children first: parts reference their session, sessions their upload.
                for (table, column) in [
                    ("upload_parts", "upload_id"),
                    ("multipart_sessions", "upload_id"),
                    ("uploads", "id"),
                ] {
                    let mut qb = sqlx::QueryBuilder::<$db>::new(format!(
                        "DELETE FROM {table} WHERE {column} IN ("
                    ));
                    let mut list = qb.separated(", ");
                    for id in &ids {
                        list.push_bind(id.as_str());
                    }
                    qb.push(")");
                    let n = qb.build().execute(&mut *tx).await?.rows_affected();
                    match table {
                        "upload_parts" => counts.upload_parts = n,
                        "multipart_sessions" => counts.multipart_sessions = n,
                        _ if n != u64::try_from(ids.len()).unwrap_or(0) => {
                            return Err(CatalogError::Other(format!(
                                "pruned {n} of {} locked upload rows",
                                ids.len()
                            )));
                        }
                        _ => {}
                    }
                }
                tx.commit().await?;
                Ok(counts)
            }

            async fn prunable_quota_days(
                &self,
                before: chrono::NaiveDate,
            ) -> Result<u64, CatalogError> {
                let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM quota_usage WHERE day < $1")
                    .bind(before.to_string())
                    .fetch_one(&self.pool)
                    .await?;
                Ok(u64::try_from(n).unwrap_or(0))
            }

            async fn prune_quota_days(
                &self,
                before: chrono::NaiveDate,
                limit: i64,
            ) -> Result<u64, CatalogError> {
                let sql = format!(
                    "DELETE FROM quota_usage WHERE (owner, day) IN \
                     (SELECT owner, day FROM quota_usage WHERE day < $1 LIMIT $2{})",
                    $lock
                );
                let n = sqlx::query(&sql)
                    .bind(before.to_string())
                    .bind(limit)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n)
            }

            async fn discardable_deliveries(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<(String, u64)>, CatalogError> {
                use sqlx::Row;
                let sql = format!(
                    "SELECT d.endpoint_id, COUNT(*) AS n FROM event_deliveries d WHERE {} \
                     GROUP BY d.endpoint_id ORDER BY d.endpoint_id",
                    super::retention_queries::DISCARDABLE
                );
                let rows = sqlx::query(&sql).bind(cutoff).fetch_all(&self.pool).await?;
                rows.iter()
                    .map(|r| {
                        let n: i64 = r.try_get("n")?;
                        Ok((r.try_get("endpoint_id")?, u64::try_from(n).unwrap_or(0)))
                    })
                    .collect()
            }

            #[tracing::instrument(skip_all, fields(limit))]
            async fn discard_deliveries(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
                limit: i64,
            ) -> Result<Vec<(String, u64)>, CatalogError> {
                use sqlx::Row;
                let mut tx = self.pool.begin_with($begin).await?;
                let sql = format!(
                    "SELECT d.endpoint_id, d.position FROM event_deliveries d WHERE {} \
                     ORDER BY d.endpoint_id, d.position LIMIT $2{}",
                    super::retention_queries::DISCARDABLE,
                    $lock
                );
                let rows = sqlx::query(&sql).bind(cutoff).bind(limit).fetch_all(&mut *tx).await?;
                let mut by_endpoint = std::collections::BTreeMap::<String, Vec<i64>>::new();
                for r in &rows {
                    by_endpoint
                        .entry(r.try_get("endpoint_id")?)
                        .or_default()
                        .push(r.try_get("position")?);
                }
                let mut discarded = Vec::with_capacity(by_endpoint.len());
                for (endpoint, positions) in by_endpoint {
                    let mut qb = sqlx::QueryBuilder::<$db>::new(
                        "DELETE FROM event_deliveries WHERE state <> 'delivered' AND endpoint_id = ",
                    );
                    qb.push_bind(endpoint.as_str());
                    qb.push(" AND position IN (");
                    let mut list = qb.separated(", ");
                    for p in &positions {
                        list.push_bind(*p);
                    }
                    qb.push(")");
                    let n = qb.build().execute(&mut *tx).await?.rows_affected();
                    sqlx::query(
                        "UPDATE event_endpoints SET discarded_deliveries = discarded_deliveries + $2 \
                         WHERE id = $1",
                    )
                    .bind(endpoint.as_str())
                    .bind(i64::try_from(n).unwrap_or(i64::MAX))
                    .execute(&mut *tx)
                    .await?;
                    discarded.push((endpoint, n));
                }
                tx.commit().await?;
                Ok(discarded)
            }

            async fn prunable_events(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
            ) -> Result<u64, CatalogError> {
                let sql = format!(
                    "SELECT COUNT(*) FROM events e WHERE {}",
                    super::retention_queries::PRUNABLE_EVENTS
                );
                let n: i64 = sqlx::query_scalar(&sql).bind(cutoff).fetch_one(&self.pool).await?;
                Ok(u64::try_from(n).unwrap_or(0))
            }

            async fn prune_events(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
                limit: i64,
            ) -> Result<u64, CatalogError> {
                use sqlx::Row;
                let mut tx = self.pool.begin_with($begin).await?;
                let sql = format!(
                    "SELECT e.position FROM events e WHERE {} ORDER BY e.position LIMIT $2{}",
                    super::retention_queries::PRUNABLE_EVENTS,
                    $lock
                );
                let rows = sqlx::query(&sql).bind(cutoff).bind(limit).fetch_all(&mut *tx).await?;
                let positions = rows
                    .iter()
                    .map(|r| r.try_get::<i64, _>("position"))
                    .collect::<Result<Vec<_>, _>>()?;
                if positions.is_empty() {
                    tx.rollback().await?;
                    return Ok(0);
                }
                for table in ["event_deliveries", "events"] {
                    let mut qb = sqlx::QueryBuilder::<$db>::new(format!(
                        "DELETE FROM {table} WHERE position IN ("
                    ));
                    let mut list = qb.separated(", ");
                    for p in &positions {
                        list.push_bind(*p);
                    }
                    qb.push(")");
                    qb.build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok(positions.len() as u64)
            }

            async fn prunable_scans(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
            ) -> Result<super::ScanPruneCounts, CatalogError> {
                use sqlx::Row;
                let sql = format!(
                    "SELECT ls.state, COUNT(*) AS n, \
                     CAST(SUM((SELECT COUNT(*) FROM link_scan_batches b WHERE b.scan_id = ls.id)) AS BIGINT) AS batches, \
                     CAST(SUM((SELECT COUNT(*) FROM link_scan_seen s WHERE s.scan_id = ls.id)) AS BIGINT) AS seen \
                     FROM link_scans ls WHERE {} OR ({}) GROUP BY ls.state",
                    super::retention_queries::retired_scans(),
                    super::retention_queries::IDLE_OPEN_SCANS
                );
                let rows = sqlx::query(&sql).bind(cutoff).fetch_all(&self.pool).await?;
                let mut counts = super::ScanPruneCounts::default();
                for r in &rows {
                    let state: String = r.try_get("state")?;
                    let n = u64::try_from(r.try_get::<i64, _>("n")?).unwrap_or(0);
                    if state == "completed" {
                        counts.superseded += n;
                    } else {
                        counts.abandoned += n;
                    }
                    let batches: Option<i64> = r.try_get("batches")?;
                    let seen: Option<i64> = r.try_get("seen")?;
                    counts.batches += u64::try_from(batches.unwrap_or(0)).unwrap_or(0);
                    counts.seen += u64::try_from(seen.unwrap_or(0)).unwrap_or(0);
                }
                Ok(counts)
            }

            #[tracing::instrument(skip_all, fields(limit))]
            async fn expire_scans(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
                limit: i64,
            ) -> Result<u64, CatalogError> {
                // `state = 'open'` again outside: a completion that won the row lock wins.
                let sql = format!(
                    "UPDATE link_scans SET state = 'expired' WHERE state = 'open' AND id IN \
                     (SELECT ls.id FROM link_scans ls WHERE {} LIMIT $2{})",
                    super::retention_queries::IDLE_OPEN_SCANS,
                    $lock
                );
                let n = sqlx::query(&sql)
                    .bind(cutoff)
                    .bind(limit)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n)
            }

            #[tracing::instrument(skip_all, fields(limit))]
            async fn prune_scans(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
                limit: i64,
            ) -> Result<super::ScanPruneCounts, CatalogError> {
                use sqlx::Row;
                let retired = super::retention_queries::retired_scans();
                let mut counts = super::ScanPruneCounts::default();
                let mut tx = self.pool.begin_with($begin).await?;
                // Children first (they reference their scan), all within one budget of rows.
                let mut budget = limit;
                for (table, key, counted) in [
                    ("link_scan_seen", "file_id", &mut counts.seen),
                    ("link_scan_batches", "n", &mut counts.batches),
                ] {
                    if budget <= 0 {
                        break;
                    }
                    let sql = format!(
                        "DELETE FROM {table} WHERE (scan_id, {key}) IN (SELECT c.scan_id, c.{key} \
                         FROM {table} c WHERE c.scan_id IN (SELECT ls.id FROM link_scans ls WHERE {retired}) \
                         LIMIT $2{})",
                        $lock
                    );
                    let n = sqlx::query(&sql)
                        .bind(cutoff)
                        .bind(budget)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                    *counted = n;
                    budget -= i64::try_from(n).unwrap_or(i64::MAX);
                }
                if budget > 0 {
                    let sql = format!(
                        "SELECT ls.id, ls.state FROM link_scans ls WHERE {retired} \
                         AND NOT EXISTS (SELECT 1 FROM link_scan_seen s WHERE s.scan_id = ls.id) \
                         AND NOT EXISTS (SELECT 1 FROM link_scan_batches b WHERE b.scan_id = ls.id) \
                         LIMIT $2{}",
                        $lock
                    );
                    let rows = sqlx::query(&sql)
                        .bind(cutoff)
                        .bind(budget)
                        .fetch_all(&mut *tx)
                        .await?;
                    for r in &rows {
                        let id: String = r.try_get("id")?;
                        let state: String = r.try_get("state")?;
                        // The state again: only what was selected, as it was selected.
                        let n = sqlx::query("DELETE FROM link_scans WHERE id = $1 AND state = $2")
                            .bind(id.as_str())
                            .bind(state.as_str())
                            .execute(&mut *tx)
                            .await?
                            .rows_affected();
                        if state == "completed" {
                            counts.superseded += n;
                        } else {
                            counts.abandoned += n;
                        }
                    }
                }
                tx.commit().await?;
                Ok(counts)
            }

            async fn event_positions(&self) -> Result<Option<(i64, i64)>, CatalogError> {
                use sqlx::Row;
                let row = sqlx::query("SELECT MIN(position) AS lo, MAX(position) AS hi FROM events")
                    .fetch_one(&self.pool)
                    .await?;
                let lo: Option<i64> = row.try_get("lo")?;
                let hi: Option<i64> = row.try_get("hi")?;
                Ok(lo.zip(hi))
            }

            async fn table_sizes(&self) -> Result<Vec<super::TableSize>, CatalogError> {
                let mut out = Vec::new();
                for table in super::retention_queries::TABLES {
                    // Names from our own list, never input.
                    let rows: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
                        .fetch_one(&self.pool)
                        .await?;
                    // Where the database cannot tell (SQLite without dbstat), bytes stay unknown.
                    let bytes: Option<i64> = sqlx::query_scalar($bytes)
                        .bind(table)
                        .fetch_one(&self.pool)
                        .await
                        .ok()
                        .flatten();
                    out.push(super::TableSize {
                        table: table.to_owned(),
                        rows,
                        bytes,
                    });
                }
                Ok(out)
            }
        }
    };
}

pub(super) use impl_retention_catalog;
