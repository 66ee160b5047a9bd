//! Little CMS 2 (Debian's `liblcms2-2`, 2.14): an image's embedded ICC profile read from
//! memory, its colour space and description, and a transform of 8-bit RGB, RGBA or CMYK pixels
//! to sRGB (perceptual intent, as browsers and libvips use for display). Each handle is closed
//! when its owner drops; a transform is one thread's at a time (`Send`, not `Sync`).

use std::os::raw::{c_char, c_void};

type Profile = *mut c_void;
type Xform = *mut c_void;

const TYPE_RGB_8: u32 = (4 << 16) | (3 << 3) | 1;
const TYPE_RGBA_8: u32 = (4 << 16) | (1 << 7) | (3 << 3) | 1;
const TYPE_CMYK_8: u32 = (6 << 16) | (4 << 3) | 1;
/// CMYK stored inverted (0 is full ink), as Adobe's JPEGs hold it.
const TYPE_CMYK_8_REV: u32 = TYPE_CMYK_8 | (1 << 13);
const INTENT_PERCEPTUAL: u32 = 0;
const FLAGS_COPY_ALPHA: u32 = 0x0400_0000;
const SIG_RGB: u32 = 0x5247_4220;
const SIG_CMYK: u32 = 0x434D_594B;
const SIG_GRAY: u32 = 0x4752_4159;
const INFO_DESCRIPTION: u32 = 0;

/// The largest profile read: embedded profiles are kilobytes (a CMYK press profile under 1 MiB).
pub const MAX_PROFILE_BYTES: usize = 4 * 1024 * 1024;

#[link(name = "lcms2")]
extern "C" {
    fn cmsOpenProfileFromMem(mem: *const c_void, size: u32) -> Profile;
    fn cmsCreate_sRGBProfile() -> Profile;
    fn cmsCloseProfile(p: Profile) -> i32;
    fn cmsGetColorSpace(p: Profile) -> u32;
    fn cmsGetProfileInfoASCII(
        p: Profile,
        info: u32,
        lang: *const c_char,
        country: *const c_char,
        buf: *mut c_char,
        size: u32,
    ) -> u32;
    fn cmsCreateTransform(
        input: Profile,
        in_format: u32,
        output: Profile,
        out_format: u32,
        intent: u32,
        flags: u32,
    ) -> Xform;
    fn cmsDoTransform(x: Xform, input: *const c_void, output: *mut c_void, pixels: u32);
    fn cmsDeleteTransform(x: Xform);
    fn cmsCreateRGBProfile(
        white: *const XyY,
        primaries: *const [XyY; 3],
        curves: *const [*mut c_void; 3],
    ) -> Profile;
    fn cmsBuildGamma(ctx: *mut c_void, gamma: f64) -> *mut c_void;
    fn cmsFreeToneCurve(curve: *mut c_void);
    fn cmsSaveProfileToMem(p: Profile, mem: *mut c_void, bytes_needed: *mut u32) -> i32;
}

/// A chromaticity (x, y) and luminance Y: lcms2's `cmsCIExyY`.
#[repr(C)]
#[derive(Clone, Copy)]
struct XyY {
    x: f64,
    y: f64,
    big_y: f64,
}

/// The bytes of an RGB matrix/TRC profile with a D65 white, the `primaries` (x, y of red, green
/// and blue) and a pure `gamma` curve, without a description: what tests embed to stand for a
/// wide-gamut camera or phone profile (Adobe RGB's primaries, say).
pub fn rgb_profile(primaries: [(f64, f64); 3], gamma: f64) -> Option<Vec<u8>> {
    let white = XyY {
        x: 0.3127,
        y: 0.3290,
        big_y: 1.0,
    };
    let p = primaries.map(|(x, y)| XyY { x, y, big_y: 1.0 });
    // SAFETY: a curve from a null (default) context; freed below.
    let curve = unsafe { cmsBuildGamma(std::ptr::null_mut(), gamma) };
    if curve.is_null() {
        return None;
    }
    let curves = [curve; 3];
    // SAFETY: the white point, primaries and curves are live for the call; lcms2 copies them.
    let profile = unsafe { cmsCreateRGBProfile(&white, &p, &curves) };
    // SAFETY: ours, freed once (the profile holds its own copy).
    unsafe { cmsFreeToneCurve(curve) };
    if profile.is_null() {
        return None;
    }
    let mut n = 0u32;
    // SAFETY: a live profile; a null buffer asks for the size only.
    let ok = unsafe { cmsSaveProfileToMem(profile, std::ptr::null_mut(), &mut n) };
    let mut bytes = vec![0u8; n as usize];
    // SAFETY: `bytes` has the `n` bytes lcms2 asked for.
    let ok =
        ok != 0 && unsafe { cmsSaveProfileToMem(profile, bytes.as_mut_ptr().cast(), &mut n) } != 0;
    // SAFETY: ours, closed once.
    unsafe { cmsCloseProfile(profile) };
    ok.then_some(bytes)
}

/// What a profile describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    Rgb,
    Cmyk,
    Gray,
    Other,
}

/// An ICC profile read from an image.
pub struct Icc(Profile);

// SAFETY: a profile handle is owned by one value and lcms2's context-free functions are
// thread safe; it is moved between threads, never shared.
unsafe impl Send for Icc {}

impl Icc {
    /// The profile in `bytes`, or None when lcms2 cannot read it (or it is implausibly large).
    pub fn read(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < 128 || bytes.len() > MAX_PROFILE_BYTES {
            return None;
        }
        // SAFETY: `bytes` is live for the call; lcms2 copies what it keeps.
        let p = unsafe { cmsOpenProfileFromMem(bytes.as_ptr().cast(), bytes.len() as u32) };
        // Not `then_some(Self(p))`: that builds the value first, and dropping an `Icc` of a
        // null profile would hand null to cmsCloseProfile.
        if p.is_null() {
            None
        } else {
            Some(Self(p))
        }
    }

    pub fn space(&self) -> Space {
        // SAFETY: a live profile.
        match unsafe { cmsGetColorSpace(self.0) } {
            SIG_RGB => Space::Rgb,
            SIG_CMYK => Space::Cmyk,
            SIG_GRAY => Space::Gray,
            _ => Space::Other,
        }
    }

    /// The profile's description ("sRGB IEC61966-2.1", "Display P3", ...), as ASCII.
    pub fn description(&self) -> String {
        let mut buf = [0 as c_char; 256];
        // SAFETY: a live profile; `buf` is writable for its length, which is passed; the
        // language and country are NUL-terminated literals.
        let n = unsafe {
            cmsGetProfileInfoASCII(
                self.0,
                INFO_DESCRIPTION,
                c"en".as_ptr(),
                c"US".as_ptr(),
                buf.as_mut_ptr(),
                buf.len() as u32,
            )
        };
        let n = (n as usize).min(buf.len());
        let bytes: Vec<u8> = buf[..n]
            .iter()
            .map(|&c| c as u8)
            .take_while(|&c| c != 0)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Whether this is an sRGB profile by its name (what cameras, phones set to sRGB and most
    /// editors embed): its pixels need no conversion.
    pub fn is_srgb(&self) -> bool {
        self.space() == Space::Rgb && self.description().to_ascii_lowercase().contains("srgb")
    }
}

impl Drop for Icc {
    fn drop(&mut self) {
        // SAFETY: ours, closed once.
        unsafe { cmsCloseProfile(self.0) };
    }
}

/// The pixels a transform reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    Rgb,
    /// RGB with alpha, which is copied through untouched.
    Rgba,
    Cmyk,
    /// CMYK stored inverted (Adobe's JPEGs).
    CmykInverted,
}

impl Input {
    fn format(self) -> u32 {
        match self {
            Self::Rgb => TYPE_RGB_8,
            Self::Rgba => TYPE_RGBA_8,
            Self::Cmyk => TYPE_CMYK_8,
            Self::CmykInverted => TYPE_CMYK_8_REV,
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            Self::Rgb => 3,
            _ => 4,
        }
    }
}

/// A transform from a profile's pixels to sRGB.
pub struct ToSrgb {
    xform: Xform,
    input: Input,
}

// SAFETY: as for `Icc`: moved, never shared.
unsafe impl Send for ToSrgb {}

impl ToSrgb {
    /// A transform from `icc`'s `input` pixels to sRGB (RGB, or RGBA for RGBA input), or None
    /// when the profile's space is not the input's or lcms2 refuses.
    pub fn new(icc: &Icc, input: Input) -> Option<Self> {
        let want = match input {
            Input::Rgb | Input::Rgba => Space::Rgb,
            Input::Cmyk | Input::CmykInverted => Space::Cmyk,
        };
        if icc.space() != want {
            return None;
        }
        let (out_format, flags) = if input == Input::Rgba {
            (TYPE_RGBA_8, FLAGS_COPY_ALPHA)
        } else {
            (TYPE_RGB_8, 0)
        };
        // SAFETY: no arguments; a new profile we close below.
        let srgb = unsafe { cmsCreate_sRGBProfile() };
        if srgb.is_null() {
            return None;
        }
        // SAFETY: both profiles are live; lcms2 keeps what it needs of them in the transform,
        // so they may be closed after.
        let xform = unsafe {
            cmsCreateTransform(
                icc.0,
                input.format(),
                srgb,
                out_format,
                INTENT_PERCEPTUAL,
                flags,
            )
        };
        // SAFETY: ours, closed once.
        unsafe { cmsCloseProfile(srgb) };
        // Not `then_some`: a `ToSrgb` of a null transform, built and dropped, aborts in
        // cmsDeleteTransform (found by a garbage profile's test).
        if xform.is_null() {
            None
        } else {
            Some(Self { xform, input })
        }
    }

    /// `pixels` (interleaved, of the transform's input) as sRGB: 3 bytes a pixel, or 4 with
    /// the alpha copied for RGBA input.
    pub fn apply(&self, pixels: &[u8]) -> Vec<u8> {
        let per = self.input.bytes();
        let n = pixels.len() / per;
        let out_per = if self.input == Input::Rgba { 4 } else { 3 };
        let mut out = vec![0u8; n * out_per];
        // One call per million pixels at most: the count is a u32.
        for (i, chunk) in pixels[..n * per].chunks(per << 20).enumerate() {
            let count = chunk.len() / per;
            let dst = &mut out[(i << 20) * out_per..][..count * out_per];
            // SAFETY: `chunk` holds `count` input pixels and `dst` room for `count` output
            // pixels of the formats the transform was made with; both live for the call.
            unsafe {
                cmsDoTransform(
                    self.xform,
                    chunk.as_ptr().cast(),
                    dst.as_mut_ptr().cast(),
                    count as u32,
                )
            };
        }
        out
    }
}

impl Drop for ToSrgb {
    fn drop(&mut self) {
        // SAFETY: ours, deleted once.
        unsafe { cmsDeleteTransform(self.xform) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn srgb_bytes() -> Vec<u8> {
        // SAFETY: a new profile, saved twice (size, then bytes) and closed.
        unsafe {
            let p = cmsCreate_sRGBProfile();
            let mut n = 0u32;
            cmsSaveProfileToMem(p, std::ptr::null_mut(), &mut n);
            let mut v = vec![0u8; n as usize];
            cmsSaveProfileToMem(p, v.as_mut_ptr().cast(), &mut n);
            cmsCloseProfile(p);
            v
        }
    }

    #[test]
    fn an_srgb_profile_is_known_and_its_transform_keeps_colours_and_alpha() {
        let icc = Icc::read(&srgb_bytes()).expect("reads");
        assert_eq!(icc.space(), Space::Rgb);
        assert!(icc.is_srgb(), "{}", icc.description());
        let x = ToSrgb::new(&icc, Input::Rgba).expect("transform");
        let out = x.apply(&[200, 100, 50, 7, 0, 0, 0, 255]);
        assert_eq!(out.len(), 8);
        assert_eq!((out[3], out[7]), (7, 255), "alpha copied");
        assert!(out[0].abs_diff(200) <= 1 && out[1].abs_diff(100) <= 1 && out[2].abs_diff(50) <= 1);
        assert!(
            ToSrgb::new(&icc, Input::Cmyk).is_none(),
            "not a CMYK profile"
        );
    }

    #[test]
    fn a_wide_gamut_profiles_colours_become_more_saturated_in_srgb_and_gray_stays_gray() {
        let adobe = rgb_profile([(0.64, 0.33), (0.21, 0.71), (0.15, 0.06)], 2.2).expect("profile");
        let icc = Icc::read(&adobe).expect("reads");
        assert_eq!(icc.space(), Space::Rgb);
        assert!(!icc.is_srgb());
        let x = ToSrgb::new(&icc, Input::Rgb).expect("transform");
        let out = x.apply(&[128, 128, 128, 60, 180, 60]);
        assert!(out[..3].iter().all(|&v| v.abs_diff(128) <= 6), "{out:?}");
        // Adobe RGB's green is more saturated than sRGB's: in sRGB numbers, less red and blue.
        assert!(
            out[3] + 10 < 60 && out[5] + 5 < 60 && out[4] >= 175,
            "{out:?}"
        );
    }

    /// Profiles with bytes flipped, runs overwritten and cut short, each read, described and
    /// asked for every transform, which is applied: no abort, no crash (a refused transform
    /// dropped as if made aborted the process once).
    #[test]
    fn mutated_profiles_are_read_or_refused_never_a_crash() {
        let good = [
            srgb_bytes(),
            rgb_profile([(0.64, 0.33), (0.21, 0.71), (0.15, 0.06)], 2.2).expect("profile"),
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut read, mut made) = (0, 0);
        for i in 0..4000 {
            let mut b = good[i % 2].clone();
            for _ in 0..1 + next() % 3 {
                let n = b.len();
                match next() % 3 {
                    0 => b[next() as usize % n] ^= 1 << (next() % 8),
                    1 => {
                        let at = next() as usize % n;
                        let end = (at + 1 + next() as usize % 64).min(n);
                        let byte = next() as u8;
                        b[at..end].fill(byte);
                    }
                    _ if n > 129 => b.truncate(128 + next() as usize % (n - 128)),
                    _ => {}
                }
            }
            let Some(icc) = Icc::read(&b) else { continue };
            read += 1;
            let _ = (icc.space(), icc.description(), icc.is_srgb());
            for input in [Input::Rgb, Input::Rgba, Input::Cmyk, Input::CmykInverted] {
                if let Some(x) = ToSrgb::new(&icc, input) {
                    made += 1;
                    let out = x.apply(&[128u8; 64]);
                    assert_eq!(
                        out.len(),
                        64 / input.bytes() * if input == Input::Rgba { 4 } else { 3 }
                    );
                }
            }
        }
        assert!(
            read > 100 && made > 10,
            "the mutations still reach lcms2: {read} read, {made} made"
        );
    }

    #[test]
    fn garbage_is_not_a_profile() {
        assert!(Icc::read(b"short").is_none());
        assert!(Icc::read(&[0x41; 4096]).is_none());
        let mut cut = srgb_bytes();
        cut.truncate(200);
        assert!(Icc::read(&cut).is_none_or_unusable());
    }

    trait NoneOrUnusable {
        fn is_none_or_unusable(&self) -> bool;
    }

    impl NoneOrUnusable for Option<Icc> {
        fn is_none_or_unusable(&self) -> bool {
            match self {
                None => true,
                Some(icc) => ToSrgb::new(icc, Input::Rgb).is_none(),
            }
        }
    }
}
