//! PNG to JPEG: decoded whole with the `png` crate (palettes and bit depths under 8 expanded,
//! 16-bit samples cut to 8; an interlaced image comes out whole; an animated PNG's default
//! image), transparency flattened onto white (a JPEG has no alpha), turned into full-resolution
//! Y, Cb and Cr planes (BT.601 full range: JPEG's YCbCr) or a Y plane for a gray image, then
//! drawn as a JPEG's planes are. Nothing of the PNG's chunks (text, time, EXIF, ICC) is written.

use fast_image_resize::Resizer;
use png::{BitDepth, ColorType, Transformations};
use upcommit_turbojpeg::{Encoder, Plane};

use super::draw::{draw, stored_rect, swapped, Scaled};
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

/// JPEG's YCbCr (BT.601, full range) of an RGB pixel, in 16-bit fixed point.
fn ycbcr(r: u8, g: u8, b: u8) -> (u8, u8, u8) {
    let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
    let clamp = |v: i32| (v >> 16).clamp(0, 255) as u8;
    (
        clamp(19_595 * r + 38_470 * g + 7_471 * b + 32_768),
        clamp(-11_059 * r - 21_709 * g + 32_768 * b + (128 << 16) + 32_768),
        clamp(32_768 * r - 27_439 * g - 5_329 * b + (128 << 16) + 32_768),
    )
}

/// Y, Cb and Cr planes of `width` × `height` 8-bit RGBA rows without padding, transparency
/// flattened onto white.
pub(super) fn rgba_planes(buf: &[u8], width: u32, height: u32) -> Vec<Plane> {
    planes(buf, width, height, width as usize * 4, ColorType::Rgba)
}

/// The decoded pixels as planes: Y alone for a gray image, else Y, Cb and Cr at full size.
fn planes(buf: &[u8], width: u32, height: u32, line: usize, color: ColorType) -> Vec<Plane> {
    let (w, h) = (width as usize, height as usize);
    let gray = matches!(color, ColorType::Grayscale | ColorType::GrayscaleAlpha);
    let mut y = Plane::new(width, height, 0);
    if gray {
        for row in 0..h {
            let src = &buf[row * line..];
            let dst = &mut y.data[row * w..(row + 1) * w];
            for (x, out) in dst.iter_mut().enumerate() {
                *out = match color {
                    ColorType::GrayscaleAlpha => over_white(src[2 * x], src[2 * x + 1]),
                    _ => src[x],
                };
            }
        }
        return vec![y];
    }
    let mut cb = Plane::new(width, height, 0);
    let mut cr = Plane::new(width, height, 0);
    let channels = if color == ColorType::Rgba { 4 } else { 3 };
    for row in 0..h {
        let src = &buf[row * line..];
        for x in 0..w {
            let px = &src[channels * x..channels * x + channels];
            let (r, g, b) = if channels == 4 {
                let a = px[3];
                (
                    over_white(px[0], a),
                    over_white(px[1], a),
                    over_white(px[2], a),
                )
            } else {
                (px[0], px[1], px[2])
            };
            let (yy, u, v) = ycbcr(r, g, b);
            let at = row * w + x;
            y.data[at] = yy;
            cb.data[at] = u;
            cr.data[at] = v;
        }
    }
    vec![y, cb, cr]
}

/// Renders the PNG `input`, displayed with `orientation`, into `box_` by `fit`, as a JPEG of
/// `quality`.
#[allow(clippy::too_many_arguments)]
pub fn render(
    resizer: &mut Resizer,
    encoder: &mut Encoder,
    input: &[u8],
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
    quality: u8,
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
    let mut buf = vec![0u8; size];
    let frame = reader.next_frame(&mut buf).map_err(corrupt)?;
    let planes = planes(
        &buf,
        frame.width,
        frame.height,
        frame.line_size,
        frame.color_type,
    );
    drop(buf);

    let shown = swapped(stored, orientation);
    let p = plan(shown, box_, fit);
    let crop = stored_rect(p.crop, orientation, shown);
    draw(
        resizer,
        encoder,
        planes,
        Scaled {
            width,
            height,
            scale: 1.0,
        },
        crop,
        &p,
        orientation,
        quality,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_convert_as_jpeg_does_and_transparency_becomes_white() {
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
