//! Issue 37 (work in progress): a JPEG's rendition for its profile's variant, rendered into
//! `cache/` at the first request and served from there after; upright whatever its EXIF says,
//! without the source's metadata, never for a stranger.

use serde_json::Value;
use upcommit_turbojpeg::{Decoder, Encoder, Plane, SAMP_420};

use crate::helpers::{error_code, spawn_app_with, Spawn};

pub(crate) fn spawn() -> Spawn {
    Spawn {
        config: Some(
            r#"
            [[profiles]]
            name = "image"
            content_types = ["image/jpeg", "image/png", "image/gif", "image/webp"]
            max_size = 10000000
            final_prefix = "media/images/"
            tracks_links = true

            [[profiles.variants]]
            name = "thumb"
            width = 200
            height = 200

            [[profiles.variants]]
            name = "whole"
            width = 200
            height = 200
            fit = "inside"
            "#
            .to_owned(),
        ),
        ..Spawn::default()
    }
}

/// A WebP's RIFF container with its extended header (`VP8X`) saying an animated `w` × `h`
/// canvas, and a little filler: enough for a commit, which reads only the header; an animation
/// is not rendered.
pub(crate) fn animated_webp(w: u32, h: u32) -> Vec<u8> {
    let mut v = b"RIFF".to_vec();
    v.extend(56u32.to_le_bytes());
    v.extend(b"WEBPVP8X");
    v.extend(10u32.to_le_bytes());
    v.extend([0x02, 0, 0, 0]);
    v.extend(&(w - 1).to_le_bytes()[..3]);
    v.extend(&(h - 1).to_le_bytes()[..3]);
    v.resize(64, 0);
    v
}

/// A real `w` × `h` RGBA PNG: its left half fully transparent, its right half opaque red.
pub(crate) fn png_half_clear(w: u32, h: u32) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header().expect("header");
        let mut data = Vec::with_capacity((w * h * 4) as usize);
        for _ in 0..h {
            for x in 0..w {
                data.extend(if x < w / 2 {
                    [0, 0, 0, 0]
                } else {
                    [255, 0, 0, 255]
                });
            }
        }
        writer.write_image_data(&data).expect("data");
    }
    out
}

/// A PNG renders too: a JPEG rendition, its transparency flattened onto white, no PNG chunk
/// carried over.
#[tokio::test]
async fn a_png_renders_into_a_jpeg_with_its_transparency_on_white() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let p = app
        .uploaded_bytes(&alice, "image", "image/png", png_half_clear(400, 200))
        .await;
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    assert_eq!(h["image"], serde_json::json!({"width": 400, "height": 200}));
    let id = h["id"].as_str().expect("id");
    let r: Value = app
        .get(&format!("/v1/files/{id}/variants/whole"), Some(&alice))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(r["content_type"], "image/jpeg", "{r}");
    assert_eq!(
        (r["width"].as_u64(), r["height"].as_u64()),
        (Some(200), Some(100))
    );
    let bytes = fetch(&app, &r["url"]).await;
    let mut dec = Decoder::new().expect("decoder");
    let hd = dec.header(&bytes).expect("a JPEG");
    let y = dec
        .decode_planes(&bytes, &hd, 200, 100)
        .expect("decode")
        .remove(0);
    let at = |x: u32, yy: u32| y.data[(yy * 200 + x) as usize];
    assert!(at(20, 50) > 245, "transparent is white: {}", at(20, 50));
    assert!(
        (66..=86).contains(&at(180, 50)),
        "red's luma: {}",
        at(180, 50)
    );
}

/// A `w` × `h` JPEG, its stored top-left quarter bright, with an EXIF block (orientation `o`
/// and a GPS tag's worth of bytes that must not reach a rendition) after SOI.
pub(crate) fn jpeg(w: u32, h: u32, o: u16) -> Vec<u8> {
    jpeg_of(w, h, o, false)
}

/// [`jpeg`], baseline or progressive.
pub(crate) fn jpeg_of(w: u32, h: u32, o: u16, progressive: bool) -> Vec<u8> {
    let mut y = Plane::new(w, h, 90);
    for row in 0..h / 4 {
        for col in 0..w / 4 {
            y.data[(row * w + col) as usize] = 245;
        }
    }
    let (cw, ch) = upcommit_turbojpeg::plane_size(1, w, h, SAMP_420);
    let planes = [y, Plane::new(cw, ch, 128), Plane::new(cw, ch, 128)];
    let mut encoder = Encoder::new().expect("encoder");
    if progressive {
        encoder = encoder.progressive();
    }
    let body = encoder
        .encode_planes(&planes, w, h, SAMP_420, 90)
        .expect("encode");
    let mut out = vec![0xFF, 0xD8];
    out.extend(crate::images::exif_segment(
        o,
        b"GPSLatitude 48.8583 N GPSLongitude 2.2945 E",
    ));
    out.extend(&body[2..]);
    out
}

#[tokio::test]
async fn a_rendition_is_rendered_once_upright_and_clean_then_served_from_the_cache() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    // Stored 800 x 400, turned a quarter clockwise by EXIF 6: shown 400 x 800.
    let p = app
        .uploaded_bytes(&alice, "image", "image/jpeg", jpeg(800, 400, 6))
        .await;
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    assert_eq!(h["image"], serde_json::json!({"width": 400, "height": 800}));
    let id = h["id"].as_str().expect("id");
    let path = format!("/v1/files/{id}/variants/thumb");

    let first: Value = app
        .get(&path, Some(&alice))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(first["cached"], false, "{first}");
    assert_eq!(
        (first["width"].as_u64(), first["height"].as_u64()),
        (Some(200), Some(200)),
        "{first}"
    );
    assert_eq!(first["content_type"], "image/jpeg");
    let bytes = fetch(&app, &first["url"]).await;
    assert_eq!(first["size"].as_u64(), Some(bytes.len() as u64));
    assert!(
        !bytes.windows(4).any(|w| w == b"Exif"),
        "no EXIF in a rendition"
    );
    assert!(
        !bytes.windows(3).any(|w| w == b"GPS"),
        "no GPS in a rendition"
    );
    let mut dec = Decoder::new().expect("decoder");
    let hd = dec.header(&bytes).expect("a JPEG");
    assert_eq!((hd.width, hd.height), (200, 200));
    // Cover keeps the middle 400 x 400 of the shown 400 x 800: the bright quarter (shown at
    // the top right, 100 wide and 200 high) is cut off, the rendition is the dark middle.
    let luma = dec
        .decode_planes(&bytes, &hd, 200, 200)
        .expect("decode")
        .remove(0);
    assert!(luma.data.iter().all(|&v| v < 140), "cover keeps the middle");

    // Inside shows it all, upright: 100 x 200, the stored top-left corner turned a quarter
    // clockwise to the top right.
    let whole: Value = app
        .get(&format!("/v1/files/{id}/variants/whole"), Some(&alice))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        (whole["width"].as_u64(), whole["height"].as_u64()),
        (Some(100), Some(200)),
        "{whole}"
    );
    let wbytes = fetch(&app, &whole["url"]).await;
    let wh = dec.header(&wbytes).expect("a JPEG");
    assert_eq!((wh.width, wh.height), (100, 200));
    let l = dec
        .decode_planes(&wbytes, &wh, 100, 200)
        .expect("decode")
        .remove(0);
    let at = |x: u32, y: u32| l.data[(y * 100 + x) as usize];
    assert!(at(95, 10) > 200, "bright top right: {}", at(95, 10));
    assert!(
        at(5, 10) < 140 && at(95, 190) < 140 && at(5, 190) < 140,
        "dark elsewhere"
    );

    let heads = |page: &str| {
        ["ok", "error"]
            .iter()
            .map(|r| {
                let series = format!(
                    r#"upcommit_s3_request_duration_seconds_count{{operation="HeadObject",result="{r}"}}"#
                );
                page.lines()
                    .find_map(|l| l.strip_prefix(series.as_str())?.strip_prefix(' ')?.parse::<f64>().ok())
                    .unwrap_or(0.0)
            })
            .sum::<f64>()
    };
    let heads_before = heads(&scrape(&app, &app.address).await);
    let again: Value = app
        .get(&path, Some(&alice))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(again["cached"], true, "{again}");
    assert_eq!(
        heads(&scrape(&app, &app.address).await),
        heads_before,
        "a rendition this replica wrote is answered without asking the store again"
    );
    assert_eq!(
        (again["width"].as_u64(), again["size"].as_u64()),
        (Some(200), Some(bytes.len() as u64))
    );
    let cached: Vec<String> = app
        .keys()
        .await
        .into_iter()
        .filter(|k| k.starts_with("cache/"))
        .collect();
    assert_eq!(cached.len(), 2, "one per variant asked for: {cached:?}");
    assert!(
        cached
            .iter()
            .all(|k| k.starts_with(&format!("cache/{id}/"))),
        "{cached:?}"
    );

    assert_eq!(
        error_code(
            app.get(&format!("/v1/files/{id}/variants/poster"), Some(&alice))
                .await
        )
        .await,
        (404, "variant_not_found".to_owned())
    );
    assert_eq!(
        error_code(app.get(&path, Some(&app.token("mallory"))).await).await,
        (404, "file_not_found".to_owned()),
        "a stranger learns nothing"
    );
    assert_eq!(
        app.get(&path, Some(&app.admin_token("root")))
            .await
            .status(),
        200
    );

    // Two renders (one per variant), two answers from the cache (alice's again, the admin's).
    let page = scrape(&app, &app.address).await;
    for (series, want) in [
        (r#"upcommit_renders_total{outcome="rendered"}"#, 2.0),
        (r#"upcommit_renders_total{outcome="failed"}"#, 0.0),
        (r#"upcommit_renders_total{outcome="busy"}"#, 0.0),
        (
            r#"upcommit_render_duration_seconds_count{outcome="rendered"}"#,
            2.0,
        ),
        (r#"upcommit_rendition_cache_total{result="miss"}"#, 2.0),
        (r#"upcommit_rendition_cache_total{result="hit"}"#, 2.0),
        ("upcommit_renders_in_flight", 0.0),
    ] {
        assert_eq!(metric(&page, series), want, "{series}\n{page}");
    }
}

async fn scrape(app: &crate::helpers::TestApp, base: &str) -> String {
    app.http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text")
}

/// One exact series' value; panics when the page does not have it.
fn metric(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} on the page"))
}

/// The bytes at a presigned URL.
async fn fetch(app: &crate::helpers::TestApp, url: &Value) -> Vec<u8> {
    app.http
        .get(url.as_str().expect("url"))
        .send()
        .await
        .expect("GET the rendition")
        .bytes()
        .await
        .expect("body")
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hygiene_deletes_a_files_renditions_with_it_and_keeps_the_others() {
    let app = spawn_app_with(Spawn {
        env: crate::hygiene::hygiene_env(crate::hygiene::DAY),
        ..spawn()
    })
    .await;
    let alice = app.token("alice");
    let mut ids = Vec::new();
    for _ in 0..2 {
        let p = app
            .uploaded_bytes(&alice, "image", "image/jpeg", jpeg(640, 480, 1))
            .await;
        let h: Value = app
            .commit(&alice, &p.key, None)
            .await
            .json()
            .await
            .expect("handle");
        let id = h["id"].as_str().expect("id").to_owned();
        for v in ["thumb", "whole"] {
            let r = app
                .get(&format!("/v1/files/{id}/variants/{v}"), Some(&alice))
                .await;
            assert_eq!(r.status(), 200);
        }
        ids.push(id);
    }
    let (doomed, kept) = (&ids[0], &ids[1]);
    let link = app
        .http
        .put(format!("{}/v1/files/{kept}/links/post/1", app.address))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("link");
    assert_eq!(link.status(), 204);
    assert_eq!(app.versions_under(&format!("cache/{doomed}/")).await, 2);

    // Unlinked, archived (no rendition of an archived file: restore it first), then deleted
    // past retention.
    for days in [2, 4] {
        crate::hygiene::hygiene(&app, Some(crate::hygiene::in_days(days)));
    }
    assert_eq!(crate::hygiene::status(&app, doomed).await, "archived");
    assert_eq!(
        error_code(
            app.get(&format!("/v1/files/{doomed}/variants/thumb"), Some(&alice))
                .await
        )
        .await,
        (409, "file_archived".to_owned())
    );
    crate::hygiene::hygiene(&app, Some(crate::hygiene::in_days(7)));
    assert_eq!(crate::hygiene::status(&app, doomed).await, "deleted");
    assert_eq!(
        app.versions_under(&format!("cache/{doomed}/")).await,
        0,
        "no version of any rendition of the deleted file is left"
    );
    assert_eq!(crate::hygiene::status(&app, kept).await, "available");
    assert_eq!(
        app.versions_under(&format!("cache/{kept}/")).await,
        2,
        "the linked file's stay"
    );
    assert_eq!(
        error_code(
            app.get(&format!("/v1/files/{doomed}/variants/thumb"), Some(&alice))
                .await
        )
        .await,
        (410, "file_deleted".to_owned())
    );
}

#[tokio::test]
async fn what_cannot_be_rendered_is_refused_with_its_code_and_nothing_is_cached() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    // An animated WebP: not rendered.
    let p = app
        .uploaded_bytes(&alice, "image", "image/webp", animated_webp(64, 48))
        .await;
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    let webp_id = h["id"].as_str().expect("id");
    assert_eq!(
        error_code(
            app.get(&format!("/v1/files/{webp_id}/variants/thumb"), Some(&alice))
                .await
        )
        .await,
        (422, "image_format_not_rendered".to_owned())
    );
    // A PNG whose header is whole and whose image data is not: unrenderable.
    let (_, png) = app
        .upload_and_commit(&alice, "image", "image/png", 500)
        .await;
    let png_id = png["id"].as_str().expect("id");
    assert_eq!(
        error_code(
            app.get(&format!("/v1/files/{png_id}/variants/thumb"), Some(&alice))
                .await
        )
        .await,
        (422, "image_unrenderable".to_owned())
    );
    assert_eq!(app.versions_under(&format!("cache/{png_id}/")).await, 0);
    // A JPEG whose header is whole (it commits) and whose image data is cut short.
    let whole = jpeg(640, 480, 1);
    let cut = whole[..whole.len() * 3 / 5].to_vec();
    let p = app.uploaded_bytes(&alice, "image", "image/jpeg", cut).await;
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    let id = h["id"].as_str().expect("id");
    assert_eq!(h["image"], serde_json::json!({"width": 640, "height": 480}));
    let (status, code) = error_code(
        app.get(&format!("/v1/files/{id}/variants/thumb"), Some(&alice))
            .await,
    )
    .await;
    assert_eq!((status, code.as_str()), (422, "image_unrenderable"));
    assert!(
        !app.keys().await.iter().any(|k| k.starts_with("cache/")),
        "nothing written for a refusal"
    );
    assert_eq!(
        app.get(&format!("/v1/files/{id}/variants/thumb"), None)
            .await
            .status(),
        401
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_replicas_render_slots_a_request_is_told_to_retry_not_queued() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let p = app
        .uploaded_bytes(&alice, "image", "image/jpeg", jpeg(640, 480, 1))
        .await;
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    let id = h["id"].as_str().expect("id").to_owned();
    // One slot, and the first render held right after it took it.
    let dir = tempfile::tempdir().expect("gate dir");
    let gate = dir.path().join("render-gate");
    let (mut server, base) = crate::helpers::server_process(
        &app,
        &[
            ("UPCOMMIT_RENDER_CONCURRENCY", "1"),
            ("UPCOMMIT_PAUSE_AT", "render_slot_taken"),
            ("UPCOMMIT_PAUSE_GATE", gate.to_str().expect("path")),
            ("RUST_LOG", "warn"),
        ],
        std::process::Stdio::null(),
    )
    .await;
    let first = {
        let (http, url, token) = (
            app.http.clone(),
            format!("{base}/v1/files/{id}/variants/thumb"),
            alice.clone(),
        );
        tokio::spawn(async move {
            http.get(url)
                .bearer_auth(token)
                .send()
                .await
                .expect("first")
        })
    };
    let reached = gate.with_extension("reached");
    for _ in 0..100 {
        if reached.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(reached.exists(), "the first render took the slot");
    let second = app
        .http
        .get(format!("{base}/v1/files/{id}/variants/whole"))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("second");
    assert_eq!(
        second
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap_or("")),
        Some("1")
    );
    assert_eq!(error_code(second).await, (503, "render_busy".to_owned()));
    let page = scrape(&app, &base).await;
    assert_eq!(metric(&page, "upcommit_renders_in_flight"), 1.0, "{page}");
    assert_eq!(metric(&page, "upcommit_render_slots"), 1.0);
    assert_eq!(
        metric(&page, r#"upcommit_renders_total{outcome="busy"}"#),
        1.0
    );
    std::fs::write(&gate, b"go").expect("open the gate");
    let first = first.await.expect("join");
    assert_eq!(first.status(), 200, "the held render finishes");
    let page = scrape(&app, &base).await;
    assert_eq!(metric(&page, "upcommit_renders_in_flight"), 0.0, "{page}");
    assert_eq!(
        metric(&page, r#"upcommit_renders_total{outcome="rendered"}"#),
        1.0
    );
    let _ = server.kill();
    let _ = server.wait();
}

/// Second read of issue 37: a render reads its source whole, so a source past
/// `MAX_RENDER_SOURCE_BYTES` is refused before it is read, whatever the profile admits.
#[tokio::test]
async fn a_source_larger_than_a_render_reads_is_refused_before_it_is_read() {
    let app = spawn_app_with(Spawn {
        config: Some(
            r#"
            [[profiles]]
            name = "image"
            content_types = ["image/jpeg"]
            max_size = 100000000
            final_prefix = "media/images/"

            [[profiles.variants]]
            name = "thumb"
            width = 200
            height = 200
            "#
            .to_owned(),
        ),
        ..Spawn::default()
    })
    .await;
    let alice = app.token("alice");
    let mut big = jpeg(640, 480, 1);
    big.resize(
        usize::try_from(upcommit::services::renditions::MAX_RENDER_SOURCE_BYTES).expect("size") + 1,
        0,
    );
    let p = app.uploaded_bytes(&alice, "image", "image/jpeg", big).await;
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    let id = h["id"].as_str().expect("id");
    let before = crate::helpers::counter_sum(
        &app.metrics_text().await,
        "upcommit_s3_request_duration_seconds_count",
        "operation=\"GetObject\"",
    );
    assert_eq!(
        error_code(
            app.get(&format!("/v1/files/{id}/variants/thumb"), Some(&alice))
                .await
        )
        .await,
        (422, "image_unrenderable".to_owned())
    );
    let after = crate::helpers::counter_sum(
        &app.metrics_text().await,
        "upcommit_s3_request_duration_seconds_count",
        "operation=\"GetObject\"",
    );
    assert_eq!(after, before, "the source was not read");
    assert!(!app.keys().await.iter().any(|k| k.starts_with("cache/")));
}

/// `upcommit reconcile --json` with `args`: its exit code and report.
fn reconcile(app: &crate::helpers::TestApp, args: &[&str]) -> (i32, Value) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["reconcile", "--json", "--grace", "0"])
        .args(args)
        .envs(&app.env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit");
    let body = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "JSON expected: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), body)
}

fn items_of<'a>(run: &'a Value, action: &str) -> Vec<&'a str> {
    run["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["action"] == action)
        .map(|i| i["key"].as_str().expect("key"))
        .collect()
}

/// Reconcile knows `cache/`: the renditions of a file that is there are neither stray nor
/// reported; those of a file that is gone — written by a render that raced the file's deletion,
/// or naming a file never recorded — are reported, and removed (every version) only when
/// asked. A key under `cache/` that names no file is stray, and never removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_removes_the_renditions_of_files_that_are_gone_and_only_those() {
    let app = spawn_app_with(Spawn {
        env: crate::hygiene::hygiene_env(crate::hygiene::DAY),
        ..spawn()
    })
    .await;
    let alice = app.token("alice");
    let mut ids = Vec::new();
    for _ in 0..2 {
        let p = app
            .uploaded_bytes(&alice, "image", "image/jpeg", jpeg(640, 480, 1))
            .await;
        let h: Value = app
            .commit(&alice, &p.key, None)
            .await
            .json()
            .await
            .expect("handle");
        let id = h["id"].as_str().expect("id").to_owned();
        for v in ["thumb", "whole"] {
            let r = app
                .get(&format!("/v1/files/{id}/variants/{v}"), Some(&alice))
                .await;
            assert_eq!(r.status(), 200);
        }
        ids.push(id);
    }
    let (doomed, kept) = (ids[0].clone(), ids[1].clone());
    let link = app
        .http
        .put(format!("{}/v1/files/{kept}/links/post/1", app.address))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("link");
    assert_eq!(link.status(), 204);

    // Nothing is gone yet: four renditions of files that are there, nothing else.
    let (code, body) = reconcile(&app, &[]);
    assert_eq!(code, 0, "{body}");
    assert_eq!(body["summary"]["renditions"], 4, "{body}");
    assert_eq!(body["summary"]["orphan_renditions"], 0, "{body}");
    assert_eq!(body["summary"]["stray"], 0, "{body}");

    for days in [2, 4, 7] {
        crate::hygiene::hygiene(&app, Some(crate::hygiene::in_days(days)));
    }
    assert_eq!(crate::hygiene::status(&app, &doomed).await, "deleted");
    // A render that raced the deletion writes after it (twice: two versions where the bucket
    // keeps them), one names a file never recorded, one key names no file at all.
    let late = format!("cache/{doomed}/thumb-late.jpg");
    let ghost = "cache/0123456789abcdef0123456789abcdef/thumb-x.jpg".to_owned();
    for (key, body) in [
        (&late, b"one".to_vec()),
        (&late, b"two".to_vec()),
        (&ghost, b"g".to_vec()),
    ] {
        app.put_object(key, body, "image/jpeg").await;
    }
    app.put_object("cache/junk.jpg", b"j".to_vec(), "image/jpeg")
        .await;

    // Reported, nothing removed.
    let (code, body) = reconcile(&app, &[]);
    assert_eq!(code, 0, "{body}");
    assert_eq!(body["summary"]["renditions"], 2, "kept's two: {body}");
    assert_eq!(body["summary"]["orphan_renditions"], 2, "{body}");
    assert_eq!(body["summary"]["orphan_renditions_removed"], 0, "{body}");
    let mut reported = items_of(&body, "orphan_rendition");
    reported.sort_unstable();
    let mut want = vec![late.as_str(), ghost.as_str()];
    want.sort_unstable();
    assert_eq!(reported, want, "{body}");
    assert_eq!(items_of(&body, "stray"), vec!["cache/junk.jpg"], "{body}");
    assert!(app.object_exists(&late).await && app.object_exists(&ghost).await);

    // Asked to remove them: every version of the gone files' renditions goes, nothing else.
    let (code, body) = reconcile(&app, &["--remove-orphan-renditions"]);
    assert_eq!(code, 0, "{body}");
    assert_eq!(body["summary"]["orphan_renditions_removed"], 2, "{body}");
    assert_eq!(app.versions_under(&format!("cache/{doomed}/")).await, 0);
    assert_eq!(
        app.versions_under("cache/0123456789abcdef0123456789abcdef/")
            .await,
        0
    );
    assert_eq!(app.versions_under(&format!("cache/{kept}/")).await, 2);
    assert!(
        app.object_exists("cache/junk.jpg").await,
        "stray: never removed"
    );
    let again: Value = app
        .get(&format!("/v1/files/{kept}/variants/thumb"), Some(&alice))
        .await
        .json()
        .await
        .expect("rendition");
    assert_eq!(again["cached"], true, "{again}");

    // Nothing is left to report.
    let (_, body) = reconcile(&app, &["--remove-orphan-renditions"]);
    assert_eq!(body["summary"]["orphan_renditions"], 0, "{body}");
}

/// `doctor --json` with `env`: the exit code and the failed checks' names and details.
fn doctor(env: &std::collections::HashMap<String, String>) -> (i32, Vec<String>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["doctor", "--json"])
        .envs(env)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("doctor --json printed JSON ({e}): {text}"));
    let failed = body["report"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["ok"] == false)
        .map(|r| r["check"].as_str().expect("check").to_owned())
        .collect();
    (out.status.code().unwrap_or(-1), failed, text)
}

/// While a profile has variants, the bucket must expire `cache/` (the image-resize rules of
/// `infra/lifecycle-rules.json`): doctor names the missing rule and `bucket apply-lifecycle`
/// writes it back. A deployment without variants needs no `cache/` rule. And `cache/` is
/// reserved: an admin's commit cannot land there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_requires_the_cache_rule_while_a_profile_has_variants_and_cache_is_reserved() {
    use upcommit::domain::lifecycle::required_rules;
    let app = spawn_app_with(spawn()).await;
    let (code, failed, out) = doctor(&app.env);
    assert_eq!((code, failed.len()), (0, 0), "{out}");

    let without: Vec<_> = required_rules()
        .iter()
        .filter(|r| !r.prefix.starts_with("cache/"))
        .cloned()
        .collect();
    crate::helpers::put_lifecycle(&app.s3, &app.bucket, &without).await;
    let (code, failed, out) = doctor(&app.env);
    assert_eq!(code, 1, "{out}");
    assert_eq!(failed, vec!["lifecycle_required_rules".to_owned()], "{out}");
    assert!(
        out.contains("resize-cache-expire") && out.contains("cache/"),
        "{out}"
    );

    // The same bucket serves a deployment without variants.
    let mut plain = app.env.clone();
    plain.remove("UPCOMMIT_CONFIG");
    let (code, failed, out) = doctor(&plain);
    assert_eq!((code, failed.len()), (0, 0), "{out}");

    let run = crate::bucket::upcommit(&app, &["bucket", "apply-lifecycle", "--yes"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let (code, _, out) = doctor(&app.env);
    assert_eq!(code, 0, "{out}");

    // An admin's commit to a key under cache/, in any spelling, is refused.
    let alice = app.token("alice");
    let root = app.admin_token("root");
    let p = app
        .uploaded_bytes(&alice, "image", "image/jpeg", jpeg(64, 48, 1))
        .await;
    for custom in [
        "cache/thumbs/x.jpg",
        "Cache/x.jpg",
        "%63ache/x.jpg",
        "cache",
    ] {
        let got = error_code(app.commit(&root, &p.key, Some(custom)).await).await;
        assert_eq!(got, (400, "final_key_reserved".to_owned()), "{custom}");
    }
    assert!(!app.object_exists("cache/thumbs/x.jpg").await);
    // The upload is still committable where it may land.
    assert_eq!(app.commit(&alice, &p.key, None).await.status(), 201);
}

/// A committed 640 × 480 JPEG of alice's, and a server process of the same deployment whose
/// renders all hold at `render_slot_taken` until the returned gate file exists.
async fn held_renders(
    app: &crate::helpers::TestApp,
    slots: &str,
) -> (String, std::process::Child, String, tempfile::TempDir) {
    let alice = app.token("alice");
    let p = app
        .uploaded_bytes(&alice, "image", "image/jpeg", jpeg(640, 480, 1))
        .await;
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    let id = h["id"].as_str().expect("id").to_owned();
    let dir = tempfile::tempdir().expect("gate dir");
    let gate = dir.path().join("render-gate");
    let (server, base) = crate::helpers::server_process(
        app,
        &[
            ("UPCOMMIT_RENDER_CONCURRENCY", slots),
            ("UPCOMMIT_PAUSE_AT", "render_slot_taken"),
            ("UPCOMMIT_PAUSE_GATE", gate.to_str().expect("path")),
            ("RUST_LOG", "warn"),
        ],
        std::process::Stdio::null(),
    )
    .await;
    (id, server, base, dir)
}

async fn until_reached(gate: &std::path::Path) {
    let reached = gate.with_extension("reached");
    for _ in 0..100 {
        if reached.exists() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no render reached the pause point");
}

/// Five requests for one rendition at once, on a replica with slots to spare: one renders,
/// the other four wait for it and are answered from the cache — one render, one write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_for_one_rendition_render_it_once() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let (id, mut server, base, dir) = held_renders(&app, "8").await;
    let gate = dir.path().join("render-gate");
    let url = format!("{base}/v1/files/{id}/variants/thumb");
    let mut asks = Vec::new();
    for _ in 0..5 {
        let (http, url, token) = (app.http.clone(), url.clone(), alice.clone());
        asks.push(tokio::spawn(async move {
            http.get(url).bearer_auth(token).send().await.expect("ask")
        }));
    }
    until_reached(&gate).await;
    // Give the other four time to arrive: with a render of their own, each would take one
    // of the spare slots and hold at the same point.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let page = scrape(&app, &base).await;
    assert_eq!(metric(&page, "upcommit_renders_in_flight"), 1.0, "{page}");
    std::fs::write(&gate, b"go").expect("open the gate");
    let mut cached = Vec::new();
    let mut sizes = Vec::new();
    for ask in asks {
        let r = ask.await.expect("join");
        assert_eq!(r.status(), 200);
        let body: Value = r.json().await.expect("json");
        cached.push(body["cached"].as_bool().expect("cached"));
        sizes.push(body["size"].as_u64().expect("size"));
    }
    cached.sort_unstable();
    assert_eq!(
        cached,
        vec![false, true, true, true, true],
        "one rendered, four waited"
    );
    assert!(sizes.windows(2).all(|w| w[0] == w[1]), "{sizes:?}");
    let page = scrape(&app, &base).await;
    assert_eq!(
        metric(&page, r#"upcommit_renders_total{outcome="rendered"}"#),
        1.0
    );
    assert_eq!(
        metric(&page, r#"upcommit_rendition_cache_total{result="miss"}"#),
        1.0
    );
    assert_eq!(
        app.versions_under(&format!("cache/{id}/")).await,
        1,
        "one write"
    );
    let _ = server.kill();
    let _ = server.wait();
}

/// Another replica writes the rendition while this one renders it: this one's conditional
/// write is refused (412), it answers the rendition that is there, and the other's bytes are
/// never replaced. On a store that ignores `If-None-Match: *` on PUT (docs/stores.md), the
/// second write replaces the first with the same bytes — both replicas drew the same
/// rendition — so only the answer is checked there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rendition_another_replica_wrote_first_is_answered_not_replaced() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let (id, mut server, base, dir) = held_renders(&app, "1").await;
    let gate = dir.path().join("render-gate");
    let ask = {
        let (http, url, token) = (
            app.http.clone(),
            format!("{base}/v1/files/{id}/variants/thumb"),
            alice.clone(),
        );
        tokio::spawn(async move { http.get(url).bearer_auth(token).send().await.expect("ask") })
    };
    until_reached(&gate).await;
    // The other replica's rendition, at the key this render will write (its size tells it
    // apart: this one is rendered from a 640 × 480 source to 200 × 200).
    let key = app
        .keys()
        .await
        .into_iter()
        .find(|k| k.starts_with(&format!("cache/{id}/")));
    assert_eq!(key, None, "nothing rendered yet");
    let fingerprinted = {
        // The key is the variant's: read it from a second file's rendition of the same variant.
        let p = app
            .uploaded_bytes(&alice, "image", "image/jpeg", jpeg(64, 48, 1))
            .await;
        let other: Value = app
            .commit(&alice, &p.key, None)
            .await
            .json()
            .await
            .expect("handle");
        let other_id = other["id"].as_str().expect("id").to_owned();
        let r = app
            .get(
                &format!("/v1/files/{other_id}/variants/thumb"),
                Some(&alice),
            )
            .await;
        assert_eq!(r.status(), 200);
        let k = app
            .keys()
            .await
            .into_iter()
            .find(|k| k.starts_with(&format!("cache/{other_id}/")))
            .expect("the other file's rendition");
        k.replace(&other_id, &id)
    };
    let theirs = jpeg(50, 50, 1);
    app.put_object(&fingerprinted, theirs.clone(), "image/jpeg")
        .await;
    std::fs::write(&gate, b"go").expect("open the gate");
    let r = ask.await.expect("join");
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.expect("json");
    if crate::helpers::gap_accepted("conditional_put") {
        // The answer describes what the key holds after both writes.
        let stored = app.get_object(&fingerprinted).await;
        assert_eq!(body["size"].as_u64(), Some(stored.len() as u64), "{body}");
    } else {
        assert_eq!(body["cached"], true, "{body}");
        assert_eq!(body["size"].as_u64(), Some(theirs.len() as u64), "{body}");
        assert_eq!(
            app.get_object(&fingerprinted).await,
            theirs,
            "never replaced"
        );
    }
    let _ = server.kill();
    let _ = server.wait();
}

/// `jpeg` with `n` bytes of APP9 segments between its frame header and its scan.
fn padded_before_scan(jpeg: Vec<u8>, n: usize) -> Vec<u8> {
    let sos = jpeg
        .windows(2)
        .position(|w| w == [0xFF, 0xDA])
        .expect("a scan");
    let mut out = jpeg[..sos].to_vec();
    let mut left = n;
    while left > 0 {
        let k = left.min(60_000);
        out.extend(crate::images::jpeg_segment(0xE9, &vec![b'p'; k]));
        left -= k;
    }
    out.extend(&jpeg[sos..]);
    out
}

/// Renders hold at most `UPCOMMIT_RENDER_MEMORY_MIB` between them, each render's peak
/// estimated from its source's frame header before anything is decoded: a progressive JPEG
/// (whose decoder holds every coefficient) too large for the budget is refused at once, one
/// that does not fit beside a running render is told to retry, and a baseline JPEG of the same
/// size, which streams, renders within the same budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renders_hold_at_most_the_memory_budget_between_them() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let commit = |bytes: Vec<u8>| {
        let (app, alice) = (&app, alice.clone());
        async move {
            let p = app
                .uploaded_bytes(&alice, "image", "image/jpeg", bytes)
                .await;
            let h: Value = app
                .commit(&alice, &p.key, None)
                .await
                .json()
                .await
                .expect("handle");
            h["id"].as_str().expect("id").to_owned()
        }
    };
    // 12 MP progressive: about 36 MiB of coefficients, past a 32 MiB budget.
    let huge = commit(jpeg_of(4000, 3000, 1, true)).await;
    // 4.3 MP progressive: about 21 MiB, one at a time.
    let a = commit(jpeg_of(2400, 1800, 1, true)).await;
    // Its frame header first, then 300 KB of segments before the scan: past the first bytes
    // a render reads to estimate itself.
    let b = commit(padded_before_scan(jpeg_of(2400, 1800, 6, true), 300_000)).await;
    let streamed = commit(jpeg_of(4000, 3000, 1, false)).await;
    let dir = tempfile::tempdir().expect("gate dir");
    let gate = dir.path().join("render-gate");
    let (mut server, base) = crate::helpers::server_process(
        &app,
        &[
            ("UPCOMMIT_RENDER_CONCURRENCY", "4"),
            ("UPCOMMIT_RENDER_MEMORY_MIB", "32"),
            ("UPCOMMIT_PAUSE_AT", "render_memory_held"),
            ("UPCOMMIT_PAUSE_GATE", gate.to_str().expect("path")),
            ("RUST_LOG", "warn"),
        ],
        std::process::Stdio::null(),
    )
    .await;
    let ask = |id: &str| {
        let (http, url, token) = (
            app.http.clone(),
            format!("{base}/v1/files/{id}/variants/thumb"),
            alice.clone(),
        );
        async move { http.get(url).bearer_auth(token).send().await.expect("ask") }
    };

    let (status, code) = error_code(ask(&huge).await).await;
    assert_eq!((status, code.as_str()), (422, "image_unrenderable"));
    assert_eq!(app.versions_under(&format!("cache/{huge}/")).await, 0);

    let first = tokio::spawn(ask(&a));
    until_reached(&gate).await;
    let page = scrape(&app, &base).await;
    let held = metric(&page, "upcommit_render_memory_held_bytes");
    assert!(
        (16.0 * 1048576.0..=32.0 * 1048576.0).contains(&held),
        "{held}"
    );
    assert_eq!(
        metric(&page, "upcommit_render_memory_budget_bytes"),
        32.0 * 1048576.0
    );
    let gets = |page: &str| {
        metric(
            page,
            r#"upcommit_s3_request_duration_seconds_count{operation="GetObject",result="ok"}"#,
        )
    };
    let gets_before = gets(&scrape(&app, &base).await);
    let second = ask(&b).await;
    assert_eq!(
        second
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let (status, code, message) = {
        let body: Value = second.json().await.expect("json");
        (
            503,
            body["error"]["code"].as_str().unwrap_or("").to_owned(),
            body["error"]["message"].as_str().unwrap_or("").to_owned(),
        )
    };
    assert_eq!((status, code.as_str()), (503, "render_busy"));
    assert!(
        message.contains("memory"),
        "the reason is the memory: {message}"
    );
    assert_eq!(
        gets(&scrape(&app, &base).await) - gets_before,
        1.0,
        "refused on its first bytes, not after reading the whole source"
    );

    std::fs::write(&gate, b"go").expect("open the gate");
    assert_eq!(first.await.expect("join").status(), 200);
    for id in [&b, &streamed] {
        let r = ask(id).await;
        assert_eq!(r.status(), 200, "{id}");
        let body: Value = r.json().await.expect("json");
        assert_eq!(body["width"], 200, "{body}");
    }
    let page = scrape(&app, &base).await;
    assert_eq!(
        metric(&page, "upcommit_render_memory_held_bytes"),
        0.0,
        "all given back"
    );
    let _ = server.kill();
    let _ = server.wait();
}

/// `eager = true`: a commit renders the variant in the background, after the commit has
/// answered — a render held at its slot does not hold the commit's 201 — so the first view is
/// a cache hit. A variant without it is not rendered until asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eager_variant_is_rendered_after_the_commit_answers_never_before() {
    let mut options = spawn();
    options.config = Some(options.config.expect("config").replace(
        "name = \"thumb\"",
        "name = \"thumb\"\n            eager = true",
    ));
    let app = spawn_app_with(options).await;
    let alice = app.token("alice");
    let dir = tempfile::tempdir().expect("gate dir");
    let gate = dir.path().join("render-gate");
    let (mut server, base) = crate::helpers::server_process(
        &app,
        &[
            ("UPCOMMIT_PAUSE_AT", "render_slot_taken"),
            ("UPCOMMIT_PAUSE_GATE", gate.to_str().expect("path")),
            ("RUST_LOG", "warn"),
        ],
        std::process::Stdio::null(),
    )
    .await;
    let p = app
        .uploaded_bytes(&alice, "image", "image/jpeg", jpeg(640, 480, 1))
        .await;
    let answered = app
        .http
        .post(format!("{base}/v1/files"))
        .bearer_auth(&alice)
        .json(&serde_json::json!({ "key": p.key }))
        .send()
        .await
        .expect("commit");
    assert_eq!(answered.status(), 201, "the commit answers");
    let h: Value = answered.json().await.expect("handle");
    let id = h["id"].as_str().expect("id").to_owned();
    // The eager render started after the answer and is held at its slot.
    until_reached(&gate).await;
    assert_eq!(app.versions_under(&format!("cache/{id}/")).await, 0);
    std::fs::write(&gate, b"go").expect("open the gate");
    let mut ready = false;
    for _ in 0..100 {
        if app.versions_under(&format!("cache/{id}/")).await == 1 {
            ready = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(ready, "the eager variant was rendered");
    let first: Value = app
        .http
        .get(format!("{base}/v1/files/{id}/variants/thumb"))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("view")
        .json()
        .await
        .expect("json");
    assert_eq!(
        first["cached"], true,
        "the first view is a cache hit: {first}"
    );
    // `whole` is not eager: nothing of it until asked.
    let keys = app.keys().await;
    assert_eq!(
        keys.iter()
            .filter(|k| k.starts_with(&format!("cache/{id}/")))
            .count(),
        1,
        "{keys:?}"
    );
    let _ = server.kill();
    let _ = server.wait();
}

/// An animated GIF renders its first frame: a 60 × 40 screen whose first frame is green, then
/// 500 red frames; the rendition is green and 60 × 40 (never enlarged).
#[tokio::test]
async fn an_animated_gif_renders_its_first_frame() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let mut bytes = Vec::new();
    {
        let palette = [0, 200, 0, 220, 0, 0];
        let mut enc = gif::Encoder::new(&mut bytes, 60, 40, &palette).expect("encoder");
        for (n, index) in std::iter::once(0u8)
            .chain(std::iter::repeat_n(1u8, 500))
            .enumerate()
        {
            let frame = gif::Frame {
                width: 60,
                height: 40,
                delay: u16::try_from(n % 7).unwrap_or(0),
                buffer: std::borrow::Cow::Owned(vec![index; 60 * 40]),
                ..gif::Frame::default()
            };
            enc.write_frame(&frame).expect("frame");
        }
    }
    let p = app
        .uploaded_bytes(&alice, "image", "image/gif", bytes)
        .await;
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    assert_eq!(h["image"], serde_json::json!({"width": 60, "height": 40}));
    let id = h["id"].as_str().expect("id");
    let r: Value = app
        .get(&format!("/v1/files/{id}/variants/whole"), Some(&alice))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        (r["width"].as_u64(), r["height"].as_u64()),
        (Some(60), Some(40)),
        "{r}"
    );
    let jpeg = fetch(&app, &r["url"]).await;
    let mut dec = Decoder::new().expect("decoder");
    let hd = dec.header(&jpeg).expect("a JPEG");
    let planes = dec.decode_planes(&jpeg, &hd, 60, 40).expect("decode");
    // Green: luma about 117, Cr well under 128 (red's would be far over).
    let (y, cr) = (planes[0].data[20 * 60 + 30], planes[2].data[10 * 30 + 15]);
    assert!(
        (100..=135).contains(&y) && cr < 100,
        "green, the first frame: Y {y}, Cr {cr}"
    );
}

/// A progressive JPEG of thousands of scans makes a decoder pass over the same coefficients
/// thousands of times: refused at once (422 `image_unrenderable`), before any decoding, and
/// nothing cached.
#[tokio::test]
async fn a_jpeg_of_thousands_of_scans_is_refused_before_it_is_decoded() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let progressive = jpeg_of(64, 48, 1, true);
    let last = progressive
        .windows(2)
        .rposition(|w| w == [0xFF, 0xDA])
        .expect("a scan");
    let eoi = progressive.len() - 2;
    let mut bomb = progressive[..eoi].to_vec();
    for _ in 0..3000 {
        bomb.extend_from_slice(&progressive[last..eoi]);
    }
    bomb.extend_from_slice(&[0xFF, 0xD9]);
    let p = app
        .uploaded_bytes(&alice, "image", "image/jpeg", bomb)
        .await;
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    let id = h["id"].as_str().expect("id");
    let resp = app
        .get(&format!("/v1/files/{id}/variants/thumb"), Some(&alice))
        .await;
    assert_eq!(resp.status(), 422);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["error"]["code"], "image_unrenderable");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("scans")),
        "{body}"
    );
    assert_eq!(app.versions_under(&format!("cache/{id}/")).await, 0);
}

/// A request waits at most UPCOMMIT_RENDER_TIMEOUT_SECS for its rendition (its own render, or
/// another request's it waits behind): then 503 `render_timeout` with Retry-After, and the
/// render stops there (issue 46: a render cannot outlive its limit). A render held up before
/// its worker (here, a slow step before the decode) starts no worker past the deadline and
/// does not count against the file: the next request renders it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_render_past_the_time_limit_answers_503_and_stops_and_the_next_ask_renders_it() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let p = app
        .uploaded_bytes(&alice, "image", "image/jpeg", jpeg(640, 480, 1))
        .await;
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    let id = h["id"].as_str().expect("id").to_owned();
    let dir = tempfile::tempdir().expect("gate dir");
    let gate = dir.path().join("render-gate");
    let (mut server, base) = crate::helpers::server_process(
        &app,
        &[
            ("UPCOMMIT_RENDER_TIMEOUT_SECS", "1"),
            ("UPCOMMIT_PAUSE_AT", "render_slot_taken"),
            ("UPCOMMIT_PAUSE_GATE", gate.to_str().expect("path")),
            ("RUST_LOG", "warn"),
        ],
        std::process::Stdio::null(),
    )
    .await;
    let url = format!("{base}/v1/files/{id}/variants/thumb");
    let ask = || {
        let (http, url, token) = (app.http.clone(), url.clone(), alice.clone());
        tokio::spawn(async move { http.get(url).bearer_auth(token).send().await.expect("ask") })
    };
    let first = ask();
    until_reached(&gate).await;
    // A second request waits behind the first's render, for as long as it may.
    let second = ask();
    for r in [first.await.expect("join"), second.await.expect("join")] {
        assert_eq!(
            r.headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap_or("")),
            Some("5")
        );
        assert_eq!(error_code(r).await, (503, "render_timeout".to_owned()));
    }
    assert_eq!(
        app.versions_under(&format!("cache/{id}/")).await,
        0,
        "still rendering"
    );
    std::fs::write(&gate, b"go").expect("open the gate");
    // The held render gives up when let go: it ends as a time-out, nothing written.
    let mut stopped = 0.0;
    for _ in 0..100 {
        stopped = metric(
            &scrape(&app, &base).await,
            r#"upcommit_renders_total{outcome="timed_out"}"#,
        );
        if stopped > 0.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(stopped, 1.0, "the held render stopped at its limit");
    assert_eq!(app.versions_under(&format!("cache/{id}/")).await, 0);
    // Not the file's fault: no worker ran past its limit, so nothing refuses it.
    let third = app
        .http
        .get(&url)
        .bearer_auth(&alice)
        .send()
        .await
        .expect("third");
    assert_eq!(third.status(), 200);
    let body: Value = third.json().await.expect("json");
    assert_eq!(body["cached"], false, "{body}");
    assert_eq!(app.versions_under(&format!("cache/{id}/")).await, 1);
    let page = scrape(&app, &base).await;
    assert_eq!(
        metric(&page, r#"upcommit_renders_total{outcome="rendered"}"#),
        1.0,
        "one render, for the third request"
    );
    assert_eq!(
        metric(&page, "upcommit_render_worker_timeouts_total"),
        0.0,
        "no worker was killed: none had started"
    );
    server.kill().ok();
    server.wait().ok();
}

/// A temporary file's renditions go when the sweep marks it expired (its object is the
/// lifecycle rule's), not 30 days later with the cache's rule; the other files' stay.
#[tokio::test]
async fn the_sweep_removes_an_expired_temporary_files_renditions_and_only_those() {
    use std::sync::Arc;
    use upcommit::config::Settings;
    use upcommit::services::sweep::{sweep_at, SweepOutcome};
    use upcommit::storage::{ObjectStore, S3Store};
    let config = r#"
        [[profiles]]
        name = "image"
        content_types = ["image/jpeg"]
        max_size = 10000000
        final_prefix = "media/images/"

        [[profiles.variants]]
        name = "thumb"
        width = 200
        height = 200

        [[profiles]]
        name = "story"
        content_types = ["image/jpeg"]
        max_size = 10000000
        final_prefix = "stories/"
        temporary_ttl = "1d"

        [[profiles.variants]]
        name = "thumb"
        width = 200
        height = 200
    "#;
    let app = spawn_app_with(Spawn {
        config: Some(config.to_owned()),
        ..Spawn::default()
    })
    .await;
    let alice = app.token("alice");
    let mut ids = Vec::new();
    let mut expires = None;
    for profile in ["image", "story"] {
        let p = app
            .uploaded_bytes(&alice, profile, "image/jpeg", jpeg(640, 480, 1))
            .await;
        let h: Value = app
            .commit(&alice, &p.key, None)
            .await
            .json()
            .await
            .expect("handle");
        let id = h["id"].as_str().expect("id").to_owned();
        let r = app
            .get(&format!("/v1/files/{id}/variants/thumb"), Some(&alice))
            .await;
        assert_eq!(r.status(), 200);
        assert_eq!(app.versions_under(&format!("cache/{id}/")).await, 1);
        if profile == "story" {
            expires = h["expires_at"].as_str().map(str::to_owned);
        }
        ids.push(id);
    }
    let expires = chrono::DateTime::parse_from_rfc3339(&expires.expect("expires_at"))
        .expect("RFC 3339")
        .with_timezone(&chrono::Utc);
    let settings =
        Settings::from_sources(Some(config), &|k| app.env.get(k).cloned()).expect("settings");
    let store: Arc<dyn ObjectStore> =
        Arc::new(S3Store::connect(&settings.s3).await.expect("store"));
    let summary = match sweep_at(
        &app.catalog,
        &store,
        &settings,
        false,
        expires + chrono::Duration::seconds(1),
    )
    .await
    .expect("sweep")
    {
        SweepOutcome::Ran { summary, .. } => *summary,
        SweepOutcome::Busy => panic!("sweep busy"),
    };
    assert_eq!(summary.handles_expired, 1, "{summary:?}");
    assert_eq!(summary.expired_rendition_versions_removed, 1);
    assert_eq!(summary.expired_renditions_failed, 0);
    assert_eq!(
        app.versions_under(&format!("cache/{}/", ids[1])).await,
        0,
        "the expired story's rendition is gone"
    );
    assert_eq!(
        app.versions_under(&format!("cache/{}/", ids[0])).await,
        1,
        "the ordinary file's stays"
    );
    assert_eq!(
        error_code(
            app.get(
                &format!("/v1/files/{}/variants/thumb", ids[1]),
                Some(&alice)
            )
            .await
        )
        .await,
        (410, "file_expired".to_owned())
    );
}

/// Every EXIF orientation, over HTTP on the test command's store: the handle's size is the
/// displayed one and the rendition is upright — the stored top-left corner (bright) lands in
/// the displayed corner EXIF says.
#[tokio::test]
async fn every_exif_orientation_renders_upright() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    for (o, corner) in [
        (1, "tl"),
        (2, "tr"),
        (3, "br"),
        (4, "bl"),
        (5, "tl"),
        (6, "tr"),
        (7, "br"),
        (8, "bl"),
    ] {
        let p = app
            .uploaded_bytes(&alice, "image", "image/jpeg", jpeg(320, 160, o))
            .await;
        let h: Value = app
            .commit(&alice, &p.key, None)
            .await
            .json()
            .await
            .expect("handle");
        let (w, hh) = if o >= 5 { (160, 320) } else { (320, 160) };
        assert_eq!(
            h["image"],
            serde_json::json!({"width": w, "height": hh}),
            "orientation {o}"
        );
        let id = h["id"].as_str().expect("id");
        let r: Value = app
            .get(&format!("/v1/files/{id}/variants/whole"), Some(&alice))
            .await
            .json()
            .await
            .expect("json");
        let (rw, rh) = (
            r["width"].as_u64().expect("width") as u32,
            r["height"].as_u64().expect("height") as u32,
        );
        assert_eq!(
            (rw, rh),
            if o >= 5 { (100, 200) } else { (200, 100) },
            "orientation {o}"
        );
        let bytes = fetch(&app, &r["url"]).await;
        let mut dec = Decoder::new().expect("decoder");
        let hd = dec.header(&bytes).expect("a JPEG");
        let y = dec
            .decode_planes(&bytes, &hd, rw, rh)
            .expect("decode")
            .remove(0);
        let mean = |x0: u32, y0: u32| {
            let mut sum = 0u64;
            for yy in y0..y0 + rh / 2 {
                for xx in x0..x0 + rw / 2 {
                    sum += u64::from(y.data[(yy * y.width + xx) as usize]);
                }
            }
            sum / u64::from(rw / 2 * (rh / 2))
        };
        let quadrants = [
            ("tl", mean(0, 0)),
            ("tr", mean(rw / 2, 0)),
            ("bl", mean(0, rh / 2)),
            ("br", mean(rw / 2, rh / 2)),
        ];
        let brightest = quadrants.iter().max_by_key(|q| q.1).expect("four").0;
        assert_eq!(brightest, corner, "orientation {o}: {quadrants:?}");
    }
}
