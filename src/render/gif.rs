//! GIF sources: the first frame only (an animation's first image; a GIF of thousands of frames
//! costs one), decoded by the `gif` crate to RGBA, placed on its logical screen at its offset
//! (what it does not cover white; its transparent pixels white in a JPEG, transparent in a
//! WebP), then drawn as a PNG's planes are. The rest of the file — later frames, comments, application extensions — is not read.

use fast_image_resize::Resizer;
use upcommit_turbojpeg::Encoder;

use super::draw::{draw, stored_rect, swapped, Scaled};
use super::output::Output;
use super::png::rgba_planes;
use super::{Limits, RenderError, Rendered};
use crate::domain::image::{Dimensions, Transform};
use crate::domain::variants::{plan, Fit};

fn corrupt(e: impl std::fmt::Display) -> RenderError {
    RenderError::Corrupt(e.to_string())
}

/// Renders the GIF `input`'s first frame into `box_` by `fit`, as `out`.
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
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    // What decoding may allocate: the logical screen's RGBA (what the memory budget reserved
    // for; a first frame larger than its screen is refused rather than decoded past it —
    // outside review of issue 37: a 9,999² frame on a 16 × 16 screen took 826 MB), within the
    // pixel limit's.
    let screen = match input.get(6..10) {
        Some(b) => {
            u64::from(u16::from_le_bytes([b[0], b[1]]))
                * u64::from(u16::from_le_bytes([b[2], b[3]]))
        }
        None => return Err(RenderError::Corrupt("a GIF cut before its screen".into())),
    };
    let most = screen
        .min(limits.max_pixels)
        .saturating_mul(4)
        .saturating_add(64 * 1024);
    options.set_memory_limit(gif::MemoryLimit::Bytes(
        std::num::NonZeroU64::new(most).unwrap_or(std::num::NonZeroU64::MIN),
    ));
    let mut decoder = options.read_info(input).map_err(corrupt)?;
    let stored = Dimensions {
        width: u32::from(decoder.width()),
        height: u32::from(decoder.height()),
    };
    if stored.width == 0 || stored.height == 0 {
        return Err(RenderError::Corrupt("a GIF with an empty screen".into()));
    }
    limits.check_pixels(stored)?;
    let frame = decoder
        .read_next_frame()
        .map_err(corrupt)?
        .ok_or_else(|| RenderError::Corrupt("a GIF without an image".into()))?;
    // The logical screen, white and opaque, with the frame over it where it falls.
    let (w, h) = (stored.width as usize, stored.height as usize);
    let mut screen = vec![255u8; w * h * 4];
    let (fw, fh) = (usize::from(frame.width), usize::from(frame.height));
    let (left, top) = (usize::from(frame.left), usize::from(frame.top));
    if frame.buffer.len() < fw * fh * 4 {
        return Err(RenderError::Corrupt(
            "a GIF frame shorter than its size".into(),
        ));
    }
    for row in 0..fh {
        let y = top + row;
        if y >= h {
            break;
        }
        for col in 0..fw {
            let x = left + col;
            if x >= w {
                break;
            }
            let from = (row * fw + col) * 4;
            let to = (y * w + x) * 4;
            screen[to..to + 4].copy_from_slice(&frame.buffer[from..from + 4]);
        }
    }
    drop(decoder);
    let (planes, alpha) = rgba_planes(&screen, stored.width, stored.height, out.keeps_alpha());
    drop(screen);

    let shown = swapped(stored, orientation);
    let p = plan(shown, box_, fit);
    let crop = stored_rect(p.crop, orientation, shown);
    draw(
        resizer,
        encoder,
        planes,
        alpha,
        Scaled {
            width: stored.width,
            height: stored.height,
            scale: 1.0,
        },
        crop,
        &p,
        orientation,
        out,
    )
}
