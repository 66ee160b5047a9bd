//! Magic bytes: does the start of an object look like the type it was declared as? A declared
//! Content-Type is only a claim; an HTML page labelled `image/png` must never be promoted.

/// How many leading bytes the check reads (one ranged GET).
pub const SNIFF_BYTES: u64 = 64;

/// How many leading bytes a commit reads of an object of `content_type`: an image's header
/// too, where a normal one fits (issue 37: a JPEG's frame header behind EXIF and an ICC
/// profile; more is read only when it goes on), otherwise the magic bytes.
pub const IMAGE_HEAD_BYTES: u64 = 64 * 1024;

pub fn read_len(content_type: &str) -> u64 {
    if crate::domain::image::Format::of_content_type(content_type).is_some() {
        IMAGE_HEAD_BYTES
    } else {
        SNIFF_BYTES
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniff {
    /// The bytes carry the declared type's signature.
    Matches,
    /// The bytes do not, or they look like markup or an executable.
    Mismatch,
    /// No signature is known for this (configured) type; only the active-content check ran.
    NoSignatureKnown,
}

const HEIF_BRANDS: [&[u8; 4]; 8] = [
    b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1",
];

fn ftyp_brand(b: &[u8]) -> Option<&[u8]> {
    (b.len() >= 12 && &b[4..8] == b"ftyp").then(|| &b[8..12])
}

fn riff(b: &[u8], form: &[u8; 4]) -> bool {
    b.len() >= 12 && &b[0..4] == b"RIFF" && &b[8..12] == form
}

/// Markup, scripts and executables: refused whatever type was declared.
fn is_active_content(b: &[u8]) -> bool {
    let b = b.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(b);
    let first = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .map(|i| &b[i..])
        .unwrap_or(&[]);
    first.starts_with(b"<")
        || b.starts_with(b"MZ")
        || b.starts_with(b"\x7FELF")
        || b.starts_with(b"#!")
}

fn mpeg_frame(b: &[u8]) -> bool {
    b.len() >= 2 && b[0] == 0xFF && b[1] & 0xE0 == 0xE0 && b[1] & 0x06 != 0
}

fn adts_frame(b: &[u8]) -> bool {
    b.len() >= 2 && b[0] == 0xFF && b[1] & 0xF6 == 0xF0
}

/// Checks `head`, the first bytes of an object, against the declared canonical content type.
pub fn sniff(content_type: &str, head: &[u8]) -> Sniff {
    if is_active_content(head) {
        return Sniff::Mismatch;
    }
    let ok = match content_type {
        "image/jpeg" => head.starts_with(&[0xFF, 0xD8, 0xFF]),
        "image/png" => head.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/webp" => riff(head, b"WEBP"),
        "image/heic" => {
            ftyp_brand(head).is_some_and(|b| HEIF_BRANDS.iter().any(|h| h.as_slice() == b))
        }
        "audio/mpeg" => head.starts_with(b"ID3") || mpeg_frame(head),
        "audio/mp4" => {
            ftyp_brand(head).is_some_and(|b| !HEIF_BRANDS.iter().any(|h| h.as_slice() == b))
        }
        "audio/aac" => head.starts_with(b"ADIF") || head.starts_with(b"ID3") || adts_frame(head),
        "audio/ogg" => head.starts_with(b"OggS"),
        "audio/webm" => head.starts_with(&[0x1A, 0x45, 0xDF, 0xA3]),
        "audio/wav" => riff(head, b"WAVE"),
        _ => return Sniff::NoSignatureKnown,
    };
    if ok {
        Sniff::Matches
    } else {
        Sniff::Mismatch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn each_builtin_type_recognizes_its_signature() {
        let cases: [(&str, &[u8]); 12] = [
            ("image/jpeg", b"\xFF\xD8\xFF\xE0\0\x10JFIF"),
            ("image/png", PNG),
            ("image/webp", b"RIFF\x24\0\0\0WEBPVP8 "),
            ("image/heic", b"\0\0\0\x18ftypheic\0\0\0\0"),
            ("audio/mpeg", b"ID3\x04\0\0\0\0\0\0"),
            ("audio/mpeg", b"\xFF\xFB\x90\x64\0\0"),
            ("audio/mp4", b"\0\0\0\x20ftypM4A \0\0\0\0"),
            ("audio/aac", b"\xFF\xF1\x50\x80\0\0"),
            ("audio/ogg", b"OggS\0\x02\0\0"),
            ("audio/webm", b"\x1A\x45\xDF\xA3\x9f\x42\x86"),
            ("audio/wav", b"RIFF\x24\0\0\0WAVEfmt "),
            ("audio/aac", b"ADIF\0\0"),
        ];
        for (ct, head) in cases {
            assert_eq!(sniff(ct, head), Sniff::Matches, "{ct}");
        }
    }

    #[test]
    fn documents_and_executables_are_refused_whatever_the_label() {
        for head in [
            b"<!DOCTYPE html><html>".as_slice(),
            b"  \n<svg xmlns=".as_slice(),
            b"\xEF\xBB\xBF<html>".as_slice(),
            b"MZ\x90\0".as_slice(),
            b"\x7FELF\x02\x01".as_slice(),
            b"#!/bin/sh\n".as_slice(),
        ] {
            for ct in ["image/png", "audio/mpeg", "application/x-custom"] {
                assert_eq!(sniff(ct, head), Sniff::Mismatch, "{ct} {head:?}");
            }
        }
    }

    #[test]
    fn one_type_labelled_as_another_is_a_mismatch() {
        assert_eq!(sniff("image/jpeg", PNG), Sniff::Mismatch);
        assert_eq!(
            sniff("image/webp", b"RIFF\x24\0\0\0WAVEfmt "),
            Sniff::Mismatch
        );
        assert_eq!(
            sniff("audio/mp4", b"\0\0\0\x18ftypheic\0\0\0\0"),
            Sniff::Mismatch
        );
        assert_eq!(sniff("image/png", b""), Sniff::Mismatch);
        assert_eq!(sniff("image/png", b"hello world"), Sniff::Mismatch);
    }

    #[test]
    fn configured_types_without_a_signature_are_reported_as_such() {
        assert_eq!(
            sniff("application/x-custom", b"anything"),
            Sniff::NoSignatureKnown
        );
    }
}
