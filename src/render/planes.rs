//! One channel of an image (a JPEG's Y, Cb or Cr), and what a render does to it: a crop and a
//! resize in one pass (`fast_image_resize`, Lanczos3, SIMD), turning it upright, and placing it
//! on a larger canvas.

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

use crate::domain::image::Transform;

pub use upcommit_turbojpeg::Plane;

/// A crop in a plane's own pixels (fractions allowed: a chroma plane is half the image's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CropF {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// What a render does to a plane.
pub trait PlaneOps: Sized {
    fn resized(
        &self,
        crop: CropF,
        width: u32,
        height: u32,
        resizer: &mut Resizer,
    ) -> Result<Plane, String>;
    fn oriented(self, t: Transform) -> Plane;
    fn placed(self, width: u32, height: u32, x: u32, y: u32, fill: u8) -> Plane;
}

impl PlaneOps for Plane {
    /// `crop` of this plane resized to `width` × `height`.
    fn resized(
        &self,
        crop: CropF,
        width: u32,
        height: u32,
        resizer: &mut Resizer,
    ) -> Result<Plane, String> {
        if crop.x == 0.0
            && crop.y == 0.0
            && crop.width == f64::from(self.width)
            && crop.height == f64::from(self.height)
            && width == self.width
            && height == self.height
        {
            return Ok(self.clone());
        }
        let src = ImageRef::new(self.width, self.height, &self.data, PixelType::U8)
            .map_err(|e| e.to_string())?;
        let mut dst = Image::new(width, height, PixelType::U8);
        let options = ResizeOptions::new()
            .resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3))
            .crop(crop.x, crop.y, crop.width, crop.height);
        resizer
            .resize(&src, &mut dst, &options)
            .map_err(|e| e.to_string())?;
        Ok(Plane {
            width,
            height,
            data: dst.into_vec(),
        })
    }

    /// This plane turned upright by `t`.
    fn oriented(self, t: Transform) -> Plane {
        if t == Transform::UPRIGHT {
            return self;
        }
        let (w, h) = (self.width, self.height);
        let (ow, oh) = if t.transposes() { (h, w) } else { (w, h) };
        let mut out = vec![0u8; self.data.len()];
        for y in 0..h {
            let row = &self.data[(y * w) as usize..((y + 1) * w) as usize];
            for (x, &v) in row.iter().enumerate() {
                let (nx, ny) = t.map((x as u32, y), w, h);
                out[(ny * ow + nx) as usize] = v;
            }
        }
        Plane {
            width: ow,
            height: oh,
            data: out,
        }
    }

    /// This plane at (`x`, `y`) on a `width` × `height` canvas of `fill`.
    fn placed(self, width: u32, height: u32, x: u32, y: u32, fill: u8) -> Plane {
        if (width, height, x, y) == (self.width, self.height, 0, 0) {
            return self;
        }
        let mut canvas = Plane::new(width, height, fill);
        for row in 0..self.height.min(height.saturating_sub(y)) {
            let n = self.width.min(width.saturating_sub(x)) as usize;
            let from = (row * self.width) as usize;
            let to = ((y + row) * width + x) as usize;
            canvas.data[to..to + n].copy_from_slice(&self.data[from..from + n]);
        }
        canvas
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(w: u32, h: u32) -> Plane {
        Plane {
            width: w,
            height: h,
            data: (0..w * h).map(|i| i as u8).collect(),
        }
    }

    #[test]
    fn turning_a_plane_matches_the_transforms_map_for_all_eight_orientations() {
        let p = numbered(3, 2);
        for o in 1..=8 {
            let t = Transform::from_exif(o);
            let q = p.clone().oriented(t);
            for y in 0..2 {
                for x in 0..3 {
                    let (nx, ny) = t.map((x, y), 3, 2);
                    assert_eq!(
                        q.data[(ny * q.width + nx) as usize],
                        p.data[(y * 3 + x) as usize],
                        "exif {o}"
                    );
                }
            }
        }
        // EXIF 6 (a quarter turn clockwise): the stored bottom-left pixel is shown top-left.
        let q = p.oriented(Transform::from_exif(6));
        assert_eq!((q.width, q.height), (2, 3));
        assert_eq!(q.data[0], 3);
    }

    #[test]
    fn placing_pads_around_the_plane() {
        let q = numbered(2, 1).placed(4, 3, 1, 1, 9);
        assert_eq!(q.data, vec![9, 9, 9, 9, 9, 0, 1, 9, 9, 9, 9, 9]);
    }

    #[test]
    fn a_resize_keeps_a_flat_plane_flat() {
        let p = Plane::new(64, 48, 200);
        let mut r = Resizer::new();
        let q = p
            .resized(
                CropF {
                    x: 8.0,
                    y: 0.0,
                    width: 48.0,
                    height: 48.0,
                },
                16,
                16,
                &mut r,
            )
            .expect("resize");
        assert_eq!((q.width, q.height), (16, 16));
        assert!(q.data.iter().all(|&v| v == 200));
    }
}
