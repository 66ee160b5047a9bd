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

/// The longest span a duration setting may name: 100 years. Every date a setting is added to
/// or taken from stays far inside what the clock types hold (a chrono `TimeDelta` panics past
/// about 292 million years, a `DateTime` past year 262,143), and nobody means more.
pub const MAX_DURATION_SECS: u64 = 100 * 365 * 86_400 + 25 * 86_400;

/// One numeric setting's accepted range, as the loader checks it: every `number` or duration
/// setting records itself here, so a test can try each at and past its bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct NumericSetting {
    /// The environment variable.
    pub name: &'static str,
    pub lo: i128,
    pub hi: i128,
    /// The value `never` is also accepted (the stage it times never runs).
    pub never: bool,
}

/// A number a setting holds: whole numbers, and the one rate.
pub(super) trait Numeric: std::str::FromStr + Copy + PartialOrd + fmt::Display {
    /// For [`NumericSetting`]'s bounds (a fractional bound is rounded down).
    fn bound(self) -> i128;
}

macro_rules! numeric {
    ($($t:ty),*) => {$(
        impl Numeric for $t {
            fn bound(self) -> i128 {
                i128::try_from(self).unwrap_or(i128::MAX)
            }
        }
    )*};
}
numeric!(u16, u32, u64, usize, i64);

impl Numeric for f64 {
    fn bound(self) -> i128 {
        // Bounds are small whole numbers; the cast saturates.
        self.floor() as i128
    }
}

/// Reads one setting: environment first, then file, then default.
pub(super) struct Source<'a> {
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    /// Every numeric setting read, with its bounds (see [`NumericSetting`]).
    pub(super) numeric: std::cell::RefCell<Vec<NumericSetting>>,
}

impl<'a> Source<'a> {
    pub(super) fn new(env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            env,
            numeric: std::cell::RefCell::default(),
        }
    }

    fn record(&self, name: &'static str, lo: i128, hi: i128, never: bool) {
        self.numeric.borrow_mut().push(NumericSetting {
            name,
            lo,
            hi,
            never,
        });
    }

    pub(super) fn string(&self, env: &str, file: Option<String>, default: &str) -> String {
        (self.env)(env)
            .filter(|v| !v.is_empty())
            .or(file)
            .unwrap_or_else(|| default.to_owned())
    }

    /// A number in `range` (from the environment or the file; the default must lie in it). A
    /// value out of range stops the start with the variable's name: a silent clamp would run
    /// with a value nobody wrote, and an unbounded one can overflow where it meets a clock.
    pub(super) fn number<T: Numeric>(
        &self,
        env: &'static str,
        file: Option<T>,
        default: T,
        range: std::ops::RangeInclusive<T>,
    ) -> Result<T, ConfigError> {
        let (lo, hi) = (*range.start(), *range.end());
        self.record(env, lo.bound(), hi.bound(), false);
        let value = match (self.env)(env).filter(|v| !v.is_empty()) {
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| ConfigError(format!("{env}: expected a number, got {v:?}")))?,
            None => file.unwrap_or(default),
        };
        in_range(env, value, lo, hi)
    }

    /// A number of seconds from `lo` to [`MAX_DURATION_SECS`].
    pub(super) fn secs(
        &self,
        env: &'static str,
        file: Option<u64>,
        default: u64,
        lo: u64,
    ) -> Result<u64, ConfigError> {
        self.number(env, file, default, lo..=MAX_DURATION_SECS)
            .map_err(|e| ConfigError(format!("{} (seconds; at most 100 years)", e.0)))
    }

    /// [`Self::secs`], or `never` (`None`: the stage it times never runs). `never` is the
    /// spelling of "not in my lifetime" that cannot overflow.
    pub(super) fn secs_or_never(
        &self,
        env: &'static str,
        file: Option<super::file::SecsOrNever>,
        default: u64,
        lo: u64,
    ) -> Result<Option<u64>, ConfigError> {
        use super::file::SecsOrNever;
        self.record(env, i128::from(lo), i128::from(MAX_DURATION_SECS), true);
        let raw = match (self.env)(env).filter(|v| !v.is_empty()) {
            Some(v) => SecsOrNever::Word(v),
            None => file.unwrap_or(SecsOrNever::Secs(default)),
        };
        let value = match raw {
            SecsOrNever::Secs(n) => n,
            SecsOrNever::Word(w) if w.trim().eq_ignore_ascii_case("never") => return Ok(None),
            SecsOrNever::Word(w) => w.trim().parse().map_err(|_| {
                ConfigError(format!(
                    "{env}: expected a number of seconds or never, got {w:?}"
                ))
            })?,
        };
        in_range(env, value, lo, MAX_DURATION_SECS)
            .map(Some)
            .map_err(|e| ConfigError(format!("{} (seconds; at most 100 years, or never)", e.0)))
    }

    /// A duration as operators write it (`90d`, `36h`, or seconds), from `lo` to
    /// [`MAX_DURATION_SECS`] seconds.
    pub(super) fn duration(
        &self,
        env: &'static str,
        file: Option<String>,
        default: &str,
        lo: u64,
    ) -> Result<u64, ConfigError> {
        self.record(env, i128::from(lo), i128::from(MAX_DURATION_SECS), false);
        let raw = self.string(env, file, default);
        let secs = crate::domain::duration::parse_secs(&raw).ok_or_else(|| {
            ConfigError(format!(
                "{env}: {}, got {raw:?}",
                crate::domain::duration::EXPECTED
            ))
        })?;
        if secs < lo || secs > MAX_DURATION_SECS {
            return Err(ConfigError(format!(
                "{env}: from {} to 100 years, got {raw:?}",
                humantime::format_duration(std::time::Duration::from_secs(lo))
            )));
        }
        Ok(secs)
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
