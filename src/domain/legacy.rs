//! Importing the layout that predates `tmp/` (`upcommit legacy import`): who owns a legacy key
//! (a key pattern such as `uploads/{owner}/*`, or a `key,owner[,profile]` CSV), and whether a
//! listed key is imported, skipped or refused. An owner is never guessed: a key the pattern
//! does not match, an owner that does not parse, a key the CSV does not name (or names twice)
//! is refused with its reason. Pure rules; the job is `services::legacy_import`.

use std::collections::HashMap;

use super::content::ContentType;
use super::keys::{is_legacy_key, FinalPrefix, TMP_PREFIX};
use super::profile::{PresignRejection, Profile, RawSize};
use super::reserved::resolves_under_tmp;

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

/// One segment of a key pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    /// `before{owner}after`: the owner is what lies between.
    Owner {
        before: String,
        after: String,
    },
    /// `*`: one segment, or, last, the rest of the key (one segment or more).
    Any,
}

/// A key pattern such as `uploads/{owner}/*`: `/`-separated segments, exactly one of which
/// holds `{owner}` (with literal text around it if wanted: `user-{owner}`); `*` is a whole
/// segment matching one non-empty segment, or, as the last segment, the non-empty rest of the
/// key. Everything else matches itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternError {
    Empty,
    EmptySegment,
    NoOwner,
    SeveralOwners,
    /// `*` inside a segment (`a*`), or a stray `{` / `}`.
    BadSegment,
    /// The pattern would match a key without anything after the owner's segment: a key is a
    /// file, so the pattern must end with `*` or a literal file segment.
    EndsWithOwner,
}

impl PatternError {
    pub fn message(self) -> &'static str {
        match self {
            Self::Empty => "the pattern is empty",
            Self::EmptySegment => {
                "the pattern has an empty segment (// or a leading or trailing /)"
            }
            Self::NoOwner => "the pattern has no {owner} segment",
            Self::SeveralOwners => "the pattern has more than one {owner}",
            Self::BadSegment => "`*` must be a whole segment, and { } appear only in {owner}",
            Self::EndsWithOwner => "the pattern must not end with the {owner} segment",
        }
    }
}

const OWNER: &str = "{owner}";

impl KeyPattern {
    pub fn parse(raw: &str) -> Result<Self, PatternError> {
        if raw.is_empty() {
            return Err(PatternError::Empty);
        }
        let mut segments = Vec::new();
        let mut owners = 0;
        for part in raw.split('/') {
            if part.is_empty() {
                return Err(PatternError::EmptySegment);
            }
            let seg = if part == "*" {
                Segment::Any
            } else if let Some((before, after)) = part.split_once(OWNER) {
                owners += 1;
                if [before, after].iter().any(|s| s.contains(['*', '{', '}'])) {
                    return Err(if after.contains(OWNER) {
                        PatternError::SeveralOwners
                    } else {
                        PatternError::BadSegment
                    });
                }
                Segment::Owner {
                    before: before.to_owned(),
                    after: after.to_owned(),
                }
            } else if part.contains(['*', '{', '}']) {
                return Err(PatternError::BadSegment);
            } else {
                Segment::Literal(part.to_owned())
            };
            segments.push(seg);
        }
        match owners {
            0 => return Err(PatternError::NoOwner),
            1 => {}
            _ => return Err(PatternError::SeveralOwners),
        }
        if matches!(segments.last(), Some(Segment::Owner { .. })) {
            return Err(PatternError::EndsWithOwner);
        }
        Ok(Self { segments })
    }

    /// The owner a key names, or `None` when the pattern does not match it. The owner is then
    /// still to be parsed ([`Owner::parse`]).
    pub fn owner_text<'k>(&self, key: &'k str) -> Option<&'k str> {
        let parts: Vec<&str> = key.split('/').collect();
        let mut owner = None;
        for (i, seg) in self.segments.iter().enumerate() {
            let last = i + 1 == self.segments.len();
            match seg {
                Segment::Any if last => {
                    let rest = parts.get(i..)?;
                    return (!rest.is_empty() && rest.iter().all(|p| !p.is_empty()))
                        .then_some(owner)
                        .flatten();
                }
                Segment::Any => {
                    if parts.get(i)?.is_empty() {
                        return None;
                    }
                }
                Segment::Literal(l) => {
                    if parts.get(i)? != l {
                        return None;
                    }
                }
                Segment::Owner { before, after } => {
                    let part = parts.get(i)?;
                    let text = part.strip_prefix(before.as_str())?;
                    owner = Some(text.strip_suffix(after.as_str())?);
                }
            }
        }
        (parts.len() == self.segments.len())
            .then_some(owner)
            .flatten()
    }
}

/// Why a key is not imported although it is a legacy key nothing records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The key pattern does not match the key.
    PatternMismatch,
    /// The owner text the pattern or the CSV gave does not parse.
    OwnerInvalid(OwnerError),
    /// The CSV has no row for the key.
    OwnerUnmapped,
    /// The CSV names the key on several rows (lines given).
    OwnerAmbiguous(Vec<usize>),
    /// The CSV row of the key is malformed.
    MappingInvalid {
        line: usize,
        reason: String,
    },
    /// No `--profile` and no profile column for the key.
    ProfileMissing,
    ProfileUnknown(String),
    /// Under a legacy prefix, but not a key the commit accepts (grammar, `..` into `tmp/`).
    KeyInvalid,
    /// Named by the CSV but outside every legacy prefix (or under `tmp/`).
    OutsideLegacyPrefixes,
}

impl Refusal {
    /// The stable snake_case code the report gives.
    pub fn code(&self) -> &'static str {
        match self {
            Self::PatternMismatch => "pattern_mismatch",
            Self::OwnerInvalid(_) => "owner_invalid",
            Self::OwnerUnmapped => "owner_unmapped",
            Self::OwnerAmbiguous(_) => "owner_ambiguous",
            Self::MappingInvalid { .. } => "mapping_invalid",
            Self::ProfileMissing => "profile_missing",
            Self::ProfileUnknown(_) => "profile_unknown",
            Self::KeyInvalid => "key_invalid",
            Self::OutsideLegacyPrefixes => "key_outside_legacy_prefixes",
        }
    }

    /// `code: explanation`, the report's reason.
    pub fn reason(&self) -> String {
        let detail = match self {
            Self::PatternMismatch => "the owner pattern does not match this key".to_owned(),
            Self::OwnerInvalid(e) => e.message().to_owned(),
            Self::OwnerUnmapped => "the owners CSV has no row for this key".to_owned(),
            Self::OwnerAmbiguous(lines) => format!(
                "the owners CSV names this key on several lines ({})",
                lines
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Self::MappingInvalid { line, reason } => format!("owners CSV line {line}: {reason}"),
            Self::ProfileMissing => "no profile: give --profile or a profile column".to_owned(),
            Self::ProfileUnknown(p) => format!("unknown upload profile {p:?}"),
            Self::KeyInvalid => "not a key a commit accepts".to_owned(),
            Self::OutsideLegacyPrefixes => {
                "the key is outside every legacy prefix (or under tmp/)".to_owned()
            }
        };
        format!("{}: {detail}", self.code())
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

/// What the catalog already holds for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    Nothing,
    /// An imported upload row, still `issued`: a run stopped between import and commit (or ran
    /// with `--no-commit`).
    Imported,
    /// Anything else: a committed, rejected or promoting upload of this key, an upload whose
    /// final key it is, or a file handle.
    Settled,
}

/// Why a key is skipped (never an error: a rerun skips what an earlier run did).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Under `tmp/` or outside every legacy prefix (an inventory lists the whole bucket).
    OutsideLegacyPrefixes,
    /// Recorded already.
    Recorded,
    /// Imported already, not committed, and this run does not commit.
    ImportedNotCommitted,
}

impl Skip {
    pub fn reason(self) -> &'static str {
        match self {
            Self::OutsideLegacyPrefixes => "outside every legacy prefix or under tmp/",
            Self::Recorded => "already recorded (an upload or a file handle names it)",
            Self::ImportedNotCommitted => "imported by an earlier run, not committed (--no-commit)",
        }
    }
}

/// What a run does with one listed key, before it reads the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Import {
        owner: Owner,
        profile: String,
    },
    /// Commit the upload an earlier run imported.
    CommitImported,
    Skip(Skip),
    Refuse(Refusal),
}

fn under_legacy_prefix(key: &str, legacy_prefixes: &[FinalPrefix]) -> bool {
    !key.starts_with(TMP_PREFIX)
        && !resolves_under_tmp(key)
        && legacy_prefixes.iter().any(|p| key.starts_with(p.as_str()))
}

/// The eligibility rule. Only keys under a legacy prefix are considered; anything recorded
/// is skipped (a second run imports nothing new); the owner and profile must resolve.
pub fn decide(
    key: &str,
    legacy_prefixes: &[FinalPrefix],
    recorded: Recorded,
    commit: bool,
    owners: &OwnerSource,
    profile_known: impl Fn(&str) -> bool,
) -> Decision {
    if !under_legacy_prefix(key, legacy_prefixes) {
        return Decision::Skip(Skip::OutsideLegacyPrefixes);
    }
    if !is_legacy_key(key, legacy_prefixes) {
        return Decision::Refuse(Refusal::KeyInvalid);
    }
    match recorded {
        Recorded::Settled => return Decision::Skip(Skip::Recorded),
        Recorded::Imported if commit => return Decision::CommitImported,
        Recorded::Imported => return Decision::Skip(Skip::ImportedNotCommitted),
        Recorded::Nothing => {}
    }
    match owners.resolve(key) {
        Err(r) => Decision::Refuse(r),
        Ok((_, profile)) if !profile_known(&profile) => {
            Decision::Refuse(Refusal::ProfileUnknown(profile))
        }
        Ok((owner, profile)) => Decision::Import { owner, profile },
    }
}

/// The object as its HEAD describes it, checked as a presign would check the declaration:
/// its stored content type must be one of the profile's and its size within the profile's
/// limit. The refusal carries the presign's code (`content_type_not_allowed`,
/// `size_too_large`, …).
pub fn admit(
    profile: &Profile,
    stored_type: Option<&str>,
    size: i64,
) -> Result<ContentType, PresignRejection> {
    let ct = profile.accept_content_type(stored_type)?;
    profile.accept_size(RawSize::Integer(i128::from(size)))?;
    Ok(ct)
}

/// Listing prefixes for a run: every legacy prefix (one nested in another is listed once,
/// with the outer one), narrowed to `--prefix` when given. Empty: nothing eligible to list.
pub fn listing_prefixes(legacy_prefixes: &[FinalPrefix], only: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = legacy_prefixes
        .iter()
        .filter_map(|l| {
            let l = l.as_str();
            match only {
                None => Some(l.to_owned()),
                Some(p) if p.starts_with(l) => Some(p.to_owned()),
                Some(p) if l.starts_with(p) => Some(l.to_owned()),
                Some(_) => None,
            }
        })
        .collect();
    out.sort();
    out.dedup();
    let outer = out.clone();
    out.retain(|p| !outer.iter().any(|o| o != p && p.starts_with(o.as_str())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::profile::builtin_profiles;

    fn prefixes() -> Vec<FinalPrefix> {
        vec![FinalPrefix::parse("uploads/").expect("prefix")]
    }

    fn pattern(p: &str) -> KeyPattern {
        KeyPattern::parse(p).expect("pattern")
    }

    fn by_pattern() -> OwnerSource {
        OwnerSource::Pattern {
            pattern: pattern("uploads/{owner}/*"),
            profile: "image".into(),
        }
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
    fn patterns_parse_with_exactly_one_owner_and_whole_segment_wildcards() {
        assert!(KeyPattern::parse("uploads/{owner}/*").is_ok());
        assert!(KeyPattern::parse("u/user-{owner}.d/*/x.png").is_ok());
        assert!(KeyPattern::parse("{owner}/*").is_ok());
        assert_eq!(KeyPattern::parse(""), Err(PatternError::Empty));
        assert_eq!(KeyPattern::parse("uploads/*"), Err(PatternError::NoOwner));
        assert_eq!(
            KeyPattern::parse("{owner}/{owner}/*"),
            Err(PatternError::SeveralOwners)
        );
        assert_eq!(
            KeyPattern::parse("u/{owner}{owner}/*"),
            Err(PatternError::SeveralOwners)
        );
        assert_eq!(
            KeyPattern::parse("uploads//{owner}/*"),
            Err(PatternError::EmptySegment)
        );
        assert_eq!(
            KeyPattern::parse("/uploads/{owner}/*"),
            Err(PatternError::EmptySegment)
        );
        assert_eq!(
            KeyPattern::parse("uploads/{owner}/"),
            Err(PatternError::EmptySegment)
        );
        assert_eq!(
            KeyPattern::parse("uploads/{owner}/a*"),
            Err(PatternError::BadSegment)
        );
        assert_eq!(
            KeyPattern::parse("uploads/{owner}*/x"),
            Err(PatternError::BadSegment)
        );
        assert_eq!(
            KeyPattern::parse("uploads/{user}/{owner}/x"),
            Err(PatternError::BadSegment)
        );
        assert_eq!(
            KeyPattern::parse("uploads/{owner}"),
            Err(PatternError::EndsWithOwner)
        );
    }

    #[test]
    fn a_pattern_takes_the_owner_from_its_segment() {
        let p = pattern("uploads/{owner}/*");
        assert_eq!(p.owner_text("uploads/alice/1.png"), Some("alice"));
        assert_eq!(p.owner_text("uploads/alice/2026/1.png"), Some("alice"));
        assert_eq!(p.owner_text("uploads/alice/"), None, "nothing after");
        assert_eq!(p.owner_text("uploads/alice"), None);
        assert_eq!(p.owner_text("uploads/alice//x"), None);
        assert_eq!(p.owner_text("other/alice/1.png"), None);
        assert_eq!(p.owner_text("uploads//1.png"), Some(""), "then refused");

        let q = pattern("u/user-{owner}.d/*/f.png");
        assert_eq!(q.owner_text("u/user-bob.d/x/f.png"), Some("bob"));
        assert_eq!(q.owner_text("u/user-bob.d/x/g.png"), None);
        assert_eq!(q.owner_text("u/user-bob.d/x/y/f.png"), None);
        assert_eq!(q.owner_text("u/bob.d/x/f.png"), None);
        assert_eq!(q.owner_text("u/user-bob.d/f.png"), None);
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

    fn decide_with(key: &str, recorded: Recorded, commit: bool, owners: &OwnerSource) -> Decision {
        decide(key, &prefixes(), recorded, commit, owners, |p| {
            p == "image" || p == "recording"
        })
    }

    #[test]
    fn only_unrecorded_keys_under_a_legacy_prefix_are_imported() {
        let o = by_pattern();
        assert_eq!(
            decide_with("uploads/alice/1.png", Recorded::Nothing, true, &o),
            Decision::Import {
                owner: Owner("alice".into()),
                profile: "image".into()
            }
        );
        for key in [
            "tmp/2026/01/01/x/1.png",
            "media/images/a/1.png",
            "uploadsx/a/1.png",
        ] {
            assert_eq!(
                decide_with(key, Recorded::Nothing, true, &o),
                Decision::Skip(Skip::OutsideLegacyPrefixes),
                "{key}"
            );
        }
        assert_eq!(
            decide_with("uploads/../tmp/x.png", Recorded::Nothing, true, &o),
            Decision::Skip(Skip::OutsideLegacyPrefixes)
        );
        assert_eq!(
            decide_with("uploads/a b/1.png", Recorded::Nothing, true, &o),
            Decision::Refuse(Refusal::KeyInvalid)
        );
        assert_eq!(
            decide_with("uploads/alice/1.png", Recorded::Settled, true, &o),
            Decision::Skip(Skip::Recorded)
        );
        assert_eq!(
            decide_with("uploads/alice/1.png", Recorded::Imported, true, &o),
            Decision::CommitImported
        );
        assert_eq!(
            decide_with("uploads/alice/1.png", Recorded::Imported, false, &o),
            Decision::Skip(Skip::ImportedNotCommitted)
        );
        assert_eq!(
            decide_with("uploads/alice.png", Recorded::Nothing, true, &o),
            Decision::Refuse(Refusal::PatternMismatch)
        );
    }

    #[test]
    fn an_unknown_profile_is_refused_never_guessed() {
        let o = OwnerSource::Pattern {
            pattern: pattern("uploads/{owner}/*"),
            profile: "video".into(),
        };
        assert_eq!(
            decide_with("uploads/alice/1.png", Recorded::Nothing, true, &o),
            Decision::Refuse(Refusal::ProfileUnknown("video".into()))
        );
        // Recorded keys are skipped before the mapping is even looked at.
        assert_eq!(
            decide_with("uploads/alice/1.png", Recorded::Settled, true, &o),
            Decision::Skip(Skip::Recorded)
        );
    }

    #[test]
    fn admission_applies_the_profile_like_a_presign() {
        let image = builtin_profiles().remove(0);
        assert_eq!(
            admit(&image, Some("image/png"), 10).map(|c| c.as_str().to_owned()),
            Ok("image/png".into())
        );
        assert_eq!(
            admit(&image, Some("text/plain"), 10),
            Err(PresignRejection::ContentTypeNotAllowed)
        );
        assert_eq!(
            admit(&image, None, 10),
            Err(PresignRejection::ContentTypeMissing)
        );
        assert_eq!(
            admit(&image, Some("image/png"), 20 * 1024 * 1024 + 1),
            Err(PresignRejection::SizeTooLarge {
                max: 20 * 1024 * 1024
            })
        );
        assert_eq!(
            admit(&image, Some("image/png"), 0),
            Err(PresignRejection::SizeInvalid)
        );
    }

    #[test]
    fn listing_prefixes_cover_each_legacy_prefix_once() {
        let ps = vec![
            FinalPrefix::parse("uploads/").expect("p"),
            FinalPrefix::parse("uploads/old/").expect("p"),
            FinalPrefix::parse("avatars/").expect("p"),
        ];
        assert_eq!(listing_prefixes(&ps, None), vec!["avatars/", "uploads/"]);
        assert_eq!(
            listing_prefixes(&ps, Some("uploads/alice/")),
            vec!["uploads/alice/"]
        );
        assert_eq!(listing_prefixes(&ps, Some("up")), vec!["uploads/"]);
        assert_eq!(listing_prefixes(&ps, Some("media/")), Vec::<String>::new());
        assert_eq!(listing_prefixes(&[], None), Vec::<String>::new());
    }
}
