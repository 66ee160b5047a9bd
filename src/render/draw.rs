//! The part of a render every source shares: planes of Y, Cb and Cr (or Y alone) at some
//! scale of the stored image, each cropped and resized on its own with `fast_image_resize`,
//! turned upright, padded where `contain` asks, and encoded (a JPEG at 4:2:0 or gray; a WebP
//! from full-resolution planes, with the alpha plane drawn the same way when there is one).
//! The geometry between the stored image and the upright one is here too.

use fast_image_resize::Resizer;
use upcommit_turbojpeg::{self as tj, Encoder, Plane};

use super::output::Output;
use super::planes::{CropF, PlaneOps};
use super::{RenderError, Rendered};
use crate::domain::image::{Dimensions, Transform};
use crate::domain::variants::{OutputFormat, Plan, Rect};

/// The inverse of `t`: a flip with turns is its own inverse; turns alone are undone by the
/// opposite turns.
pub(super) fn inverse(t: Transform) -> Transform {
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
pub(super) fn stored_rect(r: Rect, t: Transform, shown: Dimensions) -> Rect {
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

pub(super) fn swapped(d: Dimensions, t: Transform) -> Dimensions {
    if t.transposes() {
        Dimensions {
            width: d.height,
            height: d.width,
        }
    } else {
        d
    }
}

/// The image the planes hold: `width` × `height`, the stored image at `scale`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scaled {
    pub width: u32,
    pub height: u32,
    pub scale: f64,
}

/// Draws the rendition `p` plans from `planes` (the stored image at `at`; a chroma plane may be
/// smaller than the luma one; premultiplied by `alpha`, of the luma plane's size, when given):
/// `crop` is in the stored image's pixels, `orientation` turns it upright.
#[allow(clippy::too_many_arguments)]
pub(super) fn draw(
    resizer: &mut Resizer,
    encoder: &mut Encoder,
    planes: Vec<Plane>,
    alpha: Option<Plane>,
    at: Scaled,
    crop: Rect,
    p: &Plan,
    orientation: Transform,
    target: Output,
) -> Result<Rendered, RenderError> {
    let out = swapped(p.resized, orientation);
    let (sw, sh, scale) = (at.width, at.height, at.scale);
    let gray = planes.len() == 1;
    let webp = target.format != OutputFormat::Jpeg;
    // A WebP or AVIF is encoded from RGB: chroma is drawn at full resolution (the encoder
    // subsamples).
    let out_ss = match (gray, webp) {
        (true, _) => tj::SAMP_GRAY,
        (false, true) => tj::SAMP_444,
        (false, false) => tj::SAMP_420,
    };
    let has_alpha = alpha.is_some();
    let colour_planes = planes.len();

    let mut done = Vec::with_capacity(planes.len() + 1);
    for (c, plane) in planes.iter().chain(alpha.as_ref()).enumerate() {
        let is_alpha = c == colour_planes;
        // The alpha plane is drawn as the luma one is.
        let c = if is_alpha { 0 } else { c };
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
            .resized(crop_here, ow, oh, resizer)
            .map_err(RenderError::Internal)?;
        let upright = resized.oriented(orientation);
        // Contain's padding: white (Y 255, Cb and Cr 128); transparent where there is alpha.
        let (cw, ch) = tj::plane_size(c as i32, p.canvas.width, p.canvas.height, out_ss);
        let (px, py) = (
            (f64::from(p.offset.0) * f64::from(cw) / f64::from(p.canvas.width)) as u32,
            (f64::from(p.offset.1) * f64::from(ch) / f64::from(p.canvas.height)) as u32,
        );
        let fill = match (is_alpha, c) {
            (true, _) => 0,
            (false, 0) if has_alpha => 0,
            (false, 0) => 255,
            _ => 128,
        };
        done.push(upright.placed(cw, ch, px, py, fill));
    }
    drop(planes);
    drop(alpha);
    let alpha = if has_alpha { done.pop() } else { None };
    let bytes = if webp {
        super::output::from_rgb(
            &done,
            alpha.as_ref(),
            p.canvas.width,
            p.canvas.height,
            target,
        )?
    } else {
        if has_alpha {
            return Err(RenderError::Internal(
                "a JPEG cannot keep transparency".into(),
            ));
        }
        encoder
            .encode_planes(
                &done,
                p.canvas.width,
                p.canvas.height,
                out_ss,
                target.quality,
            )
            .map_err(|e| RenderError::Internal(e.0))?
    };
    Ok(Rendered {
        bytes,
        width: p.canvas.width,
        height: p.canvas.height,
        content_type: target.format.content_type(),
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
