//! Typed settings, loaded once: built-in defaults, then an optional TOML file named by
//! `UPCOMMIT_CONFIG`, then environment variables. A bad value fails at start with a message
//! that names the setting.
//!
//! One file per concern, each with its structs, its tables of the TOML file, its checks and
//! its tests: the merge of sources (`source`), the HTTP server, demo page and admin console
//! (`http`), the database (`database`), the bucket (`s3`), uploads and quotas (`uploads`) and
//! their profiles (`profiles`), identity and issuers (`identity`), events, webhooks and queues
//! (`events`), background jobs (`jobs`). `Settings::parse` loads them in order; the rules that
//! read two concerns are in `rules`.

use std::collections::HashMap;

mod database;
mod events;
mod file;
mod http;
mod identity;
mod jobs;
mod profiles;
mod rules;
mod s3;
mod source;
mod uploads;

pub use database::DatabaseSettings;
pub use events::{EventSettings, QueueSettings, WebhookSettings};
pub use http::{ConsoleSettings, DemoSettings, HttpSettings};
pub use identity::{AuthSettings, ProviderSettings};
pub use jobs::JobSettings;
pub use s3::{BucketCheckSettings, S3Settings};
pub use source::{ConfigError, NumericSetting, SecretString, MAX_DURATION_SECS};
pub use uploads::UploadSettings;

use crate::domain::quota::QuotaLimits;
use file::FileSettings;
use source::Source;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    /// `UPCOMMIT_LOG_FORMAT`: `text` (default) or `json`.
    fn load(src: &Source<'_>, f: &mut FileSettings) -> Result<Self, ConfigError> {
        match src
            .string("UPCOMMIT_LOG_FORMAT", f.log_format.take(), "text")
            .as_str()
        {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(ConfigError(format!(
                "UPCOMMIT_LOG_FORMAT: expected text or json, got {other:?}"
            ))),
        }
    }
}

/// All settings of the service.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Address the HTTP server binds (`UPCOMMIT_LISTEN`, default `127.0.0.1:8080`; port 0 picks one).
    pub listen: String,
    pub database: DatabaseSettings,
    pub s3: S3Settings,
    pub auth: AuthSettings,
    pub uploads: UploadSettings,
    /// Per-user daily limits (`UPCOMMIT_QUOTA_DAILY_UPLOADS`, `UPCOMMIT_QUOTA_DAILY_BYTES`; 0 = unlimited).
    pub quota: QuotaLimits,
    pub http: HttpSettings,
    pub bucket_check: BucketCheckSettings,
    pub jobs: JobSettings,
    pub demo: DemoSettings,
    pub console: ConsoleSettings,
    pub events: EventSettings,
    /// `text` or `json` (`UPCOMMIT_LOG_FORMAT`).
    pub log_format: LogFormat,
}

impl Settings {
    /// Loads from the process environment and the file named by `UPCOMMIT_CONFIG`.
    pub fn load() -> Result<Self, ConfigError> {
        Self::load_from_process(true)
    }

    /// As [`Settings::load`], for the operator commands that never see a token (`doctor`,
    /// `bucket`): the JWT secret may be absent, so they run with only the S3 settings.
    pub fn load_for_tools() -> Result<Self, ConfigError> {
        Self::load_from_process(false)
    }

    fn load_from_process(require_secret: bool) -> Result<Self, ConfigError> {
        let env = |k: &str| std::env::var(k).ok();
        let file =
            match env("UPCOMMIT_CONFIG").filter(|p| !p.is_empty()) {
                Some(path) => Some(std::fs::read_to_string(&path).map_err(|e| {
                    ConfigError(format!("UPCOMMIT_CONFIG: cannot read {path}: {e}"))
                })?),
                None => None,
            };
        Self::parse(file.as_deref(), &env, require_secret)
    }

    /// Loads from the given environment only (no process environment): for tests and tools.
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Self, ConfigError> {
        Self::from_sources(None, &|k| vars.get(k).cloned())
    }

    pub fn from_sources(
        file: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::parse(file, env, true)
    }

    /// Every numeric setting these sources make the loader read, with the range it accepts
    /// (settings read only when something else is configured — an issuer's timings — appear
    /// only then): the settings property test tries each at and past its bounds.
    pub fn numeric_settings(env: &dyn Fn(&str) -> Option<String>) -> Vec<NumericSetting> {
        let src = Source::new(env);
        let _ = Self::parse_from(&src, None, true);
        src.numeric.into_inner()
    }

    fn parse(
        file: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
        require_secret: bool,
    ) -> Result<Self, ConfigError> {
        Self::parse_from(&Source::new(env), file, require_secret)
    }

    fn parse_from(
        src: &Source<'_>,
        file: Option<&str>,
        require_secret: bool,
    ) -> Result<Self, ConfigError> {
        let mut f: FileSettings = match file {
            Some(text) => {
                toml::from_str(text).map_err(|e| ConfigError(format!("UPCOMMIT_CONFIG: {e}")))?
            }
            None => FileSettings::default(),
        };

        // One concern after another, each checking its settings in the order the single
        // loader did (where a message depends on an earlier check passing, as the commit
        // window's does on the presign expiry, it still does), and the concerns in about the
        // order their first checks ran, so that a bad setting is reported with the same
        // message. Only when two concerns each hold a bad value can the one named first
        // differ from before the split.
        let auth = AuthSettings::load(src, &mut f, require_secret)?;
        let database = DatabaseSettings::load(src, &mut f)?;
        let s3 = S3Settings::load(src, &mut f)?;
        let uploads = UploadSettings::load(src, &mut f)?;
        let log_format = LogFormat::load(src, &mut f)?;
        let demo = DemoSettings::load(src, &f)?;
        let console = ConsoleSettings::load(src, &mut f)?;
        let jobs = JobSettings::load(src, &mut f)?;
        let events = EventSettings::load(src, &mut f)?;
        let listen = http::listen(src, &mut f);
        let bucket_check = BucketCheckSettings::load(src, &f)?;
        let quota = uploads::quota(src, &f)?;
        let http = HttpSettings::load(src, &f)?;
        let settings = Self {
            listen,
            database,
            s3,
            auth,
            uploads,
            quota,
            http,
            bucket_check,
            jobs,
            demo,
            console,
            events,
            log_format,
        };
        rules::check(&settings)?;
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use source::env;

    #[test]
    fn bad_values_name_their_setting() {
        let cases = [
            (vec![], "UPCOMMIT_JWT_SECRET"),
            (
                vec![("UPCOMMIT_QUOTA_DAILY_BYTES", "lots")],
                "UPCOMMIT_QUOTA_DAILY_BYTES",
            ),
            (vec![("DATABASE_URL", "mysql://x")], "DATABASE_URL"),
            (vec![("UPCOMMIT_BUCKET", "Bad_Bucket")], "UPCOMMIT_BUCKET"),
            (
                vec![("UPCOMMIT_S3_ENDPOINT", "localhost:4566")],
                "UPCOMMIT_S3_ENDPOINT",
            ),
            (
                vec![("UPCOMMIT_LEGACY_PREFIXES", "tmp/")],
                "UPCOMMIT_LEGACY_PREFIXES",
            ),
            (
                vec![("UPCOMMIT_COMMIT_WINDOW_SECS", "10")],
                "UPCOMMIT_COMMIT_WINDOW_SECS",
            ),
            (vec![("UPCOMMIT_LOG_FORMAT", "xml")], "UPCOMMIT_LOG_FORMAT"),
            (
                vec![("UPCOMMIT_CORS_ORIGINS", "app.example.com")],
                "UPCOMMIT_CORS_ORIGINS",
            ),
            (
                vec![("UPCOMMIT_BUCKET_CHECK_FAILS_READINESS", "sometimes")],
                "UPCOMMIT_BUCKET_CHECK_FAILS_READINESS",
            ),
            (
                vec![("UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS", "-1")],
                "UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS",
            ),
            (
                vec![("UPCOMMIT_MULTIPART_SESSION_SECS", "86400")],
                "UPCOMMIT_MULTIPART_SESSION_SECS",
            ),
            (
                vec![("UPCOMMIT_MULTIPART_PART_SIZE_BYTES", "1048576")],
                "UPCOMMIT_MULTIPART_PART_SIZE_BYTES",
            ),
            (
                vec![("UPCOMMIT_COPY_PART_SIZE_BYTES", "1")],
                "UPCOMMIT_COPY_PART_SIZE_BYTES",
            ),
            (
                vec![("UPCOMMIT_MAX_SINGLE_COPY_BYTES", "6000000000")],
                "UPCOMMIT_MAX_SINGLE_COPY_BYTES",
            ),
            (
                vec![("UPCOMMIT_COPY_CONCURRENCY", "0")],
                "UPCOMMIT_COPY_CONCURRENCY",
            ),
        ];
        for (extra, name) in cases {
            let mut vars = env(&extra);
            if name != "UPCOMMIT_JWT_SECRET" {
                vars.insert("UPCOMMIT_JWT_SECRET".into(), "0123456789abcdef".into());
            }
            let err = Settings::from_map(&vars).expect_err(name).0;
            assert!(err.starts_with(name), "{err}");
        }
    }

    /// docs/configuration.md lists exactly the environment variables and TOML keys this module
    /// reads.
    #[test]
    fn the_configuration_doc_lists_every_setting() {
        let doc = include_str!("../../docs/configuration.md");
        // The settings code of every file under src/config/ (read by path, so that a file
        // added later is read too), not their test modules.
        let mut dirs = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/config"
        ))];
        let mut files = Vec::new();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("src/config") {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && path.file_name().is_some_and(|n| n != "tests.rs")
                {
                    files.push(path);
                }
            }
        }
        files.sort();
        let mut code = String::new();
        for path in &files {
            let source = std::fs::read_to_string(path).expect("readable");
            code.push_str(&source[..source.find("#[cfg(test)]").unwrap_or(source.len())]);
        }
        let names = |text: &str, quote: char| -> std::collections::BTreeSet<String> {
            text.split(quote)
                .filter(|w| {
                    (w.starts_with("UPCOMMIT_") || w.starts_with("AWS_") || *w == "DATABASE_URL")
                        && w.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
                })
                .map(str::to_owned)
                .collect()
        };
        let mut in_code = names(&code, '"');
        in_code.retain(|n| n != "UPCOMMIT_");
        let in_doc = names(doc, '`');
        let test_only: std::collections::BTreeSet<String> = [
            "UPCOMMIT_CRASH_AT".to_owned(),
            "UPCOMMIT_PAUSE_AT".to_owned(),
            "UPCOMMIT_PANIC_AT".to_owned(),
        ]
        .into_iter()
        .collect();
        let missing: Vec<_> = in_code.difference(&in_doc).collect();
        let stale: Vec<_> = in_doc
            .difference(&in_code)
            .filter(|n| !test_only.contains(*n))
            .collect();
        assert!(
            missing.is_empty(),
            "not in docs/configuration.md: {missing:?}"
        );
        assert!(stale.is_empty(), "documented but not read: {stale:?}");
        let struct_start = code.find("struct FileSettings {").expect("FileSettings");
        let struct_end = code[struct_start..].find("\n}").expect("end") + struct_start;
        for line in code[struct_start..struct_end].lines().skip(1) {
            let key = line.trim().trim_start_matches("pub(super) ");
            let key = key.split(':').next().unwrap_or("").trim();
            if !key.is_empty() && !key.starts_with("//") {
                assert!(
                    doc.contains(&format!("`{key}`")),
                    "TOML key {key} not documented"
                );
            }
        }
    }
}

#[cfg(test)]
mod bounds_tests;
