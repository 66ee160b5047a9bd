//! WebP renditions, WebP sources and HEIC and AVIF sources: what libwebp writes is read back with libwebp (Pillow
//! judges them again in the integration tests): size, colours, transparency kept (without the
//! hidden colour of transparent pixels bleeding into their neighbours), orientation, nothing
//! but image chunks.

use super::png_gif::png_of;
use super::*;

fn webp_of(
    source: Source,
    input: &[u8],
    t: Transform,
    box_: Dimensions,
    fit: Fit,
) -> Result<Rendered, RenderError> {
    super::super::render_here(source, input, t, box_, fit, Output::webp(90), &LIMITS)
}

/// The RIFF chunks' four-character codes of a WebP.
fn chunks(webp: &[u8]) -> Vec<String> {
    assert_eq!(&webp[..4], b"RIFF");
    assert_eq!(&webp[8..12], b"WEBP");
    let mut at = 12;
    let mut out = Vec::new();
    while at + 8 <= webp.len() {
        out.push(String::from_utf8_lossy(&webp[at..at + 4]).into_owned());
        let len = u32::from_le_bytes(webp[at + 4..at + 8].try_into().expect("4")) as usize;
        at += 8 + len + (len & 1);
    }
    out
}

fn rgba_at(px: &[u8], w: u32, x: u32, y: u32) -> [u8; 4] {
    let i = ((y * w + x) * 4) as usize;
    [px[i], px[i + 1], px[i + 2], px[i + 3]]
}

#[test]
fn a_jpeg_renders_as_an_upright_webp_of_only_image_chunks() {
    // Stored 80 x 40 with the stored top-left quarter bright; EXIF 6 shows it turned a quarter
    // clockwise: the bright corner is then top-right.
    let src = jpeg(80, 40, false);
    let r = webp_of(
        Source::Jpeg,
        &src,
        Transform::from_exif(6),
        d(20, 40),
        Fit::Inside,
    )
    .expect("render");
    assert_eq!(r.content_type, "image/webp");
    assert_eq!((r.width, r.height), (20, 40));
    assert_eq!(chunks(&r.bytes), ["VP8 "], "only the image");
    let (px, w, h) = upcommit_webp::decode_rgba(&r.bytes).expect("decodes");
    assert_eq!((w, h), (20, 40));
    let bright = rgba_at(&px, w, w - 3, 3);
    let dark = rgba_at(&px, w, 3, 3);
    assert!(bright[0] > 200 && dark[0] < 130, "{bright:?} {dark:?}");
}

#[test]
fn a_transparent_png_keeps_its_alpha_in_a_webp_and_its_hidden_colour_does_not_bleed() {
    // Left half opaque red; right half fully transparent *green* (a colour nobody sees).
    let src = png_of(
        64,
        32,
        png::ColorType::Rgba,
        png::BitDepth::Eight,
        None,
        |x, _| {
            if x < 32 {
                vec![255, 0, 0, 255]
            } else {
                vec![0, 255, 0, 0]
            }
        },
    );
    let r = webp_of(Source::Png, &src, Transform::UPRIGHT, d(16, 8), Fit::Inside).expect("render");
    assert_eq!((r.width, r.height), (16, 8));
    let names = chunks(&r.bytes);
    assert!(names.contains(&"ALPH".to_owned()), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| ["EXIF", "ICCP", "XMP "].contains(&n.as_str())),
        "{names:?}"
    );
    let (px, w, _) = upcommit_webp::decode_rgba(&r.bytes).expect("decodes");
    assert_eq!(rgba_at(&px, w, 2, 4)[3], 255);
    assert_eq!(rgba_at(&px, w, 13, 4)[3], 0);
    // The last opaque column, next to the transparent green: still red, not brownish.
    let edge = rgba_at(&px, w, 7, 4);
    assert!(edge[3] > 100, "{edge:?}");
    assert!(
        edge[0] > 200 && edge[1] < 60,
        "green bled into red: {edge:?}"
    );
    // The same PNG as a JPEG: flattened onto white.
    let j = super::jpeg_of(
        Source::Png,
        &src,
        Transform::UPRIGHT,
        d(16, 8),
        Fit::Inside,
        90,
        &LIMITS,
    )
    .expect("render");
    assert_eq!(j.content_type, "image/jpeg");
}

#[test]
fn contain_pads_a_transparent_source_with_transparency_and_an_opaque_one_with_white() {
    let clear = png_of(
        80,
        40,
        png::ColorType::Rgba,
        png::BitDepth::Eight,
        None,
        |x, _| vec![0, 0, 255, if x < 40 { 255 } else { 128 }],
    );
    let r = webp_of(
        Source::Png,
        &clear,
        Transform::UPRIGHT,
        d(40, 40),
        Fit::Contain,
    )
    .expect("render");
    let (px, w, h) = upcommit_webp::decode_rgba(&r.bytes).expect("decodes");
    assert_eq!((w, h), (40, 40));
    assert_eq!(rgba_at(&px, w, 20, 2)[3], 0, "padding is transparent");
    assert_eq!(rgba_at(&px, w, 5, 20)[3], 255);
    assert!(rgba_at(&px, w, 35, 20)[3].abs_diff(128) < 8);
    let opaque = png_of(
        80,
        40,
        png::ColorType::Rgb,
        png::BitDepth::Eight,
        None,
        |_, _| vec![0, 0, 0],
    );
    let r = webp_of(
        Source::Png,
        &opaque,
        Transform::UPRIGHT,
        d(40, 40),
        Fit::Contain,
    )
    .expect("render");
    assert_eq!(
        chunks(&r.bytes),
        ["VP8 "],
        "no alpha chunk for an opaque image"
    );
    let (px, w, _) = upcommit_webp::decode_rgba(&r.bytes).expect("decodes");
    assert!(
        rgba_at(&px, w, 20, 2)[0] > 240,
        "white padding: {:?}",
        rgba_at(&px, w, 20, 2)
    );
    assert!(rgba_at(&px, w, 20, 20)[0] < 20, "the black image");
}

#[test]
fn a_webp_source_renders_to_either_format_and_bad_ones_are_refused() {
    let mut rgba = Vec::new();
    for y in 0..30u32 {
        for x in 0..60u32 {
            let a = if y < 15 { 255 } else { 0 };
            rgba.extend_from_slice(&[if x < 30 { 250 } else { 10 }, 10, 10, a]);
        }
    }
    let src = upcommit_webp::encode(&rgba, 60, 30, 4, 95).expect("encode");
    let r = webp_of(
        Source::Webp,
        &src,
        Transform::UPRIGHT,
        d(30, 30),
        Fit::Inside,
    )
    .expect("render");
    assert_eq!((r.width, r.height), (30, 15));
    let (px, w, _) = upcommit_webp::decode_rgba(&r.bytes).expect("decodes");
    assert!(rgba_at(&px, w, 3, 3)[0] > 200 && rgba_at(&px, w, 26, 3)[0] < 60);
    assert_eq!(rgba_at(&px, w, 3, 13)[3], 0, "its transparent half");
    let j = super::jpeg_of(
        Source::Webp,
        &src,
        Transform::UPRIGHT,
        d(30, 30),
        Fit::Inside,
        90,
        &LIMITS,
    )
    .expect("render");
    assert_eq!((j.width, j.height), (30, 15));
    // Cut short, not a WebP, more pixels than allowed (refused before decoding).
    for bad in [
        &src[..src.len() / 2],
        &b"RIFF\x10\0\0\0WEBPVP8 garbage!!"[..],
    ] {
        assert!(matches!(
            webp_of(
                Source::Webp,
                bad,
                Transform::UPRIGHT,
                d(30, 30),
                Fit::Inside
            ),
            Err(RenderError::Corrupt(_))
        ));
    }
    let tight = Limits { max_pixels: 100 };
    assert!(matches!(
        super::super::render_here(
            Source::Webp,
            &src,
            Transform::UPRIGHT,
            d(30, 30),
            Fit::Inside,
            Output::webp(80),
            &tight
        ),
        Err(RenderError::TooManyPixels { .. })
    ));
}

#[test]
fn an_animated_webp_is_not_rendered() {
    // A VP8X header whose flags say "animation" (bit 1), 16 x 16, and an empty ANIM chunk.
    let mut body = b"WEBPVP8X".to_vec();
    body.extend_from_slice(&10u32.to_le_bytes());
    body.extend_from_slice(&[0x02, 0, 0, 0, 15, 0, 0, 15, 0, 0]);
    body.extend_from_slice(b"ANIM");
    body.extend_from_slice(&6u32.to_le_bytes());
    body.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    let mut webp = b"RIFF".to_vec();
    webp.extend_from_slice(&(body.len() as u32).to_le_bytes());
    webp.extend_from_slice(&body);
    assert!(upcommit_webp::features(&webp).expect("features").animated);
    assert!(matches!(
        webp_of(
            Source::Webp,
            &webp,
            Transform::UPRIGHT,
            d(8, 8),
            Fit::Inside
        ),
        Err(RenderError::Unsupported(_))
    ));
}

#[test]
fn heic_and_avif_sources_render_to_either_format_keeping_alpha_in_a_webp() {
    let (w, h) = (96u32, 48u32);
    let mut rgba = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let a = if y < 24 { 255 } else { 0 };
            rgba.extend_from_slice(&if x < 48 {
                [230, 20, 20, a]
            } else {
                [20, 20, 230, a]
            });
        }
    }
    for codec in [upcommit_heif::Codec::Hevc, upcommit_heif::Codec::Av1] {
        let file = upcommit_heif::encode_for_tests(&rgba, w, h, codec).expect("encode");
        let r = webp_of(
            Source::Heif,
            &file,
            Transform::UPRIGHT,
            d(48, 48),
            Fit::Inside,
        )
        .expect("render");
        assert_eq!((r.width, r.height), (48, 24), "{codec:?}");
        let (px, pw, _) = upcommit_webp::decode_rgba(&r.bytes).expect("webp");
        let red = rgba_at(&px, pw, 4, 4);
        let blue = rgba_at(&px, pw, 44, 4);
        assert!(
            red[0] > 180 && red[2] < 90 && red[3] == 255,
            "{codec:?} {red:?}"
        );
        assert!(blue[2] > 180 && blue[0] < 90, "{codec:?} {blue:?}");
        assert_eq!(
            rgba_at(&px, pw, 4, 20)[3],
            0,
            "{codec:?}: its transparent half"
        );
        let j = super::jpeg_of(
            Source::Heif,
            &file,
            Transform::UPRIGHT,
            d(48, 48),
            Fit::Cover,
            90,
            &LIMITS,
        )
        .expect("render");
        assert_eq!((j.width, j.height, j.content_type), (48, 48, "image/jpeg"));
        let tight = Limits { max_pixels: 1000 };
        assert!(matches!(
            super::super::render_here(
                Source::Heif,
                &file,
                Transform::UPRIGHT,
                d(48, 48),
                Fit::Cover,
                Output::jpeg(80),
                &tight
            ),
            // Refused from its sizes, before libheif decodes anything.
            Err(RenderError::TooManyPixels { max: 1000, .. })
        ));
        assert!(matches!(
            webp_of(
                Source::Heif,
                &file[..file.len() / 2],
                Transform::UPRIGHT,
                d(48, 48),
                Fit::Cover
            ),
            Err(RenderError::Corrupt(_))
        ));
    }
}

#[test]
fn an_avif_rendition_is_an_avif_of_the_right_size_keeping_transparency() {
    let src = png_of(
        64,
        32,
        png::ColorType::Rgba,
        png::BitDepth::Eight,
        None,
        |x, _| {
            if x < 32 {
                vec![230, 20, 20, 255]
            } else {
                vec![0, 255, 0, 0]
            }
        },
    );
    let r = super::super::render_here(
        Source::Png,
        &src,
        Transform::from_exif(6),
        d(16, 32),
        Fit::Inside,
        Output::avif(70),
        &LIMITS,
    )
    .expect("render");
    assert_eq!(r.content_type, "image/avif");
    assert_eq!((r.width, r.height), (16, 32), "turned a quarter");
    assert_eq!(&r.bytes[4..12], b"ftypavif");
    let back = upcommit_heif::decode(&r.bytes, 10_000).expect("decodes");
    assert_eq!((back.width, back.height), (16, 32));
    assert!(back.has_alpha);
    assert!(back.icc.is_none(), "no profile written");
    let at = |x: u32, y: u32| &back.pixels[((y * 16 + x) * 4) as usize..][..4];
    // EXIF 6: the stored left (red, opaque) half is shown on top.
    assert!(at(8, 4)[0] > 180 && at(8, 4)[3] > 240, "{:?}", at(8, 4));
    assert!(at(8, 28)[3] < 20, "the transparent half: {:?}", at(8, 28));
}

#[test]
fn slivers_render_in_every_format() {
    for (w, h) in [(1, 1), (200, 1), (1, 200), (3, 2)] {
        let src = png_of(
            w,
            h,
            png::ColorType::Rgb,
            png::BitDepth::Eight,
            None,
            |_, _| vec![200, 100, 50],
        );
        for out in [Output::jpeg(80), Output::webp(80), Output::avif(60)] {
            for fit in [Fit::Cover, Fit::Contain, Fit::Inside] {
                let r = super::super::render_here(
                    Source::Png,
                    &src,
                    Transform::from_exif(6),
                    d(60, 60),
                    fit,
                    out,
                    &LIMITS,
                );
                assert!(r.is_ok(), "{w}x{h} {out:?} {fit:?}: {r:?}");
            }
        }
    }
}
