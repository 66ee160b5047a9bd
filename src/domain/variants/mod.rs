//! A profile's named renditions of its images (issue 37): each a box, a fit, an output format
//! and a quality; and the geometry of rendering one.

pub mod geometry;

pub use geometry::{plan, Fit, Plan, Rect};
