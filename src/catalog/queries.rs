//! The one body of SQL both backends run. It is a macro because sqlx's query builder is typed
//! by database: the same text compiles once per backend, so the two implementations cannot
//! drift apart. Placeholders are `$n`, which both SQLite and PostgreSQL accept; every value is
//! a bound parameter.

// The column lists are named here by `sqlite.rs` and `postgres.rs`; they live in `rows`.
pub(super) use super::rows::UPLOAD_COLUMNS;

/// What a commit records, in one write: `promoting → committed` under the caller's lease, the
/// file handle, and its `file.committed` outbox row — the handle and the event only when the
/// state change happened, so only the lease holder records anything. Each backend sends it in
/// as few trips as it can (`RECORD_HANDLE_SQL`, `write_handle`): PostgreSQL as one statement
/// of data-modifying CTEs (atomic on its own: one round trip instead of five); SQLite as one
/// call to the connection's worker thread carrying `BEGIN IMMEDIATE`, the three statements and
/// `COMMIT` (one trip instead of five). Parameters:
/// `$1` the handle's `created_at` (also the upload's `updated_at` and the event's time),
/// `$2` upload id, `$3` lease token, `$4` tmp version, `$5` file id, `$6` key, `$7` size,
/// `$8` content type, `$9` ETag, `$10` profile, `$11` created by, `$12` original filename,
/// `$13`/`$14` checksum algorithm/value, `$15` expires at, `$16` event id, `$17` event type,
/// `$18` event subject, `$19` event payload, `$20`/`$21` the image's width and height. The tmp object stays until its URL has expired
/// (single-use URLs); legacy uploads, committed in place, have no tmp object to clear.
macro_rules! record_handle_move {
    () => {
        "UPDATE uploads SET state = 'committed', lease_token = NULL, lease_until = NULL, updated_at = $1, \
     tmp_version_id = $4, tmp_cleared_at = CASE WHEN key LIKE 'tmp/%' THEN NULL ELSE $1 END \
     WHERE id = $2 AND state = 'promoting' AND lease_token = $3"
    };
}
/// The handle row's columns and values (see `record_handle_move!` for the parameters).
macro_rules! record_handle_insert {
    () => {
        "INSERT INTO file_handles (id, upload_id, key, size, content_type, etag, profile, created_by, created_at, \
     original_filename, checksum_algorithm, checksum_value, expires_at, image_width, image_height) \
     SELECT $5, $2, $6, $7, $8, $9, $10, $11, $1, $12, $13, $14, $15, $20, $21"
    };
}
/// The outbox row's columns and values.
macro_rules! record_handle_event {
    () => {
        "INSERT INTO events (id, type, subject, occurred_at, payload) SELECT $16, $17, $18, $1, $19"
    };
}
pub(super) use {record_handle_event, record_handle_insert, record_handle_move};

/// Implements [`super::Catalog`] for a struct with a `pool: sqlx::Pool<$db>` field.
/// `$begin` is the statement that opens a write transaction (SQLite takes its write lock up
/// front with `BEGIN IMMEDIATE`, so concurrent writers queue instead of failing); `$for_update`
/// is the presign batch's (`group_commit_queries`).
macro_rules! impl_catalog {
    ($ty:ty, $db:ty, $begin:expr, $for_update:expr) => {
        super::group_commit_queries::impl_group_commit!($ty, $db, $begin, $for_update);

        impl $ty {
            /// Binds the parameters of `record_handle_move!`, in order, for this backend's `RECORD_HANDLE_SQL`.
            fn bind_handle_write<'q>(
                query: sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments<'q>>,
                handle: &'q $crate::domain::records::FileHandle,
                token: &'q str,
                tmp_version: Option<&'q str>,
                event: &'q $crate::domain::events::NewEvent,
            ) -> sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments<'q>> {
                query
                    .bind(handle.created_at)
                    .bind(handle.upload_id.as_str())
                    .bind(token)
                    .bind(tmp_version)
                    .bind(handle.id.as_str())
                    .bind(&handle.key)
                    .bind(handle.size)
                    .bind(&handle.content_type)
                    .bind(&handle.etag)
                    .bind(&handle.profile)
                    .bind(&handle.created_by)
                    .bind(&handle.original_filename)
                    .bind(super::rows::checksum_algorithm(handle.checksum.as_ref()))
                    .bind(super::rows::checksum_value(handle.checksum.as_ref()))
                    .bind(handle.expires_at)
                    .bind(event.id.as_str())
                    .bind(event.event_type.as_str())
                    .bind(event.subject.as_str())
                    .bind(event.payload.as_str())
                    .bind(handle.image.map(|d| i64::from(d.width)))
                    .bind(handle.image.map(|d| i64::from(d.height)))
            }

            /// Sets each of `columns` (fixed names, never input) to `now` on the uploads `ids`,
            /// one statement per [`super::KEY_BATCH`] ids.
            async fn stamp_uploads(
                &self,
                columns: &[&'static str],
                ids: &[$crate::domain::ids::UploadId],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), CatalogError> {
                for chunk in ids.chunks(super::KEY_BATCH) {
                    let mut qb = sqlx::QueryBuilder::<$db>::new("UPDATE uploads SET ");
                    for (i, column) in columns.iter().enumerate() {
                        if i > 0 {
                            qb.push(", ");
                        }
                        qb.push(*column).push(" = ").push_bind(now);
                    }
                    qb.push(" WHERE id IN (");
                    let mut list = qb.separated(", ");
                    for id in chunk {
                        list.push_bind(id.as_str());
                    }
                    qb.push(")");
                    qb.build().execute(&self.pool).await?;
                }
                Ok(())
            }

            fn upload_row(row: &<$db as sqlx::Database>::Row) -> Result<$crate::domain::records::Upload, CatalogError> {
                use sqlx::Row;
                $crate::domain::records::Upload::try_from(super::rows::UploadRow {
                    id: row.try_get("id")?,
                    owner: row.try_get("owner")?,
                    profile: row.try_get("profile")?,
                    content_type: row.try_get("content_type")?,
                    declared_size: row.try_get("declared_size")?,
                    key: row.try_get("key")?,
                    method: row.try_get("method")?,
                    state: row.try_get("state")?,
                    final_key: row.try_get("final_key")?,
                    reject_code: row.try_get("reject_code")?,
                    lease_token: row.try_get("lease_token")?,
                    lease_until: row.try_get("lease_until")?,
                    created_at: row.try_get("created_at")?,
                    expires_at: row.try_get("expires_at")?,
                    commit_deadline: row.try_get("commit_deadline")?,
                    original_filename: row.try_get("original_filename")?,
                    checksum_algorithm: row.try_get("checksum_algorithm")?,
                    checksum_value: row.try_get("checksum_value")?,
                })
            }

            fn handle_row(row: &<$db as sqlx::Database>::Row) -> Result<$crate::domain::records::FileHandle, CatalogError> {
                use sqlx::Row;
                $crate::domain::records::FileHandle::try_from(super::rows::HandleRow {
                    id: row.try_get("id")?,
                    upload_id: row.try_get("upload_id")?,
                    key: row.try_get("key")?,
                    size: row.try_get("size")?,
                    content_type: row.try_get("content_type")?,
                    etag: row.try_get("etag")?,
                    profile: row.try_get("profile")?,
                    created_by: row.try_get("created_by")?,
                    created_at: row.try_get("created_at")?,
                    status: row.try_get("status")?,
                    original_filename: row.try_get("original_filename")?,
                    checksum_algorithm: row.try_get("checksum_algorithm")?,
                    checksum_value: row.try_get("checksum_value")?,
                    copied_from: row.try_get("copied_from")?,
                    expires_at: row.try_get("expires_at")?,
                    expired_at: row.try_get("expired_at")?,
                    image_width: row.try_get("image_width")?,
                    image_height: row.try_get("image_height")?,
                })
            }

            async fn insert_upload<'e, E>(exec: E, u: &$crate::domain::records::Upload) -> Result<(), CatalogError>
            where
                E: sqlx::Executor<'e, Database = $db>,
            {
                sqlx::query(
                    "INSERT INTO uploads (id, owner, profile, content_type, declared_size, key, method, state, \
                     final_key, reject_code, lease_token, lease_until, created_at, expires_at, commit_deadline, updated_at, \
                     original_filename, checksum_algorithm, checksum_value) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $13, $16, $17, $18)",
                )
                .bind(u.id.as_str())
                .bind(&u.owner)
                .bind(&u.profile)
                .bind(&u.content_type)
                .bind(u.declared_size)
                .bind(&u.key)
                .bind(&u.method)
                .bind(u.state.as_str())
                .bind(&u.final_key)
                .bind(&u.reject_code)
                .bind(&u.lease_token)
                .bind(u.lease_until)
                .bind(u.created_at)
                .bind(u.expires_at)
                .bind(u.commit_deadline)
                .bind(&u.original_filename)
                .bind(super::rows::checksum_algorithm(u.checksum.as_ref()))
                .bind(super::rows::checksum_value(u.checksum.as_ref()))
                .execute(exec)
                .await?;
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl super::Catalog for $ty {
            #[tracing::instrument(skip_all)]
            async fn ping(&self) -> Result<(), CatalogError> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn close(&self) {
                self.close_pool().await;
            }

            #[tracing::instrument(skip_all, fields(upload.id = %upload.id, size_bytes = upload.declared_size))]
            async fn create_upload(
                &self,
                upload: &$crate::domain::records::Upload,
                session: Option<&$crate::domain::multipart::MultipartSession>,
                day: chrono::NaiveDate,
                limits: $crate::domain::quota::QuotaLimits,
            ) -> Result<(), CatalogError> {
                self.writer
                    .submit(super::group_commit::NewUpload {
                        upload: upload.clone(),
                        session: session.cloned(),
                        day,
                        limits,
                    })
                    .await
            }

            async fn import_upload(&self, upload: &$crate::domain::records::Upload) -> Result<(), CatalogError> {
                Self::insert_upload(&self.pool, upload).await
            }

            #[tracing::instrument(skip_all)]
            async fn upload_by_key(&self, key: &str) -> Result<Option<$crate::domain::records::Upload>, CatalogError> {
                let sql = format!("SELECT {} FROM uploads WHERE key = $1", super::rows::UPLOAD_COLUMNS);
                let row = sqlx::query(&sql).bind(key).fetch_optional(&self.pool).await?;
                row.as_ref().map(Self::upload_row).transpose()
            }

            #[tracing::instrument(skip_all, fields(keys = keys.len()))]
            async fn uploads_by_keys(
                &self,
                keys: &[String],
            ) -> Result<Vec<$crate::domain::records::Upload>, CatalogError> {
                let mut found = Vec::new();
                for chunk in keys.chunks(super::KEY_BATCH) {
                    for row in Self::select_uploads_by_keys(&self.pool, chunk).await? {
                        found.push(Self::upload_row(&row)?);
                    }
                }
                Ok(found)
            }

            #[tracing::instrument(skip_all, fields(upload.id = %id))]
            async fn upload_by_id(
                &self,
                id: &$crate::domain::ids::UploadId,
            ) -> Result<Option<$crate::domain::records::Upload>, CatalogError> {
                let sql = format!("SELECT {} FROM uploads WHERE id = $1", super::rows::UPLOAD_COLUMNS);
                let row = sqlx::query(&sql).bind(id.as_str()).fetch_optional(&self.pool).await?;
                row.as_ref().map(Self::upload_row).transpose()
            }

            async fn stale_promoting(
                &self,
                lease_expired_before: chrono::DateTime<chrono::Utc>,
                limit: i64,
            ) -> Result<Vec<$crate::domain::records::Upload>, CatalogError> {
                let sql = format!(
                    "SELECT {} FROM uploads WHERE state = 'promoting' AND lease_until < $1 ORDER BY id LIMIT $2",
                    super::rows::UPLOAD_COLUMNS
                );
                let rows = sqlx::query(&sql)
                    .bind(lease_expired_before)
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::upload_row).collect()
            }

            #[tracing::instrument(skip_all, fields(upload.id = %req.upload_id))]
            async fn take_lease(&self, req: &super::LeaseRequest<'_>) -> Result<bool, CatalogError> {
                // Whether a held lease has run out is judged here, on the database's clock, and
                // the new lease runs on it too: a replica whose clock runs ahead cannot take
                // over a live lease (F12).
                let sql = format!(
                    "UPDATE uploads SET state = 'promoting', final_key = $1, lease_token = $2, lease_until = {}, \
                     updated_at = $3 WHERE id = $4 AND state = $5 AND COALESCE(lease_token, '') = $6 \
                     AND (state = 'issued' OR lease_until < {})",
                    Self::db_now_plus(req.lease_secs),
                    Self::DB_NOW,
                );
                let n = sqlx::query(&sql)
                    .bind(req.final_key)
                    .bind(req.token)
                    .bind(req.now)
                    .bind(req.upload_id.as_str())
                    .bind(req.expected_state.as_str())
                    .bind(req.expected_token.unwrap_or(""))
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            #[tracing::instrument(skip_all, fields(upload.id = %id))]
            async fn renew_lease(
                &self,
                id: &$crate::domain::ids::UploadId,
                token: &str,
                lease_secs: i64,
            ) -> Result<bool, CatalogError> {
                let sql = format!(
                    "UPDATE uploads SET lease_until = {} WHERE id = $1 AND state = 'promoting' AND lease_token = $2",
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

            #[tracing::instrument(skip_all, fields(upload.id = %id))]
            async fn release_lease(
                &self,
                id: &$crate::domain::ids::UploadId,
                token: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, CatalogError> {
                let n = sqlx::query(
                    "UPDATE uploads SET state = 'issued', final_key = NULL, lease_token = NULL, lease_until = NULL, \
                     updated_at = $1 WHERE id = $2 AND state = 'promoting' AND lease_token = $3",
                )
                .bind(now)
                .bind(id.as_str())
                .bind(token)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            #[tracing::instrument(skip_all, fields(upload.id = %id))]
            async fn expire_lease(
                &self,
                id: &$crate::domain::ids::UploadId,
                token: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, CatalogError> {
                let sql = format!(
                    "UPDATE uploads SET lease_until = {}, updated_at = $1 \
                     WHERE id = $2 AND state = 'promoting' AND lease_token = $3",
                    Self::DB_NOW
                );
                let n = sqlx::query(&sql)
                .bind(now)
                .bind(id.as_str())
                .bind(token)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            #[tracing::instrument(skip_all, fields(upload.id = %id, error.code = code))]
            async fn reject(
                &self,
                id: &$crate::domain::ids::UploadId,
                token: &str,
                code: &str,
                tmp_version: Option<&str>,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, CatalogError> {
                let mut tx = self.pool.begin_with($begin).await?;
                let rows = sqlx::query(
                    "UPDATE uploads SET state = 'rejected', reject_code = $1, final_key = NULL, lease_token = NULL, \
                     lease_until = NULL, updated_at = $2, tmp_version_id = $5, \
                     tmp_cleared_at = CASE WHEN key LIKE 'tmp/%' THEN NULL ELSE $2 END \
                     WHERE id = $3 AND state = 'promoting' AND lease_token = $4 \
                     RETURNING id, owner, profile, key, reject_code",
                )
                .bind(code)
                .bind(now)
                .bind(id.as_str())
                .bind(token)
                .bind(tmp_version)
                .fetch_all(&mut *tx)
                .await?;
                let events = Self::upload_events(&rows, $crate::domain::events::EventType::UploadRejected, now)?;
                Self::insert_events(&mut *tx, &events).await?;
                tx.commit().await?;
                Ok(rows.len() == 1)
            }

            #[tracing::instrument(skip_all, fields(upload.id = %handle.upload_id, file.id = %handle.id))]
            async fn record_handle(
                &self,
                handle: &$crate::domain::records::FileHandle,
                token: &str,
                tmp_version: Option<&str>,
            ) -> Result<Option<$crate::domain::records::FileHandle>, CatalogError> {
                // The outbox row rides in the same write: no handle without its event.
                let event = $crate::domain::events::NewEvent::file(
                    $crate::domain::events::EventType::FileCommitted,
                    handle,
                    handle.created_at,
                );
                let query = Self::bind_handle_write(
                    sqlx::query(Self::RECORD_HANDLE_SQL),
                    handle,
                    token,
                    tmp_version,
                    &event,
                );
                let recorded = Self::write_handle(&self.pool, query).await?;
                Ok(recorded.then(|| handle.clone()))
            }

            async fn settled_tmp(
                &self,
                expired_before: chrono::DateTime<chrono::Utc>,
                limit: i64,
            ) -> Result<Vec<super::SettledTmp>, CatalogError> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT id, key, method, tmp_version_id FROM uploads \
                     WHERE tmp_cleared_at IS NULL AND state IN ('committed', 'rejected') AND expires_at < $1 \
                     ORDER BY expires_at, id LIMIT $2",
                )
                .bind(expired_before)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        let id: String = r.try_get("id")?;
                        Ok(super::SettledTmp {
                            upload_id: $crate::domain::ids::UploadId::parse(&id)
                                .ok_or_else(|| CatalogError::Corrupt(format!("upload id {id:?}")))?,
                            key: r.try_get("key")?,
                            method: r.try_get("method")?,
                            tmp_version_id: r.try_get("tmp_version_id")?,
                        })
                    })
                    .collect()
            }

            async fn mark_tmp_cleared(
                &self,
                ids: &[$crate::domain::ids::UploadId],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), CatalogError> {
                self.stamp_uploads(&["tmp_cleared_at"], ids, now).await
            }

            #[tracing::instrument(skip_all, fields(file.id = %id))]
            async fn handle_by_id(
                &self,
                id: &$crate::domain::ids::FileId,
            ) -> Result<Option<$crate::domain::records::FileHandle>, CatalogError> {
                let sql = format!("SELECT {} FROM file_handles WHERE id = $1", super::rows::HANDLE_COLUMNS);
                let row = sqlx::query(&sql).bind(id.as_str()).fetch_optional(&self.pool).await?;
                row.as_ref().map(Self::handle_row).transpose()
            }

            #[tracing::instrument(skip_all)]
            async fn mark_expired_handles(
                &self,
                now: chrono::DateTime<chrono::Utc>,
                limit: i64,
            ) -> Result<Vec<$crate::domain::ids::FileId>, CatalogError> {
                // One batch, oldest expiry first; a handle is marked once (`expired_at IS NULL`),
                // so two sweeps running at once never count one twice.
                let mut tx = self.pool.begin_with($begin).await?;
                let sql = format!(
                    "UPDATE file_handles SET expired_at = $1 WHERE id IN (\
                     SELECT id FROM file_handles WHERE expires_at IS NOT NULL AND expired_at IS NULL \
                     AND expires_at <= $1 ORDER BY expires_at, id LIMIT $2) AND expired_at IS NULL \
                     RETURNING {}",
                    super::rows::HANDLE_COLUMNS
                );
                let rows = sqlx::query(&sql)
                    .bind(now)
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?;
                let events = Self::file_events(&rows, $crate::domain::events::EventType::FileExpired, now)?;
                Self::insert_events(&mut *tx, &events).await?;
                tx.commit().await?;
                rows.iter().map(|r| Self::handle_row(r).map(|h| h.id)).collect()
            }

            #[tracing::instrument(skip_all, fields(upload.id = %id))]
            async fn handle_by_upload(
                &self,
                id: &$crate::domain::ids::UploadId,
            ) -> Result<Option<$crate::domain::records::FileHandle>, CatalogError> {
                // The handle the upload's commit made, never a copy sharing its upload id.
                let sql = format!(
                    "SELECT {} FROM file_handles WHERE upload_id = $1 AND copied_from IS NULL",
                    super::rows::HANDLE_COLUMNS
                );
                let row = sqlx::query(&sql).bind(id.as_str()).fetch_optional(&self.pool).await?;
                row.as_ref().map(Self::handle_row).transpose()
            }

            async fn quota_usage(&self, owner: &str, day: chrono::NaiveDate) -> Result<(i64, i64), CatalogError> {
                use sqlx::Row;
                let row = sqlx::query("SELECT uploads, bytes FROM quota_usage WHERE owner = $1 AND day = $2")
                    .bind(owner)
                    .bind(day.to_string())
                    .fetch_optional(&self.pool)
                    .await?;
                match row {
                    Some(r) => Ok((r.try_get("uploads")?, r.try_get("bytes")?)),
                    None => Ok((0, 0)),
                }
            }
        }
    };
}

pub(super) use impl_catalog;
