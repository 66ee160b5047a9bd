//! The JPEG path on JPEGs this test writes with the same library: sizes for each fit, every
//! EXIF orientation upright (a bright corner found where it belongs), gray sources, limits and
//! broken input. Pillow judges real files in the integration tests.

use super::jpeg::Context;
use super::{Limits, Output, RenderError, Rendered, Source};
use crate::domain::image::{Dimensions, Transform};
use crate::domain::variants::Fit;
use upcommit_turbojpeg::{Decoder, Encoder, Plane, SAMP_420, SAMP_GRAY};

const LIMITS: Limits = Limits {
    max_pixels: 100_000_000,
};

/// The JPEG path, to a JPEG of `quality`.
fn render(
    ctx: &mut Context,
    input: &[u8],
    t: Transform,
    box_: Dimensions,
    fit: Fit,
    quality: u8,
    limits: &Limits,
) -> Result<Rendered, RenderError> {
    super::jpeg::render(ctx, input, t, box_, fit, Output::jpeg(quality), limits)
}

/// `source` rendered on this thread to a JPEG of `quality`.
pub(super) fn jpeg_of(
    source: Source,
    input: &[u8],
    t: Transform,
    box_: Dimensions,
    fit: Fit,
    quality: u8,
    limits: &Limits,
) -> Result<Rendered, RenderError> {
    super::render_here(source, input, t, box_, fit, Output::jpeg(quality), limits)
}

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
fn a_jpeg_stored_as_rgb_is_drawn_in_its_own_colours() {
    let mut ctx = Context::new().expect("context");
    // Three full-size components holding R, G and B (200, 50, 100), written as if they were Y,
    // Cb and Cr; TurboJPEG writes JFIF right after SOI: an Adobe APP14 with transform 0 in its
    // place makes the components R, G and B.
    let planes = [
        Plane::new(64, 64, 200),
        Plane::new(64, 64, 50),
        Plane::new(64, 64, 100),
    ];
    let ycc = Encoder::new()
        .expect("encoder")
        .encode_planes(&planes, 64, 64, upcommit_turbojpeg::SAMP_444, 95)
        .expect("encode");
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
    let r = render(
        &mut ctx,
        &rgb,
        Transform::UPRIGHT,
        d(32, 32),
        Fit::Cover,
        90,
        &LIMITS,
    )
    .expect("render");
    let px = dec
        .decode_pixels(&r.bytes, 32, 32, upcommit_turbojpeg::Pixels::Rgb)
        .expect("decode");
    let at = &px[(16 * 32 + 16) * 3..][..3];
    for (got, want) in at.iter().zip([200u8, 50, 100]) {
        assert!(got.abs_diff(want) <= 6, "{at:?}");
    }
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

mod colour;
mod heif_sizes;
mod mutated;
mod png_gif;
mod webp;

/// A corrupt JPEG does not break the next render on the same thread (outside review of issue
/// 37: a bogus Huffman table left the thread's TurboJPEG handle failing every later JPEG).
#[test]
fn a_corrupt_jpeg_does_not_poison_the_threads_next_render() {
    let good = jpeg(64, 48, false);
    let mut bad = good.clone();
    let dht = bad
        .windows(2)
        .position(|w| w == [0xFF, 0xC4])
        .expect("a DHT segment");
    // The table's 16 code counts (after the length and the class/id byte) all 255: bogus.
    for b in &mut bad[dht + 5..dht + 21] {
        *b = 0xFF;
    }
    let render = |bytes: &[u8]| {
        jpeg_of(
            Source::Jpeg,
            bytes,
            Transform::UPRIGHT,
            d(32, 24),
            Fit::Cover,
            80,
            &LIMITS,
        )
    };
    // On one thread, as a blocking thread runs them: bad, then good, a few times over.
    std::thread::spawn(move || {
        for _ in 0..3 {
            assert!(render(&bad).is_err(), "the bogus table is refused");
            let after = render(&good);
            assert!(after.is_ok(), "the next JPEG renders: {after:?}");
        }
    })
    .join()
    .expect("the render thread");
}
