//! What the HEIF size check costs beside the render it guards (issue 37: every coded image of a
//! HEIC or AVIF is held to its `ispe` before libheif decodes it): a 2000 × 1500 photo-like
//! image encoded by libheif (HEVC where this libheif has an HEVC encoder, AV1), then
//! `domain::image::heif_work` over the whole file again and again for `secs` seconds, and the
//! route's render of it (720 × 588 inside, JPEG 80) a few times. One thread. Prints one JSON
//! line per codec: microseconds per check, milliseconds per render.
//! `cargo run --release --example heif_check -- [SECS]`
use std::time::{Duration, Instant};
use upcommit::domain::image::{heif_work, Dimensions, Transform};
use upcommit::domain::variants::Fit;
use upcommit::render::{render_here, Limits, Output, Source};
use upcommit_heif::Codec;

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .map_or(3.0, |s| s.parse().expect("seconds"));
    let (w, h) = (2000u32, 1500u32);
    // Smooth gradients with a little noise: a photo's entropy, not a flat test card's.
    let mut seed = 1u32;
    let rgb: Vec<u8> = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .flat_map(|(x, y)| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let n = seed >> 28;
            [
                (x * 255 / w + n) as u8,
                (y * 255 / h + n) as u8,
                ((x + y) % 256) as u8,
            ]
        })
        .collect();
    for (name, codec) in [("heic", Codec::Hevc), ("avif", Codec::Av1)] {
        if !upcommit_heif::can_encode(codec) {
            println!("{{\"format\":\"{name}\",\"skipped\":\"no encoder in this libheif\"}}");
            continue;
        }
        let file = upcommit_heif::encode(&rgb, w, h, 3, codec, 80).expect("encode");
        let work = heif_work(&file).expect("an honest file passes the check");
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let t0 = Instant::now();
        let mut checks = 0u64;
        while checks == 0 || Instant::now() < end {
            std::hint::black_box(heif_work(std::hint::black_box(&file)).expect("check"));
            checks += 1;
        }
        let check_us = t0.elapsed().as_secs_f64() * 1e6 / checks as f64;
        let renders = 5;
        let t0 = Instant::now();
        for _ in 0..renders {
            render_here(
                Source::Heif,
                &file,
                Transform::UPRIGHT,
                Dimensions {
                    width: 720,
                    height: 588,
                },
                Fit::Inside,
                Output::jpeg(80),
                &Limits {
                    max_pixels: 100_000_000,
                },
            )
            .expect("render");
        }
        let render_ms = t0.elapsed().as_secs_f64() * 1e3 / f64::from(renders);
        println!(
            "{{\"format\":\"{name}\",\"bytes\":{},\"pixels_decoded\":{},\"checks\":{checks},\"check_us\":{check_us:.2},\"render_ms\":{render_ms:.1},\"check_share_of_render\":{:.6}}}",
            file.len(),
            work.pixels,
            check_us / 1e3 / render_ms
        );
    }
}
