//! HEIC and AVIF sources (iPhones write HEIC): the primary image decoded whole by libheif
//! (HEVC through libde265, AV1 through dav1d) to RGB or RGBA — turned upright by libheif itself
//! from the file's `irot` and `imir`, so no orientation is applied here — its ICC profile (an
//! iPhone's Display P3) converted to sRGB, then drawn as a PNG's pixels are. Nothing of the
//! file's metadata (EXIF, XMP, the profile) is written.

use fast_image_resize::Resizer;
use upcommit_turbojpeg::Encoder;

use super::draw::{draw, stored_rect, swapped, Scaled};
use super::output::Output;
use super::png::{rgb_planes, rgba_planes};
use super::{Limits, RenderError, Rendered};
use crate::domain::image::{Dimensions, Transform};
use crate::domain::variants::{plan, Fit};

/// Renders the HEIC or AVIF `input` into `box_` by `fit`, as `out` (upright as libheif
/// decodes it).
#[allow(clippy::too_many_arguments)]
pub fn render(
    resizer: &mut Resizer,
    encoder: &mut Encoder,
    input: &[u8],
    _orientation: Transform,
    box_: Dimensions,
    fit: Fit,
    out: Output,
    limits: &Limits,
) -> Result<Rendered, RenderError> {
    // Every coded image held to its `ispe` first: libheif allocates for the size the bitstream
    // declares. Then libheif checks the pixel limit against the primary image's size.
    let work = crate::domain::image::heif_work(input)
        .map_err(|why| RenderError::Corrupt(why.to_string()))?;
    limits.check_pixels(work.largest)?;
    let decoded =
        upcommit_heif::decode(input, limits.max_pixels).map_err(|e| RenderError::Corrupt(e.0))?;
    let (width, height) = (decoded.width, decoded.height);
    let stored = Dimensions { width, height };
    limits.check_pixels(stored)?;
    let input_kind = if decoded.has_alpha {
        upcommit_lcms::Input::Rgba
    } else {
        upcommit_lcms::Input::Rgb
    };
    let convert = decoded
        .icc
        .as_deref()
        .and_then(upcommit_lcms::Icc::read)
        .filter(|p| !p.is_srgb())
        .and_then(|p| upcommit_lcms::ToSrgb::new(&p, input_kind));
    let mut pixels = decoded.pixels;
    if let Some(x) = convert {
        // Row by row, in place: no second copy of the image.
        let row = width as usize * input_kind.bytes();
        for line in pixels.chunks_exact_mut(row) {
            let converted = x.apply(line);
            line.copy_from_slice(&converted);
        }
    }
    let (planes, alpha) = if decoded.has_alpha {
        rgba_planes(&pixels, width, height, out.keeps_alpha())
    } else {
        (rgb_planes(&pixels, width, height), None)
    };
    drop(pixels);

    let upright = Transform::UPRIGHT;
    let shown = swapped(stored, upright);
    let p = plan(shown, box_, fit);
    let crop = stored_rect(p.crop, upright, shown);
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
        upright,
        out,
    )
}
