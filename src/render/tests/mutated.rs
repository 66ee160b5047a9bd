//! The decoders fed mutated images (issue 37, item 4): valid JPEGs (baseline, progressive,
//! gray, CMYK, one with a wide-gamut ICC profile), PNGs, an animated GIF, a WebP, a HEIC and an
//! AVIF with bytes
//! flipped, runs overwritten, cut short or spliced; each render (to a JPEG, a WebP or an AVIF) answers a
//! rendition or an error, never a panic or a crash, within the pixel limit.
use super::colour::with_icc;
use super::png_gif::{gif_of, png_of};
use super::*;
use proptest::prelude::*;

/// The valid sources, made once (encoding a HEIC and an AVIF takes a while).
fn sources() -> Vec<Vec<u8>> {
    static MADE: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    MADE.get_or_init(make_sources).clone()
}

fn make_sources() -> Vec<Vec<u8>> {
    let progressive = {
        let (w, h) = (48, 40);
        let (cw, ch) = upcommit_turbojpeg::plane_size(1, w, h, SAMP_420);
        let mut y = Plane::new(w, h, 60);
        y.data[..200].fill(230);
        Encoder::new()
            .expect("encoder")
            .progressive()
            .encode_planes(
                &[y, Plane::new(cw, ch, 100), Plane::new(cw, ch, 160)],
                w,
                h,
                SAMP_420,
                85,
            )
            .expect("encode")
    };
    vec![
        jpeg(64, 48, false),
        jpeg(40, 40, true),
        progressive,
        png_of(
            30,
            20,
            png::ColorType::Rgba,
            png::BitDepth::Eight,
            None,
            |x, y| {
                vec![
                    (x * 8) as u8,
                    (y * 12) as u8,
                    90,
                    if x < 10 { 0 } else { 255 },
                ]
            },
        ),
        png_of(
            25,
            25,
            png::ColorType::Grayscale,
            png::BitDepth::Sixteen,
            None,
            |x, _| vec![(x * 10) as u8, 7],
        ),
        gif_of(30, 20, (3, 2, 20, 10), 3),
        {
            let px: Vec<u8> = (0..32 * 24 * 4).map(|i| (i * 7 % 256) as u8).collect();
            Encoder::new()
                .expect("encoder")
                .encode_pixels(&px, 32, 24, upcommit_turbojpeg::Pixels::Cmyk, SAMP_420, 85)
                .expect("cmyk")
        },
        with_icc(
            &jpeg(40, 30, false),
            &upcommit_lcms::rgb_profile([(0.64, 0.33), (0.21, 0.71), (0.15, 0.06)], 2.2)
                .expect("profile"),
        ),
        {
            let px: Vec<u8> = (0..30 * 20 * 4).map(|i| (i * 13 % 256) as u8).collect();
            upcommit_webp::encode(&px, 30, 20, 4, 80).expect("webp")
        },
        heif(upcommit_heif::Codec::Hevc),
        heif(upcommit_heif::Codec::Av1),
    ]
}

fn heif(codec: upcommit_heif::Codec) -> Vec<u8> {
    let px: Vec<u8> = (0..32 * 24 * 4).map(|i| (i * 5 % 256) as u8).collect();
    upcommit_heif::encode_for_tests(&px, 32, 24, codec).expect("heif")
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, bit: u8 },
    Overwrite { at: usize, run: usize, byte: u8 },
    Cut { at: usize },
    Splice { at: usize, from: usize, run: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (any::<usize>(), 1usize..64, any::<u8>()).prop_map(|(at, run, byte)| Mutation::Overwrite {
            at,
            run,
            byte
        }),
        any::<usize>().prop_map(|at| Mutation::Cut { at }),
        (any::<usize>(), any::<usize>(), 1usize..200)
            .prop_map(|(at, from, run)| Mutation::Splice { at, from, run }),
    ]
}

fn apply(mut b: Vec<u8>, m: &Mutation) -> Vec<u8> {
    let n = b.len();
    if n == 0 {
        return b;
    }
    match *m {
        Mutation::Flip { at, bit } => b[at % n] ^= 1 << bit,
        Mutation::Overwrite { at, run, byte } => {
            let at = at % n;
            let end = (at + run).min(n);
            b[at..end].fill(byte);
        }
        Mutation::Cut { at } => b.truncate(at % n),
        Mutation::Splice { at, from, run } => {
            let (at, from) = (at % n, from % n);
            let piece: Vec<u8> = b[from..(from + run).min(n)].to_vec();
            b.splice(at..at, piece);
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    #[test]
    fn a_mutated_image_renders_or_is_refused_never_panics(
        which in 0usize..11,
        muts in proptest::collection::vec(mutation(), 1..4),
        o in 1u16..=8,
        fit in prop_oneof![Just(Fit::Cover), Just(Fit::Contain), Just(Fit::Inside)],
        format in 0u8..3,
    ) {
        let source = sources().swap_remove(which);
        let bytes = muts.iter().fold(source, apply);
        let limits = Limits { max_pixels: 1_000_000 };
        let t = Transform::from_exif(o);
        let kind = match which {
            5 => Source::Gif,
            3 | 4 => Source::Png,
            8 => Source::Webp,
            9 | 10 => Source::Heif,
            _ => Source::Jpeg,
        };
        let out = match format {
            0 => Output::jpeg(80),
            1 => Output::webp(80),
            _ => Output::avif(60),
        };
        let rendered = crate::render::render_here(kind, &bytes, t, d(24, 24), fit, out, &limits);
        if let Ok(r) = rendered {
            prop_assert!(r.width >= 1 && r.height >= 1 && r.width <= 24 && r.height <= 24);
            match format {
                0 => prop_assert!(r.bytes.starts_with(&[0xFF, 0xD8])),
                1 => prop_assert!(r.bytes.starts_with(b"RIFF")),
                _ => prop_assert!(r.bytes.get(4..12) == Some(&b"ftypavif"[..])),
            }
        }
    }
}

/// VmRSS of this process, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Memory stays flat over thousands of mutated renders (issue 37, item 4). The resident set is
/// the process's, and the test harness runs other tests on other threads of this one: the
/// measuring test runs in a process of its own (this test binary, that test only).
#[test]
fn thousands_of_mutated_renders_leave_the_resident_set_flat() {
    let name = "render::tests::mutated::resident_set_over_mutated_renders";
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .expect("run the measuring test");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("1 passed"),
        "the measuring test did not run: {text}"
    );
    for line in text.lines() {
        if let Some(at) = line.find("resident set") {
            eprintln!("{}", &line[at..]);
        }
    }
}

/// What a decoder allocates on an error path (libjpeg-turbo, libwebp, libheif, Little CMS, the
/// Rust decoders) is given back. One thread, a fixed sequence of mutations (xorshift), every
/// source and output: after a warm-up round (arenas, thread-local handles, libheif's plugins),
/// 4,000 more renders may not grow the resident set by more than 8 MiB.
#[test]
#[ignore = "run in a process of its own by thousands_of_mutated_renders_leave_the_resident_set_flat"]
fn resident_set_over_mutated_renders() {
    let sources = sources();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let limits = Limits {
        max_pixels: 1_000_000,
    };
    let mut round = |n: usize| {
        let mut rendered = 0;
        for i in 0..n {
            let which = i % sources.len();
            let m = match next() % 4 {
                0 => Mutation::Flip {
                    at: next() as usize,
                    bit: (next() % 8) as u8,
                },
                1 => Mutation::Overwrite {
                    at: next() as usize,
                    run: 1 + (next() % 64) as usize,
                    byte: next() as u8,
                },
                2 => Mutation::Cut {
                    at: next() as usize,
                },
                _ => Mutation::Splice {
                    at: next() as usize,
                    from: next() as usize,
                    run: 1 + (next() % 200) as usize,
                },
            };
            let bytes = apply(sources[which].clone(), &m);
            let kind = match which {
                5 => Source::Gif,
                3 | 4 => Source::Png,
                8 => Source::Webp,
                9 | 10 => Source::Heif,
                _ => Source::Jpeg,
            };
            let out = match i % 3 {
                0 => Output::jpeg(80),
                1 => Output::webp(80),
                _ => Output::avif(60),
            };
            let t = Transform::from_exif((i % 8) as u16 + 1);
            if crate::render::render_here(kind, &bytes, t, d(24, 24), Fit::Cover, out, &limits)
                .is_ok()
            {
                rendered += 1;
            }
        }
        rendered
    };
    round(1_000);
    let before = rss_kib();
    let rendered = round(4_000);
    let after = rss_kib();
    eprintln!("resident set {before} KiB -> {after} KiB over 4,000 renders ({rendered} rendered)");
    assert!(rendered > 100, "some mutations still render: {rendered}");
    assert!(
        after <= before + 8 * 1024,
        "the resident set grew from {before} KiB to {after} KiB over 4,000 renders"
    );
}
