//! Issue 46, item 5: a mutated corpus over every source format through the render jail —
//! straight through a pool of real workers (thousands of cases), and through the HTTP routes of
//! a server process of its own with presigns and commits running beside it (a few hundred):
//! every case answers a rendition or a refusal, no worker dies of the filter on any of them,
//! the server never answers a 500 nor dies, every upload beside them is answered as if nothing
//! else ran, and the server's resident set stays flat (it never decodes a pixel).

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use upcommit::domain::image::{Dimensions, Transform};
use upcommit::domain::variants::Fit;
use upcommit::jail::{Death, Job, Outcome, Pool, PoolConfig, PoolEvents};
use upcommit::render::{Limits, Output, RenderError, Source};
use upcommit_turbojpeg::{Encoder, Plane, SAMP_420};

use crate::helpers::{server_process, spawn_app_with, Spawn};

/// Every source format the renderer reads, two variants.
fn spawn() -> Spawn {
    Spawn {
        config: Some(
            r#"
            [[profiles]]
            name = "image"
            content_types = ["image/jpeg", "image/png", "image/gif", "image/webp", "image/avif", "image/heic"]
            max_size = 10000000
            final_prefix = "media/images/"

            [[profiles.variants]]
            name = "thumb"
            width = 24
            height = 18

            [[profiles.variants]]
            name = "whole"
            width = 40
            height = 40
            fit = "inside"
            format = "webp"
            "#
            .to_owned(),
        ),
        ..Spawn::default()
    }
}

/// A small seeded generator (xorshift64*): a failing case replays from its number.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1) as u64) as usize
    }
}

/// `b` with one mutation: a bit flipped, a run overwritten, cut short, or a run spliced in
/// from elsewhere in the file. The first 16 bytes are mostly kept, so most cases reach the
/// decoder rather than failing the signature.
fn mutated(mut b: Vec<u8>, rng: &mut Rng) -> Vec<u8> {
    let len = b.len();
    let at = 16 + rng.below(len.saturating_sub(16).max(1));
    match rng.below(4) {
        0 => {
            if at < len {
                b[at] ^= 1 << rng.below(8);
            }
        }
        1 => {
            let byte = [0x00, 0xFF, 0x7F, 0x80][rng.below(4)];
            let run = 1 + rng.below(16);
            for x in b.iter_mut().skip(at).take(run) {
                *x = byte;
            }
        }
        2 => b.truncate(at.min(len)),
        _ => {
            let from = rng.below(len);
            let run = 1 + rng.below(64);
            let piece: Vec<u8> = b.iter().skip(from).take(run).copied().collect();
            for (i, x) in piece.into_iter().enumerate() {
                if let Some(slot) = b.get_mut(at + i) {
                    *slot = x;
                }
            }
        }
    }
    b
}

fn jpeg(w: u32, h: u32, progressive: bool) -> Vec<u8> {
    let (cw, ch) = upcommit_turbojpeg::plane_size(1, w, h, SAMP_420);
    let mut y = Plane::new(w, h, 60);
    y.data[..(w as usize * 4)].fill(230);
    let enc = Encoder::new().expect("encoder");
    let mut enc = if progressive { enc.progressive() } else { enc };
    enc.encode_planes(
        &[y, Plane::new(cw, ch, 100), Plane::new(cw, ch, 160)],
        w,
        h,
        SAMP_420,
        85,
    )
    .expect("encode")
}

fn png(w: u32, h: u32) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().expect("header");
        let data: Vec<u8> = (0..w * h * 4).map(|i| (i * 7 % 251) as u8).collect();
        wr.write_image_data(&data).expect("data");
    }
    out
}

fn gif(w: u16, h: u16) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc =
            gif::Encoder::new(&mut out, w, h, &[0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255])
                .expect("gif");
        let pixels: Vec<u8> = (0..u32::from(w) * u32::from(h))
            .map(|i| (i % 3) as u8)
            .collect();
        let frame = gif::Frame::from_indexed_pixels(w, h, pixels, None);
        enc.write_frame(&frame).expect("frame");
    }
    out
}

/// Every source format the renderer reads, as (format, content type, bytes).
fn sources() -> Vec<(Source, &'static str, Vec<u8>)> {
    let px: Vec<u8> = (0..32 * 24 * 4).map(|i| (i * 5 % 256) as u8).collect();
    let mut all = vec![
        (Source::Jpeg, "image/jpeg", jpeg(64, 48, false)),
        (Source::Jpeg, "image/jpeg", jpeg(48, 40, true)),
        (Source::Png, "image/png", png(30, 20)),
        (Source::Gif, "image/gif", gif(30, 20)),
        (
            Source::Webp,
            "image/webp",
            upcommit_webp::encode(&px, 32, 24, 4, 80).expect("webp"),
        ),
    ];
    for (codec, ct) in [
        (upcommit_heif::Codec::Av1, "image/avif"),
        (upcommit_heif::Codec::Hevc, "image/heic"),
    ] {
        if upcommit_heif::can_encode(codec) {
            let f = upcommit_heif::encode_for_tests(&px, 32, 24, codec).expect("heif");
            all.push((Source::Heif, ct, f));
        }
    }
    all
}

struct Counted(std::sync::Mutex<Vec<Death>>);

impl PoolEvents for Counted {
    fn worker_started(&self) {}
    fn worker_died(&self, death: Death) {
        self.0.lock().expect("deaths").push(death);
    }
    fn worker_killed_at_limit(&self) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_mutated_sources_through_the_jail_each_answer_and_none_is_killed_by_the_filter(
) {
    let deaths = Arc::new(Counted(std::sync::Mutex::new(Vec::new())));
    let pool = Pool::new(
        PoolConfig {
            program: env!("CARGO_BIN_EXE_upcommit").into(),
            warm: 2,
            ceiling: 256 << 20,
            renders_per_worker: 200,
            nice: 10,
            accept_unfiltered: false,
            env: vec![("TJ_OPTIMIZE".into(), "1".into())],
        },
        deaths.clone(),
    );
    let sources = Arc::new(sources());
    let outputs = [Output::jpeg(80), Output::webp(70), Output::avif(50)];
    let cases = 2000usize;
    let tasks: Vec<_> = (0..2)
        .map(|lane| {
            let (pool, sources) = (pool.clone(), sources.clone());
            tokio::spawn(async move {
                let (mut answered, mut refused, mut died) = (0, 0, 0);
                for case in (lane..cases).step_by(2) {
                    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ case as u64);
                    let (source, _, bytes) = &sources[case % sources.len()];
                    let input = mutated(bytes.clone(), &mut rng);
                    let job = Job {
                        source: *source,
                        orientation: Transform::from_exif(1 + (case % 8) as u16),
                        box_: Dimensions {
                            width: 24,
                            height: 18,
                        },
                        fit: [Fit::Cover, Fit::Contain, Fit::Inside][case % 3],
                        // AVIF encodes are slow: one case in ten.
                        out: outputs[if case % 10 == 0 { 2 } else { case % 2 }],
                        limits: Limits {
                            max_pixels: 1_000_000,
                        },
                    };
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                    match pool.render(&job, &input, 32 << 20, deadline).await {
                        Outcome::Answered(Ok(r)) => {
                            assert!(r.width <= 24 && r.height <= 18, "case {case}");
                            answered += 1;
                        }
                        Outcome::Answered(Err(
                            RenderError::Corrupt(_)
                            | RenderError::TooManyPixels { .. }
                            | RenderError::Unsupported(_),
                        )) => refused += 1,
                        Outcome::Died(Death::Filtered) => {
                            panic!("case {case}: a worker was killed by the filter")
                        }
                        Outcome::Died(_) => died += 1,
                        other => panic!("case {case}: {other:?}"),
                    }
                }
                (answered, refused, died)
            })
        })
        .collect();
    let (mut answered, mut refused, mut died) = (0, 0, 0);
    for t in tasks {
        let (a, r, d) = t.await.expect("lane");
        answered += a;
        refused += r;
        died += d;
    }
    eprintln!("{cases} cases: {answered} rendered, {refused} refused, {died} workers died");
    assert_eq!(answered + refused + died, cases);
    assert!(answered > 0 && refused > 0, "the corpus reaches both ends");
    assert!(
        !deaths.0.lock().expect("deaths").contains(&Death::Filtered),
        "no honest or mutated decode needs a call the filter forbids"
    );
    // The pool goes on: an honest file renders.
    let job = Job {
        source: Source::Jpeg,
        orientation: Transform::UPRIGHT,
        box_: Dimensions {
            width: 24,
            height: 18,
        },
        fit: Fit::Cover,
        out: Output::jpeg(80),
        limits: Limits {
            max_pixels: 1_000_000,
        },
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    assert!(matches!(
        pool.render(&job, &jpeg(64, 48, false), 32 << 20, deadline)
            .await,
        Outcome::Answered(Ok(_))
    ));
}

fn vm_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_sources_through_the_routes_with_uploads_beside_them_never_answer_500_and_leave_the_server_flat(
) {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let bob = app.token("bob");
    let (mut server, base) = server_process(&app, &[("RUST_LOG", "error")], Stdio::null()).await;
    // Uploads beside the renders: bob presigns, uploads and commits small files in a loop
    // until told to stop; every one must answer 201.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let uploads = {
        let (app_http, base, bob, stop) =
            (app.http.clone(), base.clone(), bob.clone(), stop.clone());
        let body = png(8, 8);
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 400 {
                let p: Value = app_http
                    .post(format!("{base}/v1/uploads"))
                    .bearer_auth(&bob)
                    .json(&serde_json::json!({"profile": "image", "content_type": "image/png", "size": body.len()}))
                    .send()
                    .await
                    .expect("presign")
                    .json()
                    .await
                    .expect("presign json");
                let put = app_http
                    .put(p["url"].as_str().expect("url"))
                    .header("content-type", "image/png")
                    .header("if-none-match", "*")
                    .body(body.clone())
                    .send()
                    .await
                    .expect("put");
                assert_eq!(put.status(), 200, "upload {n}");
                let c = app_http
                    .post(format!("{base}/v1/files"))
                    .bearer_auth(&bob)
                    .json(&serde_json::json!({"key": p["key"]}))
                    .send()
                    .await
                    .expect("commit");
                assert_eq!(c.status(), 201, "commit {n} beside the renders");
                n += 1;
            }
            n
        })
    };
    let sources = sources();
    let mut warm = true;
    let mut rss_before = 0;
    let (mut rendered, mut refused, mut not_committed) = (0, 0, 0);
    for case in 0..240usize {
        let mut rng = Rng(0xC0FF_EE00 ^ case as u64);
        let (_, content_type, bytes) = &sources[case % sources.len()];
        let input = mutated(bytes.clone(), &mut rng);
        let p = app
            .uploaded_bytes(&alice, "image", content_type, input)
            .await;
        let h = app
            .http
            .post(format!("{base}/v1/files"))
            .bearer_auth(&alice)
            .json(&serde_json::json!({"key": p.key}))
            .send()
            .await
            .expect("commit");
        if h.status() != 201 {
            assert_eq!(h.status(), 422, "case {case}: a commit refuses with 422");
            not_committed += 1;
            continue;
        }
        let id = h.json::<Value>().await.expect("handle")["id"]
            .as_str()
            .expect("id")
            .to_owned();
        for name in ["thumb", "whole"] {
            let r = app
                .http
                .get(format!("{base}/v1/files/{id}/variants/{name}"))
                .bearer_auth(&alice)
                .send()
                .await
                .expect("a render answers");
            match r.status().as_u16() {
                200 => rendered += 1,
                422 => refused += 1,
                other => panic!(
                    "case {case} {name}: {other} {}",
                    r.text().await.unwrap_or_default()
                ),
            }
        }
        if warm {
            // Past the first renders (the pool, the connections, the allocator's arenas).
            warm = case < 20;
            rss_before = vm_rss_kib(server.id());
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let committed_beside = uploads.await.expect("the uploads beside");
    let rss_after = vm_rss_kib(server.id());
    eprintln!(
        "240 cases: {rendered} renditions, {refused} refused, {not_committed} not committed; {committed_beside} uploads beside; server RSS {rss_before} -> {rss_after} KiB"
    );
    assert!(rendered > 0 && refused > 0);
    assert!(committed_beside > 0);
    assert!(
        server.try_wait().expect("status").is_none(),
        "the server lives"
    );
    assert!(
        rss_after < rss_before + 32 * 1024,
        "the server's resident set grew from {rss_before} to {rss_after} KiB"
    );
    let _ = server.kill();
    let _ = server.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_stops_waiting_while_a_worker_starts_leaves_the_pool_whole() {
    let deaths = Arc::new(Counted(std::sync::Mutex::new(Vec::new())));
    let pool = Pool::new(
        PoolConfig {
            program: env!("CARGO_BIN_EXE_upcommit").into(),
            warm: 2,
            ceiling: 256 << 20,
            renders_per_worker: 200,
            nice: 10,
            accept_unfiltered: false,
            env: vec![("TJ_OPTIMIZE".into(), "1".into())],
        },
        deaths,
    );
    let job = Job {
        source: Source::Jpeg,
        orientation: Transform::UPRIGHT,
        box_: Dimensions {
            width: 24,
            height: 18,
        },
        fit: Fit::Cover,
        out: Output::jpeg(80),
        limits: Limits {
            max_pixels: 1_000_000,
        },
    };
    // No worker idle: the first render starts one, and its deadline has already passed.
    let past = tokio::time::Instant::now();
    assert!(matches!(
        pool.render(&job, &jpeg(64, 48, false), 32 << 20, past)
            .await,
        Outcome::TimedOut
    ));
    // A refused render retires its worker; the pool then refills to two idle workers.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    assert!(matches!(
        pool.render(&job, b"\xFF\xD8 not a jpeg", 32 << 20, deadline)
            .await,
        Outcome::Answered(Err(_))
    ));
    for _ in 0..600 {
        if pool.idle() == 2 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the pool has {} idle workers, not 2", pool.idle());
}
