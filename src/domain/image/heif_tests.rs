//! HEIF files built item by item (coded images with their parameter sets, grids, alpha planes,
//! data in `mdat` or `idat`), and what the header reader makes of files whose coded images are
//! larger than their `ispe` says.

use proptest::prelude::*;

use super::*;

/// Writes bits most significant first; `rbsp` ends with the stop bit and byte alignment.
#[derive(Default)]
pub(super) struct BitWriter {
    bytes: Vec<u8>,
    bits: usize,
}

impl BitWriter {
    pub fn put(&mut self, n: u32, v: u64) -> &mut Self {
        for i in (0..n).rev() {
            if self.bits % 8 == 0 {
                self.bytes.push(0);
            }
            let bit = if i >= 64 { 0 } else { ((v >> i) & 1) as u8 };
            *self.bytes.last_mut().expect("byte") |= bit << (7 - self.bits % 8);
            self.bits += 1;
        }
        self
    }

    pub fn ue(&mut self, v: u32) -> &mut Self {
        let v = u64::from(v) + 1;
        let len = 64 - v.leading_zeros();
        self.put(len - 1, 0).put(len, v)
    }

    pub fn finish(&mut self) -> Vec<u8> {
        self.put(1, 1);
        std::mem::take(&mut self.bytes)
    }
}

/// `rbsp` with emulation prevention bytes put in, as an encoder writes it.
fn escape(rbsp: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut zeros = 0;
    for &b in rbsp {
        if zeros >= 2 && b <= 3 {
            out.push(3);
            zeros = 0;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out.push(b);
    }
    out
}

/// An HEVC SPS NAL unit for a `w` × `h` picture with `sub_layers` − 1 sub-layers (each with a
/// profile and level), chroma 4:2:0; its profile bits are zeros, so its bytes need escaping.
pub(super) fn hevc_sps(w: u32, h: u32, sub_layers: u32) -> Vec<u8> {
    let mut r = BitWriter::default();
    r.put(4, 0).put(3, u64::from(sub_layers)).put(1, 1);
    r.put(8, 1).put(32, 0).put(48, 0).put(8, 93); // general profile, tier, level
    for _ in 0..sub_layers {
        r.put(1, 1).put(1, 1);
    }
    if sub_layers > 0 {
        r.put(2 * (8 - sub_layers), 0);
    }
    for _ in 0..sub_layers {
        r.put(88, 0).put(8, 90);
    }
    r.ue(0).ue(1).ue(w).ue(h).put(1, 0);
    let mut nal = vec![33 << 1, 1];
    nal.extend(escape(&r.finish()));
    nal
}

/// An `hvcC` body carrying `nals` (length prefixes of 4 bytes for the data).
pub(super) fn hvcc(nals: &[Vec<u8>]) -> Vec<u8> {
    let mut b = vec![1];
    b.extend([0u8; 20]);
    b.push(0xFC | 3);
    b.push(u8::try_from(nals.len()).expect("arrays"));
    for nal in nals {
        b.push(0x80 | ((nal[0] >> 1) & 0x3F));
        b.extend(1u16.to_be_bytes());
        b.extend(u16::try_from(nal.len()).expect("nal").to_be_bytes());
        b.extend(nal);
    }
    b
}

/// HEVC item data: NAL units each after a 4-byte length.
pub(super) fn hevc_data(nals: &[Vec<u8>]) -> Vec<u8> {
    nals.iter()
        .flat_map(|n| {
            let mut v = u32::try_from(n.len()).expect("nal").to_be_bytes().to_vec();
            v.extend(n);
            v
        })
        .collect()
}

/// An HEVC slice NAL unit standing for the coded picture.
pub(super) fn hevc_slice() -> Vec<u8> {
    vec![19 << 1, 1, 0xAF, 0x12, 0x34]
}

/// An AV1 sequence header OBU allowing `w` × `h`: the reduced still-picture form, or the full
/// one with timing, a decoder model and three operating points.
pub(super) fn av1_sequence(w: u32, h: u32, reduced: bool) -> Vec<u8> {
    let mut r = BitWriter::default();
    r.put(3, 0).put(1, 1).put(1, u64::from(reduced));
    if reduced {
        r.put(5, 8);
    } else {
        r.put(1, 1).put(32, 1).put(32, 30).put(1, 1).put(3, 0b010); // uvlc(1)
        r.put(1, 1).put(5, 9).put(32, 1).put(5, 3).put(5, 3); // decoder model, 10-bit delays
        r.put(1, 1).put(5, 2); // initial display delay, 3 operating points
        for level in [9u64, 4, 12] {
            r.put(12, 0x101).put(5, level);
            if level > 7 {
                r.put(1, 1);
            }
            r.put(1, 1).put(10, 5).put(10, 6).put(1, 0); // operating parameters
            r.put(1, 1).put(4, 3);
        }
    }
    r.put(4, 15)
        .put(4, 15)
        .put(16, u64::from(w - 1))
        .put(16, u64::from(h - 1));
    r.put(8, 0);
    obu(1, &r.finish())
}

/// An OBU of `kind` with a size field.
pub(super) fn obu(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![(kind << 3) | 2];
    let mut n = payload.len();
    loop {
        let byte = (n & 0x7F) as u8;
        n >>= 7;
        if n == 0 {
            b.push(byte);
            break;
        }
        b.push(byte | 0x80);
    }
    b.extend(payload);
    b
}

pub(super) fn bmff(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut b = u32::try_from(body.len() + 8)
        .expect("box")
        .to_be_bytes()
        .to_vec();
    b.extend(kind);
    b.extend(body);
    b
}

pub(super) fn full(version: u8, body: &[u8]) -> Vec<u8> {
    [&[version, 0, 0, 0][..], body].concat()
}

pub(super) fn ispe(w: u32, h: u32) -> Vec<u8> {
    let mut v = w.to_be_bytes().to_vec();
    v.extend(h.to_be_bytes());
    bmff(b"ispe", &full(0, &v))
}

pub(super) struct Item {
    pub id: u16,
    pub kind: [u8; 4],
    /// Property boxes, in order.
    pub props: Vec<Vec<u8>>,
    pub data: Vec<u8>,
    /// In `idat` rather than `mdat`.
    pub in_idat: bool,
}

impl Item {
    /// An HEVC image of `ispe` w × h whose `hvcC` SPS codes `coded`.
    pub fn hevc(id: u16, (w, h): (u32, u32), coded: (u32, u32)) -> Item {
        Item {
            id,
            kind: *b"hvc1",
            props: vec![
                ispe(w, h),
                bmff(b"hvcC", &hvcc(&[hevc_sps(coded.0, coded.1, 0)])),
            ],
            data: hevc_data(&[hevc_slice()]),
            in_idat: false,
        }
    }

    /// An AV1 image of `ispe` w × h whose sequence header, in its data, allows `coded`.
    pub fn av1(id: u16, (w, h): (u32, u32), coded: (u32, u32)) -> Item {
        let mut data = av1_sequence(coded.0, coded.1, true);
        data.extend(obu(6, &[0x10, 0x20]));
        Item {
            id,
            kind: *b"av01",
            props: vec![ispe(w, h), bmff(b"av1C", &[0x81, 0, 0x0C, 0])],
            data,
            in_idat: false,
        }
    }

    /// A grid of `rows` × `columns` (its description in `idat`) with canvas w × h, its `ispe`
    /// `size`.
    pub fn grid(id: u16, rows: u8, columns: u8, (w, h): (u16, u16), size: (u32, u32)) -> Item {
        let mut data = vec![0, 0, rows - 1, columns - 1];
        data.extend(w.to_be_bytes());
        data.extend(h.to_be_bytes());
        Item {
            id,
            kind: *b"grid",
            props: vec![ispe(size.0, size.1)],
            data,
            in_idat: true,
        }
    }
}

pub(super) struct Heif {
    pub brands: Vec<[u8; 4]>,
    pub primary: u16,
    pub items: Vec<Item>,
    /// (type, from, to)
    pub refs: Vec<([u8; 4], u16, Vec<u16>)>,
    /// Bytes of a `free` box between `meta` and `mdat`.
    pub gap: usize,
    /// Boxes of `meta` (or of its `iprp`) written twice.
    pub twice: Vec<[u8; 4]>,
    /// `iloc` or `ipma`: the first item's entry listed twice.
    pub twice_entry: Option<[u8; 4]>,
    /// `infe` boxes written after the items' own, counted in `iinf`.
    pub extra_infe: Vec<Vec<u8>>,
    /// Bytes of padding at the end of each reference box in `iref`.
    pub iref_pad: usize,
    /// The width of `iloc`'s offsets: 4 (the default) or 2.
    pub iloc_offset_size: u8,
    /// How many times the first item's extent is listed in `iloc` (1 by default).
    pub extent_repeat: u16,
}

impl Heif {
    pub fn new(brand: &[u8; 4], items: Vec<Item>) -> Heif {
        Heif {
            brands: vec![*brand, *b"mif1"],
            primary: items[0].id,
            items,
            refs: Vec::new(),
            gap: 0,
            twice: Vec::new(),
            twice_entry: None,
            extra_infe: Vec::new(),
            iref_pad: 0,
            iloc_offset_size: 4,
            extent_repeat: 1,
        }
    }

    fn meta(&self, mdat_data_at: u32) -> Vec<u8> {
        let mut infe = Vec::new();
        for item in &self.items {
            let mut v = item.id.to_be_bytes().to_vec();
            v.extend([0, 0]);
            v.extend(item.kind);
            v.push(0);
            infe.extend(bmff(b"infe", &full(2, &v)));
        }
        let mut iinf = u16::try_from(self.items.len() + self.extra_infe.len())
            .expect("items")
            .to_be_bytes()
            .to_vec();
        iinf.extend(infe);
        iinf.extend(self.extra_infe.concat());
        let mut ipco = Vec::new();
        let mut ipma = u32::try_from(self.items.len())
            .expect("n")
            .to_be_bytes()
            .to_vec();
        let mut index = 0u8;
        for item in &self.items {
            let mut entry = item.id.to_be_bytes().to_vec();
            entry.push(u8::try_from(item.props.len()).expect("props"));
            for p in &item.props {
                ipco.extend(p);
                index += 1;
                entry.push(0x80 | index);
            }
            ipma.extend(&entry);
            if self.twice_entry == Some(*b"ipma") && item.id == self.items[0].id {
                ipma.extend(&entry);
                ipma[3] += 1;
            }
        }
        let mut iref = Vec::new();
        for (kind, from, to) in &self.refs {
            let mut v = from.to_be_bytes().to_vec();
            v.extend(u16::try_from(to.len()).expect("refs").to_be_bytes());
            for t in to {
                v.extend(t.to_be_bytes());
            }
            v.extend(vec![0; self.iref_pad]);
            iref.extend(bmff(kind, &v));
        }
        // iloc version 1: offsets and lengths of 4 bytes, no base offset.
        let mut iloc = vec![(self.iloc_offset_size << 4) | 4, 0x00];
        iloc.extend(u16::try_from(self.items.len()).expect("n").to_be_bytes());
        let (mut mdat_at, mut idat_at) = (mdat_data_at, 0u32);
        let mut idat = Vec::new();
        for item in &self.items {
            let mut entry = item.id.to_be_bytes().to_vec();
            entry.extend(u16::from(item.in_idat).to_be_bytes());
            let extents = if item.id == self.items[0].id {
                self.extent_repeat
            } else {
                1
            };
            entry.extend([0, 0]); // data reference 0
            entry.extend(extents.to_be_bytes());
            let len = u32::try_from(item.data.len()).expect("len");
            let at = if item.in_idat {
                &mut idat_at
            } else {
                &mut mdat_at
            };
            for _ in 0..extents {
                match self.iloc_offset_size {
                    2 => entry.extend(u16::try_from(*at).expect("offset").to_be_bytes()),
                    _ => entry.extend(at.to_be_bytes()),
                }
                entry.extend(len.to_be_bytes());
            }
            iloc.extend(&entry);
            if self.twice_entry == Some(*b"iloc") && item.id == self.items[0].id {
                iloc.extend(&entry);
                iloc[3] += 1;
            }
            *at += len;
            if item.in_idat {
                idat.extend(&item.data);
            }
        }
        let boxed = |kind: &[u8; 4], body: &[u8]| {
            let one = bmff(kind, body);
            if self.twice.contains(kind) {
                [one.clone(), one].concat()
            } else {
                one
            }
        };
        let mut body = bmff(b"hdlr", &full(0, b"\0\0\0\0pict\0\0\0\0\0\0\0\0\0\0\0\0\0"));
        body.extend(boxed(b"pitm", &full(0, &self.primary.to_be_bytes())));
        body.extend(boxed(b"iinf", &full(0, &iinf)));
        if !self.refs.is_empty() {
            body.extend(boxed(b"iref", &full(0, &iref)));
        }
        body.extend(boxed(
            b"iprp",
            &[boxed(b"ipco", &ipco), boxed(b"ipma", &full(0, &ipma))].concat(),
        ));
        body.extend(boxed(b"iloc", &full(1, &iloc)));
        body.extend(boxed(b"idat", &idat));
        bmff(b"meta", &full(0, &body))
    }

    pub fn build(&self) -> Vec<u8> {
        let mut ftyp = self.brands[0].to_vec();
        ftyp.extend([0; 4]);
        for b in &self.brands {
            ftyp.extend(b);
        }
        let head = |at: u32| {
            let mut f = bmff(b"ftyp", &ftyp);
            f.extend(self.meta(at));
            if self.gap > 0 {
                f.extend(bmff(b"free", &vec![0; self.gap]));
            }
            f
        };
        // The layout does not depend on the offsets written in it.
        let at = u32::try_from(head(0).len() + 8).expect("offset");
        let mut file = head(at);
        let mdat: Vec<u8> = self
            .items
            .iter()
            .filter(|i| !i.in_idat)
            .flat_map(|i| i.data.clone())
            .collect();
        file.extend(bmff(b"mdat", &mdat));
        file
    }
}

fn read(format: Format, file: &[u8], complete: bool) -> Parsed {
    read_header(format, file, complete)
}

fn work(file: &[u8]) -> HeifWork {
    heif_work(file).expect("the file's work")
}

#[test]
fn an_honest_hevc_image_padded_to_whole_blocks_is_read() {
    let file = Heif::new(b"heic", vec![Item::hevc(1, (4030, 3020), (4032, 3024))]).build();
    let Parsed::Found(h) = read(Format::Heic, &file, true) else {
        panic!("{:?}", read(Format::Heic, &file, true))
    };
    assert_eq!(h.stored, dims(4030, 3020));
    // The decoder allocates the coded picture, padding and all.
    assert_eq!(work(&file).pixels, 4032 * 3024);
}

#[test]
fn an_hevc_image_coded_larger_than_its_ispe_is_refused_at_any_read() {
    let file = Heif::new(b"heic", vec![Item::hevc(1, (64, 64), (12_000, 12_000))]).build();
    for complete in [false, true] {
        assert_eq!(
            read(Format::Heic, &file, complete),
            Parsed::Invalid("a coded image larger than its size (ispe) says")
        );
    }
    assert!(heif_work(&file).is_err());
    // By its width alone, or its height alone.
    for coded in [(64 + 64 + 1, 64), (64, 200)] {
        let file = Heif::new(b"heic", vec![Item::hevc(1, (64, 64), coded)]).build();
        assert!(matches!(
            read(Format::Heic, &file, true),
            Parsed::Invalid(_)
        ));
    }
}

#[test]
fn hevc_parameter_sets_with_sub_layers_and_escaped_bytes_are_read() {
    for sub_layers in 0..7 {
        for (w, h) in [(1, 1), (640, 480), (8192, 4320), (65_535, 3)] {
            let nal = hevc_sps(w, h, sub_layers);
            assert_eq!(coded::hevc_sps(&nal), Some(dims(w, h)), "{sub_layers}");
        }
    }
    assert!(hevc_sps(640, 480, 0).windows(3).any(|w| w == [0, 0, 3]));
}

#[test]
fn a_larger_hevc_parameter_set_in_the_data_is_refused_when_the_file_is_whole() {
    let mut item = Item::hevc(1, (64, 64), (64, 64));
    item.data = hevc_data(&[hevc_sps(12_000, 12_000, 1), hevc_slice()]);
    let mut heif = Heif::new(b"heic", vec![item]);
    heif.gap = 70_000;
    let file = heif.build();
    assert_eq!(
        heif_work(&file),
        Err("a coded image larger than its size (ispe) says")
    );
    // A commit reads the header only: the data lies past it, and the render refuses the file.
    let header_only = &file[..file.len() - 100];
    assert!(matches!(
        read(Format::Heic, header_only, false),
        Parsed::Found(_)
    ));
}

#[test]
fn hevc_data_is_walked_with_four_byte_lengths_as_libheif_does_whatever_hvcc_says() {
    let mut item = Item::hevc(1, (64, 64), (64, 64));
    let mut config = hvcc(&[hevc_sps(64, 64, 0)]);
    config[21] = 0xFC | 1; // "2-byte lengths": libheif reads 4 regardless
    item.props[1] = bmff(b"hvcC", &config);
    item.data = hevc_data(&[hevc_sps(12_000, 12_000, 0), hevc_slice()]);
    let file = Heif::new(b"heic", vec![item]).build();
    assert_eq!(
        heif_work(&file),
        Err("a coded image larger than its size (ispe) says")
    );
}

#[test]
fn av1_sequence_headers_of_either_form_are_read() {
    for reduced in [true, false] {
        for (w, h) in [(1, 1), (1920, 1080), (65_536, 2)] {
            let obu = av1_sequence(w, h, reduced);
            let mut coded = coded::Coded::default();
            coded::av1_obus(&obu, &mut coded).expect("read");
            assert_eq!(coded.largest, Some(dims(w, h)), "{reduced}");
            // 16-bit size fields in the full form: a frame header may say up to 2¹⁶.
            let bound = if reduced {
                dims(w, h)
            } else {
                dims(1 << 16, 1 << 16)
            };
            assert_eq!(coded.bound, Some(bound), "{reduced}");
        }
    }
}

#[test]
fn an_av1_image_allowing_a_larger_frame_than_its_ispe_is_refused() {
    let honest = Heif::new(b"avif", vec![Item::av1(1, (1920, 1080), (1920, 1080))]).build();
    assert!(matches!(
        read(Format::Avif, &honest, true),
        Parsed::Found(_)
    ));
    let lying = Heif::new(b"avif", vec![Item::av1(1, (64, 64), (12_000, 12_000))]).build();
    assert!(matches!(
        read(Format::Avif, &lying, true),
        Parsed::Invalid(_)
    ));
    // In av1C's configOBUs, seen at any read.
    let mut item = Item::av1(1, (64, 64), (64, 64));
    item.props[1] = bmff(
        b"av1C",
        &[&[0x81, 0, 0x0C, 0][..], &av1_sequence(9000, 64, false)].concat(),
    );
    let file = Heif::new(b"avif", vec![item]).build();
    assert!(matches!(
        read(Format::Avif, &file, false),
        Parsed::Invalid(_)
    ));
}

#[test]
fn a_full_av1_sequence_header_counts_what_its_size_fields_can_hold() {
    // Honest in its declared size, yet a frame header may override it up to 65,536 square
    // (dav1d checks it against nothing smaller): the render's limit sees that.
    let mut item = Item::av1(1, (1920, 1080), (1920, 1080));
    let mut data = av1_sequence(1920, 1080, false);
    data.extend(obu(6, &[0x10, 0x20]));
    item.data = data;
    let file = Heif::new(b"avif", vec![item]).build();
    assert!(matches!(read(Format::Avif, &file, true), Parsed::Found(_)));
    assert_eq!(work(&file).largest, dims(65_536, 65_536));
}

/// A 2 × 2 grid of 512 × 512 tiles on a 1000 × 1000 canvas.
pub(super) fn grid(tile: (u32, u32)) -> Heif {
    let mut items = vec![Item::grid(10, 2, 2, (1000, 1000), (1000, 1000))];
    for id in 1..=4 {
        items.push(Item::hevc(id, (512, 512), tile));
    }
    let mut heif = Heif::new(b"heic", items);
    heif.refs.push((*b"dimg", 10, vec![1, 2, 3, 4]));
    heif
}

#[test]
fn a_grid_is_read_with_its_tiles_counted_in_its_work() {
    let file = grid((512, 512)).build();
    let Parsed::Found(h) = read(Format::Heic, &file, true) else {
        panic!("grid")
    };
    assert_eq!(h.stored, dims(1000, 1000));
    assert_eq!(work(&file).pixels, 1000 * 1000 + 4 * 512 * 512);
    assert_eq!(work(&file).largest, dims(1000, 1000));
}

#[test]
fn a_grid_that_lies_is_refused() {
    // A tile coded larger than its ispe.
    let file = grid((10_000, 10_000)).build();
    assert!(matches!(
        read(Format::Heic, &file, false),
        Parsed::Invalid(_)
    ));
    // A canvas larger than the grid's ispe.
    let mut heif = grid((512, 512));
    heif.items[0] = Item::grid(10, 2, 2, (60_000, 60_000), (1000, 1000));
    assert_eq!(
        read(Format::Heic, &heif.build(), true),
        Parsed::Invalid("a grid whose canvas is larger than its size (ispe)")
    );
    // Tiles fewer than its rows and columns.
    let mut heif = grid((512, 512));
    heif.refs[0].2.pop();
    assert!(matches!(
        read(Format::Heic, &heif.build(), true),
        Parsed::Invalid(_)
    ));
    // A tile that is a grid itself.
    let mut heif = grid((512, 512));
    heif.items[4] = Item::grid(4, 1, 1, (512, 512), (512, 512));
    assert!(matches!(
        read(Format::Heic, &heif.build(), true),
        Parsed::Invalid(_)
    ));
}

#[test]
fn a_primary_image_neither_coded_nor_a_grid_is_refused() {
    for kind in [b"iden", b"iovl", b"Exif"] {
        let mut heif = Heif::new(b"heic", vec![Item::hevc(1, (64, 64), (64, 64))]);
        heif.items[0].kind = *kind;
        assert!(
            matches!(read(Format::Heic, &heif.build(), true), Parsed::Invalid(_)),
            "{kind:?}"
        );
    }
}

#[test]
fn an_alpha_plane_is_held_to_its_size_and_counted() {
    let alpha = |coded| {
        let mut a = Item::hevc(2, (640, 480), coded);
        a.props.push(bmff(
            b"auxC",
            &full(0, b"urn:mpeg:mpegB:cicp:systems:auxiliary:alpha\0"),
        ));
        let mut heif = Heif::new(b"heic", vec![Item::hevc(1, (640, 480), (640, 480)), a]);
        heif.refs.push((*b"auxl", 2, vec![1]));
        heif.build()
    };
    assert_eq!(work(&alpha((640, 480))).pixels, 2 * 640 * 480);
    assert!(matches!(
        read(Format::Heic, &alpha((6400, 480)), true),
        Parsed::Invalid(_)
    ));
}

#[test]
fn an_item_whose_data_lies_outside_the_whole_file_is_refused() {
    let mut file = Heif::new(b"heic", vec![Item::hevc(1, (64, 64), (64, 64))]).build();
    file.truncate(file.len() - 3);
    assert!(heif_work(&file).is_err());
    assert!(matches!(read(Format::Heic, &file, false), Parsed::Found(_)));
}

proptest! {
    /// Any change to a grid file's bytes: an answer, never a panic, and the render's check
    /// agrees with the header read of the whole file.
    #[test]
    fn mutated_heif_items_get_an_answer(edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..8)) {
        let mut file = grid((512, 512)).build();
        // The brands (the first 24 bytes) kept: the file stays a HEIC.
        for (at, byte) in edits {
            let i = 24 + usize::from(at) % (file.len() - 24);
            file[i] = byte;
        }
        let _ = read(Format::Heic, &file, false);
        let found = matches!(read(Format::Heic, &file, true), Parsed::Found(_));
        prop_assert_eq!(heif_work(&file).is_ok(), found);
    }

    /// Any bytes as parameter sets, configurations or item data: an answer, never a panic.
    #[test]
    fn any_bytes_as_parameter_sets_get_an_answer(bytes in proptest::collection::vec(any::<u8>(), 0..300),
                                                ) {
        let _ = coded::hevc_sps(&bytes);
        let _ = coded::av1_sequence_header(&bytes);
        let _ = coded::hvcc(&bytes);
        let _ = coded::av1c(&bytes);
        let mut c = coded::Coded::default();
        let _ = coded::hevc_data(&bytes, &mut c);
        let _ = coded::av1_obus(&bytes, &mut c);
    }

    #[test]
    fn exp_golomb_codes_read_back(values in proptest::collection::vec(any::<u32>(), 1..20)) {
        let mut w = BitWriter::default();
        for v in &values {
            w.ue((*v).min(u32::MAX - 1));
        }
        let bytes = w.finish();
        let mut r = bits::Bits::new(&bytes);
        for v in &values {
            prop_assert_eq!(r.ue(), Some((*v).min(u32::MAX - 1)));
        }
    }
}

fn dims(width: u32, height: u32) -> Dimensions {
    Dimensions { width, height }
}
