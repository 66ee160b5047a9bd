//! Renditions of images (issue 37): decoding, resizing and encoding, CPU work run on blocking
//! threads, free of I/O. JPEG sources render through libjpeg-turbo's TurboJPEG API at reduced
//! DCT scale with `fast_image_resize` (docs/architecture.md says why: faster than sharp on its
//! own benchmark task, BENCHMARKS.md has the figures). PNG sources are decoded whole by the
//! `png` crate and drawn from the same planes.

pub mod budget;
mod draw;
pub mod gif;
pub mod jpeg;
pub mod planes;
pub mod png;

use std::cell::RefCell;

use crate::domain::image::{Dimensions, Transform};
use crate::domain::variants::Fit;

thread_local! {
    /// Each blocking thread's TurboJPEG handles and resizer, made at its first render.
    static JPEG: RefCell<Option<jpeg::Context>> = const { RefCell::new(None) };
}

/// Renders the PNG `input` on this thread (a blocking one), with this thread's resizer and
/// encoder.
pub fn png_here(
    input: &[u8],
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
    quality: u8,
    limits: &Limits,
) -> Result<Rendered, RenderError> {
    JPEG.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(jpeg::Context::new()?);
        }
        let ctx = slot
            .as_mut()
            .ok_or_else(|| RenderError::Internal("no context".into()))?;
        let (resizer, encoder) = ctx.resizer_and_encoder();
        png::render(
            resizer,
            encoder,
            input,
            orientation,
            box_,
            fit,
            quality,
            limits,
        )
    })
}

/// Renders the GIF `input`'s first frame on this thread (a blocking one), with this thread's
/// resizer and encoder.
pub fn gif_here(
    input: &[u8],
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
    quality: u8,
    limits: &Limits,
) -> Result<Rendered, RenderError> {
    JPEG.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(jpeg::Context::new()?);
        }
        let ctx = slot
            .as_mut()
            .ok_or_else(|| RenderError::Internal("no context".into()))?;
        let (resizer, encoder) = ctx.resizer_and_encoder();
        gif::render(
            resizer,
            encoder,
            input,
            orientation,
            box_,
            fit,
            quality,
            limits,
        )
    })
}

/// Renders the JPEG `input` on this thread (a blocking one), with this thread's handles.
pub fn jpeg_here(
    input: &[u8],
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
    quality: u8,
    limits: &Limits,
) -> Result<Rendered, RenderError> {
    JPEG.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(jpeg::Context::new()?);
        }
        let ctx = slot
            .as_mut()
            .ok_or_else(|| RenderError::Internal("no context".into()))?;
        jpeg::render(ctx, input, orientation, box_, fit, quality, limits)
    })
}

/// Scans a JPEG source may have (a progressive one has about ten): each scan is another pass
/// over the image's coefficients, so a file of thousands of tiny scans is a CPU bomb.
pub const MAX_JPEG_SCANS: usize = 100;

/// What a render may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Decoded pixels at most (the source's stored width × height).
    pub max_pixels: u64,
}

impl Limits {
    pub fn check_pixels(&self, d: Dimensions) -> Result<(), RenderError> {
        if d.pixels() > self.max_pixels {
            return Err(RenderError::TooManyPixels {
                pixels: d.pixels(),
                max: self.max_pixels,
            });
        }
        Ok(())
    }
}

/// A rendition's bytes and what they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub bytes: Vec<u8>,
    pub width: u32,
    pub height: u32,
    pub content_type: &'static str,
}

/// Why a render did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("the image cannot be decoded: {0}")]
    Corrupt(String),
    #[error("the image has {pixels} pixels; a render takes at most {max}")]
    TooManyPixels { pixels: u64, max: u64 },
    #[error("{0} is not rendered")]
    Unsupported(&'static str),
    #[error("the renderer failed: {0}")]
    Internal(String),
}

#[cfg(test)]
mod tests;
