//! The Orientation tag (0x0112) of an EXIF block: a TIFF header and its first IFD, in either
//! byte order. Anything malformed reads as no orientation (upright), as viewers treat it.

use super::bytes::{be16, be32, le16, le32};

const ORIENTATION: u16 = 0x0112;
const SHORT: u16 = 3;

/// The orientation (1–8) in `tiff`, a TIFF structure (`II*\0` or `MM\0*` first), if any.
pub fn orientation(tiff: &[u8]) -> Option<u16> {
    let little = match tiff.get(0..4)? {
        b"II*\0" => true,
        b"MM\0*" => false,
        _ => return None,
    };
    let u16_at = |at: usize| {
        if little {
            le16(tiff, at)
        } else {
            be16(tiff, at)
        }
    };
    let u32_at = |at: usize| {
        if little {
            le32(tiff, at)
        } else {
            be32(tiff, at)
        }
    };
    let ifd = usize::try_from(u32_at(4)?).ok()?;
    let count = usize::from(u16_at(ifd)?);
    for i in 0..count {
        let entry = ifd.checked_add(2)?.checked_add(i.checked_mul(12)?)?;
        if u16_at(entry)? != ORIENTATION {
            continue;
        }
        if u16_at(entry + 2)? != SHORT || u32_at(entry + 4)? != 1 {
            return None;
        }
        let value = u16_at(entry + 8)?;
        return (1..=8).contains(&value).then_some(value);
    }
    None
}

/// The TIFF structure of an EXIF payload, with or without the `Exif\0\0` prefix JPEG's APP1
/// carries (WebP's and PNG's chunks are written both ways).
pub fn tiff(payload: &[u8]) -> &[u8] {
    payload.strip_prefix(b"Exif\0\0").unwrap_or(payload)
}
