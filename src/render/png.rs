//! PNG sources: decoded whole with the `png` crate (palettes and bit depths under 8 expanded,
//! 16-bit samples cut to 8; an interlaced image comes out whole; an animated PNG's default
//! image), turned into full-resolution Y, Cb and Cr planes (BT.601 full range: JPEG's YCbCr) or
//! a Y plane for a gray image, then drawn as a JPEG's planes are. Transparency is flattened
//! onto white for a JPEG (it has no alpha) and kept, premultiplied, for a WebP. An ICC profile
//! (iCCP) that is not sRGB is converted to sRGB (Little CMS). Nothing of the PNG's chunks (text,
//! time, EXIF, ICC) is written.

use fast_image_resize::Resizer;
use png::{BitDepth, ColorType, Transformations};
use upcommit_turbojpeg::{Encoder, Plane};

use super::draw::{draw, stored_rect, swapped, Scaled};
use super::output::{premultiplied_chroma, premultiplied_luma, ycbcr, Output};
use super::{Limits, RenderError, Rendered};
use crate::domain::image::{Dimensions, Transform};
use crate::domain::variants::{plan, Fit};

fn corrupt(e: impl std::fmt::Display) -> RenderError {
    RenderError::Corrupt(e.to_string())
}

/// `c` shown over white with opacity `a`.
fn over_white(c: u8, a: u8) -> u8 {
    let (c, a) = (u32::from(c), u32::from(a));
    ((c * a + 255 * (255 - a) + 127) / 255) as u8
}

/// Y, Cb and Cr planes of `width` × `height` 8-bit RGBA rows without padding, with the alpha
/// plane (premultiplied planes) when `keep_alpha` and some pixel is not opaque, else
/// transparency flattened onto white.
pub(super) fn rgba_planes(
    buf: &[u8],
    width: u32,
    height: u32,
    keep_alpha: bool,
) -> (Vec<Plane>, Option<Plane>) {
    planes(
        buf,
        width,
        height,
        width as usize * 4,
        ColorType::Rgba,
        keep_alpha,
    )
}

/// Y, Cb and Cr planes of `width` × `height` 8-bit RGB rows without padding.
pub(super) fn rgb_planes(buf: &[u8], width: u32, height: u32) -> Vec<Plane> {
    planes(
        buf,
        width,
        height,
        width as usize * 3,
        ColorType::Rgb,
        false,
    )
    .0
}

/// The decoded pixels as planes: Y alone for a gray image, else Y, Cb and Cr at full size;
/// with an alpha plane (and the others premultiplied) when `keep_alpha` and some pixel is not
/// opaque, else flattened onto white.
fn planes(
    buf: &[u8],
    width: u32,
    height: u32,
    line: usize,
    color: ColorType,
    keep_alpha: bool,
) -> (Vec<Plane>, Option<Plane>) {
    let (w, h) = (width as usize, height as usize);
    let gray = matches!(color, ColorType::Grayscale | ColorType::GrayscaleAlpha);
    let channels = match color {
        ColorType::Grayscale => 1,
        ColorType::GrayscaleAlpha => 2,
        ColorType::Rgb => 3,
        _ => 4,
    };
    let has_alpha = channels % 2 == 0;
    let translucent = keep_alpha
        && has_alpha
        && (0..h).any(|row| {
            buf[row * line..row * line + w * channels]
                .chunks_exact(channels)
                .any(|px| px[channels - 1] != 255)
        });
    let mut alpha = translucent.then(|| Plane::new(width, height, 255));
    let mut y = Plane::new(width, height, 0);
    let (mut cb, mut cr) = if gray {
        (None, None)
    } else {
        (
            Some(Plane::new(width, height, 0)),
            Some(Plane::new(width, height, 0)),
        )
    };
    for row in 0..h {
        let src = &buf[row * line..];
        for x in 0..w {
            let px = &src[channels * x..channels * x + channels];
            let a = if has_alpha { px[channels - 1] } else { 255 };
            let at = row * w + x;
            let (yy, u, v) = if gray {
                (px[0], 128, 128)
            } else {
                ycbcr(px[0], px[1], px[2])
            };
            let (yy, u, v) = match alpha.as_mut() {
                Some(plane) => {
                    plane.data[at] = a;
                    (
                        premultiplied_luma(yy, a),
                        premultiplied_chroma(u, a),
                        premultiplied_chroma(v, a),
                    )
                }
                // White under it: the colour over white, in YCbCr (an affine map of RGB).
                None if a != 255 => (
                    over_white(yy, a),
                    over_white_chroma(u, a),
                    over_white_chroma(v, a),
                ),
                None => (yy, u, v),
            };
            y.data[at] = yy;
            if let (Some(cb), Some(cr)) = (cb.as_mut(), cr.as_mut()) {
                cb.data[at] = u;
                cr.data[at] = v;
            }
        }
    }
    match (cb, cr) {
        (Some(cb), Some(cr)) => (vec![y, cb, cr], alpha),
        _ => (vec![y], alpha),
    }
}

/// A chroma sample (white's is 128) shown over white with opacity `a`.
fn over_white_chroma(c: u8, a: u8) -> u8 {
    premultiplied_chroma(c, a)
}

/// Renders the PNG `input`, displayed with `orientation`, into `box_` by `fit`, as `out`.
#[allow(clippy::too_many_arguments)]
pub fn render(
    resizer: &mut Resizer,
    encoder: &mut Encoder,
    input: &[u8],
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
    out: Output,
    limits: &Limits,
) -> Result<Rendered, RenderError> {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(input));
    decoder.set_transformations(Transformations::EXPAND | Transformations::STRIP_16);
    // What decoding may allocate: the pixel limit's worth of 8-bit RGBA, and no more.
    let most = usize::try_from(limits.max_pixels.saturating_mul(4)).unwrap_or(usize::MAX);
    decoder.set_limits(png::Limits { bytes: most });
    let mut reader = decoder.read_info().map_err(corrupt)?;
    let (width, height) = reader.info().size();
    let stored = Dimensions { width, height };
    limits.check_pixels(stored)?;
    let (color, depth) = reader.output_color_type();
    if depth != BitDepth::Eight || color == ColorType::Indexed {
        return Err(RenderError::Internal(format!(
            "the PNG decoder gave {color:?} at {depth:?}"
        )));
    }
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| RenderError::TooManyPixels {
            pixels: stored.pixels(),
            max: limits.max_pixels,
        })?;
    // An embedded profile that is not sRGB (a Mac's screenshot is Display P3): its pixels are
    // converted to sRGB after decoding.
    let convert = reader
        .info()
        .icc_profile
        .as_deref()
        .and_then(upcommit_lcms::Icc::read)
        .filter(|p| !p.is_srgb())
        .and_then(|p| match color {
            ColorType::Rgb => upcommit_lcms::ToSrgb::new(&p, upcommit_lcms::Input::Rgb),
            ColorType::Rgba => upcommit_lcms::ToSrgb::new(&p, upcommit_lcms::Input::Rgba),
            _ => None,
        });
    let mut buf = vec![0u8; size];
    let frame = reader.next_frame(&mut buf).map_err(corrupt)?;
    if let Some(x) = convert {
        let row = frame.width as usize * if color == ColorType::Rgba { 4 } else { 3 };
        // Row by row, in place: no second copy of the image.
        for line in buf.chunks_exact_mut(frame.line_size) {
            let converted = x.apply(&line[..row]);
            line[..row].copy_from_slice(&converted);
        }
    }
    let (planes, alpha) = planes(
        &buf,
        frame.width,
        frame.height,
        frame.line_size,
        frame.color_type,
        out.keeps_alpha(),
    );
    drop(buf);

    let shown = swapped(stored, orientation);
    let p = plan(shown, box_, fit);
    let crop = stored_rect(p.crop, orientation, shown);
    draw(
        resizer,
        encoder,
        planes,
        alpha,
        Scaled {
            width,
            height,
            scale: 1.0,
        },
        crop,
        &p,
        orientation,
        out,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_convert_as_jpeg_does_and_transparency_becomes_white() {
        assert_eq!(over_white_chroma(200, 0), 128);
        assert_eq!(over_white_chroma(200, 255), 200);
        assert_eq!(ycbcr(255, 255, 255), (255, 128, 128));
        assert_eq!(ycbcr(0, 0, 0), (0, 128, 128));
        let (y, cb, cr) = ycbcr(255, 0, 0);
        assert_eq!(y, 76);
        assert!(cb < 100 && cr == 255, "{cb} {cr}");
        assert_eq!(over_white(0, 0), 255);
        assert_eq!(over_white(0, 255), 0);
        assert_eq!(over_white(100, 128), 177);
    }
}
