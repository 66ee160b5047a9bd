//! Issue 37 item 1: an image's width and height, as displayed, on its handle (the file API,
//! the admin API, the events); an image whose header cannot be read, or outside its profile's
//! bounds, is refused for good (422 `image_unreadable`, `image_too_many_pixels`,
//! `image_dimensions_out_of_range`).

use serde_json::{json, Value};

use crate::helpers::{error_code, spawn_app, spawn_app_with, Spawn};

/// A PNG's signature, a header chunk saying `w` × `h`, and `size` bytes in all (what follows
/// the header is filler: the header is all a commit reads).
fn png(w: u32, h: u32, size: usize) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    v.extend(w.to_be_bytes());
    v.extend(h.to_be_bytes());
    v.extend([
        8, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b'I', b'D', b'A', b'T',
    ]);
    v.resize(size, 0x5a);
    v
}

/// A JPEG segment: marker, length, body.
pub(crate) fn jpeg_segment(marker: u8, body: &[u8]) -> Vec<u8> {
    let mut s = vec![0xFF, marker];
    s.extend(
        u16::try_from(body.len() + 2)
            .expect("segment")
            .to_be_bytes(),
    );
    s.extend(body);
    s
}

/// An APP1 EXIF segment whose one IFD entry is the orientation `o`, then `trailer` bytes
/// (a GPS tag's worth of text, say) inside the segment.
pub(crate) fn exif_segment(o: u16, trailer: &[u8]) -> Vec<u8> {
    let mut exif = b"Exif\0\0MM\0*\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01".to_vec();
    exif.extend(o.to_be_bytes());
    exif.extend([0, 0, 0, 0, 0, 0]);
    exif.extend(trailer);
    jpeg_segment(0xE1, &exif)
}

/// A JPEG whose frame header sits behind `padding` bytes of APP2 segments, with an EXIF
/// orientation `o`: `w` × `h` stored.
fn jpeg(w: u16, h: u16, o: u16, padding: usize) -> Vec<u8> {
    let segment = jpeg_segment;
    let mut j = vec![0xFF, 0xD8];
    j.extend(exif_segment(o, &[]));
    let mut left = padding;
    while left > 0 {
        let n = left.min(60_000);
        j.extend(segment(0xE2, &vec![b'i'; n]));
        left -= n;
    }
    let mut sof = vec![8];
    sof.extend(h.to_be_bytes());
    sof.extend(w.to_be_bytes());
    sof.extend([1, 1, 0x11, 0]);
    j.extend(segment(0xC0, &sof));
    j.extend([
        0xFF, 0xDA, 0, 8, 1, 1, 0, 0, 0x3F, 0, 0x12, 0x34, 0xFF, 0xD9,
    ]);
    j
}

#[tokio::test]
async fn a_committed_image_carries_its_displayed_size() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let (_, png) = app
        .upload_and_commit(&alice, "image", "image/png", 2000)
        .await;
    assert_eq!(png["image"], json!({"width": 1, "height": 1}), "{png}");
    // Turned a quarter by EXIF, its header behind 100 KB: read past the first 64 KiB.
    let p = app
        .uploaded_bytes(&alice, "image", "image/jpeg", jpeg(4032, 3024, 6, 100_000))
        .await;
    let resp = app.commit(&alice, &p.key, None).await;
    assert_eq!(resp.status(), 201);
    let h: Value = resp.json().await.expect("handle");
    assert_eq!(h["image"], json!({"width": 3024, "height": 4032}), "{h}");
    let read: Value = app
        .get(
            &format!("/v1/files/{}", h["id"].as_str().expect("id")),
            Some(&alice),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(read["image"], h["image"]);
}

#[tokio::test]
async fn an_image_whose_header_cannot_be_read_is_refused_for_good() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    // A PNG signature and a header chunk that says 0 × 0.
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\0\0\0\0\0\x08\x06\0\0\0".to_vec();
    bytes.resize(500, 0);
    let p = app
        .uploaded_bytes(&alice, "image", "image/png", bytes)
        .await;
    let first = error_code(app.commit(&alice, &p.key, None).await).await;
    assert_eq!(first, (422, "image_unreadable".to_owned()));
    let again = error_code(app.commit(&alice, &p.key, None).await).await;
    assert_eq!(again.0, 422, "{again:?}");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 0);
}

/// The built-in `image` profile with bounds: 12 megapixels at most, 100..=5000 wide, at most
/// 5000 high.
fn bounded() -> Spawn {
    Spawn {
        config: Some(
            r#"
            [[profiles]]
            name = "image"
            content_types = ["image/png", "image/jpeg"]
            max_size = 10000000
            final_prefix = "media/images/"
            max_pixels = 12000000
            min_width = 100
            max_width = 5000
            max_height = 5000
            "#
            .to_owned(),
        ),
        ..Spawn::default()
    }
}

#[tokio::test]
async fn images_outside_their_profiles_bounds_are_refused_for_good() {
    let app = spawn_app_with(bounded()).await;
    let alice = app.token("alice");
    // (bytes, content type, the code, or None: committed)
    let cases: Vec<(&str, Vec<u8>, &str, Option<&str>)> = vec![
        // 4032 x 3024 = 12.19 MP: one pixel row past the limit is enough.
        (
            "12.19 MP",
            jpeg(4032, 3024, 1, 0),
            "image/jpeg",
            Some("image_too_many_pixels"),
        ),
        (
            "4000 x 3000 exactly 12 MP",
            jpeg(4000, 3000, 1, 0),
            "image/jpeg",
            None,
        ),
        (
            "99 wide",
            png(99, 400, 300),
            "image/png",
            Some("image_dimensions_out_of_range"),
        ),
        ("100 wide", png(100, 400, 300), "image/png", None),
        (
            "5001 high",
            png(2000, 5001, 300),
            "image/png",
            Some("image_dimensions_out_of_range"),
        ),
        // Stored 5001 x 2000 and turned a quarter: 2000 x 5001 as displayed, too high.
        (
            "5001 high once turned",
            jpeg(5001, 2000, 6, 0),
            "image/jpeg",
            Some("image_dimensions_out_of_range"),
        ),
        // Stored 6000 x 1000 (too wide as stored), shown 1000 x 6000: too high as displayed.
        (
            "6000 high once turned",
            jpeg(6000, 1000, 8, 0),
            "image/jpeg",
            Some("image_dimensions_out_of_range"),
        ),
        (
            "stored 5000 x 2000 turned",
            jpeg(5000, 2000, 5, 0),
            "image/jpeg",
            None,
        ),
    ];
    for (what, bytes, content_type, code) in cases {
        let p = app
            .uploaded_bytes(&alice, "image", content_type, bytes)
            .await;
        let resp = app.commit(&alice, &p.key, None).await;
        match code {
            None => assert_eq!(
                resp.status(),
                201,
                "{what}: {}",
                resp.text().await.unwrap_or_default()
            ),
            Some(code) => {
                assert_eq!(error_code(resp).await, (422, code.to_owned()), "{what}");
                // For good: the same upload is refused again, by its owner too.
                assert_eq!(
                    error_code(app.commit(&alice, &p.key, None).await).await.0,
                    422,
                    "{what}: again"
                );
            }
        }
    }
    assert_eq!(app.db.count("SELECT COUNT(*) FROM file_handles").await, 3);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM file_handles WHERE image_width IS NULL OR image_height IS NULL")
            .await,
        0
    );
}

#[tokio::test]
async fn a_decompression_bomb_is_refused_by_its_header_under_the_default_bound() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    // 100,000 x 100,000 pixels in 2 KB: refused from its header, never decoded.
    let p = app
        .uploaded_bytes(&alice, "image", "image/png", png(100_000, 100_000, 2_000))
        .await;
    let resp = app.commit(&alice, &p.key, None).await;
    let status = resp.status();
    let body: Value = resp.json().await.expect("json");
    assert_eq!(
        (status.as_u16(), body["error"]["code"].as_str()),
        (422, Some("image_too_many_pixels")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("10000000000") && m.contains("100000000")),
        "the message says how many and how many are allowed: {body}"
    );
    // 10,000 x 10,000 is the default's edge: committed.
    let p = app
        .uploaded_bytes(&alice, "image", "image/png", png(10_000, 10_000, 2_000))
        .await;
    assert_eq!(app.commit(&alice, &p.key, None).await.status(), 201);
}

#[tokio::test]
async fn the_admin_api_and_the_event_carry_the_size() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let p = app
        .uploaded_bytes(&alice, "image", "image/png", png(640, 480, 1_000))
        .await;
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    let id = h["id"].as_str().expect("id");
    let admin: Value = app
        .get(
            &format!("/v1/admin/files/{id}"),
            Some(&app.admin_token("root")),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        admin["file"]["image"],
        json!({"width": 640, "height": 480}),
        "{admin}"
    );
    // The event's data is the handle as the API returns it, the size too.
    let committed = admin["events"]
        .as_array()
        .and_then(|es| es.iter().find(|e| e["type"] == "file.committed"))
        .unwrap_or_else(|| panic!("a file.committed event: {admin}"));
    assert_eq!(
        committed["data"]["image"],
        json!({"width": 640, "height": 480}),
        "{committed}"
    );
}

/// The server's GetObject calls so far.
async fn gets(app: &crate::helpers::TestApp) -> f64 {
    crate::helpers::counter_sum(
        &app.metrics_text().await,
        "upcommit_s3_request_duration_seconds_count",
        "operation=\"GetObject\"",
    )
}

/// Review of issue 37 (high): a header of thousands of tiny segments asked for a few bytes more
/// at each one, and the commit read the object again for each: 62,000 GETs for a 1 MB file,
/// 503 after the request timeout on every attempt. The reads now at least double.
#[tokio::test]
async fn a_header_of_thousands_of_tiny_segments_costs_a_few_reads_not_one_per_segment() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let mut j = vec![0xFF, 0xD8];
    // 900 KB of 16-byte comment segments before the frame header.
    for _ in 0..(900 * 1024 / 16) {
        j.extend(jpeg_segment(0xFE, &[0; 12]));
    }
    j.extend(&jpeg(640, 480, 1, 0)[2..]);
    let p = app.uploaded_bytes(&alice, "image", "image/jpeg", j).await;
    let before = gets(&app).await;
    let resp = app.commit(&alice, &p.key, None).await;
    assert_eq!(resp.status(), 201);
    let h: Value = resp.json().await.expect("handle");
    assert_eq!(h["image"], json!({"width": 640, "height": 480}));
    let reads = gets(&app).await - before;
    assert!(reads <= 6.0, "{reads} GETs for one header");
}
