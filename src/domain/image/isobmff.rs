//! AVIF and HEIC (HEIF, an ISO base media file): `ftyp`'s brands say which, and the `meta` box
//! near the start describes the primary item (`pitm`): its size (`ispe`) and the rotation and
//! mirror (`irot`, `imir`) it is displayed with, in the order `ipma` associates them.

use super::bytes::be32;
use super::heif_meta::{box_at, meta_of, Meta, Property};
use super::{Dimensions, Format, Header, Parsed, Transform};

const AVIF_BRANDS: [&[u8]; 2] = [b"avif", b"avis"];
const HEIC_BRANDS: [&[u8]; 8] = [
    b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"heif", b"hevm",
];

/// The format `ftyp`'s brands name: AVIF if any AVIF brand is there, HEIC if any HEVC one is,
/// `declared` if only the general ones (`mif1`, `msf1`) are.
fn format_of(brands: &[u8], declared: Format) -> Option<Format> {
    let has = |set: &[&[u8]]| brands.chunks_exact(4).any(|b| set.contains(&b));
    if has(&AVIF_BRANDS) {
        Some(Format::Avif)
    } else if has(&HEIC_BRANDS) {
        Some(Format::Heic)
    } else if has(&[b"mif1", b"msf1"]) {
        Some(declared)
    } else {
        None
    }
}

/// Why a file whose brands name the other HEIF format is refused.
pub const OTHER_FORMAT: &str = "the file's brands name another image format";

/// The header of `b`, the file's first bytes (all of it when `complete`), once its coded
/// images are found no larger than their sizes say ([`super::heif_items`]).
pub fn read(declared: Format, b: &[u8], complete: bool) -> Parsed {
    match read_work(declared, b, complete) {
        Ok((header, _)) => Parsed::Found(header),
        Err(e) => e,
    }
}

/// The header and what decoding the primary image takes.
pub fn read_work(
    declared: Format,
    b: &[u8],
    complete: bool,
) -> Result<(Header, super::heif_items::Work), Parsed> {
    let ftyp = match box_at(b, 0, None) {
        Ok(f) if &f.kind == b"ftyp" => f,
        Ok(_) => return Err(Parsed::Invalid("no ftyp box first")),
        Err(e) => return Err(e),
    };
    let Some(brands) = b.get(ftyp.body..ftyp.end) else {
        return Err(Parsed::NeedMore(ftyp.end));
    };
    // major brand (4), minor version (4), compatible brands
    let all: Vec<u8> = brands
        .iter()
        .take(4)
        .chain(brands.iter().skip(8))
        .copied()
        .collect();
    let format = match format_of(&all, declared) {
        Some(f) if f == declared => f,
        Some(_) => return Err(Parsed::Invalid(OTHER_FORMAT)),
        None => return Err(Parsed::Invalid("no HEIF brand")),
    };
    let mut at = ftyp.end;
    let meta = loop {
        let top = box_at(b, at, None)?;
        if &top.kind == b"meta" {
            break top;
        }
        if &top.kind == b"mdat" {
            return Err(Parsed::Invalid("no meta box before the media data"));
        }
        at = top.end;
    };
    if b.len() < meta.end {
        return Err(Parsed::NeedMore(meta.end));
    }
    no_second_meta(b, meta.end)?;
    meta_of(b, &meta).and_then(|m| {
        let (stored, orientation) = primary(&m)?;
        let work = super::heif_items::check(b, &m, complete).map_err(Parsed::Invalid)?;
        Ok((
            Header {
                format,
                stored,
                orientation,
            },
            work,
        ))
    })
}

/// Refuses a second top-level `meta` among the boxes `b` holds after the first (libheif reads
/// the last, this reader the first). The commit's first bytes may end before it; the render's
/// check has the whole file.
fn no_second_meta(b: &[u8], mut at: usize) -> Result<(), Parsed> {
    while at < b.len() {
        // Size 0: the last box, to the end of the file.
        if be32(b, at) == Some(0) {
            break;
        }
        match box_at(b, at, None) {
            Ok(top) if &top.kind == b"meta" => return Err(Parsed::Invalid("two meta boxes")),
            Ok(top) => at = top.end,
            // A box the bytes end inside: nothing after it is a box.
            Err(_) => break,
        }
    }
    Ok(())
}

/// The primary item's size and orientation.
fn primary(m: &Meta) -> Result<(Dimensions, Transform), Parsed> {
    let bad = Parsed::Invalid;
    let item = m.primary.ok_or(bad("no primary item (pitm)"))?;
    let mut orientation = Transform::UPRIGHT;
    for p in m.of(item) {
        if let Property::Turn(t) = p {
            orientation = orientation.then(t);
        }
    }
    let size = m
        .size(item)
        .ok_or(bad("no image size (ispe) for the primary item"))?;
    Ok((size, orientation))
}
