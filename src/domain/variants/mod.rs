//! A profile's named renditions of its images (issue 37): each a box, a fit, an output format
//! and a quality; where a rendition is kept (`cache/`); and the geometry of rendering one.

pub mod geometry;
pub mod refusal;

pub use geometry::{plan, Fit, Plan, Rect};

use sha2::{Digest, Sha256};

use super::ids::FileId;

/// Where every rendition lives: a reserved prefix (no commit lands there) whose lifecycle rule
/// (`resize-cache-expire`, infra/modules/image-resize) expires renditions nobody asked for in a
/// while; they are rendered again on demand.
pub use crate::domain::prefixes::CACHE_PREFIX;

/// A side of a rendition's box at most this long.
pub const MAX_SIDE: u32 = 8192;

/// The formats a rendition is encoded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Jpeg,
    Webp,
    Avif,
}

impl OutputFormat {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "jpeg" => Self::Jpeg,
            "webp" => Self::Webp,
            "avif" => Self::Avif,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Jpeg => "jpeg",
            Self::Webp => "webp",
            Self::Avif => "avif",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Self::Jpeg => "image/jpeg",
            Self::Webp => "image/webp",
            Self::Avif => "image/avif",
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Self::Jpeg => "jpg",
            Self::Webp => "webp",
            Self::Avif => "avif",
        }
    }
}

/// One named rendition of a profile's images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// 1–32 of `[a-z0-9_-]`, unique within its profile.
    pub name: String,
    pub width: u32,
    pub height: u32,
    pub fit: Fit,
    pub format: OutputFormat,
    /// 1–100.
    pub quality: u8,
    /// Rendered in the background right after a commit, so the first view finds it cached.
    pub eager: bool,
}

/// The version of what a render does: part of every rendition's key, so that a renderer that
/// draws differently never serves what an older one cached. 2: ICC profiles converted to sRGB
/// (a Display P3 or Adobe RGB source's version 1 rendition had its numbers read as sRGB).
pub const RENDERER_VERSION: u32 = 2;

/// A variant's name: 1–32 of `[a-z0-9_-]`.
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

impl Variant {
    /// Checks one variant's own fields (uniqueness is the profile's).
    pub fn validate(&self) -> Result<(), String> {
        if !is_name(&self.name) {
            return Err(format!("variant name {:?}: 1-32 of [a-z0-9_-]", self.name));
        }
        for (what, v) in [("width", self.width), ("height", self.height)] {
            if !(1..=MAX_SIDE).contains(&v) {
                return Err(format!(
                    "variant {}: {what} must be 1..={MAX_SIDE}, got {v}",
                    self.name
                ));
            }
        }
        if !(1..=100).contains(&self.quality) {
            return Err(format!(
                "variant {}: quality must be 1..=100, got {}",
                self.name, self.quality
            ));
        }
        Ok(())
    }

    /// What the rendition's bytes depend on, besides the source: eight hex characters of a
    /// SHA-256 of the box, fit, format, quality and the renderer's version. A variant whose
    /// settings change gets new keys; the old renditions expire by the cache's rule.
    pub fn fingerprint(&self) -> String {
        let spec = format!(
            "{}x{}|{}|{}|{}|r{}",
            self.width,
            self.height,
            self.fit.as_str(),
            self.format.as_str(),
            self.quality,
            RENDERER_VERSION
        );
        hex::encode(&Sha256::digest(spec.as_bytes())[..4])
    }

    /// The key of `file`'s rendition: `cache/<file id>/<name>-<fingerprint>.<ext>`. Under the
    /// file's own prefix, so that a file's renditions are found (and removed) by one listing.
    pub fn key(&self, file: &FileId) -> String {
        format!(
            "{}{}-{}.{}",
            file_prefix(file),
            self.name,
            self.fingerprint(),
            self.format.extension()
        )
    }
}

/// The prefix of every rendition of `file`.
pub fn file_prefix(file: &FileId) -> String {
    format!("{CACHE_PREFIX}{}/", file.as_str())
}

/// The file a key under `cache/` is a rendition of: `cache/<file id>/<anything>`. `None` for
/// any other key (a key under `cache/` that no file names has no owner).
pub fn file_of_key(key: &str) -> Option<FileId> {
    let rest = key.strip_prefix(CACHE_PREFIX)?;
    let (id, name) = rest.split_once('/')?;
    if name.is_empty() {
        return None;
    }
    FileId::parse(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rendition_key_names_its_file_and_nothing_else_does() {
        let id = FileId::parse("0192f3a4b5c6d7e8f90a1b2c3d4e5f60").expect("id");
        let key = thumb().key(&id);
        assert_eq!(file_of_key(&key), Some(id.clone()));
        assert!(key.starts_with(&file_prefix(&id)));
        for other in [
            "cache/0192f3a4b5c6d7e8f90a1b2c3d4e5f60/",
            "cache/0192f3a4b5c6d7e8f90a1b2c3d4e5f60",
            "cache/0192F3A4B5C6D7E8F90A1B2C3D4E5F60/thumb-1.jpg",
            "cache/not-an-id/thumb-1.jpg",
            "media/images/0192f3a4b5c6d7e8f90a1b2c3d4e5f60/thumb-1.jpg",
            "cache//thumb.jpg",
        ] {
            assert_eq!(file_of_key(other), None, "{other:?}");
        }
    }

    fn thumb() -> Variant {
        Variant {
            name: "thumb".into(),
            width: 400,
            height: 400,
            fit: Fit::Cover,
            format: OutputFormat::Webp,
            quality: 80,
            eager: false,
        }
    }

    #[test]
    fn a_renditions_key_changes_with_what_it_depends_on_and_nothing_else() {
        let file = FileId::parse("01a2433780d47688b3d7de0fc4568805").expect("id");
        let v = thumb();
        let key = v.key(&file);
        assert!(
            key.starts_with("cache/01a2433780d47688b3d7de0fc4568805/thumb-"),
            "{key}"
        );
        assert!(key.ends_with(".webp"));
        assert_eq!(key, v.key(&file), "stable");
        let eager = Variant {
            eager: true,
            ..thumb()
        };
        assert_eq!(eager.key(&file), key, "eagerness changes no pixel");
        for other in [
            Variant {
                width: 401,
                ..thumb()
            },
            Variant {
                fit: Fit::Inside,
                ..thumb()
            },
            Variant {
                format: OutputFormat::Jpeg,
                ..thumb()
            },
            Variant {
                quality: 81,
                ..thumb()
            },
        ] {
            assert_ne!(other.key(&file), key, "{other:?}");
        }
    }

    #[test]
    fn bad_variants_are_refused_with_what_is_wrong() {
        for (v, says) in [
            (
                Variant {
                    name: "Thumb".into(),
                    ..thumb()
                },
                "variant name",
            ),
            (
                Variant {
                    name: String::new(),
                    ..thumb()
                },
                "variant name",
            ),
            (
                Variant {
                    width: 0,
                    ..thumb()
                },
                "width",
            ),
            (
                Variant {
                    height: 8193,
                    ..thumb()
                },
                "height",
            ),
            (
                Variant {
                    quality: 0,
                    ..thumb()
                },
                "quality",
            ),
            (
                Variant {
                    quality: 101,
                    ..thumb()
                },
                "quality",
            ),
        ] {
            let err = v.validate().expect_err(says);
            assert!(err.contains(says), "{err}");
        }
        assert_eq!(thumb().validate(), Ok(()));
    }
}
