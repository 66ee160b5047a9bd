//! The catalog's database: its URL and pool size.

use super::file::FileSettings;
use super::source::{ConfigError, SecretString, Source};

#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    /// `sqlite://…` (default `sqlite://data/upcommit.db`) or `postgres://…` (`DATABASE_URL`).
    pub url: SecretString,
    /// Pool size (`UPCOMMIT_DB_MAX_CONNECTIONS`, default 16).
    pub max_connections: u32,
}

impl DatabaseSettings {
    /// `DATABASE_URL` (SQLite or PostgreSQL, nothing else) and the pool size.
    pub(super) fn load(src: &Source<'_>, f: &mut FileSettings) -> Result<Self, ConfigError> {
        let database_url = src.string(
            "DATABASE_URL",
            f.database_url.take(),
            "sqlite://data/upcommit.db",
        );
        if !(database_url.starts_with("sqlite:")
            || database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://"))
        {
            return Err(ConfigError(
                "DATABASE_URL: expected sqlite://… or postgres://…".into(),
            ));
        }
        Ok(DatabaseSettings {
            url: SecretString::new(database_url),
            max_connections: src.number(
                "UPCOMMIT_DB_MAX_CONNECTIONS",
                f.db_max_connections,
                16,
                1..=10_000,
            )?,
        })
    }
}
