//! HEIF's items beyond the primary one's size: what each is (`iinf`), how they relate (`iref`:
//! a grid's tiles, an image's alpha plane), where their data is (`iloc`, `idat`), and what
//! decoding the primary image takes. libheif 1.15 allocates for the sizes the coded images
//! themselves declare, not for their `ispe`, so every coded image is held to its `ispe` here
//! (refused when its parameter sets allow a larger picture) and every grid to its own.
//! What the file's first bytes do not hold (an item's data in `mdat`) is checked when the
//! caller has the whole file (`complete`): the render's check, before libheif sees the file.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;

use super::bytes::{be16, be32, be64};
use super::coded::{self, Coded};
use super::heif_meta::{children, Boxed, Meta, Property};
use super::Dimensions;

/// A coded picture may be larger than its `ispe` by an encoder's padding (HEVC codes whole
/// blocks of up to 64 × 64 and crops the rest away), never by more.
const PADDING: u32 = 64;

/// What decoding the primary image (with its alpha plane) takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Work {
    /// Pixels decoded in all: every coded picture, and each grid's canvas.
    pub pixels: u64,
    /// The largest single picture (a coded image or a grid's canvas).
    pub largest: Dimensions,
}

impl Work {
    fn add(&mut self, d: Dimensions) {
        self.pixels = self.pixels.saturating_add(d.pixels());
        if d.pixels() > self.largest.pixels() {
            self.largest = d;
        }
    }
}

struct Items<'a> {
    b: &'a [u8],
    meta: &'a Meta,
    complete: bool,
    kinds: BTreeMap<u32, [u8; 4]>,
    /// `iref`: (type, from, to).
    refs: Vec<([u8; 4], u32, Vec<u32>)>,
    /// Each grid's tiles (its `dimg` reference), indexed once.
    tiles: BTreeMap<u32, Vec<u32>>,
    locations: BTreeMap<u32, Location>,
    /// Decoder configurations parsed, by where their body starts: one `hvcC` may be every
    /// tile's, and is read once.
    configs: RefCell<BTreeMap<usize, Coded>>,
}

struct Location {
    /// 0: offsets in the file; 1: in `idat`.
    method: u8,
    extents: Vec<(u64, u64)>,
}

/// How deep images may nest: the primary, a grid, a tile, its alpha plane (itself perhaps a
/// grid of tiles): deeper is no image an encoder writes, and is refused rather than followed.
const MAX_DEPTH: usize = 8;

/// More pictures than a 256 × 256 grid whose every tile has an alpha plane decodes: refused.
const MAX_PICTURES: u32 = 2 * 256 * 256 + 2;

/// Why extents that overlap are refused: libheif reads each item's extents whole, and every
/// item's, so bytes named twice are held twice.
const TWICE: &str = "item extents that name the same bytes twice";

/// Checks every coded image and grid of the file against its `ispe`, and answers what decoding
/// the primary image takes.
pub fn check(b: &[u8], meta: &Meta, complete: bool) -> Result<Work, &'static str> {
    let refs = meta
        .iref
        .map(|i| iref(b, &i))
        .transpose()?
        .unwrap_or_default();
    let items = Items {
        b,
        meta,
        complete,
        kinds: meta
            .iinf
            .map(|i| iinf(b, &i))
            .transpose()?
            .unwrap_or_default(),
        tiles: refs
            .iter()
            .filter(|(kind, _, _)| kind == b"dimg")
            .map(|(_, from, to)| (*from, to.clone()))
            .collect(),
        refs,
        locations: meta
            .iloc
            .map(|i| iloc(b, &i))
            .transpose()?
            .unwrap_or_default(),
        configs: RefCell::default(),
    };
    items.no_bytes_named_twice()?;
    // Each item parsed once, however often it is referenced.
    let mut count = Count::default();
    for (&id, kind) in &items.kinds {
        match kind {
            b"hvc1" | b"av01" => {
                count.coded.insert(id, items.coded(id)?);
            }
            b"grid" => {
                count.grids.insert(id, items.grid(id)?);
            }
            _ => {}
        }
    }
    // An alpha plane: an item with an `auxl` reference to the image and an alpha `auxC`.
    for (kind, from, to) in &items.refs {
        if kind == b"auxl" && meta.of(*from).any(|p| matches!(p, Property::Alpha)) {
            for &image in to {
                count.alpha.entry(image).or_default().push(*from);
            }
        }
    }
    let primary = meta.primary.ok_or("no primary item (pitm)")?;
    count.decode(primary)?;
    Ok(count.work)
}

/// What decoding takes, counted as libheif 1.15 decodes: an image, each of a grid's tiles
/// (once per reference), and every image's alpha planes, theirs included.
#[derive(Default)]
struct Count {
    coded: BTreeMap<u32, Dimensions>,
    grids: BTreeMap<u32, (Dimensions, Vec<u32>)>,
    alpha: BTreeMap<u32, Vec<u32>>,
    /// The images being decoded, outermost first.
    path: Vec<u32>,
    pictures: u32,
    work: Work,
}

impl Count {
    fn decode(&mut self, id: u32) -> Result<(), &'static str> {
        self.pictures += 1;
        if self.pictures > MAX_PICTURES {
            return Err("an image of more pictures than any grid decodes");
        }
        if self.path.contains(&id) {
            return Err("an image that is part of itself (a reference cycle)");
        }
        if self.path.len() >= MAX_DEPTH {
            return Err("images nested deeper than any encoder writes");
        }
        self.path.push(id);
        if let Some(&size) = self.coded.get(&id) {
            self.work.add(size);
        } else if let Some((canvas, tiles)) = self.grids.get(&id).cloned() {
            self.work.add(canvas);
            for tile in tiles {
                self.decode(tile)?;
            }
        } else {
            return Err("a primary image or alpha plane that is neither coded nor a grid");
        }
        for plane in self.alpha.get(&id).cloned().unwrap_or_default() {
            self.decode(plane)?;
        }
        self.path.pop();
        Ok(())
    }
}

impl Items<'_> {
    fn kind(&self, id: u32) -> Option<&[u8; 4]> {
        self.kinds.get(&id)
    }

    /// Refuses extents (of one item or of two) that overlap, in the file or in `idat`: so no
    /// item's data, nor all of them together, is longer than the file.
    fn no_bytes_named_twice(&self) -> Result<(), &'static str> {
        let mut spans: Vec<(u64, u64)> = Vec::new();
        for location in self.locations.values() {
            let (base, whole) = match (location.method, self.meta.idat) {
                (0, _) => (0, u64::MAX),
                (1, Some(idat)) => (idat.body as u64, idat.end as u64),
                // Refused where the item's data is read.
                _ => continue,
            };
            for &(offset, length) in &location.extents {
                let start = base.saturating_add(offset);
                let end = match length {
                    0 => whole,
                    n => start.saturating_add(n),
                };
                spans.push((start, end));
            }
        }
        spans.sort_unstable();
        if spans.windows(2).any(|w| w[1].0 < w[0].1) {
            return Err(TWICE);
        }
        Ok(())
    }

    /// The largest picture coded image `id` may decode to: its `ispe`, once its parameter sets
    /// are found to declare nothing larger (its padding aside), or what an AV1 frame header
    /// could still make of it when that is larger.
    fn coded(&self, id: u32) -> Result<Dimensions, &'static str> {
        let size = self
            .meta
            .size(id)
            .ok_or("a coded image without its size (ispe)")?;
        let av1 = self.kind(id) == Some(b"av01");
        let config = self
            .meta
            .of(id)
            .find_map(|p| match p {
                Property::Config { av1: a, body, end } if a == av1 => Some((body, end)),
                _ => None,
            })
            .ok_or("a coded image without its decoder configuration")?;
        let cached = self.configs.borrow().get(&config.0).copied();
        let mut coded = match cached {
            Some(c) => c,
            None => {
                let bytes = self
                    .b
                    .get(config.0..config.1)
                    .ok_or("a decoder configuration cut short")?;
                let c = if av1 {
                    coded::av1c(bytes)?
                } else {
                    coded::hvcc(bytes)?
                };
                self.configs.borrow_mut().insert(config.0, c);
                c
            }
        };
        if let Some(data) = self.data(id)? {
            if av1 {
                coded::av1_obus(&data, &mut coded)?;
            } else {
                coded::hevc_data(&data, &mut coded)?;
            }
            // A HEIF image item is one picture; a decoder keeps the others it is given.
            if coded.pictures > 1 {
                return Err("an image item holding more than one picture");
            }
        }
        check_coded(size, &coded)?;
        // What the decoder may allocate: a frame may still be as large as its fields hold.
        Ok(match coded.bound {
            Some(b) => Dimensions {
                width: size.width.max(b.width),
                height: size.height.max(b.height),
            },
            None => size,
        })
    }

    /// A grid's canvas and its tiles, the canvas no larger than its `ispe` and the tiles as
    /// many as its rows and columns.
    fn grid(&self, id: u32) -> Result<(Dimensions, Vec<u32>), &'static str> {
        let size = self.meta.size(id).ok_or("a grid without its size (ispe)")?;
        let tiles = self.tiles.get(&id).cloned().unwrap_or_default();
        if let Some(data) = self.data(id)? {
            let (rows, columns, canvas) = grid_data(&data)?;
            if canvas.width > size.width || canvas.height > size.height {
                return Err("a grid whose canvas is larger than its size (ispe)");
            }
            if tiles.len() != usize::from(rows) * usize::from(columns) {
                return Err("a grid whose tiles are not as many as its rows and columns");
            }
        }
        for &tile in &tiles {
            if !matches!(self.kind(tile), Some(b"hvc1" | b"av01")) {
                return Err("a grid tile that is not a coded image");
            }
        }
        Ok((size, tiles))
    }

    /// Item `id`'s data, when the bytes given hold it; `Err` when the file is whole and does
    /// not.
    fn data(&self, id: u32) -> Result<Option<Cow<'_, [u8]>>, &'static str> {
        let missing = |complete: bool| {
            if complete {
                Err("an item's data lies outside the file")
            } else {
                Ok(None)
            }
        };
        let Some(location) = self.locations.get(&id) else {
            return missing(self.complete);
        };
        let (source, base) = match location.method {
            0 => (self.b, 0usize),
            1 => {
                let idat = self
                    .meta
                    .idat
                    .ok_or("an item in idat without an idat box")?;
                (self.b.get(..idat.end).unwrap_or(self.b), idat.body)
            }
            _ => return Err("an item built from other items (iloc construction 2)"),
        };
        let mut parts: Vec<&[u8]> = Vec::with_capacity(location.extents.len());
        for &(offset, length) in &location.extents {
            let start = usize::try_from(offset)
                .ok()
                .and_then(|o| o.checked_add(base));
            let end = match length {
                // 0: to the end of what holds it.
                0 => Some(if location.method == 1 {
                    source.len()
                } else {
                    usize::MAX
                }),
                n => usize::try_from(n).ok().and_then(|n| start?.checked_add(n)),
            };
            let (Some(start), Some(end)) = (start, end) else {
                return Err("an item's extent past any file");
            };
            if location.method == 0 && length == 0 && self.complete {
                parts.push(
                    source
                        .get(start..)
                        .ok_or("an item's extent past the file")?,
                );
                continue;
            }
            match source.get(start..end) {
                Some(bytes) => parts.push(bytes),
                None if location.method == 1 => return Err("an item's extent past its idat"),
                None => return missing(self.complete),
            }
        }
        // One extent (the common case) is read where it lies.
        Ok(Some(match parts.as_slice() {
            [one] => Cow::Borrowed(*one),
            _ => Cow::Owned(parts.concat()),
        }))
    }
}

/// Refused when the parameter sets allow a picture larger than `size` and its padding.
fn check_coded(size: Dimensions, coded: &Coded) -> Result<(), &'static str> {
    let padded = |v: u32| v.saturating_add(PADDING - 1) / PADDING * PADDING;
    match coded.largest {
        Some(c) if c.width > padded(size.width) || c.height > padded(size.height) => {
            Err("a coded image larger than its size (ispe) says")
        }
        _ => Ok(()),
    }
}

/// `ImageGrid`: version, flags, rows − 1, columns − 1, then the canvas's width and height (16
/// or, with flag 1, 32 bits each).
fn grid_data(d: &[u8]) -> Result<(u16, u16, Dimensions), &'static str> {
    let short = "a grid's description cut short";
    let (flags, rows, columns) = match d {
        [0, flags, rows, columns, ..] => (*flags, *rows, *columns),
        [_, _, _, _, ..] => return Err("a grid description of an unknown version"),
        _ => return Err(short),
    };
    let canvas = if flags & 1 == 1 {
        Dimensions {
            width: be32(d, 4).ok_or(short)?,
            height: be32(d, 8).ok_or(short)?,
        }
    } else {
        Dimensions {
            width: u32::from(be16(d, 4).ok_or(short)?),
            height: u32::from(be16(d, 6).ok_or(short)?),
        }
    };
    Ok((u16::from(rows) + 1, u16::from(columns) + 1, canvas))
}

/// `iinf`: each item's type. `infe` of version 2 or 3 types its item; versions 0 and 1 do not
/// (their items are not images, typed `[0; 4]` here); a later version, which libheif 1.15 reads
/// as version 3, is refused, and so is an item given twice under any versions (libheif keeps
/// the first) or a count other than the entries that follow.
fn iinf(b: &[u8], i: &Boxed) -> Result<BTreeMap<u32, [u8; 4]>, &'static str> {
    let short = "an iinf box cut short";
    let version = *b.get(i.body).ok_or(short)?;
    let (count, first) = if version == 0 {
        (be16(b, i.body + 4).map(u32::from), i.body + 6)
    } else {
        (be32(b, i.body + 4), i.body + 8)
    };
    let count = count.filter(|_| first <= i.end).ok_or(short)?;
    let mut out = BTreeMap::new();
    let entries = children(b, first, i.end).map_err(|_| short)?;
    if entries.len() != count as usize || entries.iter().any(|e| &e.kind != b"infe") {
        return Err("an iinf box whose count is not its item entries");
    }
    for e in &entries {
        let v = *b.get(e.body).filter(|_| e.end > e.body).ok_or(short)?;
        let (id, at) = match v {
            0 | 1 => (be16(b, e.body + 4).map(u32::from), None),
            2 => (be16(b, e.body + 4).map(u32::from), Some(e.body + 8)),
            3 => (be32(b, e.body + 4), Some(e.body + 10)),
            _ => return Err("an item entry (infe) of an unknown version"),
        };
        let kind = match at {
            None => Some([0; 4]),
            Some(at) => b
                .get(at..at + 4)
                .filter(|_| at + 4 <= e.end)
                .and_then(|k| <[u8; 4]>::try_from(k).ok()),
        };
        let (Some(id), Some(kind)) = (id.filter(|_| e.body + 6 <= e.end), kind) else {
            return Err(short);
        };
        if out.insert(id, kind).is_some() {
            return Err("two items with one ID");
        }
    }
    Ok(out)
}

type Reference = ([u8; 4], u32, Vec<u32>);

/// `iref`: each reference's type, the item it is from and the items it is to.
fn iref(b: &[u8], i: &Boxed) -> Result<Vec<Reference>, &'static str> {
    let short = "an iref box cut short";
    let wide = *b.get(i.body).ok_or(short)? != 0;
    let id = |at: usize| {
        if wide {
            be32(b, at)
        } else {
            be16(b, at).map(u32::from)
        }
    };
    let n = if wide { 4 } else { 2 };
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for r in children(b, (i.body + 4).min(i.end), i.end).map_err(|_| short)? {
        // libheif reads references back to back, each behind an 8-byte header: a box with
        // another header or bytes after its IDs would be read two ways.
        if &r.kind == b"uuid" || r.body != r.start + 8 {
            return Err("a reference box with a header of another form");
        }
        let from = id(r.body)
            .filter(|_| r.body + n + 2 <= r.end)
            .ok_or(short)?;
        let count = be16(b, r.body + n).ok_or(short)?;
        if r.end != r.body + n + 2 + usize::from(count) * n {
            return Err("a reference box whose size is not its IDs");
        }
        let mut to = Vec::with_capacity(usize::from(count));
        for k in 0..usize::from(count) {
            let at = r.body + n + 2 + k * n;
            to.push(id(at).filter(|_| at + n <= r.end).ok_or(short)?);
        }
        // libheif takes an item's first reference of a type: which one is read must not be a
        // choice.
        if !seen.insert((r.kind, from)) {
            return Err("an item's references of one type given twice");
        }
        out.push((r.kind, from, to));
    }
    Ok(out)
}

/// `iloc`: each item's construction method and extents (offset, length).
fn iloc(b: &[u8], i: &Boxed) -> Result<BTreeMap<u32, Location>, &'static str> {
    let short = "an iloc box cut short";
    let end = i.end;
    let byte = |at: usize| b.get(at).copied().filter(|_| at < end).ok_or(short);
    let version = byte(i.body)?;
    let sizes = byte(i.body + 4)?;
    let more = byte(i.body + 5)?;
    let (offset_size, length_size) = (sizes >> 4, sizes & 0xF);
    let (base_size, index_size) = (more >> 4, if version > 0 { more & 0xF } else { 0 });
    // libheif 1.15 reads fields of 4 and 8 bytes and skips others as 0: refused, so that
    // nothing is read two ways.
    if [offset_size, length_size, base_size, index_size]
        .iter()
        .any(|s| ![0, 4, 8].contains(s))
    {
        return Err("an iloc field of a size other than 0, 4 or 8");
    }
    let mut at = i.body + 6;
    let number = |at: &mut usize, size: u8| -> Result<u64, &'static str> {
        let v = match size {
            0 => Some(0),
            2 => be16(b, *at).map(u64::from),
            4 => be32(b, *at).map(u64::from),
            8 => be64(b, *at),
            _ => return Err(short),
        };
        *at += usize::from(size);
        v.filter(|_| *at <= end).ok_or(short)
    };
    let count = number(&mut at, if version < 2 { 2 } else { 4 })?;
    let mut out = BTreeMap::new();
    for _ in 0..count {
        let id = number(&mut at, if version < 2 { 2 } else { 4 })?;
        let method = if version > 0 {
            (number(&mut at, 2)? & 0xF) as u8
        } else {
            0
        };
        number(&mut at, 2)?; // data_reference_index
        let base = number(&mut at, base_size)?;
        let extents = number(&mut at, 2)?;
        let mut list = Vec::with_capacity(usize::try_from(extents).unwrap_or(0).min(1024));
        for _ in 0..extents {
            number(&mut at, index_size)?;
            let offset = number(&mut at, offset_size)?;
            let length = number(&mut at, length_size)?;
            let offset = base
                .checked_add(offset)
                .ok_or("an iloc offset past any file")?;
            list.push((offset, length));
        }
        let id = u32::try_from(id).map_err(|_| short)?;
        let location = Location {
            method,
            extents: list,
        };
        // libheif takes an item's first entry: which one is read must not be a choice.
        if out.insert(id, location).is_some() {
            return Err("an item located twice (iloc)");
        }
    }
    Ok(out)
}
