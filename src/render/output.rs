//! What a rendition is written as: a JPEG (from Y, Cb and Cr planes at 4:2:0, or Y alone), or
//! a lossy WebP or AVIF (from the same planes at full resolution, turned into RGB — or RGBA
//! where the source had transparency — for libwebp or libheif's AV1 encoder). The colour arithmetic between JPEG's YCbCr (BT.601,
//! full range) and RGB is here, and the premultiplied alpha a transparent source is resized
//! with: colour weighted by its opacity, so a transparent pixel's hidden colour does not bleed
//! into its neighbours' edges.

use crate::domain::variants::OutputFormat;

use super::planes::Plane;
use super::RenderError;

/// A rendition's format and quality.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    pub format: OutputFormat,
    pub quality: u8,
}

impl Output {
    pub fn jpeg(quality: u8) -> Self {
        Self {
            format: OutputFormat::Jpeg,
            quality,
        }
    }

    pub fn webp(quality: u8) -> Self {
        Self {
            format: OutputFormat::Webp,
            quality,
        }
    }

    pub fn avif(quality: u8) -> Self {
        Self {
            format: OutputFormat::Avif,
            quality,
        }
    }

    /// Whether transparency is kept (drawn through) rather than flattened onto white.
    pub fn keeps_alpha(self) -> bool {
        self.format != OutputFormat::Jpeg
    }
}

/// JPEG's YCbCr (BT.601, full range) of an RGB pixel, in 16-bit fixed point.
pub(super) fn ycbcr(r: u8, g: u8, b: u8) -> (u8, u8, u8) {
    let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
    let clamp = |v: i32| (v >> 16).clamp(0, 255) as u8;
    (
        clamp(19_595 * r + 38_470 * g + 7_471 * b + 32_768),
        clamp(-11_059 * r - 21_709 * g + 32_768 * b + (128 << 16) + 32_768),
        clamp(32_768 * r - 27_439 * g - 5_329 * b + (128 << 16) + 32_768),
    )
}

/// The RGB of a JPEG YCbCr pixel (the JFIF inverse), in 16-bit fixed point.
pub(super) fn rgb(y: u8, cb: u8, cr: u8) -> (u8, u8, u8) {
    let (y, cb, cr) = (i32::from(y) << 16, i32::from(cb) - 128, i32::from(cr) - 128);
    let clamp = |v: i32| ((v + 32_768) >> 16).clamp(0, 255) as u8;
    (
        clamp(y + 91_881 * cr),
        clamp(y - 22_554 * cb - 46_802 * cr),
        clamp(y + 116_130 * cb),
    )
}

/// A luma sample weighted by opacity `a`.
pub(super) fn premultiplied_luma(v: u8, a: u8) -> u8 {
    ((u32::from(v) * u32::from(a) + 127) / 255) as u8
}

/// A chroma sample (centred on 128) weighted by opacity `a`.
pub(super) fn premultiplied_chroma(v: u8, a: u8) -> u8 {
    let d = (i32::from(v) - 128) * i32::from(a);
    (128 + (d + d.signum() * 127) / 255).clamp(0, 255) as u8
}

fn unpremultiplied_luma(v: u8, a: u8) -> u8 {
    if a == 0 {
        return 255;
    }
    ((u32::from(v) * 255 + u32::from(a) / 2) / u32::from(a)).min(255) as u8
}

fn unpremultiplied_chroma(v: u8, a: u8) -> u8 {
    if a == 0 {
        return 128;
    }
    let d = (i32::from(v) - 128) * 255;
    let a = i32::from(a);
    (128 + (d + d.signum() * a / 2) / a).clamp(0, 255) as u8
}

/// `planes` (Y, or Y, Cb and Cr, all of the canvas's size; premultiplied when `alpha` is
/// given) encoded from RGB(A) as a lossy WebP (libwebp) or AVIF (libheif's AV1 encoder) of
/// `target`'s quality.
pub(super) fn from_rgb(
    planes: &[Plane],
    alpha: Option<&Plane>,
    width: u32,
    height: u32,
    target: Output,
) -> Result<Vec<u8>, RenderError> {
    let n = width as usize * height as usize;
    if planes.iter().chain(alpha).any(|p| p.data.len() != n) {
        return Err(RenderError::Internal(
            "a WebP's planes are not of the canvas's size".into(),
        ));
    }
    let channels = if alpha.is_some() { 4 } else { 3 };
    let mut px = Vec::with_capacity(n * channels);
    for i in 0..n {
        let a = alpha.map_or(255, |p| p.data[i]);
        let (y, cb, cr) = match planes {
            [y] => (y.data[i], 128, 128),
            [y, cb, cr] => (y.data[i], cb.data[i], cr.data[i]),
            _ => return Err(RenderError::Internal("neither 1 nor 3 planes".into())),
        };
        let (y, cb, cr) = if alpha.is_some() {
            (
                unpremultiplied_luma(y, a),
                unpremultiplied_chroma(cb, a),
                unpremultiplied_chroma(cr, a),
            )
        } else {
            (y, cb, cr)
        };
        let (r, g, b) = rgb(y, cb, cr);
        px.extend_from_slice(&[r, g, b]);
        if channels == 4 {
            px.push(a);
        }
    }
    match target.format {
        OutputFormat::Avif => upcommit_heif::encode(
            &px,
            width,
            height,
            channels,
            upcommit_heif::Codec::Av1,
            target.quality,
        )
        .map_err(|e| RenderError::Internal(e.0)),
        _ => upcommit_webp::encode(&px, width, height, channels, target.quality)
            .map_err(|e| RenderError::Internal(e.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rgb_and_ycbcr_go_there_and_back() {
        for (r, g, b) in [
            (255, 255, 255),
            (0, 0, 0),
            (255, 0, 0),
            (0, 200, 30),
            (12, 34, 250),
        ] {
            let (y, cb, cr) = ycbcr(r, g, b);
            let back = rgb(y, cb, cr);
            for (a, b) in [(r, back.0), (g, back.1), (b, back.2)] {
                assert!(a.abs_diff(b) <= 2, "{:?} -> {:?}", (r, g, b), back);
            }
        }
    }

    #[test]
    fn premultiplied_samples_come_back_where_opacity_allows() {
        for a in [255u8, 200, 128, 40] {
            for v in [0u8, 17, 128, 200, 255] {
                let l = unpremultiplied_luma(premultiplied_luma(v, a), a);
                let c = unpremultiplied_chroma(premultiplied_chroma(v, a), a);
                let tol = u8::try_from(255 / u32::from(a)).unwrap_or(255);
                assert!(l.abs_diff(v) <= tol, "luma {v} at {a}: {l}");
                assert!(c.abs_diff(v) <= tol + 1, "chroma {v} at {a}: {c}");
            }
        }
        assert_eq!(premultiplied_luma(255, 0), 0);
        assert_eq!(premultiplied_chroma(255, 0), 128);
        assert_eq!(premultiplied_chroma(0, 0), 128);
        assert_eq!(unpremultiplied_luma(0, 0), 255);
    }
}
