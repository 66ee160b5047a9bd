//! What turns stored pixels upright: a horizontal flip or not, then 0–3 quarter turns clockwise
//! (the eight EXIF orientations are exactly these), composed in the order a HEIF file lists its
//! `irot` and `imir` properties.

/// A flip (left–right mirror, first), then `quarter_turns` turns of 90° clockwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Transform {
    pub flip: bool,
    pub quarter_turns: u8,
}

impl Transform {
    pub const UPRIGHT: Transform = Transform {
        flip: false,
        quarter_turns: 0,
    };

    /// EXIF's Orientation tag (1–8); any other value is taken as upright, as viewers do.
    pub fn from_exif(orientation: u16) -> Transform {
        let (flip, quarter_turns) = match orientation {
            2 => (true, 0),
            3 => (false, 2),
            4 => (true, 2),
            5 => (true, 3),
            6 => (false, 1),
            7 => (true, 1),
            8 => (false, 3),
            _ => (false, 0),
        };
        Transform {
            flip,
            quarter_turns,
        }
    }

    /// The EXIF Orientation value of this transform (1–8).
    pub fn exif(self) -> u16 {
        match (self.flip, self.quarter_turns % 4) {
            (false, 0) => 1,
            (true, 0) => 2,
            (false, 2) => 3,
            (true, 2) => 4,
            (true, 3) => 5,
            (false, 1) => 6,
            (true, 1) => 7,
            _ => 8,
        }
    }

    /// HEIF's `irot`: `angle` quarter turns anticlockwise.
    pub fn heif_rotation(angle: u8) -> Transform {
        Transform {
            flip: false,
            quarter_turns: (4 - angle % 4) % 4,
        }
    }

    /// HEIF's `imir`: a mirror about a vertical axis (0: left–right) or a horizontal one (1:
    /// top–bottom, which is a left–right mirror turned half way).
    pub fn heif_mirror(axis: u8) -> Transform {
        Transform {
            flip: true,
            quarter_turns: if axis & 1 == 0 { 0 } else { 2 },
        }
    }

    /// `self`, then `next`.
    pub fn then(self, next: Transform) -> Transform {
        // A flip after a rotation by r is the rotation by -r after the flip.
        let turns = if next.flip {
            4 + next.quarter_turns % 4 - self.quarter_turns % 4
        } else {
            next.quarter_turns % 4 + self.quarter_turns % 4
        };
        Transform {
            flip: self.flip ^ next.flip,
            quarter_turns: turns % 4,
        }
    }

    /// Whether the upright image's width is the stored height.
    pub fn transposes(self) -> bool {
        self.quarter_turns % 2 == 1
    }

    /// Where the stored pixel (x, y) of a `width` × `height` image lands upright.
    pub fn map(self, (x, y): (u32, u32), width: u32, height: u32) -> (u32, u32) {
        let (mut x, mut y, mut w, mut h) = (x, y, width, height);
        if self.flip {
            x = w - 1 - x;
        }
        for _ in 0..self.quarter_turns % 4 {
            // A quarter turn clockwise: (x, y) of a w × h image to (h-1-y, x) of an h × w one.
            (x, y) = (h - 1 - y, x);
            (w, h) = (h, w);
        }
        (x, y)
    }
}
