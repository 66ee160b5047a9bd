//! Renders per second of upcommit's renderer on sharp's benchmark task (issue 37): decode a
//! JPEG, resize to 720 × 588 with Lanczos3, encode JPEG at quality 80; `threads` renders at a
//! time (each on its own thread, as a replica's blocking pool runs them) for `secs` seconds.
//! `cargo run --release --example render -- INPUT.jpg THREADS SECS [OUT.jpg]`; prints one JSON
//! line. bench/render_vs_sharp.sh runs it beside sharp.
//!
//! With `UPCOMMIT_BENCH_JAILED=<path to the upcommit binary>` the renders go through the render
//! jail (issue 46) as the route's do: a warm pool of `THREADS` workers, the source's bytes and
//! the plan down a pipe, the rendition back; `THREADS` renders in flight at a time.
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
    if let Ok(bin) = std::env::var("UPCOMMIT_BENCH_JAILED") {
        return jailed(&bin, &input, threads, secs, box_, limits, args.get(4));
    }
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

fn jailed(
    bin: &str,
    input: &[u8],
    threads: usize,
    secs: f64,
    box_: Dimensions,
    limits: Limits,
    out: Option<&String>,
) {
    use upcommit::jail::{Job, Outcome, Pool, PoolConfig};
    struct Quiet;
    impl upcommit::jail::PoolEvents for Quiet {
        fn worker_started(&self) {}
        fn worker_died(&self, _: upcommit::jail::Death) {}
        fn worker_killed_at_limit(&self) {}
    }
    let format = std::env::var("UPCOMMIT_BENCH_FORMAT").unwrap_or_else(|_| "jpeg".into());
    let source = std::env::var("UPCOMMIT_BENCH_SOURCE").unwrap_or_else(|_| "jpeg".into());
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let pool = Pool::new(
            PoolConfig {
                program: bin.into(),
                warm: threads,
                ceiling: 1 << 30,
                renders_per_worker: 1000,
                nice: 0,
                accept_unfiltered: false,
                // What the server gives its workers (`state::render_workers`).
                env: vec![
                    ("TJ_OPTIMIZE".to_owned(), "1".to_owned()),
                    (
                        "GLIBC_TUNABLES".to_owned(),
                        upcommit::state::WORKER_MALLOC.to_owned(),
                    ),
                ],
            },
            std::sync::Arc::new(Quiet),
        );
        let started = Instant::now();
        pool.probe().await.expect("a worker");
        let first_worker = started.elapsed();
        let job = Job {
            source: upcommit::render::Source::parse(&source).expect("source"),
            orientation: Transform::UPRIGHT,
            box_,
            fit: Fit::Cover,
            out: upcommit::render::Output {
                format: upcommit::domain::variants::OutputFormat::parse(&format).expect("format"),
                quality: 80,
            },
            limits,
        };
        // Warm every worker once.
        let warmers: Vec<_> = (0..threads)
            .map(|_| {
                let (pool, input) = (pool.clone(), input.to_vec());
                tokio::spawn(async move {
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                    pool.render(&job, &input, 60 << 20, deadline).await
                })
            })
            .collect();
        for w in warmers {
            match w.await.expect("task") {
                Outcome::Answered(Ok(_)) => {}
                other => panic!("warm-up render: {other:?}"),
            }
        }
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs_f64(secs);
        let tasks: Vec<_> = (0..threads)
            .map(|_| {
                let (pool, input) = (pool.clone(), input.to_vec());
                tokio::spawn(async move {
                    let (mut n, mut last) = (0u64, None);
                    while Instant::now() < end {
                        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                        match pool.render(&job, &input, 60 << 20, deadline).await {
                            Outcome::Answered(Ok(r)) => last = Some(r),
                            other => panic!("render: {other:?}"),
                        }
                        n += 1;
                    }
                    (n, last.expect("one render"))
                })
            })
            .collect();
        let mut n = 0;
        let mut last = None;
        for t in tasks {
            let (k, r) = t.await.expect("task");
            n += k;
            last = Some(r);
        }
        let r = last.expect("a render");
        if let Some(out) = out {
            std::fs::write(out, &r.bytes).expect("write the output");
        }
        println!(
            "{{\"tool\": \"upcommit-jailed\", \"threads\": {threads}, \"renders_per_sec\": {:.1}, \"output_bytes\": {}, \"output\": \"{}x{}\", \"first_worker_ms\": {:.1}}}",
            n as f64 / t0.elapsed().as_secs_f64(),
            r.bytes.len(),
            r.width,
            r.height,
            first_worker.as_secs_f64() * 1000.0
        );
    });
}
