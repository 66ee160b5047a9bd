//! An image's header, read from its first bytes without decoding it: the format, the stored
//! width and height, and the orientation it is displayed in (EXIF's for JPEG, PNG and WebP;
//! HEIF's `irot` and `imir` for AVIF and HEIC). Pure: the caller reads the bytes (ranged GETs
//! of the object's start) and asks again with more when the answer is [`Parsed::NeedMore`].
//! Issue 37, item 1: dimensions at commit.

mod bits;
mod bounds;
mod coded;
mod exif;
mod gif;
#[cfg(test)]
mod heif_duplicates_tests;
mod heif_items;
mod heif_meta;
#[cfg(test)]
mod heif_readings_tests;
#[cfg(test)]
mod heif_tests;
#[cfg(test)]
mod heif_work_tests;
mod isobmff;
mod jpeg;
pub use jpeg::{
    colour as jpeg_colour, frame as jpeg_frame, image_scans as jpeg_image_scans,
    scan_count as jpeg_scan_count, Colour as JpegColour, Frame as JpegFrame,
};
mod png;
pub use png::compressed_chunk_bytes as png_compressed_chunk_bytes;
mod transform;
mod webp;

pub use bounds::{ImageBounds, OutOfBounds, DEFAULT_MAX_PIXELS};
pub use heif_items::Work as HeifWork;
pub use transform::Transform;
pub use webp::icc as webp_icc;

/// The furthest into an object a header is looked for: a JPEG's frame header can sit behind
/// 64 KiB of EXIF and more of ICC profile; an AVIF's or HEIC's `meta` box is near the start.
/// A header not found within it is refused ([`Parsed::Invalid`]).
pub const MAX_HEADER_BYTES: usize = 1024 * 1024;

/// The image formats whose header is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jpeg,
    Png,
    Gif,
    Webp,
    Avif,
    Heic,
}

impl Format {
    /// The format of a canonical content type, if it is an image whose header is read.
    pub fn of_content_type(content_type: &str) -> Option<Format> {
        Some(match content_type {
            "image/jpeg" => Format::Jpeg,
            "image/png" => Format::Png,
            "image/gif" => Format::Gif,
            "image/webp" => Format::Webp,
            "image/avif" => Format::Avif,
            "image/heic" | "image/heif" => Format::Heic,
            _ => return None,
        })
    }
}

/// Width and height in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Dimensions {
    pub width: u32,
    pub height: u32,
}

impl Dimensions {
    pub fn pixels(self) -> u64 {
        u64::from(self.width) * u64::from(self.height)
    }
}

/// What the header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub format: Format,
    /// As the pixels are stored.
    pub stored: Dimensions,
    /// What turns the stored pixels upright.
    pub orientation: Transform,
}

impl Header {
    /// As the image is shown: width and height swapped when the orientation turns it a quarter.
    pub fn displayed(&self) -> Dimensions {
        if self.orientation.transposes() {
            Dimensions {
                width: self.stored.height,
                height: self.stored.width,
            }
        } else {
            self.stored
        }
    }
}

/// The answer for the bytes given so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    Found(Header),
    /// The header goes on past the bytes given: ask again with at least this many (never more
    /// than [`MAX_HEADER_BYTES`]; past it the answer is `Invalid`).
    NeedMore(usize),
    /// Not a readable header of the format (what is wrong).
    Invalid(&'static str),
}

/// Reads the header of an image of `format` from `bytes`, the object's first bytes (all of them
/// when `complete`: the object is no longer than that).
pub fn read_header(format: Format, bytes: &[u8], complete: bool) -> Parsed {
    let bytes = &bytes[..bytes.len().min(MAX_HEADER_BYTES)];
    let parsed = match format {
        Format::Jpeg => jpeg::read(bytes, complete),
        Format::Png => png::read(bytes, complete),
        Format::Gif => gif::read(bytes),
        Format::Webp => webp::read(bytes, complete),
        Format::Avif | Format::Heic => isobmff::read(format, bytes, complete),
    };
    match parsed {
        Parsed::Found(h) if h.stored.width == 0 || h.stored.height == 0 => {
            Parsed::Invalid("the header gives a width or height of zero")
        }
        Parsed::NeedMore(_) if complete => Parsed::Invalid("the file ends inside its header"),
        // Past the limit: the bytes up to it first (the file may end before), then a refusal.
        Parsed::NeedMore(n) if n > MAX_HEADER_BYTES && bytes.len() < MAX_HEADER_BYTES => {
            Parsed::NeedMore(MAX_HEADER_BYTES)
        }
        Parsed::NeedMore(n) if n > MAX_HEADER_BYTES => {
            Parsed::Invalid("no image header within the first MiB")
        }
        other => other,
    }
}

/// What decoding the primary image of a whole HEIC or AVIF file (`bytes`) takes, once every coded
/// image and grid in it is found no larger than its `ispe` says; the reason when one is, or
/// when the file cannot be read.
pub fn heif_work(bytes: &[u8]) -> Result<HeifWork, &'static str> {
    // Whichever of the two its brands name.
    let read = |format| isobmff::read_work(format, bytes, true);
    let read = match read(Format::Heic) {
        Err(Parsed::Invalid(isobmff::OTHER_FORMAT)) => read(Format::Avif),
        other => other,
    };
    match read {
        Ok((_, work)) => Ok(work),
        Err(Parsed::Invalid(why)) => Err(why),
        Err(_) => Err("the file ends inside its header"),
    }
}

/// Bounds-checked big- and little-endian reads: `None` past the end.
pub(crate) mod bytes {
    pub fn be16(b: &[u8], at: usize) -> Option<u16> {
        Some(u16::from_be_bytes(
            b.get(at..at.checked_add(2)?)?.try_into().ok()?,
        ))
    }
    pub fn be32(b: &[u8], at: usize) -> Option<u32> {
        Some(u32::from_be_bytes(
            b.get(at..at.checked_add(4)?)?.try_into().ok()?,
        ))
    }
    pub fn be64(b: &[u8], at: usize) -> Option<u64> {
        Some(u64::from_be_bytes(
            b.get(at..at.checked_add(8)?)?.try_into().ok()?,
        ))
    }
    pub fn le16(b: &[u8], at: usize) -> Option<u16> {
        Some(u16::from_le_bytes(
            b.get(at..at.checked_add(2)?)?.try_into().ok()?,
        ))
    }
    pub fn le24(b: &[u8], at: usize) -> Option<u32> {
        let s = b.get(at..at.checked_add(3)?)?;
        Some(u32::from(s[0]) | u32::from(s[1]) << 8 | u32::from(s[2]) << 16)
    }
    pub fn le32(b: &[u8], at: usize) -> Option<u32> {
        Some(u32::from_le_bytes(
            b.get(at..at.checked_add(4)?)?.try_into().ok()?,
        ))
    }
}

#[cfg(test)]
mod tests;
