//! The SQL of event delivery, shared by both backends: the endpoints written from the
//! settings, the workers' claims of due deliveries (per-subject order, leases on the
//! database's clock) and their outcomes, and the outbox's gauges.

/// Which deliveries an endpoint's worker may claim now (`$1` the endpoint): pending, due, not
/// leased (or the lease ran out), and no earlier delivery of the same subject to the same
/// endpoint undelivered — a pending one is sent first, a failed one blocks its subject until
/// it is retried (so a `file.archived` never overtakes its `file.committed`). `{now}` is
/// replaced by the database's clock. (`d.state <> 'delivered'` repeats what `pending` implies so
/// that SQLite, which matches partial-index predicates by their terms, reads the open index.)
pub(super) const DUE: &str =
    "d.endpoint_id = $1 AND d.state <> 'delivered' AND d.state = 'pending' \
     AND d.next_attempt_at <= {now} \
     AND (d.lease_until IS NULL OR d.lease_until <= {now}) \
     AND NOT EXISTS (SELECT 1 FROM event_deliveries e WHERE e.endpoint_id = d.endpoint_id \
     AND e.subject = d.subject AND e.position < d.position AND e.state <> 'delivered')";

/// Implements [`super::EventDeliveryCatalog`] for a struct with a `pool: sqlx::Pool<$db>`
/// field and the `DB_NOW`/`db_now_plus` clock helpers. `$lock` locks the rows a claim selects
/// (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so workers on other replicas take other rows instead
/// of waiting; SQLite's write transaction excludes every other writer already).
macro_rules! impl_event_delivery_catalog {
    ($ty:ty, $db:ty, $begin:expr, $lock:expr, $share:expr) => {
        impl $ty {
            /// Whether `endpoint` exists and is enabled, holding it so until `tx` ends: a
            /// disable waits for the transaction (review 36: checked in an earlier statement,
            /// a disable landing between the check and the write was not seen).
            async fn hold_enabled(
                tx: &mut sqlx::Transaction<'_, $db>,
                endpoint: &str,
            ) -> Result<bool, CatalogError> {
                let sql = format!(
                    "SELECT id FROM event_endpoints WHERE id = $1 AND disabled_at IS NULL{}",
                    $share
                );
                Ok(sqlx::query(&sql)
                    .bind(endpoint)
                    .fetch_optional(&mut **tx)
                    .await?
                    .is_some())
            }
        }

        #[async_trait::async_trait]
        impl super::EventDeliveryCatalog for $ty {
            async fn sync_settings_endpoints(
                &self,
                endpoints: &[super::EndpointSpec],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), CatalogError> {
                let mut tx = self.pool.begin_with($begin).await?;
                for ep in endpoints {
                    let n = sqlx::query(
                        "INSERT INTO event_endpoints (id, kind, url, secret, event_types, source, \
                         created_at, disabled_at) VALUES ($1, $2, $3, $4, $5, 'settings', $6, NULL) \
                         ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, url = excluded.url, \
                         secret = excluded.secret, event_types = excluded.event_types, \
                         disabled_at = NULL WHERE event_endpoints.source = 'settings'",
                    )
                    .bind(ep.id.as_str())
                    .bind(ep.kind.as_str())
                    .bind(ep.url.as_str())
                    .bind(ep.secret.as_deref())
                    .bind(ep.event_types.as_str())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    if n == 0 {
                        tx.rollback().await?;
                        return Err(CatalogError::Other(format!(
                            "event endpoint {:?}: the id is taken by an endpoint of the admin API",
                            ep.id
                        )));
                    }
                }
                let mut qb = sqlx::QueryBuilder::<$db>::new(
                    "UPDATE event_endpoints SET disabled_at = ",
                );
                qb.push_bind(now);
                qb.push(" WHERE source = 'settings' AND disabled_at IS NULL");
                if !endpoints.is_empty() {
                    qb.push(" AND id NOT IN (");
                    let mut list = qb.separated(", ");
                    for ep in endpoints {
                        list.push_bind(ep.id.as_str());
                    }
                    qb.push(")");
                }
                qb.build().execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn enabled_endpoints(&self) -> Result<Vec<super::EndpointSpec>, CatalogError> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT id, kind, url, secret, event_types FROM event_endpoints \
                     WHERE disabled_at IS NULL ORDER BY id",
                )
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok(super::EndpointSpec {
                            id: r.try_get("id")?,
                            kind: r.try_get("kind")?,
                            url: r.try_get("url")?,
                            secret: r.try_get("secret")?,
                            event_types: r.try_get("event_types")?,
                        })
                    })
                    .collect()
            }

            #[tracing::instrument(skip_all, fields(endpoint, limit))]
            async fn claim_deliveries(
                &self,
                endpoint: &str,
                token: &str,
                lease_secs: i64,
                limit: i64,
            ) -> Result<Vec<super::ClaimedDelivery>, CatalogError> {
                use sqlx::Row;
                // The clock as a one-row subquery: read once per statement, so an index condition
                // can use it (PostgreSQL's `clock_timestamp()` is volatile, and a pass during an
                // outage walked the endpoint's whole backlog of rows not due yet).
                let now = format!("(SELECT {})", Self::DB_NOW);
                let due = super::delivery_queries::DUE.replace("{now}", &now);
                // A plain read first: an idle endpoint's poll takes no write lock (SQLite has one
                // for the whole database).
                let any_due: Option<i64> = sqlx::query_scalar(&format!(
                    "SELECT d.position FROM event_deliveries d WHERE {due} LIMIT 1"
                ))
                .bind(endpoint)
                .fetch_optional(&self.pool)
                .await?;
                if any_due.is_none() {
                    return Ok(Vec::new());
                }
                let mut tx = self.pool.begin_with($begin).await?;
                let sql = format!(
                    "SELECT d.position FROM event_deliveries d WHERE {due} \
                     ORDER BY d.position LIMIT $2{}",
                    $lock
                );
                let positions: Vec<i64> = sqlx::query_scalar(&sql)
                    .bind(endpoint)
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?;
                if positions.is_empty() {
                    tx.commit().await?;
                    return Ok(Vec::new());
                }
                let mut qb = sqlx::QueryBuilder::<$db>::new(format!(
                    "UPDATE event_deliveries SET lease_token = "
                ));
                qb.push_bind(token);
                qb.push(format!(", lease_until = {} WHERE endpoint_id = ", Self::db_now_plus(lease_secs)));
                qb.push_bind(endpoint);
                qb.push(" AND state = 'pending' AND position IN (");
                let mut list = qb.separated(", ");
                for p in &positions {
                    list.push_bind(*p);
                }
                qb.push(")");
                qb.build().execute(&mut *tx).await?;
                let mut qb = sqlx::QueryBuilder::<$db>::new(
                    "SELECT d.position, d.event_id, d.subject, d.attempts, e.type, e.payload \
                     FROM event_deliveries d JOIN events e ON e.position = d.position \
                     WHERE d.endpoint_id = ",
                );
                qb.push_bind(endpoint);
                qb.push(" AND d.lease_token = ");
                qb.push_bind(token);
                qb.push(" AND d.position IN (");
                let mut list = qb.separated(", ");
                for p in &positions {
                    list.push_bind(*p);
                }
                qb.push(") ORDER BY d.position");
                let rows = qb.build().fetch_all(&mut *tx).await?;
                tx.commit().await?;
                rows.iter()
                    .map(|r| {
                        Ok(super::ClaimedDelivery {
                            endpoint_id: endpoint.to_owned(),
                            position: r.try_get("position")?,
                            event_id: r.try_get("event_id")?,
                            subject: r.try_get("subject")?,
                            event_type: r.try_get("type")?,
                            attempts: r.try_get("attempts")?,
                            payload: r.try_get("payload")?,
                        })
                    })
                    .collect()
            }

            async fn mark_delivered(
                &self,
                endpoint: &str,
                position: i64,
                token: &str,
                status: i32,
            ) -> Result<bool, CatalogError> {
                let sql = format!(
                    "UPDATE event_deliveries SET state = 'delivered', attempts = attempts + 1, \
                     last_status = $4, last_error = NULL, delivered_at = {now}, \
                     lease_token = NULL, lease_until = NULL \
                     WHERE endpoint_id = $1 AND position = $2 AND lease_token = $3 \
                     AND state = 'pending'",
                    now = Self::DB_NOW
                );
                let n = sqlx::query(&sql)
                    .bind(endpoint)
                    .bind(position)
                    .bind(token)
                    .bind(status)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn mark_attempt_failed(
                &self,
                endpoint: &str,
                position: i64,
                token: &str,
                outcome: &super::FailedAttempt<'_>,
            ) -> Result<Option<bool>, CatalogError> {
                use sqlx::Row;
                let sql = format!(
                    "UPDATE event_deliveries SET attempts = attempts + 1, last_status = $4, \
                     last_error = $5, next_attempt_at = {next}, \
                     state = CASE WHEN deadline_at <= {now} THEN 'failed' ELSE 'pending' END, \
                     lease_token = NULL, lease_until = NULL \
                     WHERE endpoint_id = $1 AND position = $2 AND lease_token = $3 \
                     AND state = 'pending' RETURNING state",
                    now = Self::DB_NOW,
                    next = Self::db_now_plus("CAST($6 AS DOUBLE PRECISION) / 1000.0"),
                );
                let row = sqlx::query(&sql)
                    .bind(endpoint)
                    .bind(position)
                    .bind(token)
                    .bind(outcome.status)
                    .bind(outcome.error)
                    .bind(outcome.retry_in_ms)
                    .fetch_optional(&self.pool)
                    .await?;
                match row {
                    None => Ok(None),
                    Some(r) => Ok(Some(r.try_get::<String, _>("state")? == "failed")),
                }
            }

            async fn retry_failed_deliveries(
                &self,
                endpoint: &str,
                retry_window_secs: i64,
            ) -> Result<Option<u64>, CatalogError> {
                let mut tx = self.pool.begin_with($begin).await?;
                if !Self::hold_enabled(&mut tx, endpoint).await? {
                    tx.commit().await?;
                    return Ok(None);
                }
                let sql = format!(
                    "UPDATE event_deliveries SET state = 'pending', next_attempt_at = {now}, \
                     deadline_at = {deadline}, lease_token = NULL, lease_until = NULL \
                     WHERE endpoint_id = $1 AND state = 'failed'",
                    now = Self::DB_NOW,
                    deadline = Self::db_now_plus("$2"),
                );
                let n = sqlx::query(&sql)
                    .bind(endpoint)
                    .bind(retry_window_secs)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                tx.commit().await?;
                Ok(Some(n))
            }

            async fn delivery_gauges(&self) -> Result<super::DeliveryGauges, CatalogError> {
                use sqlx::Row;
                let row = sqlx::query(
                    "SELECT \
                     (SELECT COUNT(*) FROM event_deliveries d JOIN event_endpoints ep \
                      ON ep.id = d.endpoint_id AND ep.disabled_at IS NULL \
                      WHERE d.state = 'pending') AS pending, \
                     (SELECT COUNT(*) FROM event_deliveries d JOIN event_endpoints ep \
                      ON ep.id = d.endpoint_id AND ep.disabled_at IS NULL \
                      WHERE d.state = 'failed') AS failed, \
                     (SELECT COUNT(*) FROM event_deliveries d JOIN event_endpoints ep \
                      ON ep.id = d.endpoint_id AND ep.disabled_at IS NOT NULL \
                      WHERE d.state <> 'delivered') AS disabled, \
                     (SELECT COUNT(*) FROM events WHERE position IS NULL) AS unsequenced, \
                     (SELECT CAST(COALESCE(SUM(discarded_deliveries), 0) AS BIGINT) \
                      FROM event_endpoints) AS discarded",
                )
                .fetch_one(&self.pool)
                .await?;
                // Two reads, each served by a partial index (the unsequenced events', the open
                // deliveries'), rather than one `WHERE position IS NULL OR position IN (…)`,
                // which no index serves: on PostgreSQL it read the whole events table every
                // 5 s on every replica (scripts/explain_outbox.sh). The undelivered one is the
                // first in feed order (positions follow commits, so its time is the oldest but
                // for transactions that committed out of order, milliseconds apart).
                let unsequenced_at: Option<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
                    "SELECT MIN(occurred_at) FROM events WHERE position IS NULL",
                )
                .fetch_one(&self.pool)
                .await?;
                let undelivered_at: Option<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
                    "SELECT e.occurred_at FROM events e WHERE e.position = \
                     (SELECT MIN(d.position) FROM event_deliveries d JOIN event_endpoints ep \
                     ON ep.id = d.endpoint_id AND ep.disabled_at IS NULL \
                     WHERE d.state <> 'delivered')",
                )
                .fetch_optional(&self.pool)
                .await?;
                Ok(super::DeliveryGauges {
                    pending: row.try_get("pending")?,
                    failed: row.try_get("failed")?,
                    disabled: row.try_get("disabled")?,
                    discarded: row.try_get("discarded")?,
                    unsequenced: row.try_get("unsequenced")?,
                    oldest_undelivered: unsequenced_at.into_iter().chain(undelivered_at).min(),
                })
            }

            async fn endpoint_counts(&self) -> Result<Vec<super::EndpointCounts>, CatalogError> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT ep.id, ep.kind, ep.url, ep.source, ep.event_types, \
                     CASE WHEN ep.disabled_at IS NULL THEN 1 ELSE 0 END AS enabled, \
                     (SELECT COUNT(*) FROM event_deliveries d WHERE d.endpoint_id = ep.id \
                      AND d.state = 'pending') AS pending, \
                     (SELECT COUNT(*) FROM event_deliveries d WHERE d.endpoint_id = ep.id \
                      AND d.state = 'failed') AS failed, \
                     (SELECT COUNT(*) FROM event_deliveries d WHERE d.endpoint_id = ep.id \
                      AND d.state = 'delivered') AS delivered, \
                     (SELECT MIN(d.created_at) FROM event_deliveries d WHERE d.endpoint_id = ep.id \
                      AND d.state <> 'delivered') AS oldest_undelivered_at \
                     FROM event_endpoints ep ORDER BY ep.id",
                )
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok(super::EndpointCounts {
                            id: r.try_get("id")?,
                            kind: r.try_get("kind")?,
                            url: r.try_get("url")?,
                            source: r.try_get("source")?,
                            event_types: r.try_get("event_types")?,
                            enabled: r.try_get::<i32, _>("enabled")? == 1,
                            pending: r.try_get("pending")?,
                            failed: r.try_get("failed")?,
                            delivered: r.try_get("delivered")?,
                            oldest_undelivered_at: r.try_get("oldest_undelivered_at")?,
                        })
                    })
                    .collect()
            }

            async fn replay_deliveries(
                &self,
                endpoint: &str,
                after: i64,
                retry_window_secs: i64,
                dry_run: bool,
            ) -> Result<Option<u64>, CatalogError> {
                const MATCHING: &str = "FROM events e JOIN event_endpoints ep ON ep.id = $1 \
                     WHERE e.position > $2 \
                     AND (ep.event_types = '*' OR ep.event_types LIKE '%,' || e.type || ',%')";
                let mut tx = self.pool.begin_with($begin).await?;
                if !Self::hold_enabled(&mut tx, endpoint).await? {
                    tx.commit().await?;
                    return Ok(None);
                }
                let n = if dry_run {
                    let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) {MATCHING}"))
                        .bind(endpoint)
                        .bind(after)
                        .fetch_one(&mut *tx)
                        .await?;
                    u64::try_from(n).unwrap_or(0)
                } else {
                    let sql = format!(
                        "INSERT INTO event_deliveries (endpoint_id, position, event_id, subject, state, \
                         attempts, next_attempt_at, deadline_at, created_at) \
                         SELECT ep.id, e.position, e.id, e.subject, 'pending', 0, {now}, {deadline}, {now} \
                         {MATCHING} \
                         ON CONFLICT (endpoint_id, position) DO UPDATE SET state = 'pending', \
                         next_attempt_at = excluded.next_attempt_at, deadline_at = excluded.deadline_at, \
                         delivered_at = NULL, lease_token = NULL, lease_until = NULL",
                        now = Self::DB_NOW,
                        deadline = Self::db_now_plus("$3"),
                    );
                    sqlx::query(&sql)
                        .bind(endpoint)
                        .bind(after)
                        .bind(retry_window_secs)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected()
                };
                tx.commit().await?;
                Ok(Some(n))
            }

            async fn create_api_endpoint(
                &self,
                ep: &super::EndpointSpec,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, CatalogError> {
                let n = sqlx::query(
                    "INSERT INTO event_endpoints (id, kind, url, secret, event_types, source, \
                     created_at, disabled_at) VALUES ($1, $2, $3, $4, $5, 'api', $6, NULL) \
                     ON CONFLICT (id) DO NOTHING",
                )
                .bind(ep.id.as_str())
                .bind(ep.kind.as_str())
                .bind(ep.url.as_str())
                .bind(ep.secret.as_deref())
                .bind(ep.event_types.as_str())
                .bind(now)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            async fn disable_api_endpoint(
                &self,
                id: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<String>, CatalogError> {
                sqlx::query(
                    "UPDATE event_endpoints SET disabled_at = $2 \
                     WHERE id = $1 AND source = 'api' AND disabled_at IS NULL",
                )
                .bind(id)
                .bind(now)
                .execute(&self.pool)
                .await?;
                Ok(
                    sqlx::query_scalar("SELECT source FROM event_endpoints WHERE id = $1")
                        .bind(id)
                        .fetch_optional(&self.pool)
                        .await?,
                )
            }
        }
    };
}

pub(super) use impl_event_delivery_catalog;
