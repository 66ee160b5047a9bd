//! libheif (Debian's `libheif1`, 1.15, built with libde265 for HEVC and dav1d for AV1): a HEIC
//! or AVIF file's primary image, its displayed size (libheif applies the file's rotation and
//! mirroring, `irot` and `imir`, when it decodes), its ICC profile, and its decoding to 8-bit
//! RGB or RGBA. Only these calls; every libheif object is released before the call returns, and
//! the decoded rows are copied out.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::Once;

#[repr(C)]
struct HeifError {
    code: c_int,
    subcode: c_int,
    message: *const c_char,
}

type Ctx = *mut c_void;
type ImageHandle = *mut c_void;
type Image = *mut c_void;

const COLORSPACE_RGB: c_int = 1;
const CHROMA_INTERLEAVED_RGB: c_int = 10;
const CHROMA_INTERLEAVED_RGBA: c_int = 11;
const CHANNEL_INTERLEAVED: c_int = 10;
const COMPRESSION_HEVC: c_int = 1;
const COMPRESSION_AV1: c_int = 4;

const fn fourcc(b: &[u8; 4]) -> u32 {
    ((b[0] as u32) << 24) | ((b[1] as u32) << 16) | ((b[2] as u32) << 8) | b[3] as u32
}
const PROFILE_PROF: u32 = fourcc(b"prof");
const PROFILE_RICC: u32 = fourcc(b"rICC");

#[link(name = "heif")]
extern "C" {
    fn heif_init(params: *mut c_void) -> HeifError;
    fn heif_context_alloc() -> Ctx;
    fn heif_context_free(ctx: Ctx);
    fn heif_context_set_maximum_image_size_limit(ctx: Ctx, maximum_width: c_int);
    fn heif_context_read_from_memory_without_copy(
        ctx: Ctx,
        mem: *const c_void,
        size: usize,
        options: *const c_void,
    ) -> HeifError;
    fn heif_context_get_primary_image_handle(ctx: Ctx, handle: *mut ImageHandle) -> HeifError;
    fn heif_image_handle_release(handle: ImageHandle);
    fn heif_image_handle_get_width(handle: ImageHandle) -> c_int;
    fn heif_image_handle_get_height(handle: ImageHandle) -> c_int;
    fn heif_image_handle_has_alpha_channel(handle: ImageHandle) -> c_int;
    fn heif_image_handle_get_color_profile_type(handle: ImageHandle) -> u32;
    fn heif_image_handle_get_raw_color_profile_size(handle: ImageHandle) -> usize;
    fn heif_image_handle_get_raw_color_profile(handle: ImageHandle, out: *mut c_void) -> HeifError;
    fn heif_decode_image(
        handle: ImageHandle,
        out: *mut Image,
        colorspace: c_int,
        chroma: c_int,
        options: *const c_void,
    ) -> HeifError;
    fn heif_image_get_width(img: Image, channel: c_int) -> c_int;
    fn heif_image_get_height(img: Image, channel: c_int) -> c_int;
    fn heif_image_get_plane_readonly(img: Image, channel: c_int, stride: *mut c_int) -> *const u8;
    fn heif_image_release(img: Image);
    fn heif_have_decoder_for_format(format: c_int) -> c_int;
    fn heif_image_create(
        w: c_int,
        h: c_int,
        cs: c_int,
        chroma: c_int,
        out: *mut Image,
    ) -> HeifError;
    fn heif_image_add_plane(
        img: Image,
        channel: c_int,
        w: c_int,
        h: c_int,
        depth: c_int,
    ) -> HeifError;
    fn heif_image_get_plane(img: Image, channel: c_int, stride: *mut c_int) -> *mut u8;
    fn heif_context_get_encoder_for_format(
        ctx: Ctx,
        format: c_int,
        enc: *mut *mut c_void,
    ) -> HeifError;
    fn heif_encoder_set_lossy_quality(enc: *mut c_void, quality: c_int) -> HeifError;
    fn heif_encoder_release(enc: *mut c_void);
    fn heif_context_encode_image(
        ctx: Ctx,
        img: Image,
        enc: *mut c_void,
        options: *const c_void,
        out: *mut ImageHandle,
    ) -> HeifError;
    fn heif_context_write(ctx: Ctx, writer: *mut Writer, userdata: *mut c_void) -> HeifError;
    fn heif_have_encoder_for_format(format: c_int) -> c_int;
}

/// libheif's `struct heif_writer` (API version 1).
#[repr(C)]
struct Writer {
    version: c_int,
    write: extern "C" fn(Ctx, *const c_void, usize, *mut c_void) -> HeifError,
}

static INIT: Once = Once::new();

fn init() {
    // SAFETY: a null parameter block is libheif's default; called once for the process.
    INIT.call_once(|| unsafe {
        let _ = heif_init(std::ptr::null_mut());
    });
}

/// Why libheif refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

fn check(e: HeifError) -> Result<(), Error> {
    if e.code == 0 {
        return Ok(());
    }
    let msg = if e.message.is_null() {
        String::new()
    } else {
        // SAFETY: libheif's messages are NUL-terminated static or context-owned strings, read
        // before the context is freed.
        unsafe { std::ffi::CStr::from_ptr(e.message) }
            .to_string_lossy()
            .into_owned()
    };
    Err(Error(format!("libheif: {msg} ({}.{})", e.code, e.subcode)))
}

/// Which codec an image's file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// HEIC: HEVC (libde265).
    Hevc,
    /// AVIF: AV1 (dav1d or libaom).
    Av1,
}

/// Whether this libheif has a decoder for `codec`.
pub fn can_decode(codec: Codec) -> bool {
    init();
    let f = match codec {
        Codec::Hevc => COMPRESSION_HEVC,
        Codec::Av1 => COMPRESSION_AV1,
    };
    // SAFETY: a pure query.
    unsafe { heif_have_decoder_for_format(f) != 0 }
}

/// The primary image of a HEIC or AVIF, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// As displayed (rotation and mirroring applied).
    pub width: u32,
    pub height: u32,
    /// Rows of RGB (or RGBA with `has_alpha`) without padding.
    pub pixels: Vec<u8>,
    pub has_alpha: bool,
    /// The embedded ICC profile, if the file has one (`colr` of type `prof` or `rICC`).
    pub icc: Option<Vec<u8>>,
}

/// Frees the context (and with it anything borrowed from it) on every path.
struct Context(Ctx);

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: ours, freed once, after every handle and image made from it is released
        // (those guards are dropped first: declared later).
        unsafe { heif_context_free(self.0) };
    }
}

struct Handle(ImageHandle);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: ours, released once.
        unsafe { heif_image_handle_release(self.0) };
    }
}

struct Img(Image);

impl Drop for Img {
    fn drop(&mut self) {
        // SAFETY: ours, released once.
        unsafe { heif_image_release(self.0) };
    }
}

/// Decodes the primary image of `data`, refusing before decoding one of more than
/// `max_pixels` (its displayed width × height).
pub fn decode(data: &[u8], max_pixels: u64) -> Result<Decoded, Error> {
    init();
    // SAFETY: no arguments; null on failure.
    let ctx = Context(unsafe { heif_context_alloc() });
    if ctx.0.is_null() {
        return Err(Error("heif_context_alloc failed".into()));
    }
    // No side longer than the pixel limit allows for a one-pixel-wide image, and never past
    // libheif's own default bound (32,768): this only ever lowers it.
    let side = max_pixels.clamp(1, 32_768) as c_int;
    // SAFETY: a live context.
    unsafe { heif_context_set_maximum_image_size_limit(ctx.0, side) };
    // SAFETY: `data` outlives the context (dropped at the end of this function, before
    // `data`'s borrow ends); libheif only reads it.
    check(unsafe {
        heif_context_read_from_memory_without_copy(
            ctx.0,
            data.as_ptr().cast(),
            data.len(),
            std::ptr::null(),
        )
    })?;
    let mut h: ImageHandle = std::ptr::null_mut();
    // SAFETY: a live context; `h` is written on success.
    check(unsafe { heif_context_get_primary_image_handle(ctx.0, &mut h) })?;
    if h.is_null() {
        return Err(Error("no primary image".into()));
    }
    let handle = Handle(h);
    // SAFETY: a live handle.
    let (w, hh, alpha) = unsafe {
        (
            heif_image_handle_get_width(handle.0),
            heif_image_handle_get_height(handle.0),
            heif_image_handle_has_alpha_channel(handle.0) != 0,
        )
    };
    let (w, hh) = (
        u32::try_from(w).map_err(|_| Error("a negative width".into()))?,
        u32::try_from(hh).map_err(|_| Error("a negative height".into()))?,
    );
    if w == 0 || hh == 0 {
        return Err(Error("an image without pixels".into()));
    }
    if u64::from(w) * u64::from(hh) > max_pixels {
        return Err(Error(format!(
            "{w} × {hh} is more than {max_pixels} pixels"
        )));
    }
    // SAFETY: a live handle.
    let icc = match unsafe { heif_image_handle_get_color_profile_type(handle.0) } {
        PROFILE_PROF | PROFILE_RICC => {
            // SAFETY: a live handle.
            let n = unsafe { heif_image_handle_get_raw_color_profile_size(handle.0) };
            if n == 0 || n > 4 * 1024 * 1024 {
                None
            } else {
                let mut buf = vec![0u8; n];
                // SAFETY: `buf` holds the `n` bytes libheif said the profile has.
                check(unsafe {
                    heif_image_handle_get_raw_color_profile(handle.0, buf.as_mut_ptr().cast())
                })
                .ok()
                .map(|()| buf)
            }
        }
        _ => None,
    };
    let (chroma, channels) = if alpha {
        (CHROMA_INTERLEAVED_RGBA, 4usize)
    } else {
        (CHROMA_INTERLEAVED_RGB, 3usize)
    };
    let mut img: Image = std::ptr::null_mut();
    // SAFETY: a live handle; `img` is written on success; null options are the defaults
    // (transformations applied).
    check(unsafe {
        heif_decode_image(handle.0, &mut img, COLORSPACE_RGB, chroma, std::ptr::null())
    })?;
    if img.is_null() {
        return Err(Error("nothing decoded".into()));
    }
    let img = Img(img);
    let mut stride: c_int = 0;
    // SAFETY: a live image; the interleaved channel exists for an interleaved chroma.
    let (iw, ih, plane) = unsafe {
        (
            heif_image_get_width(img.0, CHANNEL_INTERLEAVED),
            heif_image_get_height(img.0, CHANNEL_INTERLEAVED),
            heif_image_get_plane_readonly(img.0, CHANNEL_INTERLEAVED, &mut stride),
        )
    };
    let (iw, ih) = (iw.max(0) as usize, ih.max(0) as usize);
    let stride = stride.max(0) as usize;
    if plane.is_null() || iw == 0 || ih == 0 || stride < iw * channels {
        return Err(Error("a decoded image without its pixels".into()));
    }
    let mut pixels = Vec::with_capacity(iw * ih * channels);
    for row in 0..ih {
        // SAFETY: libheif's plane holds `ih` rows of `stride` bytes, each with `iw * channels`
        // bytes of pixels; the image is live until `img` drops below.
        let line = unsafe { std::slice::from_raw_parts(plane.add(row * stride), iw * channels) };
        pixels.extend_from_slice(line);
    }
    drop(img);
    drop(handle);
    drop(ctx);
    Ok(Decoded {
        width: iw as u32,
        height: ih as u32,
        pixels,
        has_alpha: alpha,
        icc,
    })
}

/// `rgba` (`width` × `height` rows of RGBA without padding) encoded as a HEIC (`Codec::Hevc`,
/// x265) or an AVIF (`Codec::Av1`, libaom) at quality 90: what tests make sources with.
pub fn encode_for_tests(
    rgba: &[u8],
    width: u32,
    height: u32,
    codec: Codec,
) -> Result<Vec<u8>, Error> {
    encode(rgba, width, height, 4, codec, 90)
}

/// Whether this libheif has an encoder for `codec`.
pub fn can_encode(codec: Codec) -> bool {
    init();
    // SAFETY: a pure query.
    unsafe { heif_have_encoder_for_format(compression(codec)) != 0 }
}

fn compression(codec: Codec) -> c_int {
    match codec {
        Codec::Hevc => COMPRESSION_HEVC,
        Codec::Av1 => COMPRESSION_AV1,
    }
}

/// libheif's writer: appends what it is given to the `Vec<u8>` behind `userdata`.
extern "C" fn append(
    _ctx: Ctx,
    data: *const c_void,
    size: usize,
    userdata: *mut c_void,
) -> HeifError {
    if !data.is_null() && size > 0 {
        // SAFETY: `userdata` is the `&mut Vec<u8>` `encode` passed, alive for the whole
        // `heif_context_write` call; `data` holds `size` bytes for this call.
        unsafe {
            let out = &mut *userdata.cast::<Vec<u8>>();
            out.extend_from_slice(std::slice::from_raw_parts(data.cast::<u8>(), size));
        }
    }
    HeifError {
        code: 0,
        subcode: 0,
        message: c"ok".as_ptr(),
    }
}

/// `pixels` (`width` × `height` rows of RGB, `channels` 3, or RGBA, 4, without padding)
/// encoded as a HEIC or an AVIF at `quality` (0–100), in memory: an AVIF rendition.
pub fn encode(
    pixels: &[u8],
    width: u32,
    height: u32,
    channels: usize,
    codec: Codec,
    quality: u8,
) -> Result<Vec<u8>, Error> {
    init();
    let chroma = match channels {
        3 => CHROMA_INTERLEAVED_RGB,
        4 => CHROMA_INTERLEAVED_RGBA,
        _ => return Err(Error(format!("{channels} channels"))),
    };
    if width == 0 || height == 0 || pixels.len() != width as usize * height as usize * channels {
        return Err(Error("pixels of the wrong size".into()));
    }
    // SAFETY: no arguments.
    let ctx = Context(unsafe { heif_context_alloc() });
    if ctx.0.is_null() {
        return Err(Error("heif_context_alloc failed".into()));
    }
    let mut img: Image = std::ptr::null_mut();
    // SAFETY: sizes and enums are plain values; `img` is written on success.
    check(unsafe {
        heif_image_create(
            width as c_int,
            height as c_int,
            COLORSPACE_RGB,
            chroma,
            &mut img,
        )
    })?;
    let img = Img(img);
    // SAFETY: a live image.
    check(unsafe {
        heif_image_add_plane(
            img.0,
            CHANNEL_INTERLEAVED,
            width as c_int,
            height as c_int,
            8,
        )
    })?;
    let mut stride: c_int = 0;
    // SAFETY: the plane just added: `height` rows of `stride` bytes.
    let plane = unsafe { heif_image_get_plane(img.0, CHANNEL_INTERLEAVED, &mut stride) };
    let row = width as usize * channels;
    if plane.is_null() || (stride.max(0) as usize) < row {
        return Err(Error("no plane".into()));
    }
    for y in 0..height as usize {
        // SAFETY: row `y` of the plane has at least `row` writable bytes (stride ≥ row).
        let dst = unsafe { std::slice::from_raw_parts_mut(plane.add(y * stride as usize), row) };
        dst.copy_from_slice(&pixels[y * row..][..row]);
    }
    let mut enc: *mut c_void = std::ptr::null_mut();
    // SAFETY: a live context; `enc` is written on success and released below.
    check(unsafe { heif_context_get_encoder_for_format(ctx.0, compression(codec), &mut enc) })?;
    // SAFETY: a live encoder, image and context; the handle written is the context's.
    let encoded = unsafe {
        let _ = heif_encoder_set_lossy_quality(enc, c_int::from(quality.min(100)));
        let mut h: ImageHandle = std::ptr::null_mut();
        let e = heif_context_encode_image(ctx.0, img.0, enc, std::ptr::null(), &mut h);
        heif_encoder_release(enc);
        if !h.is_null() {
            heif_image_handle_release(h);
        }
        e
    };
    check(encoded)?;
    let mut out: Vec<u8> = Vec::new();
    let mut writer = Writer {
        version: 1,
        write: append,
    };
    // SAFETY: a live context; `writer` and `out` live across the call, and `append` is the
    // only user of `out`'s pointer, during the call.
    check(unsafe { heif_context_write(ctx.0, &mut writer, (&mut out as *mut Vec<u8>).cast()) })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_libheif_decodes_hevc_and_av1() {
        assert!(can_decode(Codec::Hevc), "libde265");
        assert!(can_decode(Codec::Av1), "dav1d or libaom");
    }

    #[test]
    fn what_it_encodes_decodes_to_its_size_and_colours_and_too_many_pixels_are_refused() {
        let (w, h) = (64u32, 32u32);
        let mut rgba = Vec::new();
        for _ in 0..h {
            for x in 0..w {
                rgba.extend_from_slice(if x < 32 {
                    &[220, 30, 30, 255]
                } else {
                    &[30, 30, 220, 255]
                });
            }
        }
        for codec in [Codec::Hevc, Codec::Av1] {
            let file = encode_for_tests(&rgba, w, h, codec).expect("encode");
            assert_eq!(&file[4..8], b"ftyp");
            let d = decode(&file, 1_000_000).expect("decode");
            assert_eq!((d.width, d.height), (w, h), "{codec:?}");
            let at = |x: usize| {
                &d.pixels[(16 * w as usize + x) * if d.has_alpha { 4 } else { 3 }..][..3]
            };
            assert!(at(5)[0] > 180 && at(5)[2] < 80, "{codec:?} red {:?}", at(5));
            assert!(
                at(60)[2] > 180 && at(60)[0] < 80,
                "{codec:?} blue {:?}",
                at(60)
            );
            assert!(decode(&file, 1000).is_err(), "over the pixel limit");
            assert!(
                decode(&file[..file.len() / 2], 1_000_000).is_err(),
                "cut in half"
            );
        }
    }

    #[test]
    fn garbage_and_cut_files_are_refused() {
        assert!(decode(b"", 1000).is_err());
        assert!(decode(b"\0\0\0\x18ftypheic\0\0\0\0mif1heic", 1000).is_err());
        assert!(decode(&[0x41; 500], 1000).is_err());
    }
}
