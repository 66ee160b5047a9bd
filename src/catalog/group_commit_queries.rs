//! The SQL of a presign batch (`group_commit`), shared by both backends: the whole batch in a
//! handful of statements (quota ledger rows made sure of, read and locked, charges admitted in
//! order, uploads inserted at once), or, when a row cannot be inserted, item by item, each in
//! its own savepoint.

/// Implements the presign batch writer (`create_uploads_batch`, which `group_commit`'s writer
/// task calls) for a struct with a `pool: sqlx::Pool<$db>` field. `$begin` opens the write
/// transaction; `$for_update` locks the ledger rows the batch reads (PostgreSQL: `FOR UPDATE`,
/// so replicas charging one user queue; SQLite's write transaction excludes other writers).
macro_rules! impl_group_commit {
    ($ty:ty, $db:ty, $begin:expr, $for_update:expr) => {
        impl $ty {
            /// Writes a batch of presigns in one transaction, each in its own savepoint (see
            /// `group_commit`). One result per item, in order.
            async fn create_uploads_batch(
                pool: &sqlx::Pool<$db>,
                items: Vec<super::group_commit::NewUpload>,
            ) -> Vec<Result<(), CatalogError>> {
                let n = items.len();
                let written = match Self::write_batch(pool, &items).await {
                    Ok(results) => Ok(results),
                    // A row the batch statement could not insert (a duplicate id or key, never
                    // expected): nothing was written; redo the batch item by item, each in its
                    // own savepoint, so only that item fails.
                    Err(e) => {
                        tracing::warn!(error = %e, items = n, "presign batch failed; writing its items one by one");
                        Self::write_one_by_one(pool, &items).await
                    }
                };
                match written {
                    Ok(results) => results,
                    // The transaction failed as a whole: nothing of the batch was written.
                    Err(e) => {
                        let text = e.to_string();
                        (0..n)
                            .map(|_| Err(CatalogError::Unavailable(text.clone())))
                            .collect()
                    }
                }
            }

            /// The batch in a handful of statements whatever its size: make sure each (owner,
            /// day) has a ledger row, read (and on PostgreSQL lock) those rows, admit the
            /// charges in order (`quota::admit`), add the deltas in one update, insert the
            /// admitted uploads (and sessions) in one statement each.
            async fn write_batch(
                pool: &sqlx::Pool<$db>,
                items: &[super::group_commit::NewUpload],
            ) -> Result<Vec<Result<(), CatalogError>>, CatalogError> {
                use $crate::domain::quota::{admit, Charge};
                use sqlx::Row;
                let charges: Vec<Charge> = items
                    .iter()
                    .map(|i| Charge {
                        owner: i.upload.owner.clone(),
                        day: i.day.to_string(),
                        bytes: i.upload.declared_size,
                        limits: i.limits,
                    })
                    .collect();
                let mut keys: Vec<(String, String)> =
                    charges.iter().map(|c| (c.owner.clone(), c.day.clone())).collect();
                keys.sort();
                keys.dedup();

                let mut tx = pool.begin_with($begin).await?;
                let mut qb = sqlx::QueryBuilder::<$db>::new("INSERT INTO quota_usage (owner, day, uploads, bytes) ");
                qb.push_values(&keys, |mut b, (owner, day)| {
                    b.push_bind(owner).push_bind(day).push_bind(0_i64).push_bind(0_i64);
                });
                qb.push(" ON CONFLICT (owner, day) DO NOTHING");
                qb.build().execute(&mut *tx).await?;

                let mut qb = sqlx::QueryBuilder::<$db>::new(
                    "SELECT owner, day, uploads, bytes FROM quota_usage WHERE owner IN (",
                );
                let mut owners = qb.separated(", ");
                for (owner, _) in &keys {
                    owners.push_bind(owner);
                }
                qb.push(") AND day IN (");
                let mut days = qb.separated(", ");
                for (_, day) in &keys {
                    days.push_bind(day);
                }
                // One lock order for every replica: no deadlock between two batches.
                qb.push(") ORDER BY owner, day");
                qb.push($for_update);
                let mut usage = std::collections::BTreeMap::new();
                for row in qb.build().fetch_all(&mut *tx).await? {
                    let key: (String, String) = (row.try_get("owner")?, row.try_get("day")?);
                    if keys.binary_search(&key).is_ok() {
                        usage.insert(key, (row.try_get::<i64, _>("uploads")?, row.try_get::<i64, _>("bytes")?));
                    }
                }

                let admission = admit(&usage, &charges);
                if !admission.deltas.is_empty() {
                    let mut qb = sqlx::QueryBuilder::<$db>::new("WITH v (owner, day, du, db) AS (");
                    qb.push_values(&admission.deltas, |mut b, ((owner, day), (du, db))| {
                        b.push_bind(owner).push_bind(day).push_bind(*du).push_bind(*db);
                    });
                    qb.push(
                        ") UPDATE quota_usage SET uploads = quota_usage.uploads + v.du, \
                         bytes = quota_usage.bytes + v.db FROM v \
                         WHERE quota_usage.owner = v.owner AND quota_usage.day = v.day",
                    );
                    qb.build().execute(&mut *tx).await?;

                    let admitted: Vec<&super::group_commit::NewUpload> = items
                        .iter()
                        .zip(&admission.admitted)
                        .filter(|(_, ok)| **ok)
                        .map(|(i, _)| i)
                        .collect();
                    let mut qb = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO uploads (id, owner, profile, content_type, declared_size, key, method, state, \
                         final_key, reject_code, lease_token, lease_until, created_at, expires_at, commit_deadline, updated_at, \
                         original_filename, checksum_algorithm, checksum_value) ",
                    );
                    qb.push_values(&admitted, |mut b, i| {
                        let u = &i.upload;
                        b.push_bind(u.id.as_str())
                            .push_bind(&u.owner)
                            .push_bind(&u.profile)
                            .push_bind(&u.content_type)
                            .push_bind(u.declared_size)
                            .push_bind(&u.key)
                            .push_bind(&u.method)
                            .push_bind(u.state.as_str())
                            .push_bind(&u.final_key)
                            .push_bind(&u.reject_code)
                            .push_bind(&u.lease_token)
                            .push_bind(u.lease_until)
                            .push_bind(u.created_at)
                            .push_bind(u.expires_at)
                            .push_bind(u.commit_deadline)
                            .push_bind(u.created_at)
                            .push_bind(&u.original_filename)
                            .push_bind(super::rows::checksum_algorithm(u.checksum.as_ref()))
                            .push_bind(super::rows::checksum_value(u.checksum.as_ref()));
                    });
                    qb.build().execute(&mut *tx).await?;
                    for i in &admitted {
                        if let Some(session) = &i.session {
                            Self::insert_session(&mut *tx, session).await?;
                        }
                    }
                }
                tx.commit().await?;
                Ok(admission
                    .admitted
                    .into_iter()
                    .map(|ok| if ok { Ok(()) } else { Err(CatalogError::QuotaExceeded) })
                    .collect())
            }

            async fn write_one_by_one(
                pool: &sqlx::Pool<$db>,
                items: &[super::group_commit::NewUpload],
            ) -> Result<Vec<Result<(), CatalogError>>, CatalogError> {
                let mut results = Vec::with_capacity(items.len());
                let mut tx = pool.begin_with($begin).await?;
                for item in items {
                    let (max_uploads, max_bytes) = item.limits.as_sql_bounds();
                    if item.upload.declared_size > max_bytes {
                        results.push(Err(CatalogError::QuotaExceeded));
                        continue;
                    }
                    sqlx::query("SAVEPOINT presign").execute(&mut *tx).await?;
                    let written: Result<(), CatalogError> = async {
                        // One statement charges the ledger: the insert starts the day, the
                        // conditional update adds to it only while both sums stay within the
                        // limits.
                        let charged = sqlx::query(
                            "INSERT INTO quota_usage (owner, day, uploads, bytes) VALUES ($1, $2, 1, $3) \
                             ON CONFLICT (owner, day) DO UPDATE SET uploads = quota_usage.uploads + 1, \
                             bytes = quota_usage.bytes + excluded.bytes \
                             WHERE quota_usage.uploads + 1 <= $4 AND quota_usage.bytes + excluded.bytes <= $5",
                        )
                        .bind(&item.upload.owner)
                        .bind(item.day.to_string())
                        .bind(item.upload.declared_size)
                        .bind(max_uploads)
                        .bind(max_bytes)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                        if charged == 0 {
                            return Err(CatalogError::QuotaExceeded);
                        }
                        Self::insert_upload(&mut *tx, &item.upload).await?;
                        if let Some(session) = &item.session {
                            Self::insert_session(&mut *tx, session).await?;
                        }
                        Ok(())
                    }
                    .await;
                    if written.is_err() {
                        sqlx::query("ROLLBACK TO SAVEPOINT presign").execute(&mut *tx).await?;
                    }
                    sqlx::query("RELEASE SAVEPOINT presign").execute(&mut *tx).await?;
                    results.push(written);
                }
                tx.commit().await?;
                Ok(results)
            }
        }
    };
}
pub(super) use impl_group_commit;
