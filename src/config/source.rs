//! The merge of sources: each setting is read from the environment first, then the TOML file
//! named by `UPCOMMIT_CONFIG`, then its default. Also the file's top-level shape, the secret
//! and error types every concern shares, and the range helper.

use std::fmt;

pub(super) const MIB: u64 = 1024 * 1024;
pub(super) const GIB: u64 = 1024 * MIB;

/// A secret that never shows in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[derive(Debug, thiserror::Error)]
#[error("configuration error: {0}")]
pub struct ConfigError(pub String);

/// `value` when it lies in `lo..=hi`; otherwise a start-stopping error naming the setting (a
/// silent clamp would run with a value nobody wrote).
pub(super) fn in_range<T>(name: &str, value: T, lo: T, hi: T) -> Result<T, ConfigError>
where
    T: PartialOrd + std::fmt::Display + Copy,
{
    if value < lo || value > hi {
        return Err(ConfigError(format!("{name}: {lo}..={hi}, got {value}")));
    }
    Ok(value)
}

/// Reads one setting: environment first, then file, then default.
pub(super) struct Source<'a> {
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
}

impl Source<'_> {
    pub(super) fn string(&self, env: &str, file: Option<String>, default: &str) -> String {
        (self.env)(env)
            .filter(|v| !v.is_empty())
            .or(file)
            .unwrap_or_else(|| default.to_owned())
    }

    pub(super) fn number<T: std::str::FromStr + Copy>(
        &self,
        env: &str,
        file: Option<T>,
        default: T,
    ) -> Result<T, ConfigError> {
        match (self.env)(env).filter(|v| !v.is_empty()) {
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| ConfigError(format!("{env}: expected a whole number, got {v:?}"))),
            None => Ok(file.unwrap_or(default)),
        }
    }

    pub(super) fn flag(
        &self,
        env: &str,
        file: Option<bool>,
        default: bool,
    ) -> Result<bool, ConfigError> {
        match (self.env)(env).filter(|v| !v.is_empty()) {
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => Ok(true),
                "false" | "0" | "no" => Ok(false),
                _ => Err(ConfigError(format!(
                    "{env}: expected true or false, got {v:?}"
                ))),
            },
            None => Ok(file.unwrap_or(default)),
        }
    }

    pub(super) fn list(&self, env: &str, file: Option<Vec<String>>) -> Vec<String> {
        match (self.env)(env) {
            Some(v) => v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            None => file.unwrap_or_default(),
        }
    }
}

/// The environment of a test: these pairs and nothing else.
#[cfg(test)]
pub(super) fn env(pairs: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    #[test]
    fn defaults_apply_when_only_the_secret_is_set() {
        let s = Settings::from_map(&env(&[("UPCOMMIT_JWT_SECRET", "0123456789abcdef")]))
            .expect("loads");
        assert_eq!(s.listen, "127.0.0.1:8080");
        assert_eq!(s.database.url.expose(), "sqlite://data/upcommit.db");
        assert_eq!(s.uploads.presign_expiry_secs, 900);
        assert_eq!(s.uploads.profiles.len(), 2);
        assert!(s.quota.daily_uploads > 0 && s.quota.daily_bytes > 0);
        assert!(s.s3.endpoint.is_none());
    }

    #[test]
    fn file_profiles_replace_the_builtins_and_env_wins_over_file() {
        let file = r#"
            listen = "0.0.0.0:9000"
            jwt_secret = "file-secret-0123456789"
            [[profiles]]
            name = "doc"
            content_types = ["application/pdf"]
            max_size = 1000
            final_prefix = "docs/"
        "#;
        let vars = env(&[("UPCOMMIT_LISTEN", "127.0.0.1:1")]);
        let s = Settings::from_sources(Some(file), &|k| vars.get(k).cloned()).expect("loads");
        assert_eq!(s.listen, "127.0.0.1:1");
        assert_eq!(s.auth.jwt_secret.expose(), "file-secret-0123456789");
        assert_eq!(s.uploads.profiles.len(), 1);
        assert!(s.profile("doc").is_some() && s.profile("image").is_none());

        let bad = file.replace("docs/", "TMP/docs/");
        let err = Settings::from_sources(Some(&bad), &|_| None)
            .expect_err("reserved prefix")
            .0;
        assert!(err.contains("profiles.doc"), "{err}");
    }

    #[test]
    fn secrets_are_redacted_in_debug() {
        let s = Settings::from_map(&env(&[("UPCOMMIT_JWT_SECRET", "super-secret-value-1")]))
            .expect("loads");
        assert!(!format!("{s:?}").contains("super-secret-value-1"));
    }
}
