//! WebP: a RIFF container whose first chunk is the bitstream (`VP8 `, lossy; `VP8L`, lossless)
//! or the extended header (`VP8X`: canvas size, and a flag saying an `EXIF` chunk follows).
//! The container puts that EXIF chunk after the image data: it is read when it lies within the
//! bytes a header may take ([`super::MAX_HEADER_BYTES`]), otherwise the image is taken as stored.

use super::bytes::{le16, le24, le32};
use super::{exif, Dimensions, Format, Header, Parsed, Transform, MAX_HEADER_BYTES};

const EXIF_FLAG: u8 = 0x08;

/// `complete`: `b` is the whole file (an EXIF chunk not in it is not there).
pub fn read(b: &[u8], complete: bool) -> Parsed {
    if b.len() < 30 {
        return Parsed::NeedMore(30);
    }
    if &b[0..4] != b"RIFF" || &b[8..12] != b"WEBP" {
        return Parsed::Invalid("not a RIFF WEBP container");
    }
    let found = |width: u32, height: u32, orientation| {
        Parsed::Found(Header {
            format: Format::Webp,
            stored: Dimensions { width, height },
            orientation,
        })
    };
    let data = 20;
    match &b[12..16] {
        b"VP8 " => {
            // frame tag (3), start code 9d 01 2a, then 14-bit width and height
            if b[data + 3..data + 6] != [0x9D, 0x01, 0x2A] {
                return Parsed::Invalid("a lossy WebP without its start code");
            }
            let (Some(w), Some(h)) = (le16(b, data + 6), le16(b, data + 8)) else {
                return Parsed::NeedMore(data + 10);
            };
            found(
                u32::from(w & 0x3FFF),
                u32::from(h & 0x3FFF),
                Transform::UPRIGHT,
            )
        }
        b"VP8L" => {
            if b[data] != 0x2F {
                return Parsed::Invalid("a lossless WebP without its signature");
            }
            let Some(bits) = le32(b, data + 1) else {
                return Parsed::NeedMore(data + 5);
            };
            found(
                (bits & 0x3FFF) + 1,
                ((bits >> 14) & 0x3FFF) + 1,
                Transform::UPRIGHT,
            )
        }
        b"VP8X" => {
            let (Some(w), Some(h)) = (le24(b, data + 4), le24(b, data + 7)) else {
                return Parsed::NeedMore(data + 10);
            };
            let (width, height) = (w + 1, h + 1);
            if b[data] & EXIF_FLAG == 0 {
                return found(width, height, Transform::UPRIGHT);
            }
            match exif_orientation(b) {
                Ok(o) => found(width, height, Transform::from_exif(o)),
                Err(need) if complete || need > MAX_HEADER_BYTES => {
                    found(width, height, Transform::UPRIGHT)
                }
                Err(need) => Parsed::NeedMore(need),
            }
        }
        _ => Parsed::Invalid("an unknown first WebP chunk"),
    }
}

/// The orientation in the `EXIF` chunk (1 when it has none, or there is no such chunk), or
/// how many bytes are needed to reach it.
fn exif_orientation(b: &[u8]) -> Result<u16, usize> {
    let mut at = 12usize;
    loop {
        let (Some(kind), Some(len)) = (b.get(at..at + 4), le32(b, at + 4)) else {
            return Err(at + 8);
        };
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let end = (at + 8).saturating_add(len);
        if kind == b"EXIF" {
            let data = b.get(at + 8..end).ok_or(end)?;
            return Ok(exif::orientation(exif::tiff(data)).unwrap_or(1));
        }
        // Chunks are padded to an even length.
        at = end.saturating_add(len & 1);
        if at >= usize::MAX / 2 {
            return Err(usize::MAX);
        }
    }
}
