//! Importing the layout that predates `tmp/` (`upcommit legacy import`): who owns a legacy key
//! (a key pattern such as `uploads/{owner}/*`, or a `key,owner[,profile]` CSV), and whether a
//! listed key is imported, skipped or refused. An owner is never guessed: a key the pattern
//! does not match, an owner that does not parse, a key the CSV does not name (or names twice)
//! is refused with its reason. Pure rules; the job is `services::legacy_import`.
//!
//! This file holds the decision for one listed key; owners (`owners`: the owner, the CSV
//! table) and key patterns (`pattern`) have their own files.

mod owners;
mod pattern;

use super::content::ContentType;
use super::keys::{is_legacy_key, FinalPrefix};
use super::prefixes::TMP_PREFIX;
use super::profile::{PresignRejection, Profile, RawSize};
use super::reserved::resolves_under_tmp;

pub use owners::{
    check_header, BadRow, HeaderError, Mapping, Owner, OwnerError, OwnerSource, OwnerTable,
    MAX_OWNER_BYTES,
};
pub use pattern::{KeyPattern, PatternError};

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
                owner: Owner::parse("alice").expect("owner"),
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
