//! PNG and GIF sources: colour types, depths, transparency, orientation, first frames.

use super::*;

/// A PNG of `w` × `h` with `color`'s channels and `depth`, its pixels from `px(x, y)` (one
/// sample per channel, big-endian for 16-bit), with a palette and tRNS when given.
pub(super) fn png_of(
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
) -> Result<crate::render::Rendered, RenderError> {
    super::jpeg_of(
        Source::Png,
        bytes,
        orientation,
        box_,
        Fit::Inside,
        90,
        &LIMITS,
    )
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
        super::jpeg_of(
            Source::Png,
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
pub(super) fn gif_of(sw: u16, sh: u16, first: (u16, u16, u16, u16), more: usize) -> Vec<u8> {
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
    let r = super::jpeg_of(
        Source::Gif,
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
    let r = super::jpeg_of(
        Source::Gif,
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
        super::jpeg_of(
            Source::Gif,
            cut,
            Transform::UPRIGHT,
            d(16, 16),
            Fit::Inside,
            90,
            &LIMITS
        ),
        Err(RenderError::Corrupt(_))
    ));
    let tight = Limits { max_pixels: 100 };
    assert!(matches!(
        super::jpeg_of(
            Source::Gif,
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
fn a_first_frame_larger_than_its_screen_is_refused_not_decoded() {
    // A 16 x 16 screen whose first frame is 2,000 x 2,000: the budget reserved the screen.
    let bomb = gif_of(16, 16, (0, 0, 2000, 2000), 0);
    let r = super::jpeg_of(
        Source::Gif,
        &bomb,
        Transform::UPRIGHT,
        d(16, 16),
        Fit::Inside,
        90,
        &LIMITS,
    );
    assert!(matches!(r, Err(RenderError::Corrupt(_))), "{r:?}");
    // A frame a little past its screen (as some writers leave) still renders, cut to it.
    let past = gif_of(16, 16, (10, 10, 20, 20), 0);
    assert!(super::jpeg_of(
        Source::Gif,
        &past,
        Transform::UPRIGHT,
        d(16, 16),
        Fit::Inside,
        90,
        &LIMITS
    )
    .is_ok());
}
