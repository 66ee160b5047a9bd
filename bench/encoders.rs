//! The encoders a rendition could be written with, on sharp's task's output (issue 37: "AVIF
//! if the encoder is fast enough to be useful — measure it"): INPUT.jpg rendered to 720 × 588
//! (Lanczos3, as the render route does), then the same RGBA pixels encoded again and again for
//! `secs` seconds each by TurboJPEG (quality 80, the route's JPEG), libwebp (quality 80, the
//! route's WebP) and libheif's AV1 encoder (libaom, quality 80, in memory, as the route's
//! AVIF). One thread (libaom may use more). Prints one JSON line per encoder: encodes per
//! second, milliseconds each, bytes.
//! `cargo run --release --example encoders -- INPUT.jpg [SECS]`
use std::time::{Duration, Instant};
use upcommit::domain::image::{Dimensions, Transform};
use upcommit::domain::variants::Fit;
use upcommit::render::{render_here, Limits, Output, Source};
use upcommit_turbojpeg::{Decoder, Encoder, Pixels, SAMP_420};

fn main() {
    if std::env::var_os("TJ_OPTIMIZE").is_none() {
        std::env::set_var("TJ_OPTIMIZE", "1");
    }
    let args: Vec<String> = std::env::args().collect();
    let input = std::fs::read(&args[1]).expect("read the input");
    let secs: f64 = args.get(2).map_or(5.0, |s| s.parse().expect("seconds"));
    let box_ = Dimensions {
        width: 720,
        height: 588,
    };
    let limits = Limits {
        max_pixels: 100_000_000,
    };
    let r = render_here(
        Source::Jpeg,
        &input,
        Transform::UPRIGHT,
        box_,
        Fit::Cover,
        Output::jpeg(95),
        &limits,
    )
    .expect("render");
    let (w, h) = (r.width, r.height);
    let rgb = Decoder::new()
        .expect("decoder")
        .decode_pixels(&r.bytes, w, h, Pixels::Rgb)
        .expect("decode");
    let rgba: Vec<u8> = rgb
        .chunks(3)
        .flat_map(|p| [p[0], p[1], p[2], 255])
        .collect();
    let mut jpeg = Encoder::new().expect("encoder");
    let run = |name: &str, f: &mut dyn FnMut() -> usize| {
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let t0 = Instant::now();
        let (mut n, mut bytes) = (0u64, 0);
        while n == 0 || Instant::now() < end {
            bytes = f();
            n += 1;
        }
        let took = t0.elapsed().as_secs_f64();
        println!(
            "{{\"encoder\":\"{name}\",\"width\":{w},\"height\":{h},\"encodes\":{n},\"per_sec\":{:.2},\"ms_each\":{:.2},\"bytes\":{bytes}}}",
            n as f64 / took,
            took * 1000.0 / n as f64
        );
    };
    run("jpeg_q80_turbojpeg", &mut || {
        jpeg.encode_pixels(&rgb, w, h, Pixels::Rgb, SAMP_420, 80)
            .expect("jpeg")
            .len()
    });
    run("webp_q80_libwebp", &mut || {
        upcommit_webp::encode(&rgba, w, h, 4, 80)
            .expect("webp")
            .len()
    });
    run("avif_q80_libheif_libaom", &mut || {
        upcommit_heif::encode(&rgba, w, h, 4, upcommit_heif::Codec::Av1, 80)
            .expect("avif")
            .len()
    });
}
