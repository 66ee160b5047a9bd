//! The TurboJPEG 2 API of libjpeg-turbo (Debian's `libturbojpeg0`, 2.1.5): a JPEG's header,
//! its decoding to Y, Cb and Cr planes at a reduced scale (the DCT does the first part of the
//! downscale), and the encoding of planes. Only these calls; each handle is one thread's. The
//! upcommit crate forbids unsafe code: this crate is where the FFI lives, small enough to read
//! whole, every unsafe block with the reason it is sound.
//!
//! Huffman tables are optimised (as sharp does by default) when the process environment has
//! `TJ_OPTIMIZE=1`, which TurboJPEG 2 reads on each compression; `upcommit`'s `main` sets it
//! before any thread starts (setting it later would race with other threads' `getenv`).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uchar, c_ulong, c_void};

type Handle = *mut c_void;

/// TurboJPEG's chroma subsampling codes.
pub const SAMP_444: c_int = 0;
pub const SAMP_420: c_int = 2;
pub const SAMP_GRAY: c_int = 3;
/// TurboJPEG's colorspace codes: 0 RGB, 1 YCbCr, 2 gray, 3 CMYK, 4 YCCK.
pub const CS_RGB: c_int = 0;
pub const CS_CMYK: c_int = 3;
pub const CS_YCCK: c_int = 4;
/// Interleaved pixels TurboJPEG decodes to (TJPF_RGB, TJPF_CMYK): 3 or 4 bytes a pixel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pixels {
    Rgb,
    /// As the file stores them: an Adobe (APP14) CMYK or YCCK JPEG's are inverted (0 is full
    /// ink), as Photoshop writes them.
    Cmyk,
}

impl Pixels {
    fn code(self) -> c_int {
        match self {
            Self::Rgb => 0,
            Self::Cmyk => 11,
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            Self::Rgb => 3,
            Self::Cmyk => 4,
        }
    }
}

/// Stop at the first warning (a corrupt or truncated stream), not only at errors.
const FLAG_STOPONWARNING: c_int = 8192;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ScalingFactor {
    pub num: c_int,
    pub denom: c_int,
}

impl ScalingFactor {
    /// `dim` scaled, as libjpeg-turbo rounds it (up).
    pub fn apply(self, dim: u32) -> u32 {
        let v = (i64::from(dim) * i64::from(self.num) + i64::from(self.denom) - 1)
            / i64::from(self.denom);
        v as u32
    }
}

#[link(name = "turbojpeg")]
extern "C" {
    fn tjInitDecompress() -> Handle;
    fn tjInitCompress() -> Handle;
    fn tjDestroy(h: Handle) -> c_int;
    fn tjDecompressHeader3(
        h: Handle,
        buf: *const c_uchar,
        size: c_ulong,
        width: *mut c_int,
        height: *mut c_int,
        subsamp: *mut c_int,
        colorspace: *mut c_int,
    ) -> c_int;
    fn tjDecompressToYUVPlanes(
        h: Handle,
        buf: *const c_uchar,
        size: c_ulong,
        planes: *mut *mut c_uchar,
        width: c_int,
        strides: *mut c_int,
        height: c_int,
        flags: c_int,
    ) -> c_int;
    fn tjDecompress2(
        h: Handle,
        buf: *const c_uchar,
        size: c_ulong,
        dst: *mut c_uchar,
        width: c_int,
        pitch: c_int,
        height: c_int,
        pixel_format: c_int,
        flags: c_int,
    ) -> c_int;
    fn tjCompress2(
        h: Handle,
        src: *const c_uchar,
        width: c_int,
        pitch: c_int,
        height: c_int,
        pixel_format: c_int,
        out: *mut *mut c_uchar,
        out_size: *mut c_ulong,
        subsamp: c_int,
        quality: c_int,
        flags: c_int,
    ) -> c_int;
    fn tjCompressFromYUVPlanes(
        h: Handle,
        planes: *mut *const c_uchar,
        width: c_int,
        strides: *const c_int,
        height: c_int,
        subsamp: c_int,
        out: *mut *mut c_uchar,
        out_size: *mut c_ulong,
        quality: c_int,
        flags: c_int,
    ) -> c_int;
    fn tjFree(buf: *mut c_uchar);
    fn tjGetErrorStr2(h: Handle) -> *mut c_char;
    fn tjGetScalingFactors(n: *mut c_int) -> *mut ScalingFactor;
    fn tjPlaneWidth(component: c_int, width: c_int, subsamp: c_int) -> c_int;
    fn tjPlaneHeight(component: c_int, height: c_int, subsamp: c_int) -> c_int;
}

/// One channel of an image, `width` × `height` bytes, rows without padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plane {
    pub width: u32,
    pub height: u32,
    pub data: Vec<u8>,
}

impl Plane {
    pub fn new(width: u32, height: u32, fill: u8) -> Self {
        Self {
            width,
            height,
            data: vec![fill; width as usize * height as usize],
        }
    }
}

/// What TurboJPEG reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TjError(pub String);

impl std::fmt::Display for TjError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TjError {}

fn error_of(h: Handle) -> TjError {
    // SAFETY: `h` is a live handle; the string is TurboJPEG's (static or per handle) and
    // copied out before the handle is used again.
    let msg = unsafe { CStr::from_ptr(tjGetErrorStr2(h)) };
    TjError(msg.to_string_lossy().into_owned())
}

/// A JPEG's header as TurboJPEG reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegHeader {
    pub width: u32,
    pub height: u32,
    pub subsamp: c_int,
    pub colorspace: c_int,
}

/// One plane's width and height for `component` (0 Y, 1 Cb, 2 Cr) of an image of `width` ×
/// `height` with `subsamp`.
pub fn plane_size(component: c_int, width: u32, height: u32, subsamp: c_int) -> (u32, u32) {
    // SAFETY: pure functions of their arguments.
    let (w, h) = unsafe {
        (
            tjPlaneWidth(component, width as c_int, subsamp),
            tjPlaneHeight(component, height as c_int, subsamp),
        )
    };
    (w.max(0) as u32, h.max(0) as u32)
}

/// The scales libjpeg-turbo decodes at (n/8 for n in 1..=16, and more).
pub fn scaling_factors() -> &'static [ScalingFactor] {
    let mut n: c_int = 0;
    // SAFETY: TurboJPEG returns a pointer to a static table of `n` entries.
    unsafe {
        let p = tjGetScalingFactors(&mut n);
        if p.is_null() || n <= 0 {
            return &[];
        }
        std::slice::from_raw_parts(p, n as usize)
    }
}

/// A decompressor handle.
pub struct Decoder(Handle);
// SAFETY: a TurboJPEG handle may move between threads; it is used by one at a time (&mut).
unsafe impl Send for Decoder {}

impl Decoder {
    pub fn new() -> Result<Self, TjError> {
        // SAFETY: no arguments; null on failure.
        let h = unsafe { tjInitDecompress() };
        if h.is_null() {
            return Err(TjError("tjInitDecompress failed".into()));
        }
        Ok(Self(h))
    }

    pub fn header(&mut self, jpeg: &[u8]) -> Result<JpegHeader, TjError> {
        let (mut w, mut h, mut ss, mut cs) = (0, 0, 0, 0);
        // SAFETY: the buffer and its length are the slice's; the outputs are locals.
        let rc = unsafe {
            tjDecompressHeader3(
                self.0,
                jpeg.as_ptr(),
                jpeg.len() as c_ulong,
                &mut w,
                &mut h,
                &mut ss,
                &mut cs,
            )
        };
        if rc != 0 || w <= 0 || h <= 0 {
            return Err(error_of(self.0));
        }
        Ok(JpegHeader {
            width: w as u32,
            height: h as u32,
            subsamp: ss,
            colorspace: cs,
        })
    }

    /// Decodes `jpeg` at `width` × `height` (a scaled size TurboJPEG offers) into its planes,
    /// each `plane_size` of the header's subsampling; gray images have one.
    pub fn decode_planes(
        &mut self,
        jpeg: &[u8],
        header: &JpegHeader,
        width: u32,
        height: u32,
    ) -> Result<Vec<Plane>, TjError> {
        let count = if header.subsamp == SAMP_GRAY { 1 } else { 3 };
        let mut planes: Vec<Plane> = (0..count)
            .map(|c| {
                let (w, h) = plane_size(c, width, height, header.subsamp);
                Plane::new(w, h, 0)
            })
            .collect();
        let mut ptrs: Vec<*mut c_uchar> = planes.iter_mut().map(|p| p.data.as_mut_ptr()).collect();
        let mut strides: Vec<c_int> = planes.iter().map(|p| p.width as c_int).collect();
        // SAFETY: each plane is allocated at the size TurboJPEG computes for this width,
        // height and subsampling, with its width as stride; the pointers live across the call.
        let rc = unsafe {
            tjDecompressToYUVPlanes(
                self.0,
                jpeg.as_ptr(),
                jpeg.len() as c_ulong,
                ptrs.as_mut_ptr(),
                width as c_int,
                strides.as_mut_ptr(),
                height as c_int,
                FLAG_STOPONWARNING,
            )
        };
        if rc != 0 {
            return Err(error_of(self.0));
        }
        Ok(planes)
    }
}

impl Decoder {
    /// Decodes `jpeg` at `width` × `height` (a scaled size TurboJPEG offers) into interleaved
    /// `pixels`, rows without padding (colour conversion by libjpeg: YCbCr to RGB, YCCK to CMYK).
    pub fn decode_pixels(
        &mut self,
        jpeg: &[u8],
        width: u32,
        height: u32,
        pixels: Pixels,
    ) -> Result<Vec<u8>, TjError> {
        let pitch = (width as usize)
            .checked_mul(pixels.bytes())
            .filter(|&p| p <= c_int::MAX as usize)
            .ok_or_else(|| TjError("too wide".into()))?;
        let len = pitch
            .checked_mul(height as usize)
            .ok_or_else(|| TjError("too large".into()))?;
        let mut out = vec![0u8; len];
        // SAFETY: `out` holds `pitch * height` bytes, the pitch given, for the width and
        // height given (a scaled size: TurboJPEG writes exactly that many rows of that many
        // pixels); `jpeg` is read only during the call.
        let rc = unsafe {
            tjDecompress2(
                self.0,
                jpeg.as_ptr(),
                jpeg.len() as c_ulong,
                out.as_mut_ptr(),
                width as c_int,
                pitch as c_int,
                height as c_int,
                pixels.code(),
                FLAG_STOPONWARNING,
            )
        };
        if rc != 0 {
            return Err(error_of(self.0));
        }
        Ok(out)
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and not used after this.
        unsafe { tjDestroy(self.0) };
    }
}

/// TurboJPEG's TJFLAG_PROGRESSIVE: write a progressive JPEG (tests make such sources).
const FLAG_PROGRESSIVE: c_int = 16384;

/// A compressor handle.
pub struct Encoder(Handle, c_int);
// SAFETY: as for `Decoder`.
unsafe impl Send for Encoder {}

impl Encoder {
    pub fn new() -> Result<Self, TjError> {
        // SAFETY: no arguments; null on failure.
        let h = unsafe { tjInitCompress() };
        if h.is_null() {
            return Err(TjError("tjInitCompress failed".into()));
        }
        Ok(Self(h, 0))
    }

    /// Writes progressive JPEGs from now on (baseline by default).
    pub fn progressive(mut self) -> Self {
        self.1 |= FLAG_PROGRESSIVE;
        self
    }

    /// Encodes a `width` × `height` image from its planes (`subsamp`: their subsampling).
    pub fn encode_planes(
        &mut self,
        planes: &[Plane],
        width: u32,
        height: u32,
        subsamp: c_int,
        quality: u8,
    ) -> Result<Vec<u8>, TjError> {
        let expected = if subsamp == SAMP_GRAY { 1 } else { 3 };
        if planes.len() != expected
            || planes
                .iter()
                .enumerate()
                .any(|(c, p)| plane_size(c as c_int, width, height, subsamp) != (p.width, p.height))
        {
            return Err(TjError("planes of the wrong number or size".into()));
        }
        let mut ptrs: Vec<*const c_uchar> = planes.iter().map(|p| p.data.as_ptr()).collect();
        let strides: Vec<c_int> = planes.iter().map(|p| p.width as c_int).collect();
        let mut out: *mut c_uchar = std::ptr::null_mut();
        let mut size: c_ulong = 0;
        // SAFETY: the planes were checked against TurboJPEG's own sizes above; TurboJPEG
        // allocates `out`, which is copied and freed with tjFree.
        let rc = unsafe {
            tjCompressFromYUVPlanes(
                self.0,
                ptrs.as_mut_ptr(),
                width as c_int,
                strides.as_ptr(),
                height as c_int,
                subsamp,
                &mut out,
                &mut size,
                c_int::from(quality),
                self.1,
            )
        };
        if rc != 0 {
            if !out.is_null() {
                // SAFETY: allocated by TurboJPEG.
                unsafe { tjFree(out) };
            }
            return Err(error_of(self.0));
        }
        // SAFETY: TurboJPEG wrote `size` bytes at `out`.
        let bytes = unsafe { std::slice::from_raw_parts(out, size as usize) }.to_vec();
        // SAFETY: allocated by TurboJPEG, not used after.
        unsafe { tjFree(out) };
        Ok(bytes)
    }

    /// Encodes interleaved `pixels` rows (no padding) as a JPEG: RGB as YCbCr at `subsamp`,
    /// CMYK (as stored: inverted, Adobe's way) as an Adobe YCCK JPEG. Tests make CMYK sources
    /// with it.
    pub fn encode_pixels(
        &mut self,
        data: &[u8],
        width: u32,
        height: u32,
        pixels: Pixels,
        subsamp: c_int,
        quality: u8,
    ) -> Result<Vec<u8>, TjError> {
        let pitch = width as usize * pixels.bytes();
        if width == 0 || height == 0 || data.len() < pitch * height as usize {
            return Err(TjError("pixels of the wrong size".into()));
        }
        let mut out: *mut c_uchar = std::ptr::null_mut();
        let mut size: c_ulong = 0;
        // SAFETY: `data` holds `pitch * height` bytes (checked); TurboJPEG allocates `out`,
        // copied and freed with tjFree.
        let rc = unsafe {
            tjCompress2(
                self.0,
                data.as_ptr(),
                width as c_int,
                pitch as c_int,
                height as c_int,
                pixels.code(),
                &mut out,
                &mut size,
                subsamp,
                c_int::from(quality),
                self.1,
            )
        };
        if rc != 0 {
            if !out.is_null() {
                // SAFETY: allocated by TurboJPEG.
                unsafe { tjFree(out) };
            }
            return Err(error_of(self.0));
        }
        // SAFETY: TurboJPEG wrote `size` bytes at `out`.
        let bytes = unsafe { std::slice::from_raw_parts(out, size as usize) }.to_vec();
        // SAFETY: allocated by TurboJPEG, not used after.
        unsafe { tjFree(out) };
        Ok(bytes)
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and not used after this.
        unsafe { tjDestroy(self.0) };
    }
}
