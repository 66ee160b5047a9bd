//! Owners: a user id as a token's `sub` names it, the owners CSV (`key,owner[,profile]`) read
//! into a table, and where a run's owners come from (a key pattern or that table).

use std::collections::HashMap;

use super::{under_legacy_prefix, KeyPattern, Refusal};
use crate::domain::keys::FinalPrefix;

/// The longest owner a bearer token's `sub` may name (the auth module's limit): an owner
/// longer than that could never commit or read its files.
pub const MAX_OWNER_BYTES: usize = 128;

/// A user id as a token's `sub` names it: non-empty, at most [`MAX_OWNER_BYTES`], no control
/// characters, no surrounding whitespace (a padded CSV cell is a mistake, not another user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerError {
    Empty,
    TooLong,
    ControlCharacter,
    Padded,
}

impl OwnerError {
    pub fn message(self) -> &'static str {
        match self {
            Self::Empty => "the owner is empty",
            Self::TooLong => "the owner is longer than 128 bytes",
            Self::ControlCharacter => "the owner contains control characters",
            Self::Padded => "the owner starts or ends with whitespace",
        }
    }
}

impl Owner {
    pub fn parse(raw: &str) -> Result<Self, OwnerError> {
        if raw.is_empty() {
            return Err(OwnerError::Empty);
        }
        if raw.len() > MAX_OWNER_BYTES {
            return Err(OwnerError::TooLong);
        }
        if raw.chars().any(char::is_control) {
            return Err(OwnerError::ControlCharacter);
        }
        if raw.trim() != raw {
            return Err(OwnerError::Padded);
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One CSV row's mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub owner: Owner,
    pub profile: Option<String>,
}

/// A row of the owners CSV that names no usable key: reported once, up front.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRow {
    pub line: usize,
    pub key: String,
    pub refusal: Refusal,
}

/// The owners CSV, read: the mapping (or refusal) per key, and the rows that name no key.
#[derive(Debug, Clone, Default)]
pub struct OwnerTable {
    entries: HashMap<String, Result<Mapping, Refusal>>,
    /// The line each key was first seen on (for duplicates).
    lines: HashMap<String, Vec<usize>>,
    pub bad_rows: Vec<BadRow>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    Missing,
}

/// The header the owners CSV must start with: `key,owner` or `key,owner,profile`.
pub fn check_header(fields: &[String]) -> Result<bool, HeaderError> {
    let names: Vec<String> = fields
        .iter()
        .map(|f| f.trim().to_ascii_lowercase())
        .collect();
    match names.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["key", "owner"] => Ok(false),
        ["key", "owner", "profile"] => Ok(true),
        _ => Err(HeaderError::Missing),
    }
}

impl OwnerTable {
    /// Builds the table from the rows after the header, each with its line number (1-based,
    /// the header being line 1) and its fields. Blank lines are ignored.
    pub fn from_rows(
        rows: impl IntoIterator<Item = (usize, Vec<String>)>,
        legacy_prefixes: &[FinalPrefix],
    ) -> Self {
        let mut table = Self::default();
        for (line, fields) in rows {
            if fields.len() == 1 && fields[0].trim().is_empty() {
                continue;
            }
            let key = fields.first().cloned().unwrap_or_default();
            let invalid = |reason: &str| Refusal::MappingInvalid {
                line,
                reason: reason.to_owned(),
            };
            if !(2..=3).contains(&fields.len()) {
                table.bad_rows.push(BadRow {
                    line,
                    key,
                    refusal: invalid("expected key,owner[,profile]"),
                });
                continue;
            }
            if key.is_empty() {
                table.bad_rows.push(BadRow {
                    line,
                    key,
                    refusal: invalid("the key is empty"),
                });
                continue;
            }
            if !under_legacy_prefix(&key, legacy_prefixes) {
                table.bad_rows.push(BadRow {
                    line,
                    key,
                    refusal: Refusal::OutsideLegacyPrefixes,
                });
                continue;
            }
            let profile = fields
                .get(2)
                .map(|p| p.trim().to_owned())
                .filter(|p| !p.is_empty());
            let mapping = Owner::parse(&fields[1])
                .map(|owner| Mapping { owner, profile })
                .map_err(|e| Refusal::MappingInvalid {
                    line,
                    reason: e.message().to_owned(),
                });
            let seen = table.lines.entry(key.clone()).or_default();
            seen.push(line);
            if seen.len() > 1 {
                // Two rows for one key: never pick one.
                table
                    .entries
                    .insert(key, Err(Refusal::OwnerAmbiguous(seen.clone())));
            } else {
                table.entries.insert(key, mapping);
            }
        }
        table
    }

    pub fn lookup(&self, key: &str) -> Result<Mapping, Refusal> {
        match self.entries.get(key) {
            Some(found) => found.clone(),
            None => Err(Refusal::OwnerUnmapped),
        }
    }

    /// Keys the table maps (good or refused rows).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Where owners come from.
#[derive(Debug, Clone)]
pub enum OwnerSource {
    /// `--owner-pattern` with `--profile`.
    Pattern {
        pattern: KeyPattern,
        profile: String,
    },
    /// `--owners FILE.csv`; `--profile`, when given, for rows without a profile column.
    Table {
        table: OwnerTable,
        default_profile: Option<String>,
    },
}

impl OwnerSource {
    /// The owner and profile of a key, or why there is none.
    pub fn resolve(&self, key: &str) -> Result<(Owner, String), Refusal> {
        match self {
            Self::Pattern { pattern, profile } => {
                let text = pattern.owner_text(key).ok_or(Refusal::PatternMismatch)?;
                let owner = Owner::parse(text).map_err(Refusal::OwnerInvalid)?;
                Ok((owner, profile.clone()))
            }
            Self::Table {
                table,
                default_profile,
            } => {
                let m = table.lookup(key)?;
                let profile = m
                    .profile
                    .or_else(|| default_profile.clone())
                    .ok_or(Refusal::ProfileMissing)?;
                Ok((m.owner, profile))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefixes() -> Vec<FinalPrefix> {
        vec![FinalPrefix::parse("uploads/").expect("prefix")]
    }

    fn row(line: usize, fields: &[&str]) -> (usize, Vec<String>) {
        (line, fields.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn owners_parse_like_a_token_subject() {
        assert_eq!(Owner::parse("alice").map(|o| o.0), Ok("alice".into()));
        assert_eq!(Owner::parse("a b@x.io").map(|o| o.0), Ok("a b@x.io".into()));
        assert_eq!(Owner::parse(""), Err(OwnerError::Empty));
        assert_eq!(Owner::parse(&"a".repeat(129)), Err(OwnerError::TooLong));
        assert!(Owner::parse(&"a".repeat(128)).is_ok());
        assert_eq!(Owner::parse("a\nb"), Err(OwnerError::ControlCharacter));
        assert_eq!(Owner::parse(" alice"), Err(OwnerError::Padded));
        assert_eq!(Owner::parse("alice\t"), Err(OwnerError::ControlCharacter));
    }

    #[test]
    fn the_csv_header_is_required() {
        let f = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(check_header(&f(&["key", "owner"])), Ok(false));
        assert_eq!(check_header(&f(&["Key", " owner ", "profile"])), Ok(true));
        assert_eq!(
            check_header(&f(&["uploads/a/1.png", "alice"])),
            Err(HeaderError::Missing)
        );
        assert_eq!(
            check_header(&f(&["owner", "key"])),
            Err(HeaderError::Missing)
        );
    }

    #[test]
    fn csv_rows_map_keys_and_refuse_what_they_cannot() {
        let t = OwnerTable::from_rows(
            [
                row(2, &["uploads/a/1.png", "alice"]),
                row(3, &["uploads/b/1.png", "bob", "recording"]),
                row(4, &["uploads/c/1.png", " carol"]),
                row(5, &["uploads/d/1.png"]),
                row(6, &["", "dave"]),
                row(7, &["media/images/x.png", "erin"]),
                row(8, &["uploads/f/1.png", "frank"]),
                row(9, &["uploads/f/1.png", "frank"]),
                row(10, &[""]),
                row(11, &["tmp/2026/01/01/x/y.png", "gus"]),
                row(12, &["uploads/h/1.png", "hal", ""]),
                row(13, &["uploads/i/1.png", "ivy", "image", "extra"]),
            ],
            &prefixes(),
        );
        assert_eq!(
            t.lookup("uploads/a/1.png"),
            Ok(Mapping {
                owner: Owner("alice".into()),
                profile: None
            })
        );
        assert_eq!(
            t.lookup("uploads/b/1.png").map(|m| m.profile),
            Ok(Some("recording".into()))
        );
        assert_eq!(
            t.lookup("uploads/c/1.png"),
            Err(Refusal::MappingInvalid {
                line: 4,
                reason: OwnerError::Padded.message().into()
            })
        );
        assert_eq!(
            t.lookup("uploads/f/1.png"),
            Err(Refusal::OwnerAmbiguous(vec![8, 9]))
        );
        assert_eq!(t.lookup("uploads/h/1.png").map(|m| m.profile), Ok(None));
        assert_eq!(t.lookup("uploads/z/1.png"), Err(Refusal::OwnerUnmapped));
        let bad: Vec<(usize, &str)> = t
            .bad_rows
            .iter()
            .map(|b| (b.line, b.refusal.code()))
            .collect();
        assert_eq!(
            bad,
            vec![
                (5, "mapping_invalid"),
                (6, "mapping_invalid"),
                (7, "key_outside_legacy_prefixes"),
                (11, "key_outside_legacy_prefixes"),
                (13, "mapping_invalid"),
            ]
        );
        assert_eq!(t.len(), 5);
    }

    #[test]
    fn a_table_source_falls_back_to_the_default_profile() {
        let table = OwnerTable::from_rows(
            [
                row(2, &["uploads/a/1.png", "alice"]),
                row(3, &["uploads/b/1.png", "bob", "recording"]),
            ],
            &prefixes(),
        );
        let with = OwnerSource::Table {
            table: table.clone(),
            default_profile: Some("image".into()),
        };
        let without = OwnerSource::Table {
            table,
            default_profile: None,
        };
        assert_eq!(
            with.resolve("uploads/a/1.png").map(|(_, p)| p),
            Ok("image".into())
        );
        assert_eq!(
            with.resolve("uploads/b/1.png").map(|(_, p)| p),
            Ok("recording".into())
        );
        assert_eq!(
            without.resolve("uploads/a/1.png"),
            Err(Refusal::ProfileMissing)
        );
    }
}
