//! JPEG sources. The usual one never leaves YCbCr: decoded at the smallest scale libjpeg-turbo's DCT offers
//! that still covers the target, each plane cropped and resized on its own (Lanczos3 is linear,
//! and YCbCr is an affine map of the same gamma-encoded RGB, so this is the RGB resize without
//! two colour conversions and with chroma at its stored resolution), turned upright, padded
//! where `contain` asks, and encoded from the planes (4:2:0, or gray for a gray source).
//!
//! Three kinds go through interleaved pixels at the same reduced scale instead: a CMYK (or
//! YCCK) JPEG, decoded to CMYK and converted to sRGB by its embedded ICC profile (Little CMS),
//! or without one by the naive formula (R = (1 − C)(1 − K), …, on Adobe's inverted inks); a
//! JPEG stored as RGB; and one whose ICC profile is not sRGB (Display P3 from a phone, Adobe
//! RGB from a camera), converted to sRGB. What the source carried besides pixels (EXIF with
//! GPS, XMP, comments, ICC) is not written: a rendition is sRGB without a profile.

use fast_image_resize::Resizer;

use super::draw::{draw, stored_rect, swapped, Scaled};
use super::output::Output;
use super::{Limits, RenderError, Rendered};
use crate::domain::image::{Dimensions, Transform};
use crate::domain::variants::{plan, Fit, Plan, Rect};
use upcommit_turbojpeg::{self as tj, Decoder, Encoder, JpegHeader};

/// One thread's TurboJPEG handles and resizer (renders run on blocking threads).
pub struct Context {
    decoder: Decoder,
    encoder: Encoder,
    resizer: Resizer,
}

impl Context {
    /// The resizer and the encoder, for sources other than JPEG.
    pub fn resizer_and_encoder(&mut self) -> (&mut Resizer, &mut Encoder) {
        (&mut self.resizer, &mut self.encoder)
    }

    pub fn new() -> Result<Self, RenderError> {
        Ok(Self {
            decoder: Decoder::new().map_err(|e| RenderError::Internal(e.0))?,
            encoder: Encoder::new().map_err(|e| RenderError::Internal(e.0))?,
            resizer: Resizer::new(),
        })
    }
}

/// CMYK pixels as RGB without a profile: each channel the product of its ink's and black's
/// complements. `inverted`: the inks are stored inverted (an Adobe JPEG's, 255 = no ink).
fn naive_cmyk(cmyk: &[u8], inverted: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(cmyk.len() / 4 * 3);
    for px in cmyk.chunks_exact(4) {
        let [c, m, y, k] = if inverted {
            [px[0], px[1], px[2], px[3]]
        } else {
            [255 - px[0], 255 - px[1], 255 - px[2], 255 - px[3]]
        };
        let times = |a: u8, b: u8| ((u32::from(a) * u32::from(b) + 127) / 255) as u8;
        out.extend_from_slice(&[times(c, k), times(m, k), times(y, k)]);
    }
    out
}

/// The smallest DCT scale at which `crop` of the `header`'s image is still at least `want`.
fn scale_for(header: &JpegHeader, crop: Rect, want: Dimensions) -> tj::ScalingFactor {
    let mut best = tj::ScalingFactor { num: 1, denom: 1 };
    let value = |f: tj::ScalingFactor| f64::from(f.num) / f64::from(f.denom);
    for &f in tj::scaling_factors() {
        if f.num > f.denom || value(f) >= value(best) {
            continue;
        }
        let s = value(f);
        if f64::from(crop.width) * s >= f64::from(want.width)
            && f64::from(crop.height) * s >= f64::from(want.height)
            && f.apply(header.width) >= 1
            && f.apply(header.height) >= 1
        {
            best = f;
        }
    }
    best
}

/// Renders the JPEG `input`, displayed with `orientation`, into `box_` by `fit`, as `target`.
pub fn render(
    ctx: &mut Context,
    input: &[u8],
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
    target: Output,
    limits: &Limits,
) -> Result<Rendered, RenderError> {
    let scans = crate::domain::image::jpeg_scan_count(input);
    if scans > super::MAX_JPEG_SCANS {
        return Err(RenderError::Corrupt(format!(
            "a JPEG of {scans} scans; a render reads at most {}",
            super::MAX_JPEG_SCANS
        )));
    }
    let header = ctx
        .decoder
        .header(input)
        .map_err(|e| RenderError::Corrupt(e.0))?;
    let stored = Dimensions {
        width: header.width,
        height: header.height,
    };
    limits.check_pixels(stored)?;
    let cmyk = header.colorspace == tj::CS_CMYK || header.colorspace == tj::CS_YCCK;
    let colour = crate::domain::image::jpeg_colour(input);
    let icc = colour.icc.as_deref().and_then(upcommit_lcms::Icc::read);
    let convert = icc.as_ref().and_then(|p| match (p.space(), cmyk) {
        (upcommit_lcms::Space::Cmyk, true) => upcommit_lcms::ToSrgb::new(
            p,
            if colour.adobe {
                upcommit_lcms::Input::CmykInverted
            } else {
                upcommit_lcms::Input::Cmyk
            },
        ),
        (upcommit_lcms::Space::Rgb, false) if header.subsamp != tj::SAMP_GRAY && !p.is_srgb() => {
            upcommit_lcms::ToSrgb::new(p, upcommit_lcms::Input::Rgb)
        }
        _ => None,
    });
    // Planes of R, G and B (Adobe transform 0, or components named R, G, B) are not Y, Cb and
    // Cr: encoded as such they came out in the wrong colours (review of issue 37).
    let through_pixels = cmyk || header.colorspace == tj::CS_RGB || convert.is_some();
    let shown = swapped(stored, orientation);
    let p: Plan = plan(shown, box_, fit);
    let crop = stored_rect(p.crop, orientation, shown);
    let out = swapped(p.resized, orientation);

    let f = scale_for(&header, crop, out);
    let (sw, sh) = (f.apply(header.width), f.apply(header.height));
    let planes = if through_pixels {
        let kind = if cmyk {
            tj::Pixels::Cmyk
        } else {
            tj::Pixels::Rgb
        };
        let pixels = ctx
            .decoder
            .decode_pixels(input, sw, sh, kind)
            .map_err(|e| RenderError::Corrupt(e.0))?;
        let rgb = match (&convert, cmyk) {
            (Some(x), _) => x.apply(&pixels),
            (None, true) => naive_cmyk(&pixels, colour.adobe),
            (None, false) => pixels,
        };
        super::png::rgb_planes(&rgb, sw, sh)
    } else {
        ctx.decoder
            .decode_planes(input, &header, sw, sh)
            .map_err(|e| RenderError::Corrupt(e.0))?
    };
    let scale = f64::from(f.num) / f64::from(f.denom);
    draw(
        &mut ctx.resizer,
        &mut ctx.encoder,
        planes,
        None,
        Scaled {
            width: sw,
            height: sh,
            scale,
        },
        crop,
        &p,
        orientation,
        target,
    )
}
