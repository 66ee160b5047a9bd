//! HEIF's boxes (ISO base media file format) and what its `meta` box says of its items: the
//! primary one (`pitm`), their properties (`ipco`, associated by `ipma`) and the boxes that
//! type, relate and locate them (`iinf`, `iref`, `iloc`, `idat`), for the header reader
//! ([`super::isobmff`]) and the items' check ([`super::heif_items`]).

use std::collections::BTreeMap;

use super::bytes::{be16, be32, be64};
use super::{Dimensions, Parsed, Transform};

/// A box: its type, where its body starts and where it ends.
#[derive(Debug, Clone, Copy)]
pub(super) struct Boxed {
    pub kind: [u8; 4],
    /// Where its header starts.
    pub start: usize,
    pub body: usize,
    pub end: usize,
}

/// The box at `at`, which must end by `limit` (its parent's end; `None` at the top level, where
/// the file's length is not known).
pub(super) fn box_at(b: &[u8], at: usize, limit: Option<usize>) -> Result<Boxed, Parsed> {
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
    Ok(Boxed {
        kind,
        start: at,
        body,
        end,
    })
}

/// The children of the box whose body spans `start..end` (all of which `b` holds).
pub(super) fn children(b: &[u8], start: usize, end: usize) -> Result<Vec<Boxed>, Parsed> {
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

#[derive(Debug, Clone, Copy)]
pub(super) enum Property {
    Size(Dimensions),
    Turn(Transform),
    /// A decoder configuration (`hvcC`, `av1C`): its body.
    Config {
        av1: bool,
        body: usize,
        end: usize,
    },
    /// `auxC` naming an alpha plane.
    Alpha,
    Other,
}

/// What `meta` (a full box: 4 bytes of version and flags before its children) says of its
/// items: the primary one, every property, which item has which, and the boxes that type,
/// relate and locate the items.
pub(super) struct Meta {
    pub primary: Option<u32>,
    pub properties: Vec<Property>,
    /// `ipma`: each item's property indices, in order (one entry per item).
    pub associations: BTreeMap<u32, Vec<u16>>,
    pub iinf: Option<Boxed>,
    pub iref: Option<Boxed>,
    pub iloc: Option<Boxed>,
    pub idat: Option<Boxed>,
}

impl Meta {
    /// The properties of `item`, in the order `ipma` lists them.
    pub fn of(&self, item: u32) -> impl Iterator<Item = Property> + '_ {
        self.associations
            .get(&item)
            .into_iter()
            .flatten()
            // 1-based; 0 means no property.
            .filter_map(|&index| {
                usize::from(index)
                    .checked_sub(1)
                    .and_then(|i| self.properties.get(i))
                    .copied()
            })
    }

    /// `item`'s size (its first `ispe`).
    pub fn size(&self, item: u32) -> Option<Dimensions> {
        self.of(item).find_map(|p| match p {
            Property::Size(d) => Some(d),
            _ => None,
        })
    }
}

pub(super) fn meta_of(b: &[u8], meta: &Boxed) -> Result<Meta, Parsed> {
    let bad = Parsed::Invalid;
    let mut m = Meta {
        primary: None,
        properties: Vec::new(),
        associations: BTreeMap::new(),
        iinf: None,
        iref: None,
        iloc: None,
        idat: None,
    };
    let boxes = children(b, meta.body + 4, meta.end)?;
    once(
        &boxes,
        &[b"pitm", b"iinf", b"iref", b"iloc", b"idat", b"iprp"],
    )?;
    for child in boxes {
        match &child.kind {
            b"pitm" => {
                let version = b.get(child.body).filter(|_| child.end >= child.body + 6);
                let id = match version {
                    Some(0) => be16(b, child.body + 4).map(u32::from),
                    Some(_) if child.end >= child.body + 8 => be32(b, child.body + 4),
                    _ => None,
                };
                m.primary = Some(id.ok_or(bad("a short pitm box"))?);
            }
            b"iprp" => {
                let boxes = children(b, child.body, child.end)?;
                once(&boxes, &[b"ipco", b"ipma"])?;
                for p in boxes {
                    match &p.kind {
                        b"ipco" => {
                            for prop in children(b, p.body, p.end)? {
                                m.properties.push(property(b, &prop)?);
                            }
                        }
                        b"ipma" => {
                            for (id, indices) in ipma(b, &p)? {
                                if m.associations.insert(id, indices).is_some() {
                                    return Err(bad("an item associated twice (ipma)"));
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            b"iinf" => m.iinf = Some(child),
            b"iref" => m.iref = Some(child),
            b"iloc" => m.iloc = Some(child),
            b"idat" => m.idat = Some(child),
            _ => {}
        }
    }
    m.one_of_each()?;
    Ok(m)
}

/// Refuses a box of `kinds` given twice: libheif reads the first, and what it decodes must be
/// what was checked.
fn once(boxes: &[Boxed], kinds: &[&[u8; 4]]) -> Result<(), Parsed> {
    for kind in kinds {
        if boxes.iter().filter(|b| &b.kind == *kind).count() > 1 {
            return Err(Parsed::Invalid("a box describing the items given twice"));
        }
    }
    Ok(())
}

impl Meta {
    /// Refuses an image with two sizes or two decoder configurations (which one a decoder takes is its own choice).
    fn one_of_each(&self) -> Result<(), Parsed> {
        for &id in self.associations.keys() {
            let sizes = self
                .of(id)
                .filter(|p| matches!(p, Property::Size(_)))
                .count();
            let configs = self
                .of(id)
                .filter(|p| matches!(p, Property::Config { .. }))
                .count();
            if sizes > 1 || configs > 1 {
                return Err(Parsed::Invalid(
                    "an image with two sizes (ispe) or two decoder configurations",
                ));
            }
        }
        Ok(())
    }
}

/// The auxiliary types of an alpha plane (MPEG-B's, and HEIF's for HEVC and AVC), NUL
/// included. libheif 1.15 decodes the first two as alpha; AVC's is counted too, on the safe
/// side.
const ALPHA_URNS: [&[u8]; 3] = [
    b"urn:mpeg:mpegB:cicp:systems:auxiliary:alpha\0",
    b"urn:mpeg:hevc:2015:auxid:1\0",
    b"urn:mpeg:avc:2015:auxid:1\0",
];

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
        b"hvcC" | b"av1C" => Property::Config {
            av1: &p.kind == b"av1C",
            body: p.body,
            end: p.end,
        },
        // full box, then the type's URN, ending in a NUL
        b"auxC" => match b.get(p.body + 4..p.end) {
            Some(urn) if ALPHA_URNS.iter().any(|a| urn.starts_with(a)) => Property::Alpha,
            _ => Property::Other,
        },
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
