//! Renders per second of upcommit's renderer on sharp's benchmark task (issue 37): decode a
//! JPEG, resize to 720 × 588 with Lanczos3, encode JPEG at quality 80; `threads` renders at a
//! time (each on its own thread, as a replica's blocking pool runs them) for `secs` seconds.
//! `cargo run --release --example render -- INPUT.jpg THREADS SECS [OUT.jpg]`; prints one JSON
//! line. bench/render_vs_sharp.sh runs it beside sharp.
use std::time::{Duration, Instant};
use upcommit::domain::image::{Dimensions, Transform};
use upcommit::domain::variants::Fit;
use upcommit::render::{jpeg, Limits};

fn main() {
    // Optimised Huffman tables, as sharp writes them (read by TurboJPEG on each encode; set
    // before any thread starts, as `upcommit serve` does).
    if std::env::var_os("TJ_OPTIMIZE").is_none() {
        std::env::set_var("TJ_OPTIMIZE", "1");
    }
    let args: Vec<String> = std::env::args().collect();
    let input = std::fs::read(&args[1]).expect("read the input");
    let threads: usize = args[2].parse().expect("threads");
    let secs: f64 = args[3].parse().expect("seconds");
    let limits = Limits {
        max_pixels: 100_000_000,
    };
    let box_ = Dimensions {
        width: 720,
        height: 588,
    };
    let t0 = Instant::now();
    let results: Vec<(u64, usize, (u32, u32))> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut ctx = jpeg::Context::new().expect("context");
                    let end = Instant::now() + Duration::from_secs_f64(secs);
                    let (mut n, mut last) = (0, None);
                    while Instant::now() < end {
                        let r = jpeg::render(
                            &mut ctx,
                            &input,
                            Transform::UPRIGHT,
                            box_,
                            Fit::Cover,
                            upcommit::render::Output::jpeg(80),
                            &limits,
                        )
                        .expect("render");
                        n += 1;
                        last = Some(r);
                    }
                    let r = last.expect("at least one render");
                    if let Some(out) = args.get(4) {
                        std::fs::write(out, &r.bytes).expect("write the output");
                    }
                    (n, r.bytes.len(), (r.width, r.height))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    let n: u64 = results.iter().map(|r| r.0).sum();
    println!(
        "{{\"tool\": \"upcommit\", \"threads\": {threads}, \"renders_per_sec\": {:.1}, \"output_bytes\": {}, \"output\": \"{}x{}\"}}",
        n as f64 / t0.elapsed().as_secs_f64(),
        results[0].1,
        results[0].2 .0,
        results[0].2 .1
    );
}
