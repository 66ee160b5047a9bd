//! Issue 37 item 1 (work in progress): an image's width and height, as displayed, on its
//! handle; an image whose header cannot be read is refused for good (422 `image_unreadable`).

use serde_json::{json, Value};

use crate::helpers::{error_code, spawn_app};

/// A JPEG whose frame header sits behind `padding` bytes of APP2 segments, with an EXIF
/// orientation `o`: `w` × `h` stored.
fn jpeg(w: u16, h: u16, o: u16, padding: usize) -> Vec<u8> {
    let segment = |marker: u8, body: &[u8]| {
        let mut s = vec![0xFF, marker];
        s.extend(
            u16::try_from(body.len() + 2)
                .expect("segment")
                .to_be_bytes(),
        );
        s.extend(body);
        s
    };
    let mut j = vec![0xFF, 0xD8];
    let mut exif = b"Exif\0\0MM\0*\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01".to_vec();
    exif.extend(o.to_be_bytes());
    exif.extend([0, 0, 0, 0, 0, 0]);
    j.extend(segment(0xE1, &exif));
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
