//! HEIC and AVIF files whose `ispe` is smaller than their coded image (review of issue 37: a
//! 2 KB AVIF of 12,000 × 12,000 labelled 64 × 64 took the process to 2 GB): refused from their
//! parameter sets before libheif decodes anything. The files are libheif's own, their `ispe`
//! rewritten afterwards, as an attacker would.

use super::*;
use crate::domain::image::heif_work;

/// `file` with every `ispe` of `from` rewritten to `to`; how many were.
fn relabel(file: &mut [u8], from: (u32, u32), to: (u32, u32)) -> usize {
    let mut n = 0;
    let mut at = 0;
    while let Some(i) = file[at..].windows(4).position(|w| w == b"ispe") {
        let body = at + i + 4 + 4; // type, then version and flags
        let w = u32::from_be_bytes(file[body..body + 4].try_into().expect("4"));
        let h = u32::from_be_bytes(file[body + 4..body + 8].try_into().expect("4"));
        if (w, h) == from {
            file[body..body + 4].copy_from_slice(&to.0.to_be_bytes());
            file[body + 4..body + 8].copy_from_slice(&to.1.to_be_bytes());
            n += 1;
        }
        at = body;
    }
    n
}

/// A `w` × `h` gradient encoded by libheif, with an alpha plane or without.
fn encoded(w: u32, h: u32, alpha: bool, codec: upcommit_heif::Codec) -> Vec<u8> {
    let channels = if alpha { 4 } else { 3 };
    let pixels: Vec<u8> = (0..w * h)
        .flat_map(|i| {
            let (x, y) = (i % w, i / w);
            [(x % 256) as u8, (y % 256) as u8, 90, (x % 200) as u8]
                .into_iter()
                .take(channels)
        })
        .collect();
    upcommit_heif::encode(&pixels, w, h, channels, codec, 90).expect("encode")
}

#[test]
fn libheifs_own_files_are_found_honest_with_their_alpha_counted() {
    for codec in [upcommit_heif::Codec::Hevc, upcommit_heif::Codec::Av1] {
        if !upcommit_heif::can_encode(codec) {
            continue;
        }
        let opaque = encoded(200, 120, false, codec);
        let w = heif_work(&opaque).expect("honest");
        assert_eq!((w.largest, w.pixels), (d(200, 120), 200 * 120), "{codec:?}");
        let alpha = encoded(200, 120, true, codec);
        assert_eq!(
            heif_work(&alpha).expect("honest").pixels,
            2 * 200 * 120,
            "{codec:?}"
        );
    }
}

#[test]
fn a_coded_image_larger_than_its_ispe_is_refused_before_it_is_decoded() {
    let mut tried = 0;
    for codec in [upcommit_heif::Codec::Hevc, upcommit_heif::Codec::Av1] {
        if !upcommit_heif::can_encode(codec) {
            continue;
        }
        tried += 1;
        let mut file = encoded(1024, 1024, true, codec);
        // The image and its alpha plane.
        assert_eq!(relabel(&mut file, (1024, 1024), (64, 64)), 2, "{codec:?}");
        let refused = super::super::render_here(
            Source::Heif,
            &file,
            Transform::UPRIGHT,
            d(32, 32),
            Fit::Cover,
            Output::jpeg(80),
            &LIMITS,
        );
        match refused {
            Err(RenderError::Corrupt(why)) => {
                assert!(why.contains("larger than its size"), "{codec:?}: {why}")
            }
            other => panic!("{codec:?}: {:?}", other.map(|r| (r.width, r.height))),
        }
        // A size a little short of the coded one (an encoder's padding) is not a lie.
        let mut padded = encoded(1000, 990, false, codec);
        assert_eq!(relabel(&mut padded, (1000, 990), (999, 970)), 1);
        assert!(heif_work(&padded).is_ok(), "{codec:?}");
    }
    assert!(tried > 0, "this libheif encodes neither HEVC nor AV1");
}
