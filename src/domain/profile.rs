//! Upload profiles: which content types a kind of upload may have, how large it may be, and
//! under which prefix its committed objects live.

use serde::Serialize;

use super::content::{ContentType, ContentTypeError};
use super::keys::{FilenameError, FinalKey, FinalPrefix, TmpKey};
use super::temporary::TtlDays;
use super::validation_hook::ValidationHook;

pub const MIB: u64 = 1024 * 1024;

/// One kind of upload, as configured.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub content_types: Vec<ContentType>,
    pub max_size: u64,
    pub final_prefix: FinalPrefix,
    /// The application records every use of this profile's files through the links API, so
    /// "no link" is evidence that a file is unused: only then may hygiene unlink, archive and
    /// delete its files. Off unless configured.
    pub tracks_links: bool,
    /// Presigns must declare a checksum (S3 then refuses other bytes; commit verifies it).
    pub require_checksum: bool,
    /// Files of this profile live for this long ([`super::temporary`]): committed under
    /// `temp/<N>d/`, which a lifecycle rule expires; hygiene leaves them to that rule. `None`
    /// (the default) for ordinary files, kept until hygiene has evidence they are unused.
    pub temporary_ttl: Option<TtlDays>,
    /// Asked before each commit of this profile copies the object to its final key
    /// ([`super::validation_hook`]); `None` (the default): no hook.
    pub validation_hook: Option<ValidationHook>,
    /// Bounds on an image's size, checked at commit (issue 37); `max_pixels` defaults to
    /// [`crate::domain::image::DEFAULT_MAX_PIXELS`].
    pub image_bounds: crate::domain::image::ImageBounds,
    /// Named renditions of this profile's images (issue 37); none unless configured.
    pub variants: Vec<crate::domain::variants::Variant>,
}

/// Why a presign request is refused before anything is recorded or signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PresignRejection {
    UnknownProfile,
    ContentTypeMissing,
    ContentTypeMalformed,
    ContentTypeNotAllowed,
    SizeInvalid,
    SizeTooLarge { max: u64 },
    FilenameTooLong,
    FilenameControlCharacter,
}

impl From<FilenameError> for PresignRejection {
    fn from(e: FilenameError) -> Self {
        match e {
            FilenameError::TooLong => Self::FilenameTooLong,
            FilenameError::ControlCharacter => Self::FilenameControlCharacter,
        }
    }
}

impl From<ContentTypeError> for PresignRejection {
    fn from(e: ContentTypeError) -> Self {
        match e {
            ContentTypeError::Empty => Self::ContentTypeMissing,
            ContentTypeError::Malformed => Self::ContentTypeMalformed,
        }
    }
}

/// A declared size as it arrives in JSON: any number, possibly negative, fractional or huge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RawSize {
    Integer(i128),
    NotInteger,
}

/// The JSON value given as `size` is not a number at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotANumber;

impl RawSize {
    /// Reads a JSON number from its source text. Only an integer literal (`-?[0-9]+`) is an
    /// integer: `1e3`, `1.0` and `20971520.0000000001` are `NotInteger` even where their value
    /// is whole, because a float parse would round them, and the spec says integer. Integer
    /// literals beyond `i128` saturate, so they stay "too large" (or non-positive) rather than
    /// becoming unreadable.
    pub fn parse_literal(text: &str) -> Result<Self, NotANumber> {
        let text = text.trim();
        let digits = text.strip_prefix('-').unwrap_or(text);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            let negative = digits.len() != text.len();
            return Ok(Self::Integer(text.parse::<i128>().unwrap_or(if negative {
                i128::MIN
            } else {
                i128::MAX
            })));
        }
        match serde_json::from_str::<serde_json::Number>(text) {
            Ok(_) => Ok(Self::NotInteger),
            Err(_) => Err(NotANumber),
        }
    }
}

impl Profile {
    /// The pairing rule for this profile: the only final key a commit of `tmp` may take.
    pub fn paired_key(&self, tmp: &TmpKey) -> FinalKey {
        FinalKey::paired_in(&self.final_prefix, self.temporary_ttl, tmp)
    }

    /// Checks the declared content type against the allow-list and returns its canonical form.
    pub fn accept_content_type(&self, raw: Option<&str>) -> Result<ContentType, PresignRejection> {
        let ct = ContentType::parse(raw.ok_or(PresignRejection::ContentTypeMissing)?)?;
        if self.content_types.contains(&ct) {
            Ok(ct)
        } else {
            Err(PresignRejection::ContentTypeNotAllowed)
        }
    }

    /// Sizes are 1..=max bytes.
    pub fn accept_size(&self, raw: RawSize) -> Result<u64, PresignRejection> {
        match raw {
            RawSize::Integer(n) if n <= 0 => Err(PresignRejection::SizeInvalid),
            RawSize::Integer(n) if n > i128::from(self.max_size) => {
                Err(PresignRejection::SizeTooLarge { max: self.max_size })
            }
            RawSize::Integer(n) => u64::try_from(n).map_err(|_| PresignRejection::SizeInvalid),
            RawSize::NotInteger => Err(PresignRejection::SizeInvalid),
        }
    }
}

fn types(list: &[&str]) -> Vec<ContentType> {
    list.iter()
        .filter_map(|t| ContentType::parse(t).ok())
        .collect()
}

/// The built-in profiles, used when the configuration names none.
pub fn builtin_profiles() -> Vec<Profile> {
    let prefix = |p: &str| {
        FinalPrefix::parse(p).unwrap_or_else(|e| unreachable!("built-in prefix {p}: {e:?}"))
    };
    vec![
        Profile {
            name: "image".into(),
            content_types: types(&["image/jpeg", "image/png", "image/webp", "image/heic"]),
            max_size: 20 * MIB,
            final_prefix: prefix("media/images/"),
            tracks_links: false,
            require_checksum: false,
            temporary_ttl: None,
            validation_hook: None,
            image_bounds: Default::default(),
            variants: Vec::new(),
        },
        Profile {
            name: "recording".into(),
            content_types: types(&[
                "audio/mpeg",
                "audio/mp4",
                "audio/aac",
                "audio/ogg",
                "audio/webm",
                "audio/wav",
            ]),
            max_size: 500 * MIB,
            final_prefix: prefix("media/recordings/"),
            tracks_links: false,
            require_checksum: false,
            temporary_ttl: None,
            validation_hook: None,
            image_bounds: Default::default(),
            variants: Vec::new(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> Profile {
        builtin_profiles().remove(0)
    }

    #[test]
    fn builtin_profiles_match_the_documented_defaults() {
        let all = builtin_profiles();
        assert_eq!(all[0].name, "image");
        assert_eq!(all[0].content_types.len(), 4);
        assert_eq!(all[0].max_size, 20 * MIB);
        assert_eq!(all[1].name, "recording");
        assert_eq!(all[1].content_types.len(), 6);
        assert_eq!(all[1].max_size, 500 * MIB);
        assert_eq!(all[1].final_prefix.as_str(), "media/recordings/");
    }

    #[test]
    fn content_types_outside_the_allow_list_are_refused() {
        let p = image();
        for bad in [
            "text/html",
            "image/svg+xml",
            "application/xhtml+xml",
            "application/javascript",
        ] {
            assert_eq!(
                p.accept_content_type(Some(bad)),
                Err(PresignRejection::ContentTypeNotAllowed)
            );
        }
        assert_eq!(
            p.accept_content_type(None),
            Err(PresignRejection::ContentTypeMissing)
        );
        assert_eq!(
            p.accept_content_type(Some("")),
            Err(PresignRejection::ContentTypeMissing)
        );
        assert_eq!(
            p.accept_content_type(Some("image/png\r\nX: y")),
            Err(PresignRejection::ContentTypeMalformed)
        );
        assert_eq!(
            p.accept_content_type(Some("IMAGE/PNG; charset=utf-8"))
                .map(|c| c.to_string()),
            Ok("image/png".into())
        );
    }

    #[test]
    fn only_integer_literals_are_integer_sizes() {
        let parse = RawSize::parse_literal;
        assert_eq!(parse("10"), Ok(RawSize::Integer(10)));
        assert_eq!(parse("-1"), Ok(RawSize::Integer(-1)));
        assert_eq!(parse("0"), Ok(RawSize::Integer(0)));
        assert_eq!(
            parse("18446744073709551617"),
            Ok(RawSize::Integer(18_446_744_073_709_551_617))
        );
        assert_eq!(parse(&"9".repeat(60)), Ok(RawSize::Integer(i128::MAX)));
        assert_eq!(
            parse(&format!("-{}", "9".repeat(60))),
            Ok(RawSize::Integer(i128::MIN))
        );
        for whole_but_not_integer in [
            "1e3",
            "1E3",
            "1e+3",
            "1.0",
            "1000.000",
            "20971520.0000000001",
            "1e20",
            "-0.0",
            "1.5",
        ] {
            assert_eq!(
                parse(whole_but_not_integer),
                Ok(RawSize::NotInteger),
                "{whole_but_not_integer}"
            );
        }
        for not_a_number in ["\"10\"", "true", "null", "[]", "{}", "", "-", "1-"] {
            assert_eq!(parse(not_a_number), Err(NotANumber), "{not_a_number}");
        }
    }

    #[test]
    fn sizes_must_be_positive_integers_within_the_maximum() {
        let p = image();
        assert_eq!(
            p.accept_size(RawSize::Integer(0)),
            Err(PresignRejection::SizeInvalid)
        );
        assert_eq!(
            p.accept_size(RawSize::Integer(-5)),
            Err(PresignRejection::SizeInvalid)
        );
        assert_eq!(
            p.accept_size(RawSize::NotInteger),
            Err(PresignRejection::SizeInvalid)
        );
        assert_eq!(
            p.accept_size(RawSize::Integer(i128::from(20 * MIB) + 1)),
            Err(PresignRejection::SizeTooLarge { max: 20 * MIB })
        );
        assert_eq!(
            p.accept_size(RawSize::Integer(1 << 70)),
            Err(PresignRejection::SizeTooLarge { max: 20 * MIB })
        );
        assert_eq!(p.accept_size(RawSize::Integer(1)), Ok(1));
        assert_eq!(
            p.accept_size(RawSize::Integer(i128::from(20 * MIB))),
            Ok(20 * MIB)
        );
    }
}
