//! The SQL of links, link scans and handle statuses (unlinked → archived → deleted, restore),
//! shared by both backends. `$month` formats a timestamp column as `YYYY-MM` in each dialect;
//! claim leases are judged by the database's clock (`DB_NOW`, `db_now_plus` of each catalog
//! type, the same SQL every lease uses), the one clock every replica shares.
//!
//! Every transition is one conditional statement that checks everything it depends on
//! (status, claim, links, shared keys), and links move `link_count` on the handle row in the same
//! transaction: a link and a transition racing on one handle meet on that row's lock. The
//! conditions the statements share are in `hygiene_conditions`.

/// Implements [`super::HygieneCatalog`] for a struct with a `pool: sqlx::Pool<$db>` field.
macro_rules! impl_hygiene_catalog {
    ($ty:ty, $db:ty, $begin:expr, $month:expr, $lock_key:expr, $lock_rows:expr) => {
        impl $ty {
            fn scan_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> Result<super::LinkScan, CatalogError> {
                use sqlx::Row;
                Ok(super::LinkScan {
                    id: row.try_get("id")?,
                    completed: row.try_get::<String, _>("state")? == "completed",
                    started_at: row.try_get("started_at")?,
                    completed_at: row.try_get("completed_at")?,
                })
            }

            async fn handles_where(
                &self,
                condition: &str,
                binds: (&str, chrono::DateTime<chrono::Utc>, i64),
            ) -> Result<Vec<$crate::domain::records::FileHandle>, CatalogError> {
                let sql = format!(
                    "SELECT {} FROM file_handles WHERE {condition} AND expires_at IS NULL AND id > $1 AND status_changed_at < $2 \
                     ORDER BY id LIMIT $3",
                    super::rows::HANDLE_COLUMNS
                );
                let rows = sqlx::query(&sql)
                    .bind(binds.0)
                    .bind(binds.1)
                    .bind(binds.2)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::handle_row).collect()
            }
        }

        #[async_trait::async_trait]
        impl super::HygieneCatalog for $ty {
            async fn put_link(
                &self,
                file: &$crate::domain::ids::FileId,
                object_type: &str,
                object_id: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, CatalogError> {
                let mut tx = self.pool.begin_with($begin).await?;
                sqlx::query(
                    "INSERT INTO file_links (file_id, object_type, object_id, created_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (file_id, object_type, object_id) DO NOTHING",
                )
                .bind(file.as_str())
                .bind(object_type)
                .bind(object_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                let n = sqlx::query(
                    "UPDATE file_handles SET link_count = (SELECT COUNT(*) FROM file_links WHERE file_id = $1) \
                     WHERE id = $1 AND status = 'available' AND claim IS NULL",
                )
                .bind(file.as_str())
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if n == 1 {
                    tx.commit().await?;
                    Ok(true)
                } else {
                    tx.rollback().await?;
                    Ok(false)
                }
            }

            async fn delete_link(
                &self,
                file: &$crate::domain::ids::FileId,
                object_type: &str,
                object_id: &str,
            ) -> Result<(), CatalogError> {
                let mut tx = self.pool.begin_with($begin).await?;
                sqlx::query(
                    "DELETE FROM file_links WHERE file_id = $1 AND object_type = $2 AND object_id = $3",
                )
                .bind(file.as_str())
                .bind(object_type)
                .bind(object_id)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE file_handles SET link_count = (SELECT COUNT(*) FROM file_links WHERE file_id = $1) \
                     WHERE id = $1",
                )
                .bind(file.as_str())
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn links_of(
                &self,
                file: &$crate::domain::ids::FileId,
            ) -> Result<i64, CatalogError> {
                let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM file_links WHERE file_id = $1")
                    .bind(file.as_str())
                    .fetch_one(&self.pool)
                    .await?;
                Ok(n)
            }

            async fn create_scan(
                &self,
                id: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), CatalogError> {
                sqlx::query("INSERT INTO link_scans (id, state, started_at) VALUES ($1, 'open', $2)")
                    .bind(id)
                    .bind(now)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn scan(&self, id: &str) -> Result<Option<super::LinkScan>, CatalogError> {
                // An expired scan (the prune let it go) is as gone as a pruned one.
                let row = sqlx::query(
                    "SELECT id, state, started_at, completed_at FROM link_scans \
                     WHERE id = $1 AND state <> 'expired'",
                )
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::scan_row).transpose()
            }

            async fn add_scan_batch(
                &self,
                scan: &str,
                n: i64,
                files: &[String],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, CatalogError> {
                let mut tx = self.pool.begin_with($begin).await?;
                let fresh = sqlx::query(
                    "INSERT INTO link_scan_batches (scan_id, n, files, received_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (scan_id, n) DO NOTHING",
                )
                .bind(scan)
                .bind(n)
                .bind(i64::try_from(files.len()).unwrap_or(i64::MAX))
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                    == 1;
                if fresh {
                    for f in files {
                        sqlx::query(
                            "INSERT INTO link_scan_seen (scan_id, file_id) VALUES ($1, $2) \
                             ON CONFLICT (scan_id, file_id) DO NOTHING",
                        )
                        .bind(scan)
                        .bind(f)
                        .execute(&mut *tx)
                        .await?;
                    }
                }
                tx.commit().await?;
                Ok(fresh)
            }

            async fn complete_scan(
                &self,
                id: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<super::ScanCompletion, CatalogError> {
                use sqlx::Row;
                let mut tx = self.pool.begin_with($begin).await?;
                // A deletion holding a key this scan vouches for (saw, or created after it
                // began) that is past its last check (its S3 calls under way, `claim_s3_at`)
                // cannot heed the scan: the scan waits for it rather than complete unheeded —
                // until it settles, or a later run finishes a deletion that died (its lease
                // running out does not end the wait: some versions may be gone). One that is not yet there will refuse at that
                // check once the scan is complete. The deletion's rows are locked as its
                // renewal locks them (in id order), so a renewal either commits first (and is
                // seen here) or runs after and sees this scan completed.
                let sql = format!(
                    "SELECT d.id, CASE WHEN d.claim_s3_at IS NOT NULL THEN 1 ELSE 0 END AS held \
                     FROM file_handles d WHERE d.claim = 'delete' AND EXISTS (SELECT 1 FROM file_handles o \
                     WHERE o.key = d.key AND (EXISTS (SELECT 1 FROM link_scan_seen s WHERE s.scan_id = $1 \
                     AND s.file_id = o.id) OR o.created_at >= (SELECT ls.started_at FROM link_scans ls \
                     WHERE ls.id = $1))) \
                     ORDER BY d.id{}",
                    $lock_rows,
                );
                let held = sqlx::query(&sql)
                    .bind(id)
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(|r| r.try_get::<i32, _>("held"))
                    .collect::<Result<Vec<_>, _>>()?;
                if held.contains(&1) {
                    tx.rollback().await?;
                    return Ok(super::ScanCompletion::Busy);
                }
                let n = sqlx::query(
                    "UPDATE link_scans SET state = 'completed', completed_at = $1 WHERE id = $2 AND state = 'open'",
                )
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                tx.commit().await?;
                Ok(if n == 1 {
                    super::ScanCompletion::Completed
                } else {
                    super::ScanCompletion::NotOpen
                })
            }

            async fn latest_completed_scan(&self) -> Result<Option<super::LinkScan>, CatalogError> {
                let row = sqlx::query(
                    "SELECT id, state, started_at, completed_at FROM link_scans WHERE state = 'completed' \
                     ORDER BY completed_at DESC, id DESC LIMIT 1",
                )
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::scan_row).transpose()
            }

            async fn unlinked_candidates(
                &self,
                cutoff: chrono::DateTime<chrono::Utc>,
                profiles: &[String],
                after: &str,
                limit: i64,
            ) -> Result<Vec<$crate::domain::records::FileHandle>, CatalogError> {
                // Available, older than the grace period, not restored within it, no links, a
                // profile that tracks links, and not vouched for by the latest completed scan.
                let sql = format!(
                    "SELECT {} FROM file_handles h WHERE h.id > $1 AND {} ORDER BY h.id LIMIT $3",
                    super::rows::HANDLE_COLUMNS,
                    super::hygiene_conditions::unused_conditions(profiles)
                );
                let rows = sqlx::query(&sql)
                    .bind(after)
                    .bind(cutoff)
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::handle_row).collect()
            }

            async fn unlink_if_unused(
                &self,
                id: &$crate::domain::ids::FileId,
                cutoff: chrono::DateTime<chrono::Utc>,
                profiles: &[String],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, CatalogError> {
                let sql = format!(
                    "UPDATE file_handles AS h SET status = 'unlinked', status_changed_at = $3 \
                     WHERE h.id = $1 AND {} RETURNING {}",
                    super::hygiene_conditions::unused_conditions(profiles),
                    super::rows::HANDLE_COLUMNS
                );
                let mut tx = self.pool.begin_with($begin).await?;
                let rows = sqlx::query(&sql)
                    .bind(id.as_str())
                    .bind(cutoff)
                    .bind(now)
                    .fetch_all(&mut *tx)
                    .await?;
                let events = Self::file_events(&rows, $crate::domain::events::EventType::FileUnlinked, now)?;
                Self::insert_events(&mut *tx, &events).await?;
                tx.commit().await?;
                Ok(rows.len() == 1)
            }

            async fn return_vouched(
                &self,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<u64, CatalogError> {
                // Unlinked (never claimed, so never changed in S3): back to available, as if
                // restored, when the latest completed scan vouches for it.
                let sql = format!(
                    "UPDATE file_handles AS h SET status = 'available', status_changed_at = $1, restored_at = $1 \
                     WHERE h.status = 'unlinked' AND h.claim IS NULL AND {} AND {} RETURNING {}",
                    super::hygiene_conditions::scan_vouches("h"),
                    super::hygiene_conditions::UNMOVED,
                    super::rows::HANDLE_COLUMNS
                );
                let mut tx = self.pool.begin_with($begin).await?;
                let rows = sqlx::query(&sql).bind(now).fetch_all(&mut *tx).await?;
                let events = Self::file_events(&rows, $crate::domain::events::EventType::FileRestored, now)?;
                Self::insert_events(&mut *tx, &events).await?;
                tx.commit().await?;
                Ok(rows.len() as u64)
            }

            async fn vouched_moved(
                &self,
                after: &str,
                limit: i64,
            ) -> Result<Vec<$crate::domain::records::FileHandle>, CatalogError> {
                let sql = format!(
                    "SELECT {} FROM file_handles h WHERE h.id > $1 AND h.status = 'unlinked' \
                     AND h.claim IS NULL AND {} AND NOT ({}) ORDER BY h.id LIMIT $2",
                    super::rows::HANDLE_COLUMNS,
                    super::hygiene_conditions::scan_vouches("h"),
                    super::hygiene_conditions::UNMOVED,
                );
                let rows = sqlx::query(&sql)
                    .bind(after)
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::handle_row).collect()
            }

            async fn handles_in_status(
                &self,
                status: $crate::domain::records::HandleStatus,
                changed_before: chrono::DateTime<chrono::Utc>,
                profiles: &[String],
                after: &str,
                limit: i64,
            ) -> Result<Vec<$crate::domain::records::FileHandle>, CatalogError> {
                let condition = format!(
                    "status = '{}' AND {}",
                    status.as_str(),
                    super::hygiene_conditions::profiles_in("profile", profiles)
                );
                self.handles_where(&condition, (after, changed_before, limit)).await
            }

            async fn key_has_status(
                &self,
                key: &str,
                statuses: &[$crate::domain::records::HandleStatus],
            ) -> Result<bool, CatalogError> {
                let list = super::hygiene_conditions::statuses_sql(statuses);
                let sql = format!("SELECT COUNT(*) FROM file_handles WHERE key = $1 AND status IN ({list})");
                let n: i64 = sqlx::query_scalar(&sql).bind(key).fetch_one(&self.pool).await?;
                Ok(n > 0)
            }

            async fn claim_handle(
                &self,
                id: &$crate::domain::ids::FileId,
                kind: super::ClaimKind,
                guard: Option<&super::HygieneGuard<'_>>,
                token: &str,
                lease_secs: u64,
            ) -> Result<bool, CatalogError> {
                let until = Self::db_now_plus("$3");
                let mut sql = format!(
                    "UPDATE file_handles AS h SET claim = $1, claim_token = $2, claim_until = {until}, \
                     claim_s3_at = NULL WHERE h.id = $4"
                );
                match guard {
                    Some(g) => {
                        // Hygiene: everything the step depends on, in this statement.
                        sql.push_str(&format!(
                            " AND h.status = '{}' AND h.status_changed_at < $5 AND h.link_count = 0 \
                             AND NOT EXISTS (SELECT 1 FROM file_links l WHERE l.file_id = h.id) AND {} \
                             AND NOT {} AND (h.claim IS NULL OR h.claim_until < {now})",
                            g.from.as_str(),
                            super::hygiene_conditions::profiles_in("h.profile", g.profiles),
                            super::hygiene_conditions::scan_vouches("h"),
                            now = Self::DB_NOW,
                        ));
                        // The object is the key's: a scan that saw any copy keeps it.
                        sql.push_str(&format!(
                            " AND NOT {}",
                            super::hygiene_conditions::sibling_vouched()
                        ));
                        if !g.key_not_in.is_empty() {
                            sql.push_str(&format!(
                                " AND NOT EXISTS (SELECT 1 FROM file_handles o WHERE o.key = h.key \
                                 AND o.id <> h.id AND o.status IN ({}))",
                                super::hygiene_conditions::statuses_sql(g.key_not_in)
                            ));
                        }
                        if g.key_retired {
                            // Deleting the key deletes every copy's object: every other handle
                            // of it must be deleted, or archived past the same period, held by
                            // no claim but a deletion, and not vouched for by the latest scan.
                            sql.push_str(&format!(
                                " AND NOT EXISTS (SELECT 1 FROM file_handles o WHERE o.key = h.key \
                                 AND o.id <> h.id AND o.status <> 'deleted' AND NOT (o.status = 'archived' \
                                 AND o.status_changed_at < $5 AND o.link_count = 0 \
                                 AND (o.claim IS NULL OR o.claim = 'delete') AND NOT {}))",
                                super::hygiene_conditions::scan_vouches("o")
                            ));
                        }
                    }
                    None => sql.push_str(&format!(
                        " AND h.status IN ('unlinked', 'archived') \
                         AND (h.claim IS NULL OR ((h.claim <> 'delete' OR h.claim_s3_at IS NULL) \
                         AND h.claim_until < {now})) \
                         AND NOT EXISTS (SELECT 1 FROM file_handles o WHERE o.key = h.key \
                         AND o.id <> h.id AND ((o.claim = 'delete' AND (o.claim_s3_at IS NOT NULL \
                         OR o.claim_until >= {now})) \
                         OR (o.claim = 'archive' AND o.claim_until >= {now})))",
                        now = Self::DB_NOW,
                    )),
                }
                let secs = i64::try_from(lease_secs).unwrap_or(i64::MAX / 4);
                // Claims of handles sharing a key meet on those rows' locks (a restore of one
                // copy and the deletion of another never both succeed), then the update judges
                // what the others committed.
                let mut tx = self.pool.begin_with($begin).await?;
                sqlx::query($lock_key)
                    .bind(id.as_str())
                    .fetch_all(&mut *tx)
                    .await?;
                let q = sqlx::query(&sql)
                    .bind(kind.as_str())
                    .bind(token)
                    .bind(secs)
                    .bind(id.as_str());
                let q = match guard {
                    Some(g) => q.bind(g.changed_before),
                    None => q,
                };
                let n = q.execute(&mut *tx).await?.rows_affected();
                tx.commit().await?;
                Ok(n == 1)
            }

            async fn renew_claim(
                &self,
                id: &$crate::domain::ids::FileId,
                token: &str,
                lease_secs: u64,
            ) -> Result<bool, CatalogError> {
                // Copies: the object is shared, so the last check before S3 also refuses while
                // another handle of the key is available or being restored (see
                // `SIBLING_LIVE`); the key's rows are taken in the claims' order first.
                let until = Self::db_now_plus("$2");
                let sql = format!(
                    "UPDATE file_handles AS h SET claim_until = {until}, claim_s3_at = {now} \
                     WHERE h.id = $3 AND h.claim_token = $1 AND h.link_count = 0 AND NOT {} AND NOT {} \
                     AND NOT {}",
                    super::hygiene_conditions::scan_vouches("h"),
                    super::hygiene_conditions::SIBLING_LIVE,
                    super::hygiene_conditions::sibling_vouched(),
                    now = Self::DB_NOW,
                );
                let secs = i64::try_from(lease_secs).unwrap_or(i64::MAX / 4);
                let mut tx = self.pool.begin_with($begin).await?;
                sqlx::query($lock_key)
                    .bind(id.as_str())
                    .fetch_all(&mut *tx)
                    .await?;
                let n = sqlx::query(&sql)
                    .bind(token)
                    .bind(secs)
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                tx.commit().await?;
                Ok(n == 1)
            }

            async fn settle_claim(
                &self,
                id: &$crate::domain::ids::FileId,
                token: &str,
                settle: &super::Settle<'_>,
            ) -> Result<bool, CatalogError> {
                let mut tx = self.pool.begin_with($begin).await?;
                // Copies are read or updated too: take the key's rows in the claims' order.
                sqlx::query($lock_key)
                    .bind(id.as_str())
                    .fetch_all(&mut *tx)
                    .await?;
                if let Some((object_type, object_id)) = settle.link {
                    sqlx::query(
                        "INSERT INTO file_links (file_id, object_type, object_id, created_at) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (file_id, object_type, object_id) DO NOTHING",
                    )
                    .bind(id.as_str())
                    .bind(object_type)
                    .bind(object_id)
                    .bind(settle.now)
                    .execute(&mut *tx)
                    .await?;
                }
                // An archival settles only while no copy is available or being restored and the
                // latest completed scan vouches for no handle of the key: a copy that came back,
                // or a scan completed, while S3 was being changed makes it fail (and be undone).
                let archived = settle.to == $crate::domain::records::HandleStatus::Archived;
                let sql = format!(
                    "UPDATE file_handles AS h SET status = $1, status_changed_at = $2, \
                     storage_class = COALESCE($3, storage_class), \
                     restored_at = CASE WHEN $4 THEN $2 ELSE restored_at END, \
                     link_count = (SELECT COUNT(*) FROM file_links WHERE file_id = $5), \
                     claim = NULL, claim_token = NULL, claim_until = NULL \
                     WHERE h.id = $5 AND h.claim_token = $6{} RETURNING {}",
                    if archived {
                        format!(
                            " AND NOT {} AND NOT {} AND NOT {}",
                            super::hygiene_conditions::SIBLING_LIVE,
                            super::hygiene_conditions::scan_vouches("h"),
                            super::hygiene_conditions::sibling_vouched()
                        )
                    } else {
                        String::new()
                    },
                    super::rows::HANDLE_COLUMNS
                );
                let settled = sqlx::query(&sql)
                .bind(settle.to.as_str())
                .bind(settle.now)
                .bind(settle.storage_class)
                .bind(settle.restored)
                .bind(id.as_str())
                .bind(token)
                .fetch_all(&mut *tx)
                .await?;
                if settled.len() != 1 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                let mut events = Self::file_events(
                    &settled,
                    $crate::domain::events::EventType::for_status(settle.to),
                    settle.now,
                )?;
                if let Some(class) = settle.storage_class {
                    // The class is the object's, shared by every copy of the key.
                    sqlx::query(
                        "UPDATE file_handles SET storage_class = $1 \
                         WHERE key = (SELECT key FROM file_handles WHERE id = $2) AND id <> $2",
                    )
                    .bind(class)
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
                }
                if settle.to == $crate::domain::records::HandleStatus::Deleted {
                    // The key's object is gone for every copy: the copies the claim vouched for
                    // (archived past the period, see `key_retired`) are deleted with it.
                    let sql = format!(
                        "UPDATE file_handles SET status = 'deleted', status_changed_at = $1, \
                         claim = NULL, claim_token = NULL, claim_until = NULL \
                         WHERE key = (SELECT key FROM file_handles WHERE id = $2) AND id <> $2 \
                         AND status = 'archived' AND (claim IS NULL OR claim = 'delete') RETURNING {}",
                        super::rows::HANDLE_COLUMNS
                    );
                    let copies = sqlx::query(&sql)
                        .bind(settle.now)
                        .bind(id.as_str())
                        .fetch_all(&mut *tx)
                        .await?;
                    events.extend(Self::file_events(
                        &copies,
                        $crate::domain::events::EventType::FileDeleted,
                        settle.now,
                    )?);
                }
                Self::insert_events(&mut *tx, &events).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn release_claim(
                &self,
                id: &$crate::domain::ids::FileId,
                token: &str,
            ) -> Result<(), CatalogError> {
                sqlx::query(
                    "UPDATE file_handles SET claim = NULL, claim_token = NULL, claim_until = NULL \
                     WHERE id = $1 AND claim_token = $2",
                )
                .bind(id.as_str())
                .bind(token)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn handle_totals_by_status(&self) -> Result<Vec<(String, i64, i64)>, CatalogError> {
                use sqlx::Row;
                let rows = sqlx::query(
                    // Copies share one object: its bytes count once per status, however many
                    // handles of that status share its key.
                    "SELECT s, CAST(SUM(n) AS BIGINT) AS n, CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM \
                     (SELECT CASE WHEN expired_at IS NULL THEN status ELSE 'expired' END AS s, key, \
                     COUNT(*) AS n, MAX(size) AS size FROM file_handles GROUP BY 1, key) per_key \
                     GROUP BY s ORDER BY s",
                )
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| Ok((r.try_get("s")?, r.try_get("n")?, r.try_get("bytes")?)))
                    .collect()
            }

            async fn unlinked_per_month(&self) -> Result<Vec<(String, i64)>, CatalogError> {
                use sqlx::Row;
                let sql = format!(
                    "SELECT {m} AS month, COUNT(*) AS n FROM file_handles \
                     WHERE status <> 'available' AND status_changed_at IS NOT NULL GROUP BY {m} ORDER BY {m}",
                    m = $month
                );
                let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
                rows.iter()
                    .map(|r| Ok((r.try_get("month")?, r.try_get("n")?)))
                    .collect()
            }

            async fn storage_class_of(
                &self,
                id: &$crate::domain::ids::FileId,
            ) -> Result<Option<String>, CatalogError> {
                Ok(sqlx::query_scalar("SELECT storage_class FROM file_handles WHERE id = $1")
                    .bind(id.as_str())
                    .fetch_optional(&self.pool)
                    .await?)
            }

            async fn copy_handle(
                &self,
                source: &$crate::domain::ids::FileId,
                copy: &super::NewCopy<'_>,
            ) -> Result<Option<$crate::domain::records::FileHandle>, CatalogError> {
                let mut tx = self.pool.begin_with($begin).await?;
                // The key's rows in the claims' order: a hygiene claim on a copy of the key and
                // this insert meet on them, and the claim's guard then sees the new copy.
                sqlx::query($lock_key)
                    .bind(source.as_str())
                    .fetch_all(&mut *tx)
                    .await?;
                let n = sqlx::query(
                    "INSERT INTO file_handles (id, upload_id, key, size, content_type, etag, profile, \
                     created_by, created_at, status, storage_class, original_filename, \
                     checksum_algorithm, checksum_value, copied_from, expires_at, image_width, image_height) \
                     SELECT $1, s.upload_id, s.key, s.size, s.content_type, s.etag, s.profile, \
                     $2, $3, 'available', s.storage_class, s.original_filename, \
                     s.checksum_algorithm, s.checksum_value, s.id, s.expires_at, s.image_width, s.image_height \
                     FROM file_handles s WHERE s.id = $4 AND s.status = 'available' AND s.claim IS NULL \
                     AND s.expired_at IS NULL AND (s.expires_at IS NULL OR s.expires_at > $3) \
                     AND (SELECT COUNT(*) FROM file_handles c WHERE c.key = s.key AND c.status <> 'deleted') < $5 \
                     AND NOT EXISTS (SELECT 1 FROM file_handles o WHERE o.key = s.key AND o.id <> s.id \
                     AND o.claim IN ('archive', 'delete'))",
                )
                .bind(copy.id.as_str())
                .bind(copy.owner)
                .bind(copy.now)
                .bind(source.as_str())
                .bind(copy.max_handles_per_key)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if n != 1 {
                    tx.rollback().await?;
                    return Ok(None);
                }
                let sql = format!(
                    "SELECT {} FROM file_handles WHERE id = $1",
                    super::rows::HANDLE_COLUMNS
                );
                let row = sqlx::query(&sql)
                    .bind(copy.id.as_str())
                    .fetch_one(&mut *tx)
                    .await?;
                let handle = Self::handle_row(&row)?;
                let event = $crate::domain::events::NewEvent::file(
                    $crate::domain::events::EventType::FileCopied,
                    &handle,
                    copy.now,
                );
                Self::insert_events(&mut *tx, std::slice::from_ref(&event)).await?;
                tx.commit().await?;
                Ok(Some(handle))
            }
        }
    };
}

pub(super) use impl_hygiene_catalog;
