//! PNG: IHDR, the first chunk, gives width and height; an `eXIf` chunk before the image data
//! (IDAT) gives the orientation. Chunks after IHDR that cannot be walked (cut short, or longer
//! than a header may be) leave the image as stored: its size is IHDR's whatever follows.

use super::bytes::be32;
use super::{exif, Dimensions, Format, Header, Parsed, Transform, MAX_HEADER_BYTES};

const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// `complete`: `b` is the whole file.
pub fn read(b: &[u8], complete: bool) -> Parsed {
    if b.len() < 24 {
        return Parsed::NeedMore(24);
    }
    if !b.starts_with(SIGNATURE) || &b[12..16] != b"IHDR" {
        return Parsed::Invalid("not a PNG signature and header chunk");
    }
    let (Some(width), Some(height)) = (be32(b, 16), be32(b, 20)) else {
        return Parsed::NeedMore(24);
    };
    if width > i32::MAX as u32 || height > i32::MAX as u32 {
        return Parsed::Invalid("a PNG width or height past 2^31 - 1");
    }
    let header = |orientation| {
        Parsed::Found(Header {
            format: Format::Png,
            stored: Dimensions { width, height },
            orientation,
        })
    };
    // The chunks after IHDR, up to the image data: length (4), type (4), data, CRC (4).
    // Where the walk needs bytes the file does not have, or more than a header may take.
    let need = |n: usize| {
        if complete || n > MAX_HEADER_BYTES {
            header(Transform::UPRIGHT)
        } else {
            Parsed::NeedMore(n)
        }
    };
    let mut at = 8;
    loop {
        let (Some(len), Some(kind)) = (be32(b, at), b.get(at + 4..at + 8)) else {
            return need(at + 8);
        };
        if matches!(kind, b"IDAT" | b"IEND") {
            return header(Transform::UPRIGHT);
        }
        let Some(end) = usize::try_from(len)
            .ok()
            .and_then(|len| (at + 12).checked_add(len))
        else {
            return header(Transform::UPRIGHT);
        };
        if kind == b"eXIf" {
            let Some(data) = b.get(at + 8..end - 4) else {
                return need(end);
            };
            let o = exif::orientation(exif::tiff(data)).unwrap_or(1);
            return header(Transform::from_exif(o));
        }
        at = end;
    }
}

/// The bytes of a PNG's compressed chunks besides its image data (`iCCP`, `zTXt`, `iTXt`),
/// walked over the whole file: a decoder inflates them (a PNG decoder reads the colour profile
/// before any pixel), up to about 1,032 times their length (deflate's limit), whatever the
/// image's pixels. A walk that fails ends the count there.
pub fn compressed_chunk_bytes(b: &[u8]) -> u64 {
    if !b.starts_with(SIGNATURE) {
        return 0;
    }
    let (mut at, mut total) = (8usize, 0u64);
    while let (Some(len), Some(kind)) = (be32(b, at), b.get(at + 4..at + 8)) {
        if kind == b"IEND" {
            break;
        }
        if matches!(kind, b"iCCP" | b"zTXt" | b"iTXt") {
            total = total.saturating_add(u64::from(len));
        }
        match usize::try_from(len)
            .ok()
            .and_then(|l| (at + 12).checked_add(l))
        {
            Some(next) => at = next,
            None => break,
        }
    }
    total
}
