//! Moved to `crate::pause` (a support module every layer may use); this path goes once every
//! caller names the new one.
pub use crate::pause::*;
