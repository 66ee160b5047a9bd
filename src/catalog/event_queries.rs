//! The outbox's SQL, shared by both backends: writing events inside the transactions that make
//! the changes, the sequencer that gives committed events their feed position and fans them out
//! to the endpoints' deliveries, and the pull feed.

/// Implements the outbox helpers and [`super::EventCatalog`]'s outbox part for a catalog.
/// `$begin` opens a write transaction; `$sequencer_lock` is a statement answering one boolean:
/// whether this transaction may sequence (PostgreSQL: a transaction-level advisory lock taken
/// without waiting, so one replica sequences at a time; SQLite: `BEGIN IMMEDIATE` already
/// excludes every other writer).
macro_rules! impl_event_outbox {
    ($ty:ty, $db:ty, $begin:expr, $sequencer_lock:expr) => {
        impl $ty {
            /// Inserts `events` with the executor of the transaction making their change.
            pub(super) async fn insert_events<'e, E>(
                exec: E,
                events: &[$crate::domain::events::NewEvent],
            ) -> Result<(), CatalogError>
            where
                E: sqlx::Executor<'e, Database = $db>,
            {
                if events.is_empty() {
                    return Ok(());
                }
                let mut qb = sqlx::QueryBuilder::<$db>::new(
                    "INSERT INTO events (id, type, subject, occurred_at, payload) ",
                );
                qb.push_values(events, |mut row, e| {
                    row.push_bind(e.id.as_str())
                        .push_bind(e.event_type.as_str())
                        .push_bind(e.subject.as_str())
                        .push_bind(e.occurred_at)
                        .push_bind(e.payload.as_str());
                });
                qb.build().execute(exec).await?;
                Ok(())
            }

            /// One `file.*` event per handle row (read back after the change, so the payload is
            /// the handle as it now is).
            pub(super) fn file_events(
                rows: &[<$db as sqlx::Database>::Row],
                event_type: $crate::domain::events::EventType,
                at: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<$crate::domain::events::NewEvent>, CatalogError> {
                rows.iter()
                    .map(|r| {
                        Self::handle_row(r)
                            .map(|h| $crate::domain::events::NewEvent::file(event_type, &h, at))
                    })
                    .collect()
            }

            /// `upload.*`/`multipart.*` events from rows holding `id, owner, profile, key` (and
            /// `reject_code` for rejections).
            pub(super) fn upload_events(
                rows: &[<$db as sqlx::Database>::Row],
                event_type: $crate::domain::events::EventType,
                at: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<$crate::domain::events::NewEvent>, CatalogError> {
                use sqlx::Row;
                rows.iter()
                    .map(|r| {
                        let code: Option<String> =
                            if event_type == $crate::domain::events::EventType::UploadRejected {
                                r.try_get("reject_code")?
                            } else {
                                None
                            };
                        Ok($crate::domain::events::UploadFacts {
                            upload_id: r.try_get("id")?,
                            owner: r.try_get("owner")?,
                            profile: r.try_get("profile")?,
                            key: r.try_get("key")?,
                            code,
                        }
                        .event(event_type, at))
                    })
                    .collect()
            }
        }

        #[async_trait::async_trait]
        impl super::EventOutbox for $ty {
            async fn record_event(
                &self,
                event: &$crate::domain::events::NewEvent,
            ) -> Result<(), CatalogError> {
                sqlx::query(
                    "INSERT INTO events (id, type, subject, occurred_at, payload) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (id) DO NOTHING",
                )
                .bind(event.id.as_str())
                .bind(event.event_type.as_str())
                .bind(event.subject.as_str())
                .bind(event.occurred_at)
                .bind(event.payload.as_str())
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            #[tracing::instrument(skip_all)]
            async fn sequence_events(
                &self,
                limit: i64,
                retry_window_secs: i64,
            ) -> Result<u64, CatalogError> {
                // Idle most of the time: a read (which takes no lock) decides whether a write
                // transaction is needed at all.
                let waiting: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM events WHERE position IS NULL)",
                )
                .fetch_one(&self.pool)
                .await?;
                if !waiting {
                    return Ok(0);
                }
                let mut tx = self.pool.begin_with($begin).await?;
                let mine: bool = sqlx::query_scalar($sequencer_lock).fetch_one(&mut *tx).await?;
                if !mine {
                    // Another replica is sequencing right now; it takes these events too.
                    tx.rollback().await?;
                    return Ok(0);
                }
                let last: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(position), 0) FROM events")
                    .fetch_one(&mut *tx)
                    .await?;
                // Only committed rows are visible here, so an event still in its transaction
                // gets its position later, after the ones already handed out.
                let n = sqlx::query(
                    "UPDATE events SET position = n.p FROM \
                     (SELECT seq, $1 + ROW_NUMBER() OVER (ORDER BY seq) AS p FROM events \
                     WHERE position IS NULL ORDER BY seq LIMIT $2) AS n \
                     WHERE events.seq = n.seq",
                )
                .bind(last)
                .bind(limit)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if n > 0 {
                    // Timed by the database's clock, which the claims compare with: a replica
                    // whose clock runs ahead would otherwise delay every event it sequences.
                    let sql = format!(
                        "INSERT INTO event_deliveries (endpoint_id, position, event_id, subject, state, \
                         attempts, next_attempt_at, deadline_at, created_at) \
                         SELECT ep.id, e.position, e.id, e.subject, 'pending', 0, {now}, {deadline}, {now} \
                         FROM events e JOIN event_endpoints ep ON ep.disabled_at IS NULL \
                         AND (ep.event_types = '*' OR ep.event_types LIKE '%,' || e.type || ',%') \
                         WHERE e.position > $1",
                        now = Self::DB_NOW,
                        deadline = Self::db_now_plus("$2"),
                    );
                    sqlx::query(&sql)
                        .bind(last)
                        .bind(retry_window_secs)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(n)
            }

            async fn events_after(
                &self,
                after: i64,
                limit: i64,
            ) -> Result<Vec<$crate::domain::events::StoredEvent>, CatalogError> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT position, id, type, subject, occurred_at, payload FROM events \
                     WHERE position > $1 ORDER BY position LIMIT $2",
                )
                .bind(after)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::domain::events::StoredEvent {
                            position: r.try_get("position")?,
                            id: r.try_get("id")?,
                            event_type: r.try_get("type")?,
                            subject: r.try_get("subject")?,
                            occurred_at: r.try_get("occurred_at")?,
                            payload: r.try_get("payload")?,
                        })
                    })
                    .collect()
            }

            async fn unsequenced_events(&self) -> Result<i64, CatalogError> {
                Ok(sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE position IS NULL")
                    .fetch_one(&self.pool)
                    .await?)
            }
        }
    };
}

pub(super) use impl_event_outbox;
