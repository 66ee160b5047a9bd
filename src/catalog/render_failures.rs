//! Renders that ended their worker or ran past the time limit, per (file, variant) (issue 46):
//! the trait, its row, and its SQL for both backends. Whether a row refuses the next render is
//! the domain's rule (`domain::variants::refusal`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::CatalogError;

/// One (file, variant)'s failed renders: the last one's cause and how many in a row had it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RenderFailure {
    pub file_id: String,
    pub variant: String,
    /// The bytes (`ETag:size`): another file of the same bytes is refused by this row too.
    pub content: String,
    pub cause: String,
    pub count: i64,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
}

#[async_trait]
pub trait RenderFailureCatalog: Send + Sync + 'static {
    /// The latest row of `variant` of `file`, or of any file of the same `content` (empty:
    /// none), if their renders failed.
    async fn render_failure(
        &self,
        file: &str,
        content: &str,
        variant: &str,
    ) -> Result<Option<RenderFailure>, CatalogError>;
    /// Records a failed render: one more in a row when the cause is the last one's, else the
    /// first of a new cause. One statement (an upsert): replicas failing at once count each.
    async fn record_render_failure(
        &self,
        file: &str,
        content: &str,
        variant: &str,
        cause: &str,
        at: DateTime<Utc>,
    ) -> Result<RenderFailure, CatalogError>;
    /// Forgets the failures of `file` and of its `content` (of one `variant`, when given); how
    /// many rows went.
    async fn clear_render_failures(
        &self,
        file: &str,
        content: &str,
        variant: Option<&str>,
    ) -> Result<u64, CatalogError>;
    /// Up to `limit` rows, the latest failure first: every one, or those that refuse `file`
    /// (its own, and any of its bytes, `content`) when `of` names it.
    async fn render_failures(
        &self,
        of: Option<(&str, &str)>,
        limit: i64,
    ) -> Result<Vec<RenderFailure>, CatalogError>;
}

pub(super) const COLUMNS: &str = "file_id, variant, content, cause, count, first_at, last_at";

macro_rules! impl_render_failure_catalog {
    ($ty:ty, $db:ty) => {
        impl $ty {
            fn render_failure_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> Result<super::render_failures::RenderFailure, CatalogError> {
                use sqlx::Row;
                Ok(super::render_failures::RenderFailure {
                    file_id: row.try_get("file_id")?,
                    variant: row.try_get("variant")?,
                    content: row.try_get("content")?,
                    cause: row.try_get("cause")?,
                    count: row.try_get("count")?,
                    first_at: row.try_get("first_at")?,
                    last_at: row.try_get("last_at")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl super::render_failures::RenderFailureCatalog for $ty {
            async fn render_failure(
                &self,
                file: &str,
                content: &str,
                variant: &str,
            ) -> Result<Option<super::render_failures::RenderFailure>, CatalogError> {
                let sql = format!(
                    "SELECT {} FROM render_failures WHERE variant = $2 \
                     AND (file_id = $1 OR (content = $3 AND content <> '')) \
                     ORDER BY last_at DESC LIMIT 1",
                    super::render_failures::COLUMNS
                );
                let row = sqlx::query(&sql)
                    .bind(file)
                    .bind(variant)
                    .bind(content)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::render_failure_row).transpose()
            }

            async fn record_render_failure(
                &self,
                file: &str,
                content: &str,
                variant: &str,
                cause: &str,
                at: chrono::DateTime<chrono::Utc>,
            ) -> Result<super::render_failures::RenderFailure, CatalogError> {
                let sql = format!(
                    "INSERT INTO render_failures ({cols}) VALUES ($1, $2, $5, $3, 1, $4, $4) \
                     ON CONFLICT (file_id, variant) DO UPDATE SET \
                     count = CASE WHEN render_failures.cause = excluded.cause \
                             THEN render_failures.count + 1 ELSE 1 END, \
                     first_at = CASE WHEN render_failures.cause = excluded.cause \
                             THEN render_failures.first_at ELSE excluded.first_at END, \
                     cause = excluded.cause, last_at = excluded.last_at, content = excluded.content \
                     RETURNING {cols}",
                    cols = super::render_failures::COLUMNS
                );
                let row = sqlx::query(&sql)
                    .bind(file)
                    .bind(variant)
                    .bind(cause)
                    .bind(at)
                    .bind(content)
                    .fetch_one(&self.pool)
                    .await?;
                Self::render_failure_row(&row)
            }

            async fn clear_render_failures(
                &self,
                file: &str,
                content: &str,
                variant: Option<&str>,
            ) -> Result<u64, CatalogError> {
                let done = sqlx::query(
                    "DELETE FROM render_failures WHERE (file_id = $1 OR (content = $3 AND content <> '')) \
                     AND ($2 IS NULL OR variant = $2)",
                )
                .bind(file)
                .bind(variant)
                .bind(content)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected())
            }

            async fn render_failures(
                &self,
                of: Option<(&str, &str)>,
                limit: i64,
            ) -> Result<Vec<super::render_failures::RenderFailure>, CatalogError> {
                let sql = format!(
                    "SELECT {} FROM render_failures WHERE ($1 IS NULL OR file_id = $1 \
                     OR (content = $3 AND content <> '')) \
                     ORDER BY last_at DESC, file_id, variant LIMIT $2",
                    super::render_failures::COLUMNS
                );
                let rows = sqlx::query(&sql)
                    .bind(of.map(|(file, _)| file))
                    .bind(limit)
                    .bind(of.map(|(_, content)| content))
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::render_failure_row).collect()
            }
        }
    };
}
pub(super) use impl_render_failure_catalog;
