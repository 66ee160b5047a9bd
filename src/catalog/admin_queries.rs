//! The SQL of the admin API's reads and of the job history's retention, shared by both
//! backends.

/// The job runs the history's retention lets go as of the cutoff `$1` (alias `r`): ended
/// before it, and a newer run of the same job, kind (dry run or not) and outcome exists — so
/// the newest run of each job, its newest finished run and its newest failed one always stay,
/// whatever their age. A real run still `running` is never let go (a resumable checkpoint);
/// a dry run still `running` since before the cutoff is one whose process died (dry runs are
/// never resumed, and a stopping server records its own as failed), and goes.
pub(super) const PRUNABLE_RUNS: &str = "((r.state = 'running' AND r.dry_run = TRUE AND r.updated_at < $1) \
     OR (r.state <> 'running' \
     AND COALESCE(r.finished_at, r.updated_at) < $1 \
     AND EXISTS (SELECT 1 FROM job_runs n WHERE n.job = r.job AND n.dry_run = r.dry_run \
                 AND n.state = r.state \
                 AND (n.started_at > r.started_at OR (n.started_at = r.started_at AND n.id > r.id)))))";

/// Implements [`super::AdminCatalog`]. `$day` is the SQL of a timestamp column's UTC day as
/// `YYYY-MM-DD`, with `COL` standing for the column.
macro_rules! impl_admin_catalog {
    ($ty:ty, $db:ty, $begin:expr, $day:expr) => {
        impl $ty {
            fn delivery_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> Result<super::admin::DeliveryRow, CatalogError> {
                use sqlx::Row;
                Ok(super::admin::DeliveryRow {
                    position: row.try_get("position")?,
                    event_id: row.try_get("event_id")?,
                    event_type: row.try_get("type")?,
                    subject: row.try_get("subject")?,
                    state: row.try_get("state")?,
                    attempts: i64::from(row.try_get::<i32, _>("attempts")?),
                    last_status: row.try_get::<Option<i32>, _>("last_status")?.map(i64::from),
                    last_error: row.try_get("last_error")?,
                    created_at: row.try_get("created_at")?,
                    next_attempt_at: row.try_get("next_attempt_at")?,
                    delivered_at: row.try_get("delivered_at")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl super::AdminCatalog for $ty {
            async fn storage_by(
                &self,
                dimension: super::admin::HandleDimension,
            ) -> Result<Vec<super::admin::Share>, CatalogError> {
                use sqlx::Row;
                // One row per (value, object): copies share their key and count once.
                let sql = format!(
                    "SELECT name, COUNT(*) AS n, CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM \
                     (SELECT DISTINCT {col} AS name, key, size FROM file_handles \
                      WHERE status NOT IN ('deleted', 'expired')) o \
                     GROUP BY name ORDER BY bytes DESC, name",
                    col = dimension.column()
                );
                let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
                rows.iter()
                    .map(|r| {
                        Ok(super::admin::Share {
                            name: r.try_get("name")?,
                            count: r.try_get("n")?,
                            bytes: r.try_get("bytes")?,
                        })
                    })
                    .collect()
            }

            async fn uploads_per_day(
                &self,
                since: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<super::admin::DayOfUploads>, CatalogError> {
                use sqlx::Row;
                let sql = format!(
                    "SELECT day, CAST(SUM(presigned) AS BIGINT) AS presigned, \
                     CAST(SUM(committed) AS BIGINT) AS committed, \
                     CAST(SUM(committed_bytes) AS BIGINT) AS committed_bytes FROM ( \
                       SELECT {upload_day} AS day, 1 AS presigned, 0 AS committed, CAST(0 AS BIGINT) AS committed_bytes \
                       FROM uploads WHERE created_at >= $1 \
                       UNION ALL \
                       SELECT {handle_day} AS day, 0, 1, size FROM file_handles \
                       WHERE created_at >= $1 AND copied_from IS NULL \
                     ) d GROUP BY day ORDER BY day",
                    upload_day = $day.replace("COL", "created_at"),
                    handle_day = $day.replace("COL", "created_at"),
                );
                let rows = sqlx::query(&sql).bind(since).fetch_all(&self.pool).await?;
                rows.iter()
                    .map(|r| {
                        Ok(super::admin::DayOfUploads {
                            day: r.try_get("day")?,
                            presigned: r.try_get("presigned")?,
                            committed: r.try_get("committed")?,
                            committed_bytes: r.try_get("committed_bytes")?,
                        })
                    })
                    .collect()
            }

            async fn endpoint_exists(&self, id: &str) -> Result<bool, CatalogError> {
                Ok(sqlx::query("SELECT id FROM event_endpoints WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .is_some())
            }

            async fn deliveries_page(
                &self,
                endpoint: &str,
                state: Option<&str>,
                after: i64,
                limit: i64,
            ) -> Result<Vec<super::admin::DeliveryRow>, CatalogError> {
                let sql = format!(
                    "SELECT d.position, d.event_id, e.type, d.subject, d.state, d.attempts, \
                     d.last_status, d.last_error, d.created_at, d.next_attempt_at, d.delivered_at \
                     FROM event_deliveries d JOIN events e ON e.id = d.event_id \
                     WHERE d.endpoint_id = $1 AND d.position > $2 {} \
                     ORDER BY d.position LIMIT $3",
                    if state.is_some() { "AND d.state = $4" } else { "" }
                );
                let mut q = sqlx::query(&sql).bind(endpoint).bind(after).bind(limit);
                if let Some(state) = state {
                    q = q.bind(state);
                }
                let rows = q.fetch_all(&self.pool).await?;
                rows.iter().map(Self::delivery_row).collect()
            }

            async fn runs_page(
                &self,
                job: Option<&str>,
                before: Option<&super::admin::Before>,
                limit: i64,
            ) -> Result<Vec<$crate::domain::jobs::JobRun>, CatalogError> {
                let mut qb = sqlx::QueryBuilder::<$db>::new(
                    "SELECT id, job, dry_run, state, checkpoint, summary, started_at, updated_at, \
                     finished_at FROM job_runs WHERE 1 = 1",
                );
                if let Some(job) = job {
                    qb.push(" AND job = ").push_bind(job.to_owned());
                }
                if let Some(b) = before {
                    qb.push(" AND (started_at < ")
                        .push_bind(b.at)
                        .push(" OR (started_at = ")
                        .push_bind(b.at)
                        .push(" AND id < ")
                        .push_bind(b.id.clone())
                        .push("))");
                }
                qb.push(" ORDER BY started_at DESC, id DESC LIMIT ")
                    .push_bind(limit);
                let rows = qb.build().fetch_all(&self.pool).await?;
                rows.iter().map(Self::run_row).collect()
            }

            async fn find_handles(
                &self,
                filter: &super::admin::HandleFilter,
                before: Option<&super::admin::Before>,
                limit: i64,
            ) -> Result<Vec<$crate::domain::records::FileHandle>, CatalogError> {
                let mut qb = sqlx::QueryBuilder::<$db>::new(format!(
                    "SELECT {} FROM file_handles WHERE 1 = 1",
                    super::rows::HANDLE_COLUMNS
                ));
                for (column, value) in [
                    ("id", &filter.id),
                    ("created_by", &filter.owner),
                    ("status", &filter.status),
                    ("profile", &filter.profile),
                ] {
                    if let Some(value) = value {
                        qb.push(format!(" AND {column} = "))
                            .push_bind(value.clone());
                    }
                }
                if let Some(prefix) = &filter.key_prefix {
                    // A prefix match without LIKE (whose `%` and `_` a prefix may hold):
                    // the key's first characters equal the prefix.
                    qb.push(" AND substr(key, 1, ")
                        .push_bind(i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX))
                        .push(") = ")
                        .push_bind(prefix.clone());
                }
                if let Some(b) = before {
                    qb.push(" AND (created_at < ")
                        .push_bind(b.at)
                        .push(" OR (created_at = ")
                        .push_bind(b.at)
                        .push(" AND id < ")
                        .push_bind(b.id.clone())
                        .push("))");
                }
                qb.push(" ORDER BY created_at DESC, id DESC LIMIT ")
                    .push_bind(limit);
                let rows = qb.build().fetch_all(&self.pool).await?;
                rows.iter().map(Self::handle_row).collect()
            }

            async fn handles_of_key(
                &self,
                key: &str,
                limit: i64,
            ) -> Result<Vec<$crate::domain::records::FileHandle>, CatalogError> {
                let sql = format!(
                    "SELECT {} FROM file_handles WHERE key = $1 ORDER BY created_at, id LIMIT $2",
                    super::rows::HANDLE_COLUMNS
                );
                let rows = sqlx::query(&sql)
                    .bind(key)
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::handle_row).collect()
            }

            async fn file_links(
                &self,
                file_id: &str,
                limit: i64,
            ) -> Result<Vec<super::admin::LinkRow>, CatalogError> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT object_type, object_id, created_at FROM file_links \
                     WHERE file_id = $1 ORDER BY created_at, object_type, object_id LIMIT $2",
                )
                .bind(file_id)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok(super::admin::LinkRow {
                            object_type: r.try_get("object_type")?,
                            object_id: r.try_get("object_id")?,
                            created_at: r.try_get("created_at")?,
                        })
                    })
                    .collect()
            }

            async fn events_of_subject(
                &self,
                subject: &str,
                limit: i64,
            ) -> Result<Vec<super::admin::SubjectEvent>, CatalogError> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT position, id, payload FROM events WHERE subject = $1 \
                     ORDER BY seq DESC LIMIT $2",
                )
                .bind(subject)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                let mut events = rows
                    .iter()
                    .map(|r| {
                        Ok(super::admin::SubjectEvent {
                            position: r.try_get("position")?,
                            id: r.try_get("id")?,
                            payload: r.try_get("payload")?,
                        })
                    })
                    .collect::<Result<Vec<_>, CatalogError>>()?;
                events.reverse();
                Ok(events)
            }

            async fn prunable_runs(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
            ) -> Result<u64, CatalogError> {
                use sqlx::Row;
                let sql = format!(
                    "SELECT COUNT(*) AS n FROM job_runs r WHERE {}",
                    super::admin_queries::PRUNABLE_RUNS
                );
                let n: i64 = sqlx::query(&sql)
                    .bind(cutoff)
                    .fetch_one(&self.pool)
                    .await?
                    .try_get("n")?;
                Ok(u64::try_from(n).unwrap_or(0))
            }

            #[tracing::instrument(skip_all, fields(limit))]
            async fn prune_runs(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
                limit: i64,
            ) -> Result<u64, CatalogError> {
                use sqlx::Row;
                let mut tx = self.pool.begin_with($begin).await?;
                let sql = format!(
                    "SELECT r.id FROM job_runs r WHERE {} ORDER BY r.started_at, r.id LIMIT $2",
                    super::admin_queries::PRUNABLE_RUNS
                );
                let rows = sqlx::query(&sql)
                    .bind(cutoff)
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?;
                if rows.is_empty() {
                    tx.commit().await?;
                    return Ok(0);
                }
                let ids = rows
                    .iter()
                    .map(|r| r.try_get::<String, _>("id"))
                    .collect::<Result<Vec<_>, _>>()?;
                // Items first: they reference their run.
                let mut runs = 0;
                for (table, column) in [("job_items", "run_id"), ("job_runs", "id")] {
                    let mut qb = sqlx::QueryBuilder::<$db>::new(format!(
                        "DELETE FROM {table} WHERE {column} IN ("
                    ));
                    let mut list = qb.separated(", ");
                    for id in &ids {
                        list.push_bind(id.as_str());
                    }
                    qb.push(")");
                    runs = qb.build().execute(&mut *tx).await?.rows_affected();
                }
                tx.commit().await?;
                Ok(runs)
            }
        }
    };
}

pub(super) use impl_admin_catalog;
