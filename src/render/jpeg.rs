//! JPEG to JPEG without leaving YCbCr: decoded at the smallest scale libjpeg-turbo's DCT offers
//! that still covers the target, each plane cropped and resized on its own (Lanczos3 is linear,
//! and YCbCr is an affine map of the same gamma-encoded RGB, so this is the RGB resize without
//! two colour conversions and with chroma at its stored resolution), turned upright, padded
//! where `contain` asks, and encoded from the planes (4:2:0, or gray for a gray source). What
//! the source carried besides pixels (EXIF with GPS, XMP, comments, ICC) is not written.

use fast_image_resize::Resizer;

use super::planes::{CropF, PlaneOps};
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
    pub fn new() -> Result<Self, RenderError> {
        Ok(Self {
            decoder: Decoder::new().map_err(|e| RenderError::Internal(e.0))?,
            encoder: Encoder::new().map_err(|e| RenderError::Internal(e.0))?,
            resizer: Resizer::new(),
        })
    }
}

/// The inverse of `t`: a flip with turns is its own inverse; turns alone are undone by the
/// opposite turns.
fn inverse(t: Transform) -> Transform {
    if t.flip {
        t
    } else {
        Transform {
            flip: false,
            quarter_turns: (4 - t.quarter_turns % 4) % 4,
        }
    }
}

/// `r`, a rectangle of the upright `shown` image, in the stored image's pixels.
fn stored_rect(r: Rect, t: Transform, shown: Dimensions) -> Rect {
    let inv = inverse(t);
    let a = inv.map((r.x, r.y), shown.width, shown.height);
    let b = inv.map(
        (r.x + r.width - 1, r.y + r.height - 1),
        shown.width,
        shown.height,
    );
    Rect {
        x: a.0.min(b.0),
        y: a.1.min(b.1),
        width: a.0.max(b.0) - a.0.min(b.0) + 1,
        height: a.1.max(b.1) - a.1.min(b.1) + 1,
    }
}

fn swapped(d: Dimensions, t: Transform) -> Dimensions {
    if t.transposes() {
        Dimensions {
            width: d.height,
            height: d.width,
        }
    } else {
        d
    }
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

/// Renders the JPEG `input`, displayed with `orientation`, into `box_` by `fit`, as a JPEG of
/// `quality`.
pub fn render(
    ctx: &mut Context,
    input: &[u8],
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
    quality: u8,
    limits: &Limits,
) -> Result<Rendered, RenderError> {
    let header = ctx
        .decoder
        .header(input)
        .map_err(|e| RenderError::Corrupt(e.0))?;
    let stored = Dimensions {
        width: header.width,
        height: header.height,
    };
    limits.check_pixels(stored)?;
    if header.colorspace == tj::CS_CMYK || header.colorspace == tj::CS_YCCK {
        return Err(RenderError::Unsupported("a CMYK JPEG"));
    }
    // Planes of R, G and B (Adobe transform 0, or components named R, G, B) are not Y, Cb and
    // Cr: encoded as such they came out in the wrong colours (review of issue 37).
    if header.colorspace == tj::CS_RGB {
        return Err(RenderError::Unsupported("a JPEG stored as RGB"));
    }
    let shown = swapped(stored, orientation);
    let p: Plan = plan(shown, box_, fit);
    let crop = stored_rect(p.crop, orientation, shown);
    let out = swapped(p.resized, orientation);

    let f = scale_for(&header, crop, out);
    let (sw, sh) = (f.apply(header.width), f.apply(header.height));
    let planes = ctx
        .decoder
        .decode_planes(input, &header, sw, sh)
        .map_err(|e| RenderError::Corrupt(e.0))?;
    let gray = planes.len() == 1;
    let out_ss = if gray { tj::SAMP_GRAY } else { tj::SAMP_420 };
    let scale = f64::from(f.num) / f64::from(f.denom);

    let mut done = Vec::with_capacity(planes.len());
    for (c, plane) in planes.iter().enumerate() {
        // This plane's share of the scaled image (a 4:2:0 chroma plane is half of it).
        let (rx, ry) = (
            f64::from(plane.width) / f64::from(sw),
            f64::from(plane.height) / f64::from(sh),
        );
        let crop_here = CropF {
            x: f64::from(crop.x) * scale * rx,
            y: f64::from(crop.y) * scale * ry,
            width: (f64::from(crop.width) * scale * rx).min(f64::from(plane.width)),
            height: (f64::from(crop.height) * scale * ry).min(f64::from(plane.height)),
        };
        let (ow, oh) = tj::plane_size(c as i32, out.width, out.height, out_ss);
        let resized = plane
            .resized(crop_here, ow, oh, &mut ctx.resizer)
            .map_err(RenderError::Internal)?;
        let upright = resized.oriented(orientation);
        // Contain's padding: white (Y 255, Cb and Cr 128).
        let (cw, ch) = tj::plane_size(c as i32, p.canvas.width, p.canvas.height, out_ss);
        let (px, py) = (
            (f64::from(p.offset.0) * f64::from(cw) / f64::from(p.canvas.width)) as u32,
            (f64::from(p.offset.1) * f64::from(ch) / f64::from(p.canvas.height)) as u32,
        );
        let fill = if c == 0 { 255 } else { 128 };
        done.push(upright.placed(cw, ch, px, py, fill));
    }
    drop(planes);
    let bytes = ctx
        .encoder
        .encode_planes(&done, p.canvas.width, p.canvas.height, out_ss, quality)
        .map_err(|e| RenderError::Internal(e.0))?;
    Ok(Rendered {
        bytes,
        width: p.canvas.width,
        height: p.canvas.height,
        content_type: "image/jpeg",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rectangle_maps_back_to_the_stored_image_for_every_orientation() {
        let stored = Dimensions {
            width: 40,
            height: 30,
        };
        for o in 1..=8 {
            let t = Transform::from_exif(o);
            let shown = swapped(stored, t);
            // Each stored pixel's upright place, then the rectangle around one pixel back.
            for (x, y) in [(0, 0), (39, 0), (0, 29), (17, 11)] {
                let (ux, uy) = t.map((x, y), stored.width, stored.height);
                let r = stored_rect(
                    Rect {
                        x: ux,
                        y: uy,
                        width: 1,
                        height: 1,
                    },
                    t,
                    shown,
                );
                assert_eq!((r.x, r.y, r.width, r.height), (x, y, 1, 1), "exif {o}");
            }
            let all = stored_rect(
                Rect {
                    x: 0,
                    y: 0,
                    width: shown.width,
                    height: shown.height,
                },
                t,
                shown,
            );
            assert_eq!((all.width, all.height), (40, 30), "exif {o}");
        }
    }
}
