//! WebP sources: a still WebP decoded whole by libwebp to RGBA, then drawn as a PNG's pixels
//! are (transparency kept for a WebP rendition, flattened onto white for a JPEG). An animated
//! WebP is not rendered (libwebp's simple decoder reads still images). An ICCP profile that is
//! not sRGB is converted to sRGB; nothing of the file's chunks (EXIF, XMP, ICC) is written.

use fast_image_resize::Resizer;
use upcommit_turbojpeg::Encoder;

use super::draw::{draw, stored_rect, swapped, Scaled};
use super::output::Output;
use super::png::rgba_planes;
use super::{Limits, RenderError, Rendered};
use crate::domain::image::{Dimensions, Transform};
use crate::domain::variants::{plan, Fit};

/// Renders the WebP `input`, displayed with `orientation`, into `box_` by `fit`, as `out`.
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
    let f = upcommit_webp::features(input).map_err(|e| RenderError::Corrupt(e.0))?;
    if f.animated {
        return Err(RenderError::Unsupported("an animated WebP"));
    }
    let stored = Dimensions {
        width: f.width,
        height: f.height,
    };
    if stored.width == 0 || stored.height == 0 {
        return Err(RenderError::Corrupt("a WebP without pixels".into()));
    }
    // Checked before decoding: libwebp allocates the whole image.
    limits.check_pixels(stored)?;
    let (rgba, width, height) =
        upcommit_webp::decode_rgba(input).map_err(|e| RenderError::Corrupt(e.0))?;
    if (width, height) != (stored.width, stored.height) {
        return Err(RenderError::Corrupt(
            "a WebP whose image is not the size its header says".into(),
        ));
    }
    // An ICCP profile that is not sRGB: the pixels converted to sRGB, row by row in place.
    let mut rgba = rgba;
    if let Some(x) = crate::domain::image::webp_icc(input)
        .and_then(upcommit_lcms::Icc::read)
        .filter(|p| !p.is_srgb())
        .and_then(|p| upcommit_lcms::ToSrgb::new(&p, upcommit_lcms::Input::Rgba))
    {
        for line in rgba.chunks_exact_mut(width as usize * 4) {
            let converted = x.apply(line);
            line.copy_from_slice(&converted);
        }
    }
    let (planes, alpha) = rgba_planes(&rgba, width, height, out.keeps_alpha());
    drop(rgba);

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
