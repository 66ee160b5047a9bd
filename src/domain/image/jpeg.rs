//! JPEG: the markers from SOI to the start of scan (SOS), each segment skipped by its length
//! except the first frame header (SOFn: the size) and the first APP1 EXIF block (the
//! orientation), wherever it stands before the scan: before the frame header as cameras write
//! it, or after it, which decoders honour too (review of issue 37: an EXIF block after SOF was
//! ignored, so the size and the rendition were sideways). The frame header may sit behind
//! 64 KiB of EXIF and more of ICC profile and Adobe segments.

use super::bytes::be16;
use super::{exif, Dimensions, Format, Header, Parsed, Transform, MAX_HEADER_BYTES};

const APP1: u8 = 0xE1;
const SOS: u8 = 0xDA;
const EOI: u8 = 0xD9;

/// Start-of-frame markers: C0–CF but DHT (C4), JPG (C8) and DAC (CC).
fn is_frame(marker: u8) -> bool {
    (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC)
}

/// Markers without a length: TEM, RST0–7 (and SOI, which only starts the file).
fn stands_alone(marker: u8) -> bool {
    marker == 0x01 || (0xD0..=0xD8).contains(&marker)
}

/// How many scans (SOS markers) the JPEG `b` holds. Inside entropy-coded data a 0xFF byte is
/// always followed by a stuffed 0x00 or a restart marker, so every `FF DA` in the file is a
/// real start of scan. A progressive JPEG has about ten; thousands make a decoder redo its
/// work thousands of times over the same coefficients.
pub fn scan_count(b: &[u8]) -> usize {
    b.windows(2).filter(|w| *w == [0xFF, SOS]).count()
}

/// The scans of the image itself: its segments walked from SOI by their lengths, each scan's
/// entropy-coded data skipped to the next marker, up to EOI (an EXIF thumbnail's scans, inside
/// APP1, are not counted, as [`scan_count`] would count them). A sequential JPEG of more than
/// one scan (one per component, say) is decoded like a progressive one: libjpeg holds every
/// DCT coefficient until the last scan. Where the walk fails, the scans found so far.
pub fn image_scans(b: &[u8]) -> usize {
    let mut scans = 0;
    if b.get(..2) != Some(&[0xFF, 0xD8][..]) {
        return 0;
    }
    let mut at = 2;
    loop {
        if b.get(at) != Some(&0xFF) {
            return scans;
        }
        let mut code_at = at + 1;
        while b.get(code_at) == Some(&0xFF) {
            code_at += 1;
        }
        let Some(&marker) = b.get(code_at) else {
            return scans;
        };
        if stands_alone(marker) {
            at = code_at + 1;
            continue;
        }
        if matches!(marker, 0x00 | EOI) {
            return scans;
        }
        let Some(len) = be16(b, code_at + 1).map(usize::from).filter(|&l| l >= 2) else {
            return scans;
        };
        at = code_at + 1 + len;
        if marker == SOS {
            scans += 1;
            // Entropy-coded data: to the next marker that is not a stuffed byte or a restart.
            loop {
                let Some(i) = b.get(at..).and_then(|r| r.iter().position(|&x| x == 0xFF)) else {
                    return scans;
                };
                at += i;
                match b.get(at + 1) {
                    Some(0x00 | 0xD0..=0xD7 | 0xFF) => at += 1,
                    Some(_) => break,
                    None => return scans,
                }
            }
        }
    }
}

/// A JPEG's first frame header (SOFn), as a render's memory estimate needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The SOF marker's code: C0 baseline, C1 extended, C2 progressive, …
    pub marker: u8,
    pub width: u32,
    pub height: u32,
    /// Each component's horizontal and vertical sampling factors (1–4).
    pub sampling: Vec<(u8, u8)>,
}

impl Frame {
    /// Progressive (SOF2, SOF6, SOF10, SOF14): a decoder holds every DCT coefficient of the
    /// image at once, whatever size it decodes to.
    pub fn progressive(&self) -> bool {
        matches!(self.marker, 0xC2 | 0xC6 | 0xCA | 0xCE)
    }
}

/// The first frame header of `b`, walking the segments from SOI; `None` when there is none
/// before the scan, or the segments cannot be walked to it.
pub fn frame(b: &[u8]) -> Option<Frame> {
    if b.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    let mut at = 2;
    loop {
        if *b.get(at)? != 0xFF {
            return None;
        }
        let mut code_at = at + 1;
        while *b.get(code_at)? == 0xFF {
            code_at += 1;
        }
        let marker = b[code_at];
        if stands_alone(marker) {
            at = code_at + 1;
            continue;
        }
        if matches!(marker, 0x00 | SOS | EOI) {
            return None;
        }
        let len = usize::from(be16(b, code_at + 1)?);
        if len < 2 {
            return None;
        }
        if is_frame(marker) {
            let seg = b.get(code_at + 3..code_at + 1 + len)?;
            let height = u32::from(be16(seg, 1)?);
            let width = u32::from(be16(seg, 3)?);
            let n = usize::from(*seg.get(5)?);
            let sampling = (0..n)
                .map(|i| seg.get(7 + 3 * i).map(|hv| (hv >> 4, hv & 0x0F)))
                .collect::<Option<Vec<_>>>()?;
            let valid = |f: u8| (1..=4).contains(&f);
            if n == 0 || sampling.iter().any(|&(h, v)| !valid(h) || !valid(v)) {
                return None;
            }
            return Some(Frame {
                marker,
                width,
                height,
                sampling,
            });
        }
        at = code_at + 1 + len;
    }
}

/// `complete`: `b` is the whole file.
pub fn read(b: &[u8], complete: bool) -> Parsed {
    if b.len() < 4 {
        return Parsed::NeedMore(4);
    }
    if b[0] != 0xFF || b[1] != 0xD8 {
        return Parsed::Invalid("not a JPEG start of image");
    }
    let mut orientation = Transform::UPRIGHT;
    // The first EXIF block decides (a later APP1 is XMP or a copy).
    let mut exif_seen = false;
    let mut frame: Option<Dimensions> = None;
    let found = |frame: Dimensions, orientation| {
        Parsed::Found(Header {
            format: Format::Jpeg,
            stored: frame,
            orientation,
        })
    };
    // Out of bytes at `n`: ask for more, unless the frame header is known and no more will
    // come (the whole file was given, or more would pass the header limit).
    let need = |n: usize, frame: Option<Dimensions>, orientation| match frame {
        Some(f) if complete || n > MAX_HEADER_BYTES => found(f, orientation),
        _ => Parsed::NeedMore(n),
    };
    // Past the frame header, what cannot be walked ends the walk with the size it gave (the
    // scan's data, or bytes a writer left there): the frame decides, as it did before the walk
    // went on to the scan.
    let bad = |why: &'static str, frame: Option<Dimensions>, orientation| match frame {
        Some(f) => found(f, orientation),
        None => Parsed::Invalid(why),
    };
    let mut at = 2;
    loop {
        // A marker: 0xFF, any number of fill bytes 0xFF, then the code.
        let Some(&first) = b.get(at) else {
            return need(at + 4, frame, orientation);
        };
        if first != 0xFF {
            return bad("bytes between JPEG segments", frame, orientation);
        }
        let mut code_at = at + 1;
        while b.get(code_at) == Some(&0xFF) {
            code_at += 1;
        }
        let Some(&marker) = b.get(code_at) else {
            return need(code_at + 3, frame, orientation);
        };
        if marker == 0x00 {
            return bad(
                "a stuffed byte where a JPEG marker belongs",
                frame,
                orientation,
            );
        }
        if stands_alone(marker) {
            at = code_at + 1;
            continue;
        }
        if marker == SOS || marker == EOI {
            return match frame {
                Some(f) => found(f, orientation),
                None => Parsed::Invalid("no JPEG frame header before the image data"),
            };
        }
        let Some(len) = be16(b, code_at + 1) else {
            return need(code_at + 3, frame, orientation);
        };
        let len = usize::from(len);
        if len < 2 {
            return bad(
                "a JPEG segment shorter than its length field",
                frame,
                orientation,
            );
        }
        let body = code_at + 3;
        let end = code_at + 1 + len;
        if is_frame(marker) && frame.is_none() {
            // precision (1), height (2), width (2)
            if len < 7 {
                return Parsed::Invalid("a JPEG frame header too short");
            }
            let (Some(height), Some(width)) = (be16(b, body + 1), be16(b, body + 3)) else {
                return Parsed::NeedMore(body + 5);
            };
            let size = Dimensions {
                width: width.into(),
                height: height.into(),
            };
            if exif_seen {
                return found(size, orientation);
            }
            frame = Some(size);
        }
        if marker == APP1 && !exif_seen {
            let Some(segment) = b.get(body..end) else {
                return need(end, frame, orientation);
            };
            if let Some(tiff) = segment.strip_prefix(b"Exif\0\0") {
                exif_seen = true;
                if let Some(o) = exif::orientation(tiff) {
                    orientation = Transform::from_exif(o);
                }
                if let Some(f) = frame {
                    return found(f, orientation);
                }
            }
        }
        at = end;
    }
}

/// What a JPEG's segments before its first scan say of its colours: the ICC profile (APP2
/// `ICC_PROFILE` chunks, joined in their sequence order) and whether an Adobe (APP14) segment
/// is there — an Adobe CMYK or YCCK JPEG stores its inks inverted, as Photoshop writes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Colour {
    pub icc: Option<Vec<u8>>,
    pub adobe: bool,
}

/// The [`Colour`] of the JPEG `b` (the segments up to the first scan; a profile whose chunks
/// are missing, repeated or out of range is dropped, never half used).
pub fn colour(b: &[u8]) -> Colour {
    let mut chunks: Vec<(u8, u8, &[u8])> = Vec::new();
    let mut adobe = false;
    let mut at = 2;
    if b.get(..2) == Some(&[0xFF, 0xD8]) {
        while let Some(&0xFF) = b.get(at) {
            let mut code_at = at + 1;
            while b.get(code_at) == Some(&0xFF) {
                code_at += 1;
            }
            let Some(&marker) = b.get(code_at) else { break };
            if stands_alone(marker) {
                at = code_at + 1;
                continue;
            }
            if matches!(marker, 0x00 | SOS | EOI) {
                break;
            }
            let Some(len) = be16(b, code_at + 1).map(usize::from) else {
                break;
            };
            let Some(seg) = (len >= 2)
                .then(|| b.get(code_at + 3..code_at + 1 + len))
                .flatten()
            else {
                break;
            };
            if marker == 0xE2 {
                if let Some([seq, count, data @ ..]) = seg.strip_prefix(b"ICC_PROFILE\0") {
                    chunks.push((*seq, *count, data));
                }
            }
            if marker == 0xEE && seg.starts_with(b"Adobe") {
                adobe = true;
            }
            at = code_at + 1 + len;
        }
    }
    chunks.sort_by_key(|c| c.0);
    let count = chunks.first().map_or(0, |c| c.1);
    let whole = !chunks.is_empty()
        && chunks.len() == usize::from(count)
        && chunks
            .iter()
            .enumerate()
            .all(|(i, c)| usize::from(c.0) == i + 1 && c.1 == count);
    Colour {
        icc: whole.then(|| chunks.iter().flat_map(|c| c.2.iter().copied()).collect()),
        adobe,
    }
}

#[cfg(test)]
mod colour_tests {
    use super::*;

    fn segment(marker: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![0xFF, marker];
        v.extend(((body.len() + 2) as u16).to_be_bytes());
        v.extend(body);
        v
    }

    fn icc_chunk(seq: u8, count: u8, data: &[u8]) -> Vec<u8> {
        let mut body = b"ICC_PROFILE\0".to_vec();
        body.extend([seq, count]);
        body.extend(data);
        segment(0xE2, &body)
    }

    #[test]
    fn an_icc_profile_is_joined_in_sequence_order_and_a_broken_one_dropped() {
        let mut b = vec![0xFF, 0xD8];
        b.extend(segment(0xE1, b"Exif\0\0whatever"));
        b.extend(icc_chunk(2, 2, b"world"));
        b.extend(icc_chunk(1, 2, b"hello "));
        b.extend(segment(0xEE, b"Adobe\0\x64\0\0\0\0\x02"));
        b.extend([0xFF, 0xDA, 0, 2]);
        b.extend(icc_chunk(3, 3, b"after the scan: not read"));
        let c = colour(&b);
        assert_eq!(c.icc.as_deref(), Some(&b"hello world"[..]));
        assert!(c.adobe);

        for broken in [
            vec![icc_chunk(1, 2, b"only one of two")],
            vec![icc_chunk(1, 1, b"a"), icc_chunk(1, 1, b"b")],
            vec![icc_chunk(0, 1, b"sequence zero")],
            vec![icc_chunk(1, 2, b"a"), icc_chunk(2, 3, b"b")],
        ] {
            let mut b = vec![0xFF, 0xD8];
            for s in broken {
                b.extend(s);
            }
            assert_eq!(colour(&b), Colour::default());
        }
        assert_eq!(colour(b"not a jpeg"), Colour::default());
        let mut cut = vec![0xFF, 0xD8];
        cut.extend(&icc_chunk(1, 1, b"cut short")[..10]);
        assert_eq!(colour(&cut), Colour::default());
    }
}
