//! What a render holds in memory at its peak, estimated from the source's frame header before
//! anything is decoded (issue 37: "memory bounded"), so a replica can refuse a render that
//! could never fit its budget and hold back one that does not fit now. Pure arithmetic.
//!
//! The parts, for a JPEG:
//! - a **progressive** JPEG's DCT coefficients: libjpeg keeps every block of every component
//!   (64 coefficients of 2 bytes) whatever scale it decodes to — about 3 bytes a pixel for
//!   4:2:0, 6 for 4:4:4. Baseline JPEGs stream and hold none;
//! - the planes decoded at the DCT scale chosen (the smallest M/8 that covers the rendition,
//!   hence at most 1/8 more than the rendition's share of the source);
//! - the rendition's planes (placed, and one plane's resized and turned copies on the way) and
//!   its encoded bytes;
//! - a fixed allowance for the decoder's and resizer's own buffers.
//!
//! A PNG has no reduced-scale decoding: it is decoded whole ([`png_bytes`]).
//!
//! The source's own bytes are counted by the caller (it reserves them before reading).

use crate::domain::image::{Dimensions, JpegFrame, Transform};
use crate::domain::variants::{plan, Fit, OutputFormat};

/// The decoder's and resizer's buffers, Huffman tables, row buffers: a generous constant.
pub const FIXED: u64 = 8 * 1024 * 1024;

fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

/// Bytes the render of `frame` (displayed with `orientation`) into `box_` by `fit` holds at
/// its peak, the source's bytes aside.
pub fn jpeg_bytes(frame: &JpegFrame, orientation: Transform, box_: Dimensions, fit: Fit) -> u64 {
    jpeg_bytes_of_scans(frame, 1, orientation, box_, fit)
}

/// [`jpeg_bytes`] for a JPEG of `scans` scans: a sequential one of several (one per component,
/// say) holds every coefficient as a progressive one does (issue 46: a 100-megapixel baseline
/// JPEG of one scan per component took libjpeg to about 600 MB while the estimate assumed it
/// streamed).
pub fn jpeg_bytes_of_scans(
    frame: &JpegFrame,
    scans: usize,
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
) -> u64 {
    let (w, h) = (u64::from(frame.width), u64::from(frame.height));
    let hmax = u64::from(frame.sampling.iter().map(|s| s.0).max().unwrap_or(1));
    let vmax = u64::from(frame.sampling.iter().map(|s| s.1).max().unwrap_or(1));
    // Each component's share of the pixels (1 for luma, 1/4 for 4:2:0 chroma).
    let share: f64 = frame
        .sampling
        .iter()
        .map(|&(hs, vs)| (f64::from(hs) * f64::from(vs)) / (hmax * vmax) as f64)
        .sum();
    let coefficients = if frame.progressive() || scans > 1 {
        frame
            .sampling
            .iter()
            .map(|&(hs, vs)| {
                let (hs, vs) = (u64::from(hs), u64::from(vs));
                // Blocks across and down, padded to whole MCUs as libjpeg allocates them.
                let bw = div_ceil(div_ceil(w * hs, hmax), 8).next_multiple_of(hs);
                let bh = div_ceil(div_ceil(h * vs, vmax), 8).next_multiple_of(vs);
                bw * bh * 64 * 2
            })
            .sum()
    } else {
        0
    };
    let (p, scaled) = decoded_pixels(frame, orientation, box_, fit);
    let decoded = (scaled as f64 * share) as u64;
    let canvas = u64::from(p.canvas.width) * u64::from(p.canvas.height);
    // The placed planes, one plane's resized and turned copies on the way, the encoded bytes.
    let rendition = (canvas as f64 * share * 2.0) as u64 + canvas;
    coefficients + decoded + rendition + FIXED
}

/// The plan of a JPEG render and the pixels decoded at the DCT scale that covers it (plus the
/// 1/8 step the decoder rounds up to).
fn decoded_pixels(
    frame: &JpegFrame,
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
) -> (crate::domain::variants::Plan, u64) {
    let (w, h) = (u64::from(frame.width), u64::from(frame.height));
    let stored = Dimensions {
        width: frame.width.max(1),
        height: frame.height.max(1),
    };
    let shown = if orientation.transposes() {
        Dimensions {
            width: stored.height,
            height: stored.width,
        }
    } else {
        stored
    };
    let p = plan(shown, box_, fit);
    let ratio = (f64::from(p.resized.width) / f64::from(p.crop.width.max(1)))
        .max(f64::from(p.resized.height) / f64::from(p.crop.height.max(1)));
    let scale = (ratio + 0.125).min(1.0);
    let scaled = ((w as f64 * scale).ceil() * (h as f64 * scale).ceil()) as u64;
    (p, scaled)
}

/// Bytes a JPEG render holds besides [`jpeg_bytes`] when it goes through interleaved pixels (a
/// CMYK or RGB-stored JPEG, or one whose ICC profile is converted to sRGB): the decoded CMYK or
/// RGB pixels (4), the converted RGB (3) and full-resolution planes (3) at the scale decoded.
pub fn jpeg_pixels_bytes(
    frame: &JpegFrame,
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
) -> u64 {
    decoded_pixels(frame, orientation, box_, fit).1 * 10
}

/// Bytes the render of a PNG of `stored` size holds at its peak, the source's bytes aside: a
/// PNG is decoded whole (at most 4 bytes a pixel, 8-bit RGBA) and turned into full-size planes
/// (3 bytes a pixel) before the decoded buffer goes; then the rendition's planes and bytes. Its
/// compressed chunks ([`png_inflated_bytes`]) come on top.
pub fn png_bytes(stored: Dimensions, orientation: Transform, box_: Dimensions, fit: Fit) -> u64 {
    let pixels = stored.pixels();
    let shown = if orientation.transposes() {
        Dimensions {
            width: stored.height.max(1),
            height: stored.width.max(1),
        }
    } else {
        Dimensions {
            width: stored.width.max(1),
            height: stored.height.max(1),
        }
    };
    let p = plan(shown, box_, fit);
    let canvas = u64::from(p.canvas.width) * u64::from(p.canvas.height);
    pixels * 7 + canvas * 4 + FIXED
}

/// The most a PNG's compressed chunks besides its pixels (`iCCP`, `zTXt`, `iTXt`: `compressed`
/// bytes in all) inflate to: deflate's limit of about 1,032 to 1 (issue 46: a 400 KB PNG of one
/// pixel whose `iCCP` inflates to 390 MB).
pub fn png_inflated_bytes(compressed: u64) -> u64 {
    compressed.saturating_mul(1032)
}

/// Bytes the render of a HEIC or AVIF of `stored` size holds at its peak, the source's bytes
/// aside: libheif's decoded planes (up to 3 bytes a pixel at 4:4:4) and its RGBA image (4), the
/// copy handed over (4) and the planes drawn from it (4 with alpha): 15 bytes a pixel, then the
/// rendition's planes and bytes.
pub fn heif_bytes(stored: Dimensions, orientation: Transform, box_: Dimensions, fit: Fit) -> u64 {
    png_bytes(stored, orientation, box_, fit) + stored.pixels() * 8
}

/// Bytes the render of a GIF's first frame on a logical screen of `stored` size holds at its
/// peak, the source's bytes aside: the frame as RGBA and the screen as RGBA (4 bytes a pixel
/// each, at most), then the planes, as for a PNG.
pub fn gif_bytes(stored: Dimensions, orientation: Transform, box_: Dimensions, fit: Fit) -> u64 {
    png_bytes(stored, orientation, box_, fit) + stored.pixels() * 4
}

/// Bytes a WebP or AVIF rendition holds besides what [`jpeg_bytes`] or [`png_bytes`] count for the
/// rendition: chroma drawn at full resolution (2 bytes a pixel more than 4:2:0's half), the
/// RGB(A) rows handed to libwebp (4), and libwebp's own YUV, alpha and output buffers (about
/// 3). Nothing for a JPEG rendition.
pub fn output_bytes(
    stored: Dimensions,
    orientation: Transform,
    box_: Dimensions,
    fit: Fit,
    format: OutputFormat,
) -> u64 {
    let encoder = match format {
        OutputFormat::Jpeg => return 0,
        OutputFormat::Webp => 0,
        // libaom's encoder state, whatever the size (about 30 MiB measured for 720 × 588).
        OutputFormat::Avif => 32 * 1024 * 1024,
    };
    let shown = if orientation.transposes() {
        Dimensions {
            width: stored.height.max(1),
            height: stored.width.max(1),
        }
    } else {
        Dimensions {
            width: stored.width.max(1),
            height: stored.height.max(1),
        }
    };
    let p = plan(shown, box_, fit);
    u64::from(p.canvas.width) * u64::from(p.canvas.height) * 9 + encoder
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(marker: u8, width: u32, height: u32, sampling: &[(u8, u8)]) -> JpegFrame {
        JpegFrame {
            marker,
            width,
            height,
            sampling: sampling.to_vec(),
        }
    }

    const MIB: u64 = 1024 * 1024;
    const S420: [(u8, u8); 3] = [(2, 2), (1, 1), (1, 1)];
    const S444: [(u8, u8); 3] = [(1, 1), (1, 1), (1, 1)];
    const BOX: Dimensions = Dimensions {
        width: 720,
        height: 588,
    };

    #[test]
    fn a_baseline_jpeg_holds_little_whatever_its_size() {
        let f = frame(0xC0, 8660, 5774, &S420);
        let bytes = jpeg_bytes(&f, Transform::UPRIGHT, BOX, Fit::Cover);
        assert!(bytes < 24 * MIB, "{}", bytes / MIB);
        // Its whole size as the rendition: the planes at full scale, about 1.5 bytes a pixel.
        let whole = jpeg_bytes(
            &f,
            Transform::UPRIGHT,
            Dimensions {
                width: 8660,
                height: 5774,
            },
            Fit::Inside,
        );
        assert!(whole > 70 * MIB && whole < 320 * MIB, "{}", whole / MIB);
    }

    #[test]
    fn a_progressive_jpeg_holds_every_coefficient() {
        // 50 megapixels: 3 bytes a pixel in 4:2:0, 6 in 4:4:4, for any rendition size.
        let p420 = jpeg_bytes(
            &frame(0xC2, 8660, 5774, &S420),
            Transform::UPRIGHT,
            BOX,
            Fit::Cover,
        );
        assert!((140 * MIB..175 * MIB).contains(&p420), "{}", p420 / MIB);
        let p444 = jpeg_bytes(
            &frame(0xC2, 8660, 5774, &S444),
            Transform::UPRIGHT,
            BOX,
            Fit::Cover,
        );
        assert!((280 * MIB..320 * MIB).contains(&p444), "{}", p444 / MIB);
        let gray = jpeg_bytes(
            &frame(0xC2, 8660, 5774, &[(1, 1)]),
            Transform::UPRIGHT,
            BOX,
            Fit::Cover,
        );
        assert!((90 * MIB..115 * MIB).contains(&gray), "{}", gray / MIB);
    }

    #[test]
    fn a_sequential_jpeg_of_several_scans_holds_every_coefficient_like_a_progressive_one() {
        let f = frame(0xC0, 8660, 5774, &S420);
        let one = jpeg_bytes_of_scans(&f, 1, Transform::UPRIGHT, BOX, Fit::Cover);
        let three = jpeg_bytes_of_scans(&f, 3, Transform::UPRIGHT, BOX, Fit::Cover);
        let progressive = jpeg_bytes(
            &frame(0xC2, 8660, 5774, &S420),
            Transform::UPRIGHT,
            BOX,
            Fit::Cover,
        );
        assert!(one < 24 * MIB, "{}", one / MIB);
        assert_eq!(three, progressive);
    }

    #[test]
    fn a_pngs_compressed_chunks_count_at_deflates_limit() {
        assert_eq!(png_inflated_bytes(0), 0);
        assert!(png_inflated_bytes(400 * 1024) > 390 * MIB);
        assert_eq!(png_inflated_bytes(u64::MAX), u64::MAX);
    }

    #[test]
    fn a_png_holds_seven_bytes_a_pixel_while_it_is_turned_into_planes() {
        let d = |width, height| Dimensions { width, height };
        let b = png_bytes(d(4000, 3000), Transform::UPRIGHT, BOX, Fit::Cover);
        assert!((84 * MIB..100 * MIB).contains(&b), "{}", b / MIB);
        assert!(png_bytes(d(10, 10), Transform::from_exif(6), BOX, Fit::Cover) >= FIXED);
    }

    #[test]
    fn the_estimate_never_shrinks_as_the_source_grows() {
        let mut last = 0;
        for side in [16, 100, 1000, 4000, 12000] {
            for marker in [0xC0, 0xC2] {
                let b = jpeg_bytes(
                    &frame(marker, side, side * 3 / 4, &S420),
                    Transform::from_exif(6),
                    BOX,
                    Fit::Cover,
                );
                assert!(b >= FIXED);
                if marker == 0xC2 {
                    assert!(b >= last, "{side}");
                    last = b;
                }
            }
        }
    }
}
