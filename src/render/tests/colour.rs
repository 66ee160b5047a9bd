//! Colour: CMYK JPEGs (Adobe's inverted inks, as Photoshop, Pillow and TurboJPEG write them)
//! and JPEGs and PNGs whose ICC profile is not sRGB are drawn in sRGB; an sRGB or absent profile leaves
//! the pixels as they are. Pillow judges CMYK files it writes itself in the integration run.

use super::*;
use upcommit_turbojpeg::Pixels;

/// `jpeg` rendered to a `w` × `h` JPEG and decoded to RGB.
fn rendered_rgb(jpeg: &[u8], w: u32, h: u32) -> Vec<u8> {
    let mut ctx = Context::new().expect("context");
    let r = render(
        &mut ctx,
        jpeg,
        Transform::UPRIGHT,
        d(w, h),
        Fit::Cover,
        95,
        &LIMITS,
    )
    .expect("render");
    assert_eq!((r.width, r.height), (w, h));
    Decoder::new()
        .expect("decoder")
        .decode_pixels(&r.bytes, w, h, Pixels::Rgb)
        .expect("decode")
}

fn close(got: &[u8], want: [u8; 3], tol: u8) -> bool {
    got.iter().zip(want).all(|(g, w)| g.abs_diff(w) <= tol)
}

#[test]
fn a_cmyk_jpeg_is_drawn_in_rgb_by_its_inks() {
    // 80 x 80, quadrants of inks (C, M, Y, K; 1 = full ink), stored inverted:
    // top-left none (white), top-right cyan, bottom-left magenta + yellow (red), bottom-right
    // full black.
    let inks = |x: u32, y: u32| match (x < 40, y < 40) {
        (true, true) => [0u8, 0, 0, 0],
        (false, true) => [255, 0, 0, 0],
        (true, false) => [0, 255, 255, 0],
        (false, false) => [0, 0, 0, 255],
    };
    let mut px = Vec::new();
    for y in 0..80 {
        for x in 0..80 {
            px.extend(inks(x, y).map(|v| 255 - v));
        }
    }
    let jpeg = Encoder::new()
        .expect("encoder")
        .encode_pixels(&px, 80, 80, Pixels::Cmyk, SAMP_420, 95)
        .expect("encode");
    let colour = crate::domain::image::jpeg_colour(&jpeg);
    assert!(colour.adobe, "TurboJPEG writes Adobe's segment for CMYK");
    let header = Decoder::new().expect("d").header(&jpeg).expect("header");
    assert_eq!(header.colorspace, upcommit_turbojpeg::CS_YCCK);
    let rgb = rendered_rgb(&jpeg, 40, 40);
    let at = |x: u32, y: u32| &rgb[((y * 40 + x) * 3) as usize..][..3];
    assert!(close(at(5, 5), [255, 255, 255], 8), "white {:?}", at(5, 5));
    assert!(close(at(35, 5), [0, 255, 255], 12), "cyan {:?}", at(35, 5));
    assert!(close(at(5, 35), [255, 0, 0], 12), "red {:?}", at(5, 35));
    assert!(close(at(35, 35), [0, 0, 0], 8), "black {:?}", at(35, 35));
}

/// `jpeg` with an APP2 ICC_PROFILE segment holding `icc` right after SOI.
pub(super) fn with_icc(jpeg: &[u8], icc: &[u8]) -> Vec<u8> {
    let mut body = b"ICC_PROFILE\0\x01\x01".to_vec();
    body.extend(icc);
    let mut out = vec![0xFF, 0xD8, 0xFF, 0xE2];
    out.extend(u16::try_from(body.len() + 2).expect("small").to_be_bytes());
    out.extend(body);
    out.extend(&jpeg[2..]);
    out
}

#[test]
fn a_wide_gamut_profile_is_converted_to_srgb_and_an_srgb_one_is_not() {
    // Left half mid gray, right half a green (60, 180, 60).
    let mut px = Vec::new();
    for _ in 0..64 {
        for x in 0..64 {
            px.extend(if x < 32 {
                [128u8, 128, 128]
            } else {
                [60, 180, 60]
            });
        }
    }
    let plain = Encoder::new()
        .expect("encoder")
        .encode_pixels(&px, 64, 64, Pixels::Rgb, upcommit_turbojpeg::SAMP_444, 95)
        .expect("encode");
    let adobe_rgb = upcommit_lcms::rgb_profile([(0.64, 0.33), (0.21, 0.71), (0.15, 0.06)], 2.2)
        .expect("profile");
    let wide = with_icc(&plain, &adobe_rgb);
    let as_is = rendered_rgb(&plain, 32, 32);
    let converted = rendered_rgb(&wide, 32, 32);
    let at = |v: &[u8], x: u32| v[((16 * 32 + x) * 3) as usize..][..3].to_vec();
    assert!(
        close(&at(&as_is, 24), [60, 180, 60], 8),
        "{:?}",
        at(&as_is, 24)
    );
    // The same numbers in Adobe RGB are a more saturated green: less red and blue in sRGB.
    let g = at(&converted, 24);
    assert!(g[0] + 10 < 60 && g[2] + 5 < 60 && g[1] >= 170, "{g:?}");
    assert!(close(&at(&converted, 4), [128, 128, 128], 8), "gray stays");
    // No profile in the rendition either way.
    let mut ctx = Context::new().expect("context");
    let r = render(
        &mut ctx,
        &wide,
        Transform::UPRIGHT,
        d(32, 32),
        Fit::Cover,
        90,
        &LIMITS,
    )
    .expect("render");
    assert_eq!(crate::domain::image::jpeg_colour(&r.bytes).icc, None);
}

#[test]
fn a_pngs_wide_gamut_profile_is_converted_and_its_alpha_kept() {
    let adobe_rgb = upcommit_lcms::rgb_profile([(0.64, 0.33), (0.21, 0.71), (0.15, 0.06)], 2.2)
        .expect("profile");
    let png_with = |icc: Option<&[u8]>| {
        let mut info = png::Info::with_size(32, 32);
        info.color_type = png::ColorType::Rgba;
        info.bit_depth = png::BitDepth::Eight;
        info.icc_profile = icc.map(|b| std::borrow::Cow::Owned(b.to_vec()));
        let mut out = Vec::new();
        {
            let enc = png::Encoder::with_info(&mut out, info).expect("encoder");
            let mut w = enc.write_header().expect("header");
            let px: Vec<u8> = (0..32 * 32)
                .flat_map(|i| {
                    if i % 32 < 16 {
                        [60, 180, 60, 255]
                    } else {
                        [60, 180, 60, 0]
                    }
                })
                .collect();
            w.write_image_data(&px).expect("data");
        }
        out
    };
    let render_webp = |png: &[u8]| {
        let r = crate::render::render_here(
            Source::Png,
            png,
            Transform::UPRIGHT,
            d(32, 32),
            Fit::Cover,
            Output::webp(95),
            &LIMITS,
        )
        .expect("render");
        upcommit_webp::decode_rgba(&r.bytes).expect("webp").0
    };
    let plain = render_webp(&png_with(None));
    let wide = render_webp(&png_with(Some(&adobe_rgb)));
    let at = |v: &[u8], x: usize| v[(16 * 32 + x) * 4..][..4].to_vec();
    assert!(
        close(&at(&plain, 4)[..3], [60, 180, 60], 8),
        "{:?}",
        at(&plain, 4)
    );
    let g = at(&wide, 4);
    assert!(g[0] + 10 < 60 && g[1] >= 170 && g[3] == 255, "{g:?}");
    assert_eq!(at(&wide, 28)[3], 0, "alpha untouched by the conversion");
}

#[test]
fn a_profile_that_is_garbage_cut_or_of_another_colour_space_is_ignored_not_fatal() {
    let mut px = Vec::new();
    for _ in 0..32 * 32 {
        px.extend([60u8, 180, 60]);
    }
    let plain = Encoder::new()
        .expect("encoder")
        .encode_pixels(&px, 32, 32, Pixels::Rgb, upcommit_turbojpeg::SAMP_444, 95)
        .expect("encode");
    let wide = upcommit_lcms::rgb_profile([(0.64, 0.33), (0.21, 0.71), (0.15, 0.06)], 2.2)
        .expect("profile");
    let mut cut = wide.clone();
    cut.truncate(wide.len() / 2);
    // A gray profile's header on an RGB image: the colour space is not the image's.
    let mut gray = wide.clone();
    gray[16..20].copy_from_slice(b"GRAY");
    for icc in [vec![0x41u8; 3000], cut, gray, vec![0u8; 200]] {
        let rgb = rendered_rgb(&with_icc(&plain, &icc), 16, 16);
        assert!(
            close(&rgb[(8 * 16 + 8) * 3..][..3], [60, 180, 60], 8),
            "drawn as it is: {:?}",
            &rgb[(8 * 16 + 8) * 3..][..3]
        );
    }
}

#[test]
fn a_webps_wide_gamut_iccp_profile_is_converted() {
    let px: Vec<u8> = (0..32 * 32).flat_map(|_| [60u8, 180, 60, 255]).collect();
    let plain = upcommit_webp::encode(&px, 32, 32, 4, 95).expect("webp");
    // The extended form: VP8X (flag: ICC), ICCP, then the plain file's image chunk.
    let profile = upcommit_lcms::rgb_profile([(0.64, 0.33), (0.21, 0.71), (0.15, 0.06)], 2.2)
        .expect("profile");
    let mut body = b"WEBPVP8X".to_vec();
    body.extend(10u32.to_le_bytes());
    body.extend([0x20, 0, 0, 0, 31, 0, 0, 31, 0, 0]);
    body.extend(b"ICCP");
    body.extend((profile.len() as u32).to_le_bytes());
    body.extend(&profile);
    if profile.len() % 2 == 1 {
        body.push(0);
    }
    body.extend(&plain[12..]);
    let mut wide = b"RIFF".to_vec();
    wide.extend((body.len() as u32).to_le_bytes());
    wide.extend(body);
    assert_eq!(crate::domain::image::webp_icc(&wide), Some(&profile[..]));
    let render = |src: &[u8]| {
        let r = crate::render::render_here(
            Source::Webp,
            src,
            Transform::UPRIGHT,
            d(16, 16),
            Fit::Cover,
            Output::webp(95),
            &LIMITS,
        )
        .expect("render");
        upcommit_webp::decode_rgba(&r.bytes).expect("webp").0[(8 * 16 + 8) * 4..][..3].to_vec()
    };
    assert!(close(&render(&plain), [60, 180, 60], 10));
    let g = render(&wide);
    assert!(g[0] + 10 < 60 && g[1] >= 165, "converted: {g:?}");
}
