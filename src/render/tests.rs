//! The JPEG path on JPEGs this test writes with the same library: sizes for each fit, every
//! EXIF orientation upright (a bright corner found where it belongs), gray sources, limits and
//! broken input. Pillow judges real files in the integration tests.

use super::jpeg::{render, Context};
use super::{Limits, RenderError};
use crate::domain::image::{Dimensions, Transform};
use crate::domain::variants::Fit;
use upcommit_turbojpeg::{Decoder, Encoder, Plane, SAMP_420, SAMP_GRAY};

const LIMITS: Limits = Limits {
    max_pixels: 100_000_000,
};

fn d(width: u32, height: u32) -> Dimensions {
    Dimensions { width, height }
}

/// A `w` × `h` JPEG, mid gray with its stored top-left quarter white.
fn jpeg(w: u32, h: u32, gray: bool) -> Vec<u8> {
    let mut y = Plane::new(w, h, 100);
    for row in 0..h / 4 {
        for col in 0..w / 4 {
            y.data[(row * w + col) as usize] = 250;
        }
    }
    let mut enc = Encoder::new().expect("encoder");
    if gray {
        return enc
            .encode_planes(&[y], w, h, SAMP_GRAY, 95)
            .expect("encode");
    }
    let (cw, ch) = upcommit_turbojpeg::plane_size(1, w, h, SAMP_420);
    let planes = [y, Plane::new(cw, ch, 128), Plane::new(cw, ch, 128)];
    enc.encode_planes(&planes, w, h, SAMP_420, 95)
        .expect("encode")
}

/// The rendition's luma, decoded at full size.
fn luma(bytes: &[u8]) -> Plane {
    let mut dec = Decoder::new().expect("decoder");
    let h = dec.header(bytes).expect("header");
    dec.decode_planes(bytes, &h, h.width, h.height)
        .expect("decode")
        .remove(0)
}

fn at(p: &Plane, x: u32, y: u32) -> u8 {
    p.data[(y * p.width + x) as usize]
}

#[test]
fn each_fit_gives_its_size_and_a_small_source_is_never_enlarged() {
    let mut ctx = Context::new().expect("context");
    let src = jpeg(800, 600, false);
    for (fit, want) in [
        (Fit::Cover, d(200, 200)),
        (Fit::Inside, d(200, 150)),
        (Fit::Contain, d(200, 200)),
    ] {
        let r = render(
            &mut ctx,
            &src,
            Transform::UPRIGHT,
            d(200, 200),
            fit,
            80,
            &LIMITS,
        )
        .expect("render");
        assert_eq!((r.width, r.height), (want.width, want.height), "{fit:?}");
        let l = luma(&r.bytes);
        assert_eq!(
            (l.width, l.height),
            (want.width, want.height),
            "{fit:?}: the bytes say so too"
        );
        assert_eq!(r.content_type, "image/jpeg");
    }
    // Contain pads with white above and below the 200 x 150 picture.
    let r = render(
        &mut ctx,
        &src,
        Transform::UPRIGHT,
        d(200, 200),
        Fit::Contain,
        80,
        &LIMITS,
    )
    .expect("render");
    let l = luma(&r.bytes);
    assert!(
        at(&l, 100, 5) > 245 && at(&l, 100, 195) > 245,
        "white padding"
    );
    let small = render(
        &mut ctx,
        &src,
        Transform::UPRIGHT,
        d(2000, 2000),
        Fit::Cover,
        80,
        &LIMITS,
    )
    .expect("render");
    assert_eq!(
        (small.width, small.height),
        (600, 600),
        "never enlarged: the box's shape at the source's own scale"
    );
}

#[test]
fn every_exif_orientation_comes_out_upright() {
    let mut ctx = Context::new().expect("context");
    // Stored 400 x 200, its top-left quarter bright. Shown with orientation `o`, the bright
    // corner is where `Transform::map` sends the stored top-left corner.
    let src = jpeg(400, 200, false);
    for o in 1..=8u16 {
        let t = Transform::from_exif(o);
        let r = render(&mut ctx, &src, t, d(100, 100), Fit::Inside, 90, &LIMITS).expect("render");
        let shown = if t.transposes() { (50, 100) } else { (100, 50) };
        assert_eq!((r.width, r.height), shown, "exif {o}");
        let l = luma(&r.bytes);
        let (cx, cy) = t.map((0, 0), 400, 200);
        // The corner's pixel in the rendition's scale, pulled a few pixels inwards.
        let sx = if cx == 0 { 3 } else { r.width - 4 };
        let sy = if cy == 0 { 3 } else { r.height - 4 };
        assert!(
            at(&l, sx, sy) > 200,
            "exif {o}: bright at ({sx}, {sy}), got {}",
            at(&l, sx, sy)
        );
        // And the opposite corner is not.
        let (ox, oy) = (r.width - 1 - sx, r.height - 1 - sy);
        assert!(at(&l, ox, oy) < 150, "exif {o}: dark at ({ox}, {oy})");
    }
}

#[test]
fn a_gray_source_renders_gray() {
    let mut ctx = Context::new().expect("context");
    let r = render(
        &mut ctx,
        &jpeg(300, 300, true),
        Transform::UPRIGHT,
        d(100, 100),
        Fit::Cover,
        80,
        &LIMITS,
    )
    .expect("render");
    let mut dec = Decoder::new().expect("decoder");
    assert_eq!(dec.header(&r.bytes).expect("header").subsamp, SAMP_GRAY);
}

#[test]
fn limits_and_broken_input_are_refused_with_their_reason() {
    let mut ctx = Context::new().expect("context");
    let src = jpeg(800, 600, false);
    let tight = Limits {
        max_pixels: 100_000,
    };
    assert_eq!(
        render(
            &mut ctx,
            &src,
            Transform::UPRIGHT,
            d(100, 100),
            Fit::Cover,
            80,
            &tight
        ),
        Err(RenderError::TooManyPixels {
            pixels: 480_000,
            max: 100_000
        })
    );
    for broken in [
        &src[..src.len() / 2],
        &src[..300],
        b"not a jpeg at all".as_slice(),
        &[],
    ] {
        let r = render(
            &mut ctx,
            broken,
            Transform::UPRIGHT,
            d(100, 100),
            Fit::Cover,
            80,
            &LIMITS,
        );
        assert!(
            matches!(r, Err(RenderError::Corrupt(_))),
            "{} bytes: {r:?}",
            broken.len()
        );
    }
    // The handles still work after the errors.
    assert!(render(
        &mut ctx,
        &src,
        Transform::UPRIGHT,
        d(100, 100),
        Fit::Cover,
        80,
        &LIMITS
    )
    .is_ok());
}

#[test]
fn a_jpeg_stored_as_rgb_is_refused_not_drawn_in_the_wrong_colours() {
    let mut ctx = Context::new().expect("context");
    let ycc = jpeg(64, 64, false);
    // TurboJPEG writes JFIF right after SOI; an Adobe APP14 with transform 0 in its place
    // makes the three components R, G and B.
    assert_eq!(&ycc[2..4], &[0xFF, 0xE0]);
    let jfif_len = usize::from(u16::from_be_bytes([ycc[4], ycc[5]]));
    let mut rgb = vec![0xFF, 0xD8, 0xFF, 0xEE, 0x00, 0x0E];
    rgb.extend(b"Adobe\x00\x64\x00\x00\x00\x00\x00");
    rgb.extend(&ycc[4 + jfif_len..]);
    let mut dec = Decoder::new().expect("decoder");
    assert_eq!(
        dec.header(&rgb).expect("header").colorspace,
        upcommit_turbojpeg::CS_RGB
    );
    assert_eq!(
        render(
            &mut ctx,
            &rgb,
            Transform::UPRIGHT,
            d(32, 32),
            Fit::Cover,
            80,
            &LIMITS
        ),
        Err(RenderError::Unsupported("a JPEG stored as RGB"))
    );
}

#[test]
fn the_frame_header_tells_baseline_from_progressive_and_its_sampling() {
    use crate::domain::image::jpeg_frame;
    let (w, h) = (64, 48);
    let y = Plane::new(w, h, 100);
    let (cw, ch) = upcommit_turbojpeg::plane_size(1, w, h, SAMP_420);
    let planes = [y, Plane::new(cw, ch, 128), Plane::new(cw, ch, 128)];
    let baseline = Encoder::new()
        .expect("encoder")
        .encode_planes(&planes, w, h, SAMP_420, 80)
        .expect("encode");
    let progressive = Encoder::new()
        .expect("encoder")
        .progressive()
        .encode_planes(&planes, w, h, SAMP_420, 80)
        .expect("encode");
    let fb = jpeg_frame(&baseline).expect("a frame");
    let fp = jpeg_frame(&progressive).expect("a frame");
    assert!(!fb.progressive() && fp.progressive(), "{fb:?} {fp:?}");
    for f in [&fb, &fp] {
        assert_eq!((f.width, f.height), (w, h));
        assert_eq!(f.sampling, vec![(2, 2), (1, 1), (1, 1)]);
    }
    // Both decode the same way.
    let mut ctx = Context::new().expect("context");
    for bytes in [&baseline, &progressive] {
        let r = render(
            &mut ctx,
            bytes,
            Transform::UPRIGHT,
            d(32, 24),
            Fit::Cover,
            80,
            &LIMITS,
        )
        .expect("render");
        assert_eq!((r.width, r.height), (32, 24));
    }
    // Cut before the frame header, or not a JPEG: none.
    assert_eq!(jpeg_frame(&baseline[..4]), None);
    assert_eq!(jpeg_frame(b"\x89PNG\r\n\x1a\n"), None);
    let mut zero_components = baseline.clone();
    let sof = zero_components
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("SOF0");
    zero_components[sof + 9] = 0;
    assert_eq!(jpeg_frame(&zero_components), None);
}

/// A PNG of `w` × `h` with `color`'s channels and `depth`, its pixels from `px(x, y)` (one
/// sample per channel, big-endian for 16-bit), with a palette and tRNS when given.
fn png_of(
    w: u32,
    h: u32,
    color: png::ColorType,
    depth: png::BitDepth,
    palette: Option<(&[u8], &[u8])>,
    px: impl Fn(u32, u32) -> Vec<u8>,
) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(color);
        enc.set_depth(depth);
        if let Some((plte, trns)) = palette {
            enc.set_palette(plte.to_vec());
            enc.set_trns(trns.to_vec());
        }
        let mut writer = enc.write_header().expect("header");
        let mut bytes = Vec::new();
        for y in 0..h {
            for x in 0..w {
                bytes.extend(px(x, y));
            }
        }
        writer.write_image_data(&bytes).expect("data");
    }
    out
}

fn png_render(
    bytes: &[u8],
    box_: Dimensions,
    orientation: Transform,
) -> Result<super::Rendered, RenderError> {
    super::png_here(bytes, orientation, box_, Fit::Inside, 90, &LIMITS)
}

#[test]
fn a_png_renders_with_its_transparency_flattened_onto_white() {
    // Left half transparent (black, alpha 0), right half opaque red.
    let bytes = png_of(
        40,
        30,
        png::ColorType::Rgba,
        png::BitDepth::Eight,
        None,
        |x, _| {
            if x < 20 {
                vec![0, 0, 0, 0]
            } else {
                vec![255, 0, 0, 255]
            }
        },
    );
    let r = png_render(&bytes, d(40, 30), Transform::UPRIGHT).expect("render");
    assert_eq!((r.width, r.height), (40, 30));
    let y = luma(&r.bytes);
    let at = |x: u32, yy: u32| y.data[(yy * y.width + x) as usize];
    assert!(at(5, 15) > 245, "transparent is white: {}", at(5, 15));
    assert!(
        (66..=86).contains(&at(35, 15)),
        "red's luma: {}",
        at(35, 15)
    );
}

#[test]
fn palette_sixteen_bit_and_gray_alpha_pngs_render() {
    // A palette of transparent black and opaque blue, with tRNS.
    let plte = [0, 0, 0, 0, 0, 255];
    let trns = [0, 255];
    let pal = png_of(
        32,
        32,
        png::ColorType::Indexed,
        png::BitDepth::Eight,
        Some((&plte, &trns)),
        |x, _| vec![u8::from(x >= 16)],
    );
    let y = luma(
        &png_render(&pal, d(32, 32), Transform::UPRIGHT)
            .expect("palette")
            .bytes,
    );
    assert!(
        y.data[16 * 32 + 2] > 245 && y.data[16 * 32 + 30] < 40,
        "white then blue"
    );
    // 16-bit gray, half intensity: gray JPEG of luma about 128.
    let deep = png_of(
        16,
        16,
        png::ColorType::Grayscale,
        png::BitDepth::Sixteen,
        None,
        |_, _| vec![0x80, 0x00],
    );
    let r = png_render(&deep, d(16, 16), Transform::UPRIGHT).expect("16-bit");
    let mut dec = Decoder::new().expect("decoder");
    assert_eq!(
        dec.header(&r.bytes).expect("jpeg").subsamp,
        SAMP_GRAY,
        "gray stays gray"
    );
    let y = luma(&r.bytes);
    assert!(
        y.data.iter().all(|&v| (120..=136).contains(&v)),
        "{:?}",
        &y.data[..4]
    );
    // Gray with alpha: half-transparent black over white is mid-gray.
    let ga = png_of(
        16,
        16,
        png::ColorType::GrayscaleAlpha,
        png::BitDepth::Eight,
        None,
        |_, _| vec![0, 128],
    );
    let y = luma(
        &png_render(&ga, d(16, 16), Transform::UPRIGHT)
            .expect("gray alpha")
            .bytes,
    );
    assert!(
        y.data.iter().all(|&v| (118..=136).contains(&v)),
        "{:?}",
        &y.data[..4]
    );
}

#[test]
fn a_png_is_turned_upright_cut_or_refused_like_a_jpeg() {
    // Bright stored top-left quarter; EXIF 6 turns it a quarter clockwise: top right.
    let bytes = png_of(
        40,
        20,
        png::ColorType::Rgb,
        png::BitDepth::Eight,
        None,
        |x, y| {
            let v = if x < 10 && y < 5 { 250 } else { 40 };
            vec![v, v, v]
        },
    );
    let r = png_render(&bytes, d(20, 40), Transform::from_exif(6)).expect("render");
    assert_eq!((r.width, r.height), (20, 40));
    let y = luma(&r.bytes);
    let at = |x: u32, yy: u32| y.data[(yy * y.width + x) as usize];
    assert!(
        at(18, 2) > 200 && at(2, 2) < 90 && at(18, 38) < 90,
        "upright"
    );
    // Cut short: corrupt. Past the pixel limit: refused before decoding.
    let cut = &bytes[..bytes.len() - 20];
    assert!(matches!(
        png_render(cut, d(20, 40), Transform::UPRIGHT),
        Err(RenderError::Corrupt(_))
    ));
    let tight = Limits { max_pixels: 100 };
    assert!(matches!(
        super::png_here(
            &bytes,
            Transform::UPRIGHT,
            d(20, 40),
            Fit::Inside,
            90,
            &tight
        ),
        Err(RenderError::TooManyPixels { .. })
    ));
    assert!(matches!(
        png_render(b"\x89PNG\r\n\x1a\nnot a png", d(20, 40), Transform::UPRIGHT),
        Err(RenderError::Corrupt(_))
    ));
}

/// An animated GIF on a `sw` × `sh` screen: its first frame `fw` × `fh` at (`left`, `top`), red
/// with a transparent left column; then `more` frames of blue covering the screen.
fn gif_of(sw: u16, sh: u16, first: (u16, u16, u16, u16), more: usize) -> Vec<u8> {
    let (left, top, fw, fh) = first;
    let mut out = Vec::new();
    {
        // Palette: 0 transparent (black), 1 red, 2 blue.
        let palette = [0, 0, 0, 255, 0, 0, 0, 0, 255];
        let mut enc = gif::Encoder::new(&mut out, sw, sh, &palette).expect("encoder");
        enc.set_repeat(gif::Repeat::Infinite).expect("repeat");
        let pixels: Vec<u8> = (0..fh)
            .flat_map(|_| (0..fw).map(|x| if x == 0 { 0 } else { 1 }))
            .collect();
        let mut frame = gif::Frame {
            left,
            top,
            width: fw,
            height: fh,
            transparent: Some(0),
            buffer: std::borrow::Cow::Owned(pixels),
            ..gif::Frame::default()
        };
        enc.write_frame(&frame).expect("first frame");
        for _ in 0..more {
            frame = gif::Frame {
                width: sw,
                height: sh,
                buffer: std::borrow::Cow::Owned(vec![2; usize::from(sw) * usize::from(sh)]),
                ..gif::Frame::default()
            };
            enc.write_frame(&frame).expect("frame");
        }
    }
    out
}

#[test]
fn a_gif_renders_its_first_frame_on_its_screen_and_nothing_after() {
    // 40 x 30 screen; the first frame 20 x 10 at (10, 10); then 3,000 blue frames.
    let bytes = gif_of(40, 30, (10, 10, 20, 10), 3000);
    let r = super::gif_here(
        &bytes,
        Transform::UPRIGHT,
        d(40, 30),
        Fit::Inside,
        95,
        &LIMITS,
    )
    .expect("render");
    assert_eq!((r.width, r.height), (40, 30));
    let mut dec = Decoder::new().expect("decoder");
    let hd = dec.header(&r.bytes).expect("jpeg");
    let planes = dec.decode_planes(&r.bytes, &hd, 40, 30).expect("decode");
    let (y, cr) = (&planes[0], &planes[2]);
    let at = |p: &Plane, x: u32, yy: u32| p.data[(yy * p.width + x) as usize];
    assert!(
        at(y, 2, 2) > 245 && at(y, 37, 27) > 245,
        "off the frame: white, not blue"
    );
    assert!(
        (60..=92).contains(&at(y, 20, 15)),
        "the frame is red: {}",
        at(y, 20, 15)
    );
    assert!(at(cr, 10, 7) > 200, "red's Cr: {}", at(cr, 10, 7));
    assert!(
        at(y, 10, 15) > 200,
        "its transparent column is white: {}",
        at(y, 10, 15)
    );
    // A frame reaching past the screen is cut to it; an empty screen or no frame is corrupt.
    let past = gif_of(16, 16, (10, 10, 20, 20), 0);
    let r = super::gif_here(
        &past,
        Transform::UPRIGHT,
        d(16, 16),
        Fit::Inside,
        90,
        &LIMITS,
    )
    .expect("render");
    assert_eq!((r.width, r.height), (16, 16));
    let cut = &bytes[..20];
    assert!(matches!(
        super::gif_here(cut, Transform::UPRIGHT, d(16, 16), Fit::Inside, 90, &LIMITS),
        Err(RenderError::Corrupt(_))
    ));
    let tight = Limits { max_pixels: 100 };
    assert!(matches!(
        super::gif_here(
            &bytes,
            Transform::UPRIGHT,
            d(16, 16),
            Fit::Inside,
            90,
            &tight
        ),
        Err(RenderError::TooManyPixels { .. })
    ));
}

#[test]
fn a_jpeg_of_too_many_scans_is_refused_before_it_is_decoded() {
    let progressive = {
        let (w, h) = (32, 32);
        let (cw, ch) = upcommit_turbojpeg::plane_size(1, w, h, SAMP_420);
        Encoder::new()
            .expect("encoder")
            .progressive()
            .encode_planes(
                &[
                    Plane::new(w, h, 90),
                    Plane::new(cw, ch, 128),
                    Plane::new(cw, ch, 128),
                ],
                w,
                h,
                SAMP_420,
                80,
            )
            .expect("encode")
    };
    let scans = crate::domain::image::jpeg_scan_count(&progressive);
    assert!((2..=super::MAX_JPEG_SCANS).contains(&scans), "{scans}");
    let mut ctx = Context::new().expect("context");
    assert!(render(
        &mut ctx,
        &progressive,
        Transform::UPRIGHT,
        d(16, 16),
        Fit::Cover,
        80,
        &LIMITS
    )
    .is_ok());
    // The last scan (its header and data) repeated until there are too many.
    let last = progressive
        .windows(2)
        .rposition(|w| w == [0xFF, 0xDA])
        .expect("a scan");
    let eoi = progressive.len() - 2;
    let mut bomb = progressive[..eoi].to_vec();
    while crate::domain::image::jpeg_scan_count(&bomb) <= super::MAX_JPEG_SCANS {
        bomb.extend_from_slice(&progressive[last..eoi]);
    }
    bomb.extend_from_slice(&[0xFF, 0xD9]);
    match render(
        &mut ctx,
        &bomb,
        Transform::UPRIGHT,
        d(16, 16),
        Fit::Cover,
        80,
        &LIMITS,
    ) {
        Err(RenderError::Corrupt(why)) => assert!(why.contains("scans"), "{why}"),
        other => panic!("refused for its scans, got {other:?}"),
    }
}

mod mutated {
    //! The decoders fed mutated images (issue 37, item 4): valid JPEGs (baseline, progressive,
    //! gray), PNGs and an animated GIF with bytes flipped, runs overwritten, cut short or spliced; each render
    //! answers a rendition or an error, never a panic or a crash, within the pixel limit.
    use super::*;
    use proptest::prelude::*;

    fn sources() -> Vec<Vec<u8>> {
        let progressive = {
            let (w, h) = (48, 40);
            let (cw, ch) = upcommit_turbojpeg::plane_size(1, w, h, SAMP_420);
            let mut y = Plane::new(w, h, 60);
            y.data[..200].fill(230);
            Encoder::new()
                .expect("encoder")
                .progressive()
                .encode_planes(
                    &[y, Plane::new(cw, ch, 100), Plane::new(cw, ch, 160)],
                    w,
                    h,
                    SAMP_420,
                    85,
                )
                .expect("encode")
        };
        vec![
            jpeg(64, 48, false),
            jpeg(40, 40, true),
            progressive,
            png_of(
                30,
                20,
                png::ColorType::Rgba,
                png::BitDepth::Eight,
                None,
                |x, y| {
                    vec![
                        (x * 8) as u8,
                        (y * 12) as u8,
                        90,
                        if x < 10 { 0 } else { 255 },
                    ]
                },
            ),
            png_of(
                25,
                25,
                png::ColorType::Grayscale,
                png::BitDepth::Sixteen,
                None,
                |x, _| vec![(x * 10) as u8, 7],
            ),
            gif_of(30, 20, (3, 2, 20, 10), 3),
        ]
    }

    #[derive(Debug, Clone)]
    enum Mutation {
        Flip { at: usize, bit: u8 },
        Overwrite { at: usize, run: usize, byte: u8 },
        Cut { at: usize },
        Splice { at: usize, from: usize, run: usize },
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
            (any::<usize>(), 1usize..64, any::<u8>())
                .prop_map(|(at, run, byte)| Mutation::Overwrite { at, run, byte }),
            any::<usize>().prop_map(|at| Mutation::Cut { at }),
            (any::<usize>(), any::<usize>(), 1usize..200)
                .prop_map(|(at, from, run)| Mutation::Splice { at, from, run }),
        ]
    }

    fn apply(mut b: Vec<u8>, m: &Mutation) -> Vec<u8> {
        let n = b.len();
        if n == 0 {
            return b;
        }
        match *m {
            Mutation::Flip { at, bit } => b[at % n] ^= 1 << bit,
            Mutation::Overwrite { at, run, byte } => {
                let at = at % n;
                let end = (at + run).min(n);
                b[at..end].fill(byte);
            }
            Mutation::Cut { at } => b.truncate(at % n),
            Mutation::Splice { at, from, run } => {
                let (at, from) = (at % n, from % n);
                let piece: Vec<u8> = b[from..(from + run).min(n)].to_vec();
                b.splice(at..at, piece);
            }
        }
        b
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
        #[test]
        fn a_mutated_image_renders_or_is_refused_never_panics(
            which in 0usize..6,
            muts in proptest::collection::vec(mutation(), 1..4),
            o in 1u16..=8,
            fit in prop_oneof![Just(Fit::Cover), Just(Fit::Contain), Just(Fit::Inside)],
        ) {
            let source = sources().swap_remove(which);
            let bytes = muts.iter().fold(source, apply);
            let limits = Limits { max_pixels: 1_000_000 };
            let t = Transform::from_exif(o);
            let rendered = match which {
                5 => super::super::gif_here(&bytes, t, d(24, 24), fit, 80, &limits),
                3 | 4 => super::super::png_here(&bytes, t, d(24, 24), fit, 80, &limits),
                _ => super::super::jpeg_here(&bytes, t, d(24, 24), fit, 80, &limits),
            };
            if let Ok(r) = rendered {
                prop_assert!(r.width >= 1 && r.height >= 1 && r.width <= 24 && r.height <= 24);
                prop_assert!(r.bytes.starts_with(&[0xFF, 0xD8]));
            }
        }
    }
}
