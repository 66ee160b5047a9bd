//! libwebp's simple API (Debian's `libwebp7`, 1.2.4): a WebP's features (size, alpha,
//! animation), its decoding to 8-bit RGBA, and lossy encoding from RGB or RGBA rows. Only these
//! calls; every buffer libwebp hands back is copied into a `Vec` and freed with `WebPFree`
//! before the call returns. Each unsafe block says why it is sound.

use std::os::raw::{c_int, c_void};

/// `WEBP_DECODER_ABI_VERSION` of the headers this was written against (libwebp 1.2.4); a
/// library with another major version refuses the call (`VP8_STATUS_INVALID_PARAM`).
const DECODER_ABI_VERSION: c_int = 0x0209;

#[repr(C)]
#[derive(Default)]
struct BitstreamFeatures {
    width: c_int,
    height: c_int,
    has_alpha: c_int,
    has_animation: c_int,
    format: c_int,
    pad: [u32; 5],
}

#[link(name = "webp")]
extern "C" {
    fn WebPGetFeaturesInternal(
        data: *const u8,
        size: usize,
        features: *mut BitstreamFeatures,
        version: c_int,
    ) -> c_int;
    fn WebPDecodeRGBA(
        data: *const u8,
        size: usize,
        width: *mut c_int,
        height: *mut c_int,
    ) -> *mut u8;
    fn WebPEncodeRGB(
        rgb: *const u8,
        width: c_int,
        height: c_int,
        stride: c_int,
        quality: f32,
        output: *mut *mut u8,
    ) -> usize;
    fn WebPEncodeRGBA(
        rgba: *const u8,
        width: c_int,
        height: c_int,
        stride: c_int,
        quality: f32,
        output: *mut *mut u8,
    ) -> usize;
    fn WebPFree(ptr: *mut c_void);
}

/// Why libwebp refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// What a WebP's headers say of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    pub width: u32,
    pub height: u32,
    pub has_alpha: bool,
    pub animated: bool,
}

/// The features of the WebP `data` (its headers only; nothing is decoded).
pub fn features(data: &[u8]) -> Result<Features, Error> {
    let mut f = BitstreamFeatures::default();
    // SAFETY: `data` is a live slice of `data.len()` bytes libwebp only reads during the call;
    // `f` is a writable struct laid out as the 1.2.4 header's `WebPBitstreamFeatures`, and the
    // ABI version passed makes the library refuse a layout it does not share.
    let status =
        unsafe { WebPGetFeaturesInternal(data.as_ptr(), data.len(), &mut f, DECODER_ABI_VERSION) };
    if status != 0 {
        return Err(Error(format!(
            "not a WebP libwebp can read (status {status})"
        )));
    }
    let (width, height) = (
        u32::try_from(f.width).map_err(|_| Error("a negative width".into()))?,
        u32::try_from(f.height).map_err(|_| Error("a negative height".into()))?,
    );
    Ok(Features {
        width,
        height,
        has_alpha: f.has_alpha != 0,
        animated: f.has_animation != 0,
    })
}

/// The WebP `data` decoded to `width` × `height` rows of 8-bit RGBA without padding (a still
/// image; libwebp's simple API refuses an animation).
pub fn decode_rgba(data: &[u8]) -> Result<(Vec<u8>, u32, u32), Error> {
    let (mut w, mut h): (c_int, c_int) = (0, 0);
    // SAFETY: `data` is a live slice libwebp only reads; `w` and `h` are writable ints. The
    // returned buffer, when not null, is libwebp's of `w * h * 4` bytes (the simple API's
    // contract for RGBA), read once below and then freed with `WebPFree`, its allocator.
    let out = unsafe { WebPDecodeRGBA(data.as_ptr(), data.len(), &mut w, &mut h) };
    if out.is_null() {
        return Err(Error("the WebP cannot be decoded".into()));
    }
    let len = (w.max(0) as usize) * (h.max(0) as usize) * 4;
    // SAFETY: `out` is non-null and points to `len` initialised bytes (see above); the slice
    // lives only until the copy, before the free.
    let pixels = unsafe { std::slice::from_raw_parts(out, len) }.to_vec();
    // SAFETY: `out` came from libwebp's decoder and is freed once, here.
    unsafe { WebPFree(out.cast()) };
    Ok((pixels, w as u32, h as u32))
}

/// `width` × `height` rows of 8-bit RGB (`channels` 3) or RGBA (4) without padding, encoded as
/// a lossy WebP of `quality` (0–100).
pub fn encode(
    pixels: &[u8],
    width: u32,
    height: u32,
    channels: usize,
    quality: u8,
) -> Result<Vec<u8>, Error> {
    if channels != 3 && channels != 4 {
        return Err(Error(format!("{channels} channels")));
    }
    let (w, h) = (
        c_int::try_from(width).map_err(|_| Error("too wide".into()))?,
        c_int::try_from(height).map_err(|_| Error("too tall".into()))?,
    );
    let stride =
        c_int::try_from(width as usize * channels).map_err(|_| Error("too wide".into()))?;
    if width == 0 || height == 0 || pixels.len() < width as usize * channels * height as usize {
        return Err(Error(format!(
            "{} bytes for {width} × {height} × {channels}",
            pixels.len()
        )));
    }
    let mut out: *mut u8 = std::ptr::null_mut();
    let q = f32::from(quality.min(100));
    // SAFETY: `pixels` holds at least `stride * height` bytes (checked above), read only
    // during the call; `out` is a writable pointer libwebp sets to its own buffer.
    let size = unsafe {
        if channels == 4 {
            WebPEncodeRGBA(pixels.as_ptr(), w, h, stride, q, &mut out)
        } else {
            WebPEncodeRGB(pixels.as_ptr(), w, h, stride, q, &mut out)
        }
    };
    if out.is_null() {
        return Err(Error("libwebp did not encode".into()));
    }
    let bytes = if size == 0 {
        None
    } else {
        // SAFETY: libwebp wrote `size` bytes at `out` (non-null); copied before the free.
        Some(unsafe { std::slice::from_raw_parts(out, size) }.to_vec())
    };
    // SAFETY: `out` is libwebp's buffer, freed once, here.
    unsafe { WebPFree(out.cast()) };
    bytes.ok_or_else(|| Error("libwebp did not encode".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoded_image_decodes_to_its_size_and_colours() {
        let (w, h) = (64u32, 48u32);
        let mut rgba = Vec::new();
        for y in 0..h {
            for x in 0..w {
                let a = if x < 32 { 255 } else { 0 };
                rgba.extend_from_slice(&[200, (y * 4) as u8, 20, a]);
            }
        }
        let webp = encode(&rgba, w, h, 4, 90).unwrap();
        assert_eq!(&webp[..4], b"RIFF");
        assert_eq!(&webp[8..12], b"WEBP");
        let f = features(&webp).unwrap();
        assert_eq!(
            (f.width, f.height, f.has_alpha, f.animated),
            (w, h, true, false)
        );
        let (px, dw, dh) = decode_rgba(&webp).unwrap();
        assert_eq!((dw, dh), (w, h));
        let at = |x: u32, y: u32| &px[((y * w + x) * 4) as usize..][..4];
        assert!(at(5, 5)[0].abs_diff(200) < 12, "{:?}", at(5, 5));
        assert_eq!(at(5, 5)[3], 255);
        assert_eq!(at(60, 5)[3], 0);
        let rgb: Vec<u8> = rgba.chunks(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
        let opaque = encode(&rgb, w, h, 3, 80).unwrap();
        assert!(!features(&opaque).unwrap().has_alpha);
    }

    #[test]
    fn garbage_and_short_buffers_are_refused() {
        assert!(features(b"RIFF\0\0\0\0WEBPVP8 garbage").is_err());
        assert!(decode_rgba(b"not a webp at all").is_err());
        assert!(decode_rgba(&[]).is_err());
        assert!(encode(&[0; 10], 4, 4, 3, 80).is_err());
        assert!(encode(&[0; 48], 4, 4, 2, 80).is_err());
    }
}

/// Writes to an address no process maps: the worker's crash test (issue 46) needs a real
/// `SIGSEGV` from native code, as a decoder's bug would raise it. Never called outside a debug
/// build's test probe.
#[doc(hidden)]
pub fn crash_for_tests() {
    let p = std::ptr::null_mut::<u8>().wrapping_add(16);
    // SAFETY: not sound, on purpose: the write faults, and the process dies of SIGSEGV.
    unsafe { p.write_volatile(0) }
}
