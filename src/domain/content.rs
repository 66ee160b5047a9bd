//! Content types as the service accepts them: one canonical spelling, so that the value signed
//! into the URL, the value stored in the catalog and the value returned to the client are the
//! same bytes.

use std::fmt;

/// A canonical media type: lowercase `type/subtype`, parameters dropped.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContentType(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentTypeError {
    /// Missing or blank.
    Empty,
    /// Control characters (CR/LF header injection), non-ASCII, or not `type/subtype`.
    Malformed,
}

fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b)
}

impl ContentType {
    /// Canonicalizes `IMAGE/PNG; charset=utf-8 ` to `image/png`. Anything with a control
    /// character anywhere is refused rather than cleaned, because it is an injection attempt.
    pub fn parse(raw: &str) -> Result<Self, ContentTypeError> {
        if raw.chars().any(|c| c.is_control()) {
            return Err(ContentTypeError::Malformed);
        }
        let essence = raw
            .split(';')
            .next()
            .unwrap_or("")
            .trim_matches([' ', '\t']);
        if essence.is_empty() {
            return Err(if raw.trim().is_empty() {
                ContentTypeError::Empty
            } else {
                ContentTypeError::Malformed
            });
        }
        let (kind, sub) = essence.split_once('/').ok_or(ContentTypeError::Malformed)?;
        let valid =
            |part: &str| !part.is_empty() && part.len() <= 127 && part.bytes().all(is_token_char);
        if !valid(kind) || !valid(sub) {
            return Err(ContentTypeError::Malformed);
        }
        Ok(Self(essence.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ContentType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_case_parameters_and_spaces_canonicalize() {
        for raw in [
            "image/png",
            "IMAGE/PNG",
            "Image/Png; charset=utf-8",
            " image/png ",
            "image/png;",
        ] {
            assert_eq!(
                ContentType::parse(raw).map(|c| c.0),
                Ok("image/png".to_owned()),
                "{raw:?}"
            );
        }
    }

    #[test]
    fn control_characters_are_refused_not_cleaned() {
        for raw in [
            "image/png\r\nX-Evil: 1",
            "image/png\n",
            "image/\0png",
            "image/png\t\r",
        ] {
            assert_eq!(
                ContentType::parse(raw),
                Err(ContentTypeError::Malformed),
                "{raw:?}"
            );
        }
    }

    #[test]
    fn empty_and_malformed_are_told_apart() {
        assert_eq!(ContentType::parse(""), Err(ContentTypeError::Empty));
        assert_eq!(ContentType::parse("   "), Err(ContentTypeError::Empty));
        for raw in [
            "image",
            "/png",
            "image/",
            "image/p ng",
            "imäge/png",
            "; charset=x",
            "a/b/c",
        ] {
            assert_eq!(
                ContentType::parse(raw),
                Err(ContentTypeError::Malformed),
                "{raw:?}"
            );
        }
    }
}
