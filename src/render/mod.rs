//! Renditions of images (issue 37): decoding, resizing and encoding, CPU work run on blocking
//! threads, free of I/O. JPEG sources render through libjpeg-turbo's TurboJPEG API at reduced
//! DCT scale with `fast_image_resize` (docs/architecture.md says why: faster than sharp on its
//! own benchmark task, BENCHMARKS.md has the figures). PNG, GIF and WebP sources are decoded
//! whole (the `png` and `gif` crates, libwebp), as are HEIC and AVIF (libheif), and drawn from
//! the same planes; an ICC profile that is not sRGB is converted (Little CMS). A rendition is a
//! JPEG (TurboJPEG) or a WebP (libwebp).

pub mod budget;
mod draw;
pub mod gif;
pub mod heif;
pub mod jpeg;
pub mod output;
pub mod planes;
pub mod png;
pub mod webp;

pub use output::Output;

use std::cell::RefCell;

use crate::domain::image::{Dimensions, Transform};
use crate::domain::variants::Fit;

thread_local! {
    /// Each blocking thread's TurboJPEG handles and resizer, made at its first render.
    static JPEG: RefCell<Option<jpeg::Context>> = const { RefCell::new(None) };
}

/// A source's format, as the renderer takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Jpeg,
    Png,
    Gif,
    Webp,
    /// HEIC or AVIF (libheif).
    Heif,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Jpeg => "jpeg",
            Source::Png => "png",
            Source::Gif => "gif",
            Source::Webp => "webp",
            Source::Heif => "heif",
        }
    }

    pub fn parse(s: &str) -> Option<Source> {
        [
            Source::Jpeg,
            Source::Png,
            Source::Gif,
            Source::Webp,
            Source::Heif,
        ]
        .into_iter()
        .find(|f| f.as_str() == s)
    }
}

/// Renders `input` (a `source`), displayed with `orientation`, into `box_` by `fit`, as `out`,
/// on this thread (a blocking one), with this thread's TurboJPEG handles and resizer.
pub fn render_here(
    source: Source,
    input: &[u8],
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
    out: Output,
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
        let rendered = if source == Source::Jpeg {
            jpeg::render(ctx, input, orientation, box_, fit, out, limits)
        } else {
            let (resizer, encoder) = ctx.resizer_and_encoder();
            let render = match source {
                Source::Png => png::render,
                Source::Gif => gif::render,
                Source::Heif => heif::render,
                _ => webp::render,
            };
            render(resizer, encoder, input, orientation, box_, fit, out, limits)
        };
        // A TurboJPEG handle that failed keeps state that fails the next image it is given
        // (outside review of issue 37: one corrupt Huffman table made every JPEG render on that
        // thread fail, for every user): after any error, this thread's handles are made anew.
        if rendered.is_err() {
            *slot = None;
        }
        rendered
    })
}

/// Loads what rendering loads from disk (libheif's plugins) and makes this thread's TurboJPEG
/// handles: a render worker does it before its filter forbids opening files.
pub fn warm() {
    let _ = upcommit_heif::can_decode(upcommit_heif::Codec::Hevc);
    let _ = upcommit_heif::can_decode(upcommit_heif::Codec::Av1);
    let _ = upcommit_heif::can_encode(upcommit_heif::Codec::Av1);
    // Little CMS dates every profile it makes (sRGB's, for each conversion) with gmtime, whose
    // first call reads /etc/localtime: once here, before the filter kills any open.
    let _ = upcommit_lcms::rgb_profile([(0.64, 0.33), (0.30, 0.60), (0.15, 0.06)], 2.2);
    JPEG.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = jpeg::Context::new().ok();
        }
    });
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
