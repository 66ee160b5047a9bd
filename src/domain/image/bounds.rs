//! A profile's bounds on an image's size (issue 37): at most `max_pixels` (stored width ×
//! height, what a decoder allocates), and optionally a minimum and maximum width and height as
//! displayed (orientation applied). Pure; the commit refuses what is outside for good.

use super::{Dimensions, Header};

/// 100 megapixels: above any camera phone's photo (a 200 MP sensor writes 50 MP by default)
/// and below what a renderer should allocate without being asked.
pub const DEFAULT_MAX_PIXELS: u64 = 100_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageBounds {
    pub max_pixels: u64,
    pub min_width: Option<u32>,
    pub max_width: Option<u32>,
    pub min_height: Option<u32>,
    pub max_height: Option<u32>,
}

impl Default for ImageBounds {
    fn default() -> Self {
        Self {
            max_pixels: DEFAULT_MAX_PIXELS,
            min_width: None,
            max_width: None,
            min_height: None,
            max_height: None,
        }
    }
}

/// Why an image is outside its profile's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfBounds {
    /// More pixels than `max_pixels` (422 `image_too_many_pixels`).
    Pixels { pixels: u64, max: u64 },
    /// A displayed width or height outside the profile's range (422
    /// `image_dimensions_out_of_range`).
    Dimensions {
        displayed: Dimensions,
        bounds: ImageBounds,
    },
}

impl std::fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pixels { pixels, max } => {
                write!(f, "the image has {pixels} pixels; its profile allows {max}")
            }
            Self::Dimensions { displayed, bounds } => {
                let range = |min: Option<u32>, max: Option<u32>| match (min, max) {
                    (Some(a), Some(b)) => format!("{a}..={b}"),
                    (Some(a), None) => format!("at least {a}"),
                    (None, Some(b)) => format!("at most {b}"),
                    (None, None) => "any".to_owned(),
                };
                write!(
                    f,
                    "the image is {} x {} as displayed; its profile allows a width of {} and a height of {}",
                    displayed.width,
                    displayed.height,
                    range(bounds.min_width, bounds.max_width),
                    range(bounds.min_height, bounds.max_height)
                )
            }
        }
    }
}

impl ImageBounds {
    /// Whether the image `header` describes is within these bounds.
    pub fn check(&self, header: &Header) -> Result<(), OutOfBounds> {
        let pixels = header.stored.pixels();
        if pixels > self.max_pixels {
            return Err(OutOfBounds::Pixels {
                pixels,
                max: self.max_pixels,
            });
        }
        let d = header.displayed();
        let within = |v: u32, min: Option<u32>, max: Option<u32>| {
            min.map_or(true, |m| v >= m) && max.map_or(true, |m| v <= m)
        };
        if within(d.width, self.min_width, self.max_width)
            && within(d.height, self.min_height, self.max_height)
        {
            Ok(())
        } else {
            Err(OutOfBounds::Dimensions {
                displayed: d,
                bounds: *self,
            })
        }
    }

    /// A bounds table that cannot admit anything is a configuration error.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_pixels == 0 {
            return Err("max_pixels must be above 0".into());
        }
        for (what, min, max) in [
            ("width", self.min_width, self.max_width),
            ("height", self.min_height, self.max_height),
        ] {
            if min == Some(0) || max == Some(0) {
                return Err(format!("min_{what} and max_{what} must be above 0"));
            }
            if let (Some(a), Some(b)) = (min, max) {
                if a > b {
                    return Err(format!("min_{what} {a} is above max_{what} {b}"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::image::{Format, Transform};
    use proptest::prelude::*;

    fn header(width: u32, height: u32, exif: u16) -> Header {
        Header {
            format: Format::Jpeg,
            stored: Dimensions { width, height },
            orientation: Transform::from_exif(exif),
        }
    }

    #[test]
    fn the_default_allows_100_megapixels_and_no_more() {
        let b = ImageBounds::default();
        assert_eq!(b.check(&header(10_000, 10_000, 1)), Ok(()));
        assert_eq!(
            b.check(&header(10_000, 10_001, 1)),
            Err(OutOfBounds::Pixels {
                pixels: 100_010_000,
                max: DEFAULT_MAX_PIXELS
            })
        );
        // The PNG bomb of the issue: 100,000 x 100,000.
        assert!(matches!(
            b.check(&header(100_000, 100_000, 1)),
            Err(OutOfBounds::Pixels { .. })
        ));
    }

    #[test]
    fn width_and_height_are_judged_as_displayed() {
        let b = ImageBounds {
            max_width: Some(3000),
            min_height: Some(3500),
            ..ImageBounds::default()
        };
        // Stored 4032 x 3024 and turned a quarter (EXIF 6): shown 3024 x 4032... too wide.
        assert!(b.check(&header(4032, 3024, 6)).is_err());
        // Stored 3024 x 4032 as is: too wide too (3024 > 3000).
        assert!(b.check(&header(3024, 4032, 1)).is_err());
        // Stored 4000 x 2900, turned: shown 2900 x 4000: within.
        assert_eq!(b.check(&header(4000, 2900, 8)), Ok(()));
        // Not turned: 4000 wide.
        assert!(b.check(&header(4000, 2900, 1)).is_err());
    }

    #[test]
    fn bounds_that_admit_nothing_are_refused() {
        let bad = [
            ImageBounds {
                max_pixels: 0,
                ..ImageBounds::default()
            },
            ImageBounds {
                min_width: Some(10),
                max_width: Some(9),
                ..ImageBounds::default()
            },
            ImageBounds {
                max_height: Some(0),
                ..ImageBounds::default()
            },
        ];
        for b in bad {
            assert!(b.validate().is_err(), "{b:?}");
        }
        assert_eq!(ImageBounds::default().validate(), Ok(()));
    }

    proptest! {
        #[test]
        fn check_agrees_with_the_definition(
            w in 1u32..20_000, h in 1u32..20_000, exif in 1u16..=8,
            max_pixels in 1u64..400_000_000,
            min_w in proptest::option::of(1u32..20_000), max_w in proptest::option::of(1u32..20_000),
            min_h in proptest::option::of(1u32..20_000), max_h in proptest::option::of(1u32..20_000),
        ) {
            let b = ImageBounds { max_pixels, min_width: min_w, max_width: max_w, min_height: min_h, max_height: max_h };
            let hd = header(w, h, exif);
            let (dw, dh) = if matches!(exif, 5..=8) { (h, w) } else { (w, h) };
            let ok = u64::from(w) * u64::from(h) <= max_pixels
                && min_w.is_none_or(|m| dw >= m) && max_w.is_none_or(|m| dw <= m)
                && min_h.is_none_or(|m| dh >= m) && max_h.is_none_or(|m| dh <= m);
            prop_assert_eq!(b.check(&hd).is_ok(), ok);
        }
    }
}
