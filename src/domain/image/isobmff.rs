//! AVIF and HEIC (HEIF, an ISO base media file): `ftyp`'s brands say which, and the `meta` box
//! near the start describes the primary item (`pitm`): its size (`ispe`) and the rotation and
//! mirror (`irot`, `imir`) it is displayed with, in the order `ipma` associates them.

use super::bytes::{be16, be32, be64};
use super::{Dimensions, Format, Header, Parsed, Transform};

/// A box: its type, where its body starts and where it ends.
struct Boxed {
    kind: [u8; 4],
    body: usize,
    end: usize,
}

/// The box at `at`, which must end by `limit` (its parent's end; `None` at the top level, where
/// the file's length is not known).
fn box_at(b: &[u8], at: usize, limit: Option<usize>) -> Result<Boxed, Parsed> {
    let (Some(size), Some(kind)) = (be32(b, at), b.get(at + 4..at + 8)) else {
        return Err(Parsed::NeedMore(at + 16));
    };
    let kind: [u8; 4] = kind.try_into().map_err(|_| Parsed::Invalid("a box type"))?;
    let (body, end) = match size {
        0 => match limit {
            Some(limit) => (at + 8, limit),
            // "To the end of the file": the last box, never a header's.
            None => return Err(Parsed::Invalid("no meta box before the media data")),
        },
        1 => {
            let Some(large) = be64(b, at + 8) else {
                return Err(Parsed::NeedMore(at + 16));
            };
            let end = usize::try_from(large)
                .ok()
                .and_then(|l| at.checked_add(l))
                .ok_or(Parsed::Invalid("a box longer than memory"))?;
            (at + 16, end)
        }
        n => (at + 8, at.saturating_add(n as usize)),
    };
    if end < body || limit.is_some_and(|l| end > l) {
        return Err(Parsed::Invalid(
            "a box that does not fit its size or its parent",
        ));
    }
    Ok(Boxed { kind, body, end })
}

/// The children of the box whose body spans `start..end` (all of which `b` holds).
fn children(b: &[u8], start: usize, end: usize) -> Result<Vec<Boxed>, Parsed> {
    // Nothing past the parent is read: a child's header straddling its end is cut short
    // however many bytes follow.
    let b = &b[..end.min(b.len())];
    let mut out = Vec::new();
    let mut at = start;
    while at < end {
        let child = box_at(b, at, Some(end)).map_err(|e| match e {
            Parsed::NeedMore(_) => Parsed::Invalid("a box cut short by its parent"),
            other => other,
        })?;
        at = child.end;
        out.push(child);
    }
    Ok(out)
}

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

#[derive(Debug, Clone, Copy)]
enum Property {
    Size(Dimensions),
    Turn(Transform),
    Other,
}

pub fn read(declared: Format, b: &[u8]) -> Parsed {
    let ftyp = match box_at(b, 0, None) {
        Ok(f) if &f.kind == b"ftyp" => f,
        Ok(_) => return Parsed::Invalid("no ftyp box first"),
        Err(e) => return e,
    };
    let Some(brands) = b.get(ftyp.body..ftyp.end) else {
        return Parsed::NeedMore(ftyp.end);
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
        Some(_) => return Parsed::Invalid("the file's brands name another image format"),
        None => return Parsed::Invalid("no HEIF brand"),
    };
    let mut at = ftyp.end;
    let meta = loop {
        let top = match box_at(b, at, None) {
            Ok(t) => t,
            Err(e) => return e,
        };
        if &top.kind == b"meta" {
            break top;
        }
        if &top.kind == b"mdat" {
            return Parsed::Invalid("no meta box before the media data");
        }
        at = top.end;
    };
    if b.len() < meta.end {
        return Parsed::NeedMore(meta.end);
    }
    match primary(b, &meta) {
        Ok((stored, orientation)) => Parsed::Found(Header {
            format,
            stored,
            orientation,
        }),
        Err(e) => e,
    }
}

/// The primary item's size and orientation, from the `meta` box (a full box: 4 bytes of
/// version and flags before its children).
fn primary(b: &[u8], meta: &Boxed) -> Result<(Dimensions, Transform), Parsed> {
    let bad = Parsed::Invalid;
    let mut item = None;
    let mut properties = Vec::new();
    let mut associations: Vec<(u32, Vec<u16>)> = Vec::new();
    for child in children(b, meta.body + 4, meta.end)? {
        match &child.kind {
            b"pitm" => {
                let version = b.get(child.body).filter(|_| child.end >= child.body + 6);
                let id = match version {
                    Some(0) => be16(b, child.body + 4).map(u32::from),
                    Some(_) if child.end >= child.body + 8 => be32(b, child.body + 4),
                    _ => None,
                };
                item = Some(id.ok_or(bad("a short pitm box"))?);
            }
            b"iprp" => {
                for p in children(b, child.body, child.end)? {
                    match &p.kind {
                        b"ipco" => {
                            for prop in children(b, p.body, p.end)? {
                                properties.push(property(b, &prop)?);
                            }
                        }
                        b"ipma" => associations.extend(ipma(b, &p)?),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let item = item.ok_or(bad("no primary item (pitm)"))?;
    let mut size = None;
    let mut orientation = Transform::UPRIGHT;
    for (_, indices) in associations.iter().filter(|(id, _)| *id == item) {
        for &index in indices {
            // 1-based; 0 means no property.
            let Some(p) = usize::from(index)
                .checked_sub(1)
                .and_then(|i| properties.get(i))
            else {
                continue;
            };
            match *p {
                Property::Size(d) if size.is_none() => size = Some(d),
                Property::Turn(t) => orientation = orientation.then(t),
                _ => {}
            }
        }
    }
    let size = size.ok_or(bad("no image size (ispe) for the primary item"))?;
    Ok((size, orientation))
}

fn property(b: &[u8], p: &Boxed) -> Result<Property, Parsed> {
    let short = Parsed::Invalid("a property box cut short");
    Ok(match &p.kind {
        // full box: version and flags (4), width (4), height (4)
        b"ispe" if p.end < p.body + 12 => return Err(short),
        b"ispe" => Property::Size(Dimensions {
            width: be32(b, p.body + 4).ok_or(short.clone())?,
            height: be32(b, p.body + 8).ok_or(short)?,
        }),
        b"irot" => Property::Turn(Transform::heif_rotation(
            *b.get(p.body).filter(|_| p.end > p.body).ok_or(short)? & 3,
        )),
        b"imir" => Property::Turn(Transform::heif_mirror(
            *b.get(p.body).filter(|_| p.end > p.body).ok_or(short)? & 1,
        )),
        _ => Property::Other,
    })
}

/// `ipma`: for each item, the 1-based indices of its properties, in order.
fn ipma(b: &[u8], p: &Boxed) -> Result<Vec<(u32, Vec<u16>)>, Parsed> {
    let short = || Parsed::Invalid("an ipma box cut short");
    let get = |at: usize| if at < p.end { b.get(at).copied() } else { None };
    let version = get(p.body).ok_or_else(short)?;
    let wide = get(p.body + 3).ok_or_else(short)? & 1 == 1;
    let count = be32(b, p.body + 4).ok_or_else(short)?;
    let mut at = p.body + 8;
    let mut out = Vec::new();
    for _ in 0..count {
        let id = if version < 1 {
            let id = be16(b, at).map(u32::from);
            at += 2;
            id
        } else {
            let id = be32(b, at);
            at += 4;
            id
        }
        .filter(|_| at <= p.end)
        .ok_or_else(short)?;
        let n = get(at).ok_or_else(short)?;
        at += 1;
        let mut indices = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            let index = if wide {
                let v = be16(b, at).filter(|_| at + 2 <= p.end).ok_or_else(short)?;
                at += 2;
                v & 0x7FFF
            } else {
                let v = get(at).ok_or_else(short)?;
                at += 1;
                u16::from(v & 0x7F)
            };
            indices.push(index);
        }
        out.push((id, indices));
    }
    Ok(out)
}
