//! The SQL of maintenance jobs, shared by both backends: runs, their items, and the per-job
//! lease row that lets one replica at a time run a job.

/// Implements [`super::JobCatalog`] for a struct with a `pool: sqlx::Pool<$db>` field.
macro_rules! impl_job_catalog {
    ($ty:ty, $db:ty, $begin:expr, $bytes:expr, $now_text:expr) => {
        impl $ty {
            fn run_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> Result<$crate::domain::jobs::JobRun, CatalogError> {
                use sqlx::Row;
                let state: String = row.try_get("state")?;
                Ok($crate::domain::jobs::JobRun {
                    id: row.try_get("id")?,
                    job: row.try_get("job")?,
                    dry_run: row.try_get("dry_run")?,
                    state: $crate::domain::jobs::RunState::parse(&state)
                        .ok_or_else(|| CatalogError::Corrupt(format!("run state {state:?}")))?,
                    checkpoint: row.try_get("checkpoint")?,
                    summary: row.try_get("summary")?,
                    started_at: row.try_get("started_at")?,
                    updated_at: row.try_get("updated_at")?,
                    finished_at: row.try_get("finished_at")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl super::JobCatalog for $ty {
            async fn acquire_job_lock(
                &self,
                job: &str,
                holder: &str,
                lease_secs: u64,
            ) -> Result<bool, CatalogError> {
                // Inserted when free, taken over when the holder's lease ran out, renewed by
                // the holder itself; anyone else gets no row changed. Both the new lease's end
                // and the old one's expiry are the database's clock: a replica whose clock runs
                // ahead cannot take over a live lease.
                let sql = format!(
                    "INSERT INTO job_locks (job, holder, until) VALUES ($1, $2, {until}) \
                     ON CONFLICT (job) DO UPDATE SET holder = excluded.holder, until = excluded.until \
                     WHERE job_locks.until < {now} OR job_locks.holder = excluded.holder",
                    until = Self::db_now_plus("$3"),
                    now = Self::DB_NOW,
                );
                let n = sqlx::query(&sql)
                    .bind(job)
                    .bind(holder)
                    .bind(i64::try_from(lease_secs).unwrap_or(i64::MAX / 4))
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn release_job_lock(&self, job: &str, holder: &str) -> Result<(), CatalogError> {
                sqlx::query("DELETE FROM job_locks WHERE job = $1 AND holder = $2")
                    .bind(job)
                    .bind(holder)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn insert_run(&self, run: &$crate::domain::jobs::JobRun) -> Result<(), CatalogError> {
                sqlx::query(
                    "INSERT INTO job_runs (id, job, dry_run, state, checkpoint, summary, started_at, updated_at, finished_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(&run.id)
                .bind(&run.job)
                .bind(run.dry_run)
                .bind(run.state.as_str())
                .bind(&run.checkpoint)
                .bind(&run.summary)
                .bind(run.started_at)
                .bind(run.updated_at)
                .bind(run.finished_at)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn unfinished_run(
                &self,
                job: &str,
            ) -> Result<Option<$crate::domain::jobs::JobRun>, CatalogError> {
                let row = sqlx::query(
                    "SELECT id, job, dry_run, state, checkpoint, summary, started_at, updated_at, finished_at \
                     FROM job_runs WHERE job = $1 AND state = 'running' AND dry_run = $2 \
                     ORDER BY started_at DESC LIMIT 1",
                )
                .bind(job)
                .bind(false)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::run_row).transpose()
            }

            async fn last_run(
                &self,
                job: &str,
            ) -> Result<Option<$crate::domain::jobs::JobRun>, CatalogError> {
                let row = sqlx::query(
                    "SELECT id, job, dry_run, state, checkpoint, summary, started_at, updated_at, finished_at \
                     FROM job_runs WHERE job = $1 AND state <> 'running' AND dry_run = $2 \
                     ORDER BY started_at DESC LIMIT 1",
                )
                .bind(job)
                .bind(false)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::run_row).transpose()
            }

            async fn last_finished_run(
                &self,
                job: &str,
            ) -> Result<Option<$crate::domain::jobs::JobRun>, CatalogError> {
                let row = sqlx::query(
                    "SELECT id, job, dry_run, state, checkpoint, summary, started_at, updated_at, finished_at \
                     FROM job_runs WHERE job = $1 AND state = 'finished' AND dry_run = $2 \
                     ORDER BY started_at DESC LIMIT 1",
                )
                .bind(job)
                .bind(false)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::run_row).transpose()
            }

            async fn run_by_id(
                &self,
                id: &str,
            ) -> Result<Option<$crate::domain::jobs::JobRun>, CatalogError> {
                let row = sqlx::query(
                    "SELECT id, job, dry_run, state, checkpoint, summary, started_at, updated_at, finished_at \
                     FROM job_runs WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::run_row).transpose()
            }

            async fn update_run(
                &self,
                id: &str,
                state: $crate::domain::jobs::RunState,
                checkpoint: Option<&str>,
                summary: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), CatalogError> {
                let finished = (state != $crate::domain::jobs::RunState::Running).then_some(now);
                sqlx::query(
                    "UPDATE job_runs SET state = $1, checkpoint = $2, summary = $3, updated_at = $4, \
                     finished_at = $5 WHERE id = $6",
                )
                .bind(state.as_str())
                .bind(checkpoint)
                .bind(summary)
                .bind(now)
                .bind(finished)
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn add_job_items(
                &self,
                run_id: &str,
                items: &[$crate::domain::jobs::JobItem],
            ) -> Result<(), CatalogError> {
                // One multi-row insert per KEY_BATCH items (6 parameters a row, well under
                // either database's limit), all in one transaction: a page of a sweep's report is
                // two statements, not a thousand.
                let mut tx = self.pool.begin_with($begin).await?;
                for chunk in items.chunks(super::KEY_BATCH) {
                    let mut qb = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO job_items (run_id, action, key, version_id, bytes, reason) ",
                    );
                    qb.push_values(chunk, |mut row, item| {
                        row.push_bind(run_id)
                            .push_bind(&item.action)
                            .push_bind(&item.key)
                            .push_bind(&item.version_id)
                            .push_bind(item.bytes)
                            .push_bind(&item.reason);
                    });
                    qb.build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn job_items_page(
                &self,
                run_id: &str,
                after: i64,
                limit: i64,
            ) -> Result<Vec<(i64, $crate::domain::jobs::JobItem)>, CatalogError> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT id, action, key, version_id, bytes, reason FROM job_items \
                     WHERE run_id = $1 AND id > $2 ORDER BY id LIMIT $3",
                )
                .bind(run_id)
                .bind(after)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok((
                            r.try_get("id")?,
                            $crate::domain::jobs::JobItem {
                                action: r.try_get("action")?,
                                key: r.try_get("key")?,
                                version_id: r.try_get("version_id")?,
                                bytes: r.try_get("bytes")?,
                                reason: r.try_get("reason")?,
                            },
                        ))
                    })
                    .collect()
            }

            async fn job_items(
                &self,
                run_id: &str,
            ) -> Result<Vec<$crate::domain::jobs::JobItem>, CatalogError> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT action, key, version_id, bytes, reason FROM job_items WHERE run_id = $1 ORDER BY id",
                )
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::domain::jobs::JobItem {
                            action: r.try_get("action")?,
                            key: r.try_get("key")?,
                            version_id: r.try_get("version_id")?,
                            bytes: r.try_get("bytes")?,
                            reason: r.try_get("reason")?,
                        })
                    })
                    .collect()
            }

            async fn handle_keys_after(
                &self,
                after: &str,
                limit: i64,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<$crate::domain::reconcile::HandleKey>, CatalogError> {
                use sqlx::Row;
                // Only handles whose object must exist: not deleted, and not claimed for
                // deletion (its versions may be partly gone until the deletion settles). One
                // row per key: copies share a key and the join needs keys strictly in order.
                // Each page must be a range read of the key index in order: `status <> 'deleted'`
                // (the CHECK constraint's other three) keeps the planner off the status index,
                // which made every page sort all the handles after it (0.4 s a page at 200,000
                // handles on SQLite, growing with the table; 2 ms this way). A temporary file
                // past its `expires_at` is left out: the lifecycle rule may remove its object
                // from then on, which is its end, not a loss. So is a handle recorded after the
                // run began (`now`, its start): the listing may have passed its key before its
                // object was copied, and under steady commits a run that read those would chase
                // them (each one a HEAD) for as long as the commits go on.
                let sql = format!(
                    "SELECT MIN(id) AS id, key, MAX(size) AS size, COUNT(*) AS handles, \
                     MIN(created_at) AS recorded_at FROM file_handles \
                     WHERE key {c} > $1 AND status <> 'deleted' \
                     AND (claim IS NULL OR claim <> 'delete') \
                     AND (expires_at IS NULL OR expires_at > $3) AND created_at <= $3 \
                     GROUP BY key ORDER BY key {c} LIMIT $2",
                    c = $bytes
                );
                let rows = sqlx::query(&sql)
                    .bind(after)
                    .bind(limit)
                    .bind(now)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::domain::reconcile::HandleKey {
                            key: r.try_get("key")?,
                            file_id: r.try_get("id")?,
                            size: r.try_get("size")?,
                            handles: r.try_get("handles")?,
                            recorded_at: r.try_get("recorded_at")?,
                        })
                    })
                    .collect()
            }

            async fn handle_ids_of_key(
                &self,
                key: &str,
                limit: i64,
            ) -> Result<Vec<String>, CatalogError> {
                // The handles whose object must exist, as `handle_keys_after` reads them
                // (without its run start and temporary-file cut).
                Ok(sqlx::query_scalar(
                    "SELECT id FROM file_handles WHERE key = $1 AND status <> 'deleted' \
                     AND (claim IS NULL OR claim <> 'delete') ORDER BY id LIMIT $2",
                )
                .bind(key)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn upload_names_key(&self, key: &str) -> Result<bool, CatalogError> {
                let n: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM uploads WHERE key = $1 OR final_key = $1",
                )
                .bind(key)
                .fetch_one(&self.pool)
                .await?;
                Ok(n > 0)
            }

            async fn clock(&self) -> Result<chrono::DateTime<chrono::Utc>, CatalogError> {
                let text: String = sqlx::query_scalar($now_text).fetch_one(&self.pool).await?;
                chrono::DateTime::parse_from_rfc3339(&text)
                    .map(|t| t.with_timezone(&chrono::Utc))
                    .map_err(|e| CatalogError::Corrupt(format!("database clock {text:?}: {e}")))
            }


            async fn mark_swept_many(
                &self,
                upload_ids: &[$crate::domain::ids::UploadId],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), CatalogError> {
                // Marked once: a second sweep of the same key (a version left behind the first
                // time) changes nothing and announces nothing again.
                for chunk in upload_ids.chunks(super::KEY_BATCH) {
                    let mut tx = self.pool.begin_with($begin).await?;
                    let mut qb = sqlx::QueryBuilder::<$db>::new("UPDATE uploads SET swept_at = ");
                    qb.push_bind(now).push(", updated_at = ").push_bind(now).push(" WHERE id IN (");
                    let mut list = qb.separated(", ");
                    for id in chunk {
                        list.push_bind(id.as_str());
                    }
                    qb.push(") AND swept_at IS NULL RETURNING id, owner, profile, key, state");
                    let rows = qb.build().fetch_all(&mut *tx).await?;
                    // A rejected upload was announced when it was rejected; a committed one's
                    // tmp object is not the sweep's (it would never be marked here).
                    let abandoned: Vec<_> = rows
                        .into_iter()
                        .filter(|r| {
                            use sqlx::Row;
                            matches!(
                                r.try_get::<String, _>("state").as_deref(),
                                Ok("issued" | "promoting")
                            )
                        })
                        .collect();
                    let events = Self::upload_events(
                        &abandoned,
                        $crate::domain::events::EventType::UploadExpired,
                        now,
                    )?;
                    Self::insert_events(&mut *tx, &events).await?;
                    tx.commit().await?;
                }
                Ok(())
            }
        }
    };
}

pub(super) use impl_job_catalog;
