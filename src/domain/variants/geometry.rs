//! Where a rendition's pixels come from and where they go (issue 37): the part of the source
//! (as displayed, orientation applied) that is kept, the size it is resized to, and the canvas
//! it lands on. Pure. The rule every fit keeps: a rendition is never larger than its source on
//! either side (so never in pixels); a source smaller than the box is never enlarged: `cover`
//! then keeps the largest part of the box's shape it holds, the others render it whole.

use crate::domain::image::Dimensions;

/// How the source meets the variant's box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// Fills the box: scaled to cover it, the overflow cropped off (centered).
    Cover,
    /// The whole image inside the box, centered on a canvas the box's shape (where the source
    /// is at least that large), the rest padded (transparent where the format can, else white).
    Contain,
    /// The whole image inside the box, no padding: the rendition takes the image's shape.
    Inside,
}

impl Fit {
    pub fn parse(s: &str) -> Option<Fit> {
        Some(match s {
            "cover" => Fit::Cover,
            "contain" => Fit::Contain,
            "inside" => Fit::Inside,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Fit::Cover => "cover",
            Fit::Contain => "contain",
            Fit::Inside => "inside",
        }
    }
}

/// A rectangle in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

/// What a render does, in the displayed source's coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The part of the source kept (all of it, except for `cover`).
    pub crop: Rect,
    /// The size `crop` is resized to.
    pub resized: Dimensions,
    /// The rendition's size: `resized`, or larger for `contain`'s padding.
    pub canvas: Dimensions,
    /// Where `resized` sits on the canvas.
    pub offset: (u32, u32),
}

impl Plan {
    /// Nothing to resize: the kept part is already the size it lands at.
    pub fn is_copy(&self) -> bool {
        self.crop.width == self.resized.width && self.crop.height == self.resized.height
    }
}

/// `n × scale`, rounded, at least 1 and at most `max`.
fn scaled(n: u32, scale: f64, max: u32) -> u32 {
    let v = (f64::from(n) * scale).round();
    (v.max(1.0).min(f64::from(max))) as u32
}

/// The plan for a source of `src` (as displayed) into a `box_` of `fit`.
pub fn plan(src: Dimensions, box_: Dimensions, fit: Fit) -> Plan {
    let whole = Rect {
        x: 0,
        y: 0,
        width: src.width,
        height: src.height,
    };
    let (rw, rh) = (
        f64::from(box_.width) / f64::from(src.width),
        f64::from(box_.height) / f64::from(src.height),
    );
    let as_is = Plan {
        crop: whole,
        resized: src,
        canvas: src,
        offset: (0, 0),
    };
    match fit {
        Fit::Inside | Fit::Contain => {
            let s = rw.min(rh);
            if s >= 1.0 {
                return as_is;
            }
            let resized = Dimensions {
                width: scaled(src.width, s, box_.width),
                height: scaled(src.height, s, box_.height),
            };
            let canvas = if fit == Fit::Contain {
                // The box, but never past the source on either side.
                Dimensions {
                    width: box_.width.min(src.width).max(resized.width),
                    height: box_.height.min(src.height).max(resized.height),
                }
            } else {
                resized
            };
            Plan {
                crop: whole,
                resized,
                canvas,
                offset: (
                    (canvas.width - resized.width) / 2,
                    (canvas.height - resized.height) / 2,
                ),
            }
        }
        Fit::Cover => {
            let s = rw.max(rh);
            if s >= 1.0 {
                // Filling the box would enlarge the image: the largest part of the box's shape
                // the source holds, centred, at its own size (a 100 x 1000 strip for a 200 x 200
                // box is 100 x 100, not the whole strip: review of issue 37).
                let (bw, bh) = (u64::from(box_.width), u64::from(box_.height));
                let (sw, sh) = (u64::from(src.width), u64::from(src.height));
                let (cw, ch) = if sw * bh >= sh * bw {
                    (((sh * bw + bh / 2) / bh).clamp(1, sw), sh)
                } else {
                    (sw, ((sw * bh + bw / 2) / bw).clamp(1, sh))
                };
                let (cw, ch) = (cw as u32, ch as u32);
                let crop = Rect {
                    x: (src.width - cw) / 2,
                    y: (src.height - ch) / 2,
                    width: cw,
                    height: ch,
                };
                let size = Dimensions {
                    width: cw,
                    height: ch,
                };
                return Plan {
                    crop,
                    resized: size,
                    canvas: size,
                    offset: (0, 0),
                };
            }
            // The part of the source whose scaled size is the box: the box divided by the
            // scale, centered, within the source.
            let cw = ((f64::from(box_.width) / s).round() as u32).clamp(1, src.width);
            let ch = ((f64::from(box_.height) / s).round() as u32).clamp(1, src.height);
            let crop = Rect {
                x: (src.width - cw) / 2,
                y: (src.height - ch) / 2,
                width: cw,
                height: ch,
            };
            let resized = Dimensions {
                width: box_.width.min(cw),
                height: box_.height.min(ch),
            };
            Plan {
                crop,
                resized,
                canvas: resized,
                offset: (0, 0),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(width: u32, height: u32) -> Dimensions {
        Dimensions { width, height }
    }

    #[test]
    fn sharps_benchmark_task_is_a_plain_resize() {
        let p = plan(d(2725, 2225), d(720, 588), Fit::Cover);
        assert_eq!(p.resized, d(720, 588));
        assert_eq!(p.canvas, d(720, 588));
        // 2725 / 720 = 3.785; 588 x 3.785 = 2225.4: the whole height, the width all but a pixel.
        assert!(p.crop.width >= 2723 && p.crop.height == 2225, "{p:?}");
    }

    #[test]
    fn each_fit_of_a_landscape_photo_into_a_square() {
        let src = d(4000, 3000);
        let cover = plan(src, d(400, 400), Fit::Cover);
        assert_eq!(
            cover.crop,
            Rect {
                x: 500,
                y: 0,
                width: 3000,
                height: 3000
            }
        );
        assert_eq!((cover.resized, cover.canvas), (d(400, 400), d(400, 400)));
        let inside = plan(src, d(400, 400), Fit::Inside);
        assert_eq!(
            (inside.resized, inside.canvas, inside.offset),
            (d(400, 300), d(400, 300), (0, 0))
        );
        let contain = plan(src, d(400, 400), Fit::Contain);
        assert_eq!(
            (contain.resized, contain.canvas, contain.offset),
            (d(400, 300), d(400, 400), (0, 50))
        );
    }

    #[test]
    fn a_source_smaller_than_the_box_is_never_enlarged() {
        for fit in [Fit::Contain, Fit::Inside] {
            let p = plan(d(300, 200), d(400, 400), fit);
            assert_eq!((p.resized, p.canvas), (d(300, 200), d(300, 200)), "{fit:?}");
            assert!(p.is_copy());
        }
        // Cover keeps the box's shape: the middle 200 x 200, at its own size.
        let p = plan(d(300, 200), d(400, 400), Fit::Cover);
        assert_eq!(
            p.crop,
            Rect {
                x: 50,
                y: 0,
                width: 200,
                height: 200
            }
        );
        assert_eq!((p.resized, p.canvas), (d(200, 200), d(200, 200)));
        assert!(p.is_copy());
        // Smaller on one side only (review of issue 37): a 100 x 1000 strip into 200 x 200.
        let p = plan(d(100, 1000), d(200, 200), Fit::Cover);
        assert_eq!(
            p.crop,
            Rect {
                x: 0,
                y: 450,
                width: 100,
                height: 100
            }
        );
        assert_eq!(p.canvas, d(100, 100));
    }

    #[test]
    fn contains_padding_never_makes_the_canvas_larger_than_the_source() {
        // A strip 1000 x 10 into 500 x 500: the image is 500 x 5; the canvas 500 x 10, not
        // 500 x 500 (50 times the source's pixels).
        let p = plan(d(1000, 10), d(500, 500), Fit::Contain);
        assert_eq!(
            (p.resized, p.canvas, p.offset),
            (d(500, 5), d(500, 10), (0, 2))
        );
    }

    proptest! {
        #[test]
        fn never_larger_than_the_source_and_always_within_the_box(
            sw in 1u32..20_000, sh in 1u32..20_000, bw in 1u32..5_000, bh in 1u32..5_000,
            fit in prop_oneof![Just(Fit::Cover), Just(Fit::Contain), Just(Fit::Inside)],
        ) {
            let (src, b) = (d(sw, sh), d(bw, bh));
            let p = plan(src, b, fit);
            prop_assert!(p.canvas.width <= sw && p.canvas.height <= sh, "{:?}", p);
            prop_assert!(p.resized.width >= 1 && p.resized.height >= 1);
            prop_assert!(p.resized.width <= p.canvas.width && p.resized.height <= p.canvas.height);
            prop_assert!(p.offset.0 + p.resized.width <= p.canvas.width);
            prop_assert!(p.offset.1 + p.resized.height <= p.canvas.height);
            prop_assert!(p.crop.x + p.crop.width <= sw && p.crop.y + p.crop.height <= sh);
            prop_assert!(p.resized.width <= p.crop.width && p.resized.height <= p.crop.height, "never enlarged: {:?}", p);
            let whole = Rect { x: 0, y: 0, width: sw, height: sh };
            let as_is = p.crop == whole && p.resized == src && p.canvas == src;
            if !as_is {
                prop_assert!(p.canvas.width <= bw && p.canvas.height <= bh, "within the box: {:?}", p);
            }
            if fit == Fit::Cover && sw > bw && sh > bh {
                prop_assert_eq!(p.canvas, b);
            }
            if fit == Fit::Cover {
                // Always the box's shape, to a pixel of rounding.
                let off = (i64::from(p.canvas.width) * i64::from(bh) - i64::from(p.canvas.height) * i64::from(bw)).abs();
                prop_assert!(off <= i64::from(bw.max(bh)), "cover's shape: {:?} for {:?}", p, b);
            }
            // The kept part's shape survives the resize, to a pixel of rounding.
            let skew = (i64::from(p.resized.width) * i64::from(p.crop.height)
                - i64::from(p.resized.height) * i64::from(p.crop.width)).abs();
            prop_assert!(skew <= i64::from(p.crop.width.max(p.crop.height)), "aspect: {:?}", p);
        }
    }
}
