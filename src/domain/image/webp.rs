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

/// The ICC profile of a WebP (its `ICCP` chunk, which the extended format puts right after
/// `VP8X`), or `None` when it has none or the chunks cannot be walked to it.
pub fn icc(b: &[u8]) -> Option<&[u8]> {
    if b.get(0..4)? != b"RIFF" || b.get(8..12)? != b"WEBP" {
        return None;
    }
    let mut at = 12usize;
    while let (Some(kind), Some(len)) = (b.get(at..at + 4), le32(b, at + 4)) {
        let len = usize::try_from(len).ok()?;
        let end = (at + 8).checked_add(len)?;
        if kind == b"ICCP" {
            return b.get(at + 8..end);
        }
        // The profile precedes the image data: past it, there is none.
        if matches!(kind, b"VP8 " | b"VP8L" | b"ANIM" | b"ALPH") {
            return None;
        }
        at = end.checked_add(len & 1)?;
    }
    None
}

#[cfg(test)]
mod icc_tests {
    use super::icc;

    fn chunk(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut v = kind.to_vec();
        v.extend((body.len() as u32).to_le_bytes());
        v.extend(body);
        if body.len() % 2 == 1 {
            v.push(0);
        }
        v
    }

    fn riff(chunks: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = chunks.concat();
        let mut v = b"RIFF".to_vec();
        v.extend(((body.len() + 4) as u32).to_le_bytes());
        v.extend(b"WEBP");
        v.extend(body);
        v
    }

    #[test]
    fn the_iccp_chunk_is_found_after_vp8x_and_nowhere_else() {
        let vp8x = chunk(b"VP8X", &[0x20, 0, 0, 0, 9, 0, 0, 9, 0, 0]);
        let with = riff(&[
            vp8x.clone(),
            chunk(b"ICCP", b"odd"),
            chunk(b"VP8 ", b"data"),
        ]);
        assert_eq!(icc(&with), Some(&b"odd"[..]));
        let after_image = riff(&[vp8x.clone(), chunk(b"VP8 ", b"data"), chunk(b"ICCP", b"x")]);
        assert_eq!(icc(&after_image), None);
        assert_eq!(icc(&riff(&[chunk(b"VP8 ", b"data")])), None);
        let mut cut = with.clone();
        cut.truncate(cut.len() - 12);
        assert_eq!(icc(&cut[..24]), None, "the ICCP chunk cut short");
        let mut lying = riff(&[vp8x, chunk(b"ICCP", b"abc")]);
        let at = lying.len() - 8;
        lying[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(icc(&lying), None, "a length past the file");
        assert_eq!(icc(b"not a webp"), None);
    }
}
