//! Fixtures built byte by byte (each format's header as its specification lays it out), read
//! as a commit reads them: the first bytes, then more while the answer is `NeedMore`.

use proptest::prelude::*;

use super::*;

/// A TIFF structure with one IFD entry, Orientation = `o`.
type Encoders = (fn(u16) -> [u8; 2], fn(u32) -> [u8; 4]);

fn tiff(o: u16, big_endian: bool) -> Vec<u8> {
    let (u16b, u32b): Encoders = if big_endian {
        (u16::to_be_bytes, u32::to_be_bytes)
    } else {
        (u16::to_le_bytes, u32::to_le_bytes)
    };
    let mut t = if big_endian {
        b"MM\0*".to_vec()
    } else {
        b"II*\0".to_vec()
    };
    t.extend(u32b(8));
    t.extend(u16b(2)); // two entries: a width tag first, then the orientation
    t.extend(u16b(0x0100));
    t.extend(u16b(3));
    t.extend(u32b(1));
    t.extend(u16b(640));
    t.extend([0, 0]);
    t.extend(u16b(0x0112));
    t.extend(u16b(3));
    t.extend(u32b(1));
    t.extend(u16b(o));
    t.extend([0, 0]);
    t.extend(u32b(0));
    t
}

fn segment(marker: u8, body: &[u8]) -> Vec<u8> {
    let mut s = vec![0xFF, marker];
    s.extend(
        u16::try_from(body.len() + 2)
            .expect("segment")
            .to_be_bytes(),
    );
    s.extend(body);
    s
}

/// A JPEG: SOI, JFIF, `padding` bytes of APP2 segments (an ICC profile's place), an EXIF APP1
/// with orientation `o` if any, then the baseline frame header and the start of scan.
fn jpeg(w: u16, h: u16, o: Option<u16>, big_endian: bool, padding: usize) -> Vec<u8> {
    let mut j = vec![0xFF, 0xD8];
    j.extend(segment(0xE0, b"JFIF\0\x01\x02\0\0\x01\0\x01\0\0"));
    if let Some(o) = o {
        let mut exif = b"Exif\0\0".to_vec();
        exif.extend(tiff(o, big_endian));
        j.extend(segment(0xE1, &exif));
    }
    let mut left = padding;
    while left > 0 {
        let n = left.min(60_000);
        j.extend(segment(0xE2, &vec![b'i'; n]));
        left -= n;
    }
    let mut sof = vec![8];
    sof.extend(h.to_be_bytes());
    sof.extend(w.to_be_bytes());
    sof.extend([3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
    j.extend(segment(0xC0, &sof));
    j.extend(segment(0xDA, &[3, 1, 0, 2, 0x11, 3, 0x11, 0, 0x3F, 0]));
    j.extend([0x12, 0x34, 0xFF, 0xD9]);
    j
}

fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut c = u32::try_from(data.len())
        .expect("chunk")
        .to_be_bytes()
        .to_vec();
    c.extend(kind);
    c.extend(data);
    c.extend([0; 4]);
    c
}

fn png(w: u32, h: u32, o: Option<u16>) -> Vec<u8> {
    let mut p = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = w.to_be_bytes().to_vec();
    ihdr.extend(h.to_be_bytes());
    ihdr.extend([8, 6, 0, 0, 0]);
    p.extend(chunk(b"IHDR", &ihdr));
    if let Some(o) = o {
        p.extend(chunk(b"eXIf", &tiff(o, true)));
    }
    p.extend(chunk(b"IDAT", &[0x78, 0x9C, 0, 0]));
    p.extend(chunk(b"IEND", &[]));
    p
}

fn gif(w: u16, h: u16) -> Vec<u8> {
    let mut g = b"GIF89a".to_vec();
    g.extend(w.to_le_bytes());
    g.extend(h.to_le_bytes());
    g.extend([0xF7, 0, 0, b',']);
    g
}

fn riff(chunks: &[Vec<u8>]) -> Vec<u8> {
    let body: Vec<u8> = chunks.concat();
    let mut r = b"RIFF".to_vec();
    r.extend(u32::try_from(body.len() + 4).expect("riff").to_le_bytes());
    r.extend(b"WEBP");
    r.extend(body);
    r
}

fn riff_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut c = kind.to_vec();
    c.extend(u32::try_from(data.len()).expect("chunk").to_le_bytes());
    c.extend(data);
    if data.len() % 2 == 1 {
        c.push(0);
    }
    c
}

fn webp_lossy(w: u16, h: u16) -> Vec<u8> {
    let mut d = vec![0x50, 0x09, 0x00, 0x9D, 0x01, 0x2A];
    d.extend(w.to_le_bytes());
    d.extend(h.to_le_bytes());
    d.extend([0; 8]);
    riff(&[riff_chunk(b"VP8 ", &d)])
}

fn webp_lossless(w: u32, h: u32) -> Vec<u8> {
    let bits = (w - 1) | (h - 1) << 14;
    let mut d = vec![0x2F];
    d.extend(bits.to_le_bytes());
    d.extend([0; 6]);
    riff(&[riff_chunk(b"VP8L", &d)])
}

/// An extended WebP: VP8X, `image` bytes of bitstream, then EXIF with orientation `o`.
fn webp_extended(w: u32, h: u32, o: Option<u16>, image: usize) -> Vec<u8> {
    let mut x = vec![if o.is_some() { 0x08 } else { 0 }, 0, 0, 0];
    x.extend(&(w - 1).to_le_bytes()[..3]);
    x.extend(&(h - 1).to_le_bytes()[..3]);
    let mut chunks = vec![
        riff_chunk(b"VP8X", &x),
        riff_chunk(b"VP8 ", &vec![7; image]),
    ];
    if let Some(o) = o {
        let mut e = b"Exif\0\0".to_vec();
        e.extend(tiff(o, false));
        chunks.push(riff_chunk(b"EXIF", &e));
    }
    riff(&chunks)
}

/// A HEIF file: `ftyp` with `brands`, then `meta` whose primary item 1 (AV1 if the first brand
/// is `avif`, else HEVC) has `ispe` (w × h) and the transforms `turns` (b"irot" or b"imir"
/// with their byte), in that order; an unrelated item 2 with another size comes first.
fn heif(brands: &[&[u8; 4]], w: u32, h: u32, turns: &[(&[u8; 4], u8)]) -> Vec<u8> {
    use super::heif_tests::{bmff, Heif, Item};
    let item = if brands[0] == b"avif" {
        Item::av1
    } else {
        Item::hevc
    };
    let mut primary = item(1, (w, h), (w, h));
    for (kind, byte) in turns {
        primary.props.push(bmff(kind, &[*byte]));
    }
    let mut file = Heif::new(brands[0], vec![item(2, (99, 77), (99, 77)), primary]);
    file.brands = brands.iter().map(|b| **b).collect();
    file.primary = 1;
    file.build()
}

/// Reads as a commit does: 64 bytes first, then as many as asked while the answer is
/// `NeedMore` (each request larger than what it had). Returns the answer and the bytes read.
fn read_like_a_commit(format: Format, file: &[u8]) -> (Parsed, usize) {
    let mut have = 64.min(file.len());
    loop {
        let answer = read_header(format, &file[..have], have == file.len());
        match answer {
            Parsed::NeedMore(n) => {
                assert!(n > have, "asked for {n} with {have} given");
                have = n.min(file.len());
            }
            other => return (other, have),
        }
    }
}

fn found(format: Format, file: &[u8]) -> Header {
    match read_like_a_commit(format, file).0 {
        Parsed::Found(h) => h,
        other => panic!("{format:?}: {other:?}"),
    }
}

fn dims(width: u32, height: u32) -> Dimensions {
    Dimensions { width, height }
}

#[test]
fn every_format_gives_its_width_and_height() {
    let cases = [
        (Format::Jpeg, jpeg(4032, 3024, None, false, 0)),
        (Format::Png, png(1, 70_000, None)),
        (Format::Gif, gif(320, 200)),
        (Format::Webp, webp_lossy(1023, 767)),
        (Format::Webp, webp_lossless(16_383, 1)),
        (Format::Webp, webp_extended(16_777_216, 3, None, 100)),
        (Format::Avif, heif(&[b"avif", b"mif1"], 1920, 1080, &[])),
        (Format::Heic, heif(&[b"heic", b"mif1"], 4032, 3024, &[])),
    ];
    let expected = [
        dims(4032, 3024),
        dims(1, 70_000),
        dims(320, 200),
        dims(1023, 767),
        dims(16_383, 1),
        dims(16_777_216, 3),
        dims(1920, 1080),
        dims(4032, 3024),
    ];
    for ((format, file), want) in cases.iter().zip(expected) {
        let h = found(*format, file);
        assert_eq!((h.format, h.stored, h.displayed()), (*format, want, want));
    }
}

#[test]
fn every_exif_orientation_is_applied_in_both_byte_orders() {
    for o in 1..=8u16 {
        for big_endian in [false, true] {
            let h = found(Format::Jpeg, &jpeg(600, 400, Some(o), big_endian, 0));
            assert_eq!(h.orientation, Transform::from_exif(o));
            assert_eq!(h.orientation.exif(), o);
            let want = if o >= 5 {
                dims(400, 600)
            } else {
                dims(600, 400)
            };
            assert_eq!(h.displayed(), want, "orientation {o}");
        }
    }
    let h = found(Format::Png, &png(600, 400, Some(6)));
    assert_eq!(h.displayed(), dims(400, 600));
    let h = found(Format::Webp, &webp_extended(600, 400, Some(8), 500));
    assert_eq!(h.displayed(), dims(400, 600));
}

#[test]
fn a_frame_header_behind_an_icc_profile_is_reached_by_reading_further() {
    let file = jpeg(5000, 4000, Some(6), true, 200_000);
    let (answer, read) = read_like_a_commit(Format::Jpeg, &file);
    assert_eq!(answer, Parsed::Found(found(Format::Jpeg, &file)));
    assert!(
        read > 200_000 && read < file.len(),
        "{read} of {}",
        file.len()
    );
    // Past the limit: refused, not read on.
    let far = jpeg(5000, 4000, None, true, MAX_HEADER_BYTES + 10);
    assert!(matches!(
        read_like_a_commit(Format::Jpeg, &far).0,
        Parsed::Invalid(_)
    ));
}

#[test]
fn a_webp_exif_after_the_image_data_is_read_within_the_limit_only() {
    let near = webp_extended(600, 400, Some(6), 300_000);
    assert_eq!(found(Format::Webp, &near).displayed(), dims(400, 600));
    // Beyond the limit the image is taken as stored (the commit does not read it whole).
    let far = webp_extended(600, 400, Some(6), MAX_HEADER_BYTES + 1);
    assert_eq!(found(Format::Webp, &far).orientation, Transform::UPRIGHT);
}

#[test]
fn heif_rotation_and_mirror_compose_in_their_listed_order() {
    // irot 1 is a quarter turn anticlockwise: EXIF's 8.
    let h = found(Format::Heic, &heif(&[b"heic"], 300, 200, &[(b"irot", 1)]));
    assert_eq!((h.orientation.exif(), h.displayed()), (8, dims(200, 300)));
    // A left–right mirror then a quarter turn anticlockwise is a transpose the other way round
    // from the turn then the mirror.
    let mirror_first = found(
        Format::Avif,
        &heif(&[b"avif"], 300, 200, &[(b"imir", 0), (b"irot", 1)]),
    );
    let turn_first = found(
        Format::Avif,
        &heif(&[b"avif"], 300, 200, &[(b"irot", 1), (b"imir", 0)]),
    );
    assert_eq!(mirror_first.orientation.exif(), 5);
    assert_eq!(turn_first.orientation.exif(), 7);
    assert_eq!(turn_first.displayed(), dims(200, 300));
    // The primary item's size, not the first item's.
    assert_eq!(mirror_first.stored, dims(300, 200));
}

#[test]
fn bytes_of_another_format_or_no_size_are_refused() {
    let avif = heif(&[b"avif", b"mif1"], 10, 10, &[]);
    assert!(matches!(
        read_header(Format::Heic, &avif, true),
        Parsed::Invalid(_)
    ));
    let heic = heif(&[b"heic"], 10, 10, &[]);
    assert!(matches!(
        read_header(Format::Avif, &heic, true),
        Parsed::Invalid(_)
    ));
    for (format, file) in [
        (Format::Jpeg, png(10, 10, None)),
        (Format::Png, jpeg(10, 10, None, false, 0)),
        (Format::Gif, webp_lossy(10, 10)),
        (Format::Webp, gif(10, 10)),
        (Format::Jpeg, jpeg(0, 10, None, false, 0)),
        (Format::Png, png(10, 0, None)),
        (Format::Png, png(1 << 31, 1, None)),
        (Format::Gif, gif(0, 0)),
    ] {
        let answer = read_header(format, &file, true);
        assert!(
            matches!(answer, Parsed::Invalid(_)),
            "{format:?}: {answer:?}"
        );
    }
    // A file that ends inside its header.
    let cut = jpeg(10, 10, None, false, 0);
    let answer = read_header(Format::Jpeg, &cut[..25], true);
    assert_eq!(answer, Parsed::Invalid("the file ends inside its header"));
}

#[test]
fn a_decompression_bomb_header_reads_as_the_size_it_claims() {
    // Bounding pixels is the profile's rule, on the size the header gives.
    let h = found(Format::Png, &png(100_000, 100_000, None));
    assert_eq!(h.stored.pixels(), 10_000_000_000);
}

#[test]
fn transforms_compose_as_their_pixel_maps_do() {
    let all: Vec<Transform> = (1..=8).map(Transform::from_exif).collect();
    let (w, h) = (3, 2);
    for a in &all {
        for b in &all {
            let ab = a.then(*b);
            for y in 0..h {
                for x in 0..w {
                    let (ax, ay) = a.map((x, y), w, h);
                    let (aw, ah) = if a.transposes() { (h, w) } else { (w, h) };
                    assert_eq!(ab.map((x, y), w, h), b.map((ax, ay), aw, ah), "{a:?} {b:?}");
                }
            }
        }
        assert_eq!(Transform::from_exif(a.exif()), *a);
    }
    // EXIF 6: the stored first row becomes the rightmost column, top to bottom.
    let six = Transform::from_exif(6);
    assert_eq!(six.map((0, 0), 3, 2), (1, 0));
    assert_eq!(six.map((2, 0), 3, 2), (1, 2));
    // EXIF 5 is the transpose.
    assert_eq!(Transform::from_exif(5).map((2, 1), 3, 2), (1, 2));
}

fn fixtures() -> Vec<(Format, Vec<u8>)> {
    vec![
        (Format::Jpeg, jpeg(640, 480, Some(6), false, 3000)),
        (Format::Png, png(640, 480, Some(3))),
        (Format::Gif, gif(640, 480)),
        (Format::Webp, webp_lossy(640, 480)),
        (Format::Webp, webp_lossless(640, 480)),
        (Format::Webp, webp_extended(640, 480, Some(5), 900)),
        (Format::Avif, heif(&[b"avif"], 640, 480, &[(b"irot", 3)])),
        (Format::Heic, heif(&[b"heic"], 640, 480, &[(b"imir", 1)])),
    ]
}

const FORMATS: [Format; 6] = [
    Format::Jpeg,
    Format::Png,
    Format::Gif,
    Format::Webp,
    Format::Avif,
    Format::Heic,
];

proptest! {
    /// Any bytes: an answer, never a panic; a header found has no zero side.
    #[test]
    fn any_bytes_get_an_answer(bytes in proptest::collection::vec(any::<u8>(), 0..1500),
                               f in 0usize..6, complete: bool) {
        if let Parsed::Found(h) = read_header(FORMATS[f], &bytes, complete) {
            prop_assert!(h.stored.width > 0 && h.stored.height > 0);
        }
    }

    /// A real header with bytes changed, cut or appended: never a panic, and what a commit's
    /// reads find is what the whole mutated file says.
    #[test]
    fn mutated_headers_get_an_answer(which in 0usize..8,
                                     edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..6),
                                     cut in any::<u16>(), tail in proptest::collection::vec(any::<u8>(), 0..40)) {
        let (format, mut file) = fixtures().swap_remove(which);
        for (at, byte) in edits {
            let i = usize::from(at) % file.len();
            file[i] = byte;
        }
        file.truncate(usize::from(cut).max(1).min(file.len()));
        file.extend(tail);
        let (progressive, have) = read_like_a_commit(format, &file);
        let whole = read_header(format, &file, true);
        if progressive != whole {
            // Only a HEIF item's data, which a commit's reads need not reach, may tell them
            // apart: the render checks it on the whole file.
            prop_assert!(matches!(format, Format::Avif | Format::Heic) && have < file.len());
            // The whole file refused (for that reason, or for another found first).
            prop_assert!(matches!(whole, Parsed::Invalid(_)));
            prop_assert!(!matches!(progressive, Parsed::NeedMore(_)));
        }
    }

    /// A prefix of a valid header: `NeedMore` past the prefix, or the whole file's answer.
    #[test]
    fn a_prefix_never_answers_otherwise_than_the_whole(which in 0usize..8, len in 0usize..5000) {
        let (format, file) = fixtures().swap_remove(which);
        let whole = read_header(format, &file, true);
        prop_assert!(matches!(whole, Parsed::Found(_)));
        let len = len.min(file.len());
        match read_header(format, &file[..len], len == file.len()) {
            Parsed::NeedMore(n) => prop_assert!(n > len),
            answer => prop_assert_eq!(answer, whole),
        }
    }
}

#[test]
fn a_png_whose_later_chunks_cannot_be_walked_is_its_ihdr_size_as_stored() {
    let mut file = png(640, 480, None);
    file.truncate(33); // signature and IHDR only
    file.extend([0x5a; 500]);
    let (answer, read) = read_like_a_commit(Format::Png, &file);
    let Parsed::Found(h) = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(
        (h.stored, h.orientation),
        (dims(640, 480), Transform::UPRIGHT)
    );
    assert!(read <= file.len());
}

#[test]
fn an_exif_block_after_the_frame_header_still_turns_the_image() {
    // Review of issue 37: SOF first, then the EXIF APP1 (orientation 6), then the scan.
    let upright = jpeg(400, 300, None, true, 0);
    let sof_at = upright
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("SOF");
    let sos_at = upright
        .windows(2)
        .position(|w| w == [0xFF, 0xDA])
        .expect("SOS");
    let mut exif = b"Exif\0\0".to_vec();
    exif.extend(tiff(6, true));
    let mut file = upright[..sos_at].to_vec();
    file.extend(segment(0xE1, &exif));
    file.extend(&upright[sos_at..]);
    assert!(sof_at < sos_at);
    let h = found(Format::Jpeg, &file);
    assert_eq!(h.displayed(), dims(300, 400));
    // Without an EXIF block anywhere: upright, and the walk stops at the scan.
    assert_eq!(found(Format::Jpeg, &upright).displayed(), dims(400, 300));
    // Cut right after the frame header and not known to be whole: more is asked for; whole:
    // the frame's size as stored.
    let cut = &upright[..sos_at];
    assert!(matches!(
        read_header(Format::Jpeg, cut, false),
        Parsed::NeedMore(_)
    ));
    assert_eq!(
        read_header(Format::Jpeg, cut, true),
        Parsed::Found(Header {
            format: Format::Jpeg,
            stored: dims(400, 300),
            orientation: Transform::UPRIGHT
        })
    );
}

#[test]
fn the_images_own_scans_are_counted_past_entropy_data_and_not_an_exif_thumbnails() {
    // One scan, an EXIF block holding a thumbnail's own SOS: one.
    let mut with_thumbnail = vec![0xFF, 0xD8];
    let mut app1 = b"Exif\0\0".to_vec();
    app1.extend([0xFF, 0xD8, 0xFF, 0xDA, 0, 2, 0xFF, 0xD9]);
    with_thumbnail.extend(segment(0xE1, &app1));
    with_thumbnail.extend(&jpeg(64, 48, None, true, 0)[2..]);
    assert_eq!(
        jpeg_scan_count(&with_thumbnail),
        2,
        "the raw count sees both"
    );
    assert_eq!(jpeg_image_scans(&with_thumbnail), 1);
    // Three scans (one per component), entropy data with stuffed bytes and restarts between.
    let mut three = jpeg(64, 48, None, true, 0);
    three.truncate(three.len() - 2);
    for c in [2u8, 3] {
        three.extend([0xFF, 0x00, 0x55, 0xFF, 0xD0, 0x66]);
        three.extend(segment(0xDA, &[1, c, 0x11, 0, 0x3F, 0]));
        three.extend([0x77]);
    }
    three.extend([0xFF, 0xD9]);
    assert_eq!(jpeg_image_scans(&three), 3);
    // Cut short in a scan: the scans found so far.
    assert_eq!(jpeg_image_scans(&three[..three.len() - 12]), 2);
    assert_eq!(jpeg_image_scans(b"not a jpeg"), 0);
}

#[test]
fn a_pngs_compressed_chunks_are_summed_over_the_whole_file() {
    let mut p = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = 1u32.to_be_bytes().to_vec();
    ihdr.extend(1u32.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]);
    p.extend(chunk(b"IHDR", &ihdr));
    p.extend(chunk(b"iCCP", &[7; 100]));
    p.extend(chunk(b"IDAT", &[0x78, 0x9C, 0, 0]));
    p.extend(chunk(b"zTXt", &[7; 50]));
    p.extend(chunk(b"tEXt", &[7; 500]));
    p.extend(chunk(b"IEND", &[]));
    assert_eq!(png_compressed_chunk_bytes(&p), 150);
    // A chunk that claims more than the file holds still counts its claim (the first read).
    let mut cut = p[..33].to_vec();
    cut.extend(400_000u32.to_be_bytes());
    cut.extend(b"iCCP");
    assert_eq!(png_compressed_chunk_bytes(&cut), 400_000);
}
