//! Database errors mapped to domain meaning in exactly one place.

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The database cannot be reached or timed out: retryable, answered 503.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("daily quota exceeded")]
    QuotaExceeded,
    /// The unique index on `uploads.final_key` refused a second upload for one key.
    #[error("final key already taken")]
    FinalKeyTaken,
    /// A row already exists with this id or key.
    #[error("duplicate: {0}")]
    Duplicate(String),
    #[error("corrupt row: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Other(String),
}

impl From<sqlx::Error> for CatalogError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                // PostgreSQL names the constraint; SQLite names the column in its message.
                let what = db
                    .constraint()
                    .map(str::to_owned)
                    .unwrap_or_else(|| db.message().to_owned());
                if what.contains("final_key") {
                    Self::FinalKeyTaken
                } else {
                    Self::Duplicate(what)
                }
            }
            sqlx::Error::Database(db) if is_transient(db.code().as_deref()) => {
                Self::Unavailable(db.message().to_owned())
            }
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Tls(_) => Self::Unavailable(e.to_string()),
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::Decode(_) => Self::Corrupt(e.to_string()),
            _ => Self::Other(e.to_string()),
        }
    }
}

/// SQLite busy/locked/full/io and PostgreSQL connection, shutdown, resource and
/// serialization classes: the caller may retry.
fn is_transient(code: Option<&str>) -> bool {
    let Some(code) = code else { return false };
    matches!(code, "5" | "6" | "10" | "13" | "261" | "262" | "517")
        || code.starts_with("08")
        || code.starts_with("53")
        || code.starts_with("57P")
        || code == "40001"
        || code == "40P01"
}
