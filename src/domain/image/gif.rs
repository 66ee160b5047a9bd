//! GIF: the logical screen's width and height follow the signature.

use super::bytes::le16;
use super::{Dimensions, Format, Header, Parsed, Transform};

pub fn read(b: &[u8]) -> Parsed {
    if b.len() < 10 {
        return Parsed::NeedMore(10);
    }
    if !(b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a")) {
        return Parsed::Invalid("not a GIF signature");
    }
    let (Some(width), Some(height)) = (le16(b, 6), le16(b, 8)) else {
        return Parsed::NeedMore(10);
    };
    Parsed::Found(Header {
        format: Format::Gif,
        stored: Dimensions {
            width: width.into(),
            height: height.into(),
        },
        orientation: Transform::UPRIGHT,
    })
}
