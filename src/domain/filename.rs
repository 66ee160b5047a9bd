//! The client's own filename, kept for people, apart from the key.
//!
//! The key holds a safe ASCII slug ([`super::keys::SafeName`]); the name the user chose —
//! `写真.jpg`, `फोटो.jpg`, `صورة.png` — is kept as an [`OriginalName`] on the upload and its
//! file handle, and sent back on download as RFC 6266 `filename*=UTF-8''…` next to an ASCII
//! `filename="…"` for clients that do not read the extended form.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use unicode_normalization::UnicodeNormalization;

use super::keys::MAX_FILENAME_BYTES;
use super::reserved::is_invisible;

/// A filename as the user wrote it, made safe to show and to send in a header: its last path
/// component, in NFC, without control, bidi or other invisible characters, trimmed, at most
/// 255 bytes (cut inside the stem so the extension stays).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginalName(String);

impl OriginalName {
    /// `None` when nothing of the name is left (empty, only invisible characters, `.`, `..`).
    pub fn clean(raw: &str) -> Option<Self> {
        let last = raw.rsplit(['/', '\\']).next().unwrap_or("");
        let kept: String = last
            .nfc()
            .filter(|c| !c.is_control() && !is_invisible(*c))
            .collect();
        let kept = kept.trim();
        if kept.is_empty() || kept == "." || kept == ".." {
            return None;
        }
        Some(Self(fit(kept, MAX_FILENAME_BYTES)))
    }

    /// A name read back from the catalog, trusted as stored.
    pub fn from_trusted(s: String) -> Self {
        Self(s)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Cuts `name` to `max` bytes on a character boundary, from the end of the stem, so that the
/// extension (up to 16 bytes with its dot) survives. NFC can lengthen a name (composition
/// exclusions), so a name accepted at 255 bytes may need this.
fn fit(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let ext = match name.rfind('.') {
        Some(i) if i > 0 && name.len() - i <= 16 => &name[i..],
        _ => "",
    };
    let stem = &name[..name.len() - ext.len()];
    let mut cut = max - ext.len();
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{ext}", &stem[..cut])
}

/// RFC 5987 `attr-char`: everything else in `filename*` is percent-encoded.
const ATTR_CHAR: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'!')
    .remove(b'#')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b'-')
    .remove(b'.')
    .remove(b'^')
    .remove(b'_')
    .remove(b'`')
    .remove(b'|')
    .remove(b'~');

/// `attachment; filename="<ascii>"; filename*=UTF-8''<original, percent-encoded>`.
/// `ascii` is a [`super::keys::SafeName`] (no quote, backslash or non-ASCII), so it needs no
/// escaping; without an original name only the ASCII form is sent.
pub fn content_disposition(ascii: &str, original: Option<&OriginalName>) -> String {
    let mut out = format!("attachment; filename=\"{ascii}\"");
    if let Some(name) = original {
        out.push_str("; filename*=UTF-8''");
        out.extend(utf8_percent_encode(name.as_str(), ATTR_CHAR));
    }
    out
}

#[cfg(test)]
mod tests {
    use percent_encoding::percent_decode_str;

    use super::*;

    fn decode_ext(header: &str) -> String {
        let enc = header
            .split("filename*=UTF-8''")
            .nth(1)
            .expect("extended filename");
        percent_decode_str(enc)
            .decode_utf8()
            .expect("UTF-8")
            .into_owned()
    }

    #[test]
    fn names_in_every_script_are_kept_as_written() {
        for raw in [
            "写真.jpg",
            "फोटो.jpg",
            "صورة العائلة.png",
            "תמונה.png",
            "😀 party 🎉.gif",
            "Ünïcödé café.png",
            "ümlauts & spaces.png",
        ] {
            let name = OriginalName::clean(raw).expect("kept");
            assert_eq!(name.as_str(), raw.nfc().collect::<String>(), "{raw:?}");
        }
    }

    #[test]
    fn format_separator_and_filler_characters_are_removed_too() {
        // Found by the outside review: these survived and read as nothing.
        for c in [
            '\u{2028}',
            '\u{2029}',
            '\u{180E}',
            '\u{FFF9}',
            '\u{FFFB}',
            '\u{E0041}',
            '\u{3164}',
            '\u{034F}',
            '\u{115F}',
            '\u{FFA0}',
            '\u{206A}',
        ] {
            let name = OriginalName::clean(&format!("a{c}b.png")).expect("kept");
            assert_eq!(name.as_str(), "ab.png", "U+{:04X} kept", c as u32);
        }
        // Emoji variation selectors are part of how an emoji looks: kept.
        let heart = OriginalName::clean("\u{2764}\u{FE0F}.png").expect("kept");
        assert_eq!(heart.as_str(), "\u{2764}\u{FE0F}.png");
    }

    #[test]
    fn names_are_stored_in_nfc_without_controls_or_bidi_characters() {
        let decomposed = "cafe\u{301}.png";
        assert_eq!(
            OriginalName::clean(decomposed).map(|n| n.0),
            Some("caf\u{e9}.png".into())
        );
        // The right-to-left override that makes `gnp.exe` read as `exe.png`.
        assert_eq!(
            OriginalName::clean("photo\u{202E}gnp.exe").map(|n| n.0),
            Some("photognp.exe".into())
        );
        for invisible in [
            "\u{200E}", "\u{200F}", "\u{2066}", "\u{2069}", "\u{061C}", "\u{FEFF}",
        ] {
            let raw = format!("a{invisible}b.png");
            assert_eq!(
                OriginalName::clean(&raw).map(|n| n.0),
                Some("ab.png".into()),
                "{raw:?}"
            );
        }
        assert_eq!(
            OriginalName::clean("a\r\nb\0.png").map(|n| n.0),
            Some("ab.png".into())
        );
        assert_eq!(
            OriginalName::clean("C:\\Users\\me\\写真.jpg").map(|n| n.0),
            Some("写真.jpg".into())
        );
        for nothing in ["", " ", ".", "..", "a/", "\u{200B}"] {
            assert_eq!(OriginalName::clean(nothing), None, "{nothing:?}");
        }
    }

    #[test]
    fn a_name_that_nfc_lengthens_is_cut_to_255_bytes_keeping_its_extension() {
        // U+0958 is a composition exclusion: NFC writes it as two characters, 3 bytes to 6.
        let raw = format!("{}.jpg", "\u{0958}".repeat(83));
        assert!(raw.len() <= MAX_FILENAME_BYTES);
        let name = OriginalName::clean(&raw).expect("kept");
        assert!(
            name.as_str().len() <= MAX_FILENAME_BYTES,
            "{}",
            name.as_str().len()
        );
        assert!(name.as_str().ends_with(".jpg"));
        assert_eq!(fit("ab.png", 5), "a.png");
        assert_eq!(fit("写真.png", 8), "写.png");
    }

    #[test]
    fn the_disposition_carries_both_forms_and_decodes_to_the_original() {
        for raw in [
            "写真.jpg",
            "फोटो.jpg",
            "صورة.png",
            "😀.gif",
            "a \"quoted\"; name=x.png",
            "100%.txt",
        ] {
            let name = OriginalName::clean(raw).expect("kept");
            let header = content_disposition("file.jpg", Some(&name));
            assert!(header.starts_with("attachment; filename=\"file.jpg\"; filename*=UTF-8''"));
            assert!(header.is_ascii(), "{header}");
            let enc = header
                .split("filename*=UTF-8''")
                .nth(1)
                .expect("extended form");
            assert!(
                enc.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"%!#$&+-.^_`|~".contains(&b)),
                "{enc}"
            );
            assert_eq!(decode_ext(&header), raw, "{header}");
        }
        assert_eq!(
            content_disposition("clip.bin", None),
            "attachment; filename=\"clip.bin\""
        );
    }
}
