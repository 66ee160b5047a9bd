//! The SQL of multipart sessions and their parts, shared by both backends like `queries.rs`:
//! one session row per multipart upload, one row per part keyed by (upload id, part number).

/// Implements [`super::MultipartCatalog`] (and the session insert `create_upload` uses) for a
/// struct with a `pool: sqlx::Pool<$db>` field.
macro_rules! impl_multipart_catalog {
    ($ty:ty, $db:ty, $begin:expr) => {
        impl $ty {
            fn session_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> Result<$crate::domain::multipart::MultipartSession, CatalogError> {
                use sqlx::Row;
                let id: String = row.try_get("upload_id")?;
                let state: String = row.try_get("state")?;
                let n = |v: i64, what: &str| {
                    u64::try_from(v).map_err(|_| CatalogError::Corrupt(format!("{what} {v}")))
                };
                let total = n(row.try_get("total_size")?, "total_size")?;
                let part_size = n(row.try_get("part_size")?, "part_size")?;
                let part_count = u32::try_from(n(row.try_get("part_count")?, "part_count")?)
                    .map_err(|_| CatalogError::Corrupt("part_count".into()))?;
                Ok($crate::domain::multipart::MultipartSession {
                    upload_id: $crate::domain::ids::UploadId::parse(&id)
                        .ok_or_else(|| CatalogError::Corrupt(format!("upload id {id:?}")))?,
                    s3_upload_id: row.try_get("s3_upload_id")?,
                    plan: $crate::domain::multipart::PartPlan {
                        total,
                        part_size,
                        part_count,
                    },
                    state: $crate::domain::multipart::SessionState::parse(&state)
                        .ok_or_else(|| CatalogError::Corrupt(format!("session state {state:?}")))?,
                    created_at: row.try_get("created_at")?,
                    expires_at: row.try_get("expires_at")?,
                })
            }

            async fn insert_session<'e, E>(
                exec: E,
                s: &$crate::domain::multipart::MultipartSession,
            ) -> Result<(), CatalogError>
            where
                E: sqlx::Executor<'e, Database = $db>,
            {
                let big = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                sqlx::query(
                    "INSERT INTO multipart_sessions (upload_id, s3_upload_id, total_size, part_size, part_count, \
                     state, created_at, expires_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $7)",
                )
                .bind(s.upload_id.as_str())
                .bind(&s.s3_upload_id)
                .bind(big(s.plan.total))
                .bind(big(s.plan.part_size))
                .bind(i64::from(s.plan.part_count))
                .bind(s.state.as_str())
                .bind(s.created_at)
                .bind(s.expires_at)
                .execute(exec)
                .await?;
                Ok(())
            }

            async fn upsert_parts(
                exec: &mut <$db as sqlx::Database>::Connection,
                id: &$crate::domain::ids::UploadId,
                parts: &[$crate::domain::multipart::PartRecord],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), CatalogError> {
                for p in parts {
                    sqlx::query(
                        "INSERT INTO upload_parts (upload_id, part_number, etag, size, checksum, recorded_at) \
                         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (upload_id, part_number) DO UPDATE SET \
                         etag = excluded.etag, size = excluded.size, checksum = excluded.checksum, \
                         recorded_at = excluded.recorded_at",
                    )
                    .bind(id.as_str())
                    .bind(i64::from(p.part_number))
                    .bind(&p.etag)
                    .bind(i64::try_from(p.size).unwrap_or(i64::MAX))
                    .bind(&p.checksum)
                    .bind(now)
                    .execute(&mut *exec)
                    .await?;
                }
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl super::MultipartCatalog for $ty {
            #[tracing::instrument(skip_all, fields(upload.id = %id))]
            async fn multipart_session(
                &self,
                id: &$crate::domain::ids::UploadId,
            ) -> Result<Option<$crate::domain::multipart::MultipartSession>, CatalogError> {
                let row = sqlx::query(
                    "SELECT upload_id, s3_upload_id, total_size, part_size, part_count, state, created_at, \
                     expires_at FROM multipart_sessions WHERE upload_id = $1",
                )
                .bind(id.as_str())
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::session_row).transpose()
            }

            #[tracing::instrument(skip_all, fields(upload.id = %id, parts = parts.len()))]
            async fn record_parts(
                &self,
                id: &$crate::domain::ids::UploadId,
                parts: &[$crate::domain::multipart::PartRecord],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), CatalogError> {
                let mut tx = self.pool.begin_with($begin).await?;
                Self::upsert_parts(&mut *tx, id, parts, now).await?;
                tx.commit().await?;
                Ok(())
            }

            #[tracing::instrument(skip_all, fields(upload.id = %id))]
            async fn parts(
                &self,
                id: &$crate::domain::ids::UploadId,
            ) -> Result<Vec<$crate::domain::multipart::PartRecord>, CatalogError> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT part_number, etag, size, checksum FROM upload_parts WHERE upload_id = $1 \
                     ORDER BY part_number",
                )
                .bind(id.as_str())
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        let n: i64 = r.try_get("part_number")?;
                        let size: i64 = r.try_get("size")?;
                        Ok($crate::domain::multipart::PartRecord {
                            part_number: u32::try_from(n)
                                .map_err(|_| CatalogError::Corrupt(format!("part number {n}")))?,
                            etag: r.try_get("etag")?,
                            size: u64::try_from(size)
                                .map_err(|_| CatalogError::Corrupt(format!("part size {size}")))?,
                            checksum: r.try_get("checksum")?,
                        })
                    })
                    .collect()
            }

            #[tracing::instrument(skip_all, fields(upload.id = %id, to = to.as_str()))]
            async fn finish_session(
                &self,
                id: &$crate::domain::ids::UploadId,
                to: $crate::domain::multipart::SessionState,
                parts: &[$crate::domain::multipart::PartRecord],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, CatalogError> {
                let mut tx = self.pool.begin_with($begin).await?;
                let moved = sqlx::query(
                    "UPDATE multipart_sessions SET state = $1, updated_at = $2, claim_token = NULL, claim_until = NULL \
                     WHERE upload_id = $3 AND state = 'open'",
                )
                .bind(to.as_str())
                .bind(now)
                .bind(id.as_str())
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if moved == 0 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                Self::upsert_parts(&mut *tx, id, parts, now).await?;
                if to == $crate::domain::multipart::SessionState::Aborted {
                    let rows = sqlx::query("SELECT id, owner, profile, key FROM uploads WHERE id = $1")
                        .bind(id.as_str())
                        .fetch_all(&mut *tx)
                        .await?;
                    let events = Self::upload_events(
                        &rows,
                        $crate::domain::events::EventType::MultipartAborted,
                        now,
                    )?;
                    Self::insert_events(&mut *tx, &events).await?;
                }
                tx.commit().await?;
                Ok(true)
            }

            #[tracing::instrument(skip_all, fields(upload.id = %id))]
            async fn claim_session(
                &self,
                id: &$crate::domain::ids::UploadId,
                token: &str,
                lease_secs: i64,
            ) -> Result<bool, CatalogError> {
                let sql = format!(
                    "UPDATE multipart_sessions SET claim_token = $1, claim_until = {} \
                     WHERE upload_id = $2 AND state = 'open' AND (claim_until IS NULL OR claim_until < {})",
                    Self::db_now_plus(lease_secs),
                    Self::DB_NOW,
                );
                let n = sqlx::query(&sql)
                    .bind(token)
                    .bind(id.as_str())
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn release_session_claim(
                &self,
                id: &$crate::domain::ids::UploadId,
                token: &str,
            ) -> Result<(), CatalogError> {
                sqlx::query(
                    "UPDATE multipart_sessions SET claim_token = NULL, claim_until = NULL \
                     WHERE upload_id = $1 AND claim_token = $2",
                )
                .bind(id.as_str())
                .bind(token)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn renew_session_claim(
                &self,
                id: &$crate::domain::ids::UploadId,
                token: &str,
                lease_secs: i64,
            ) -> Result<bool, CatalogError> {
                let sql = format!(
                    "UPDATE multipart_sessions SET claim_until = {} \
                     WHERE upload_id = $1 AND claim_token = $2 AND state = 'open'",
                    Self::db_now_plus(lease_secs),
                );
                let n = sqlx::query(&sql)
                    .bind(id.as_str())
                    .bind(token)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }
        }
    };
}

pub(super) use impl_multipart_catalog;
