//! Issue 37, a third outside review: a HEIC whose one item lists the same half megabyte of the
//! file as 65,535 extents made the commit's size check glue 32 GiB together, and the process
//! aborted on the allocation. Over HTTP now: the commit answers 422 `image_unreadable` (extents
//! that name the same bytes twice are refused before anything is read through them), and the
//! server goes on committing and rendering.

use serde_json::Value;

use crate::helpers::{spawn_app_with, Spawn};

fn spawn() -> Spawn {
    Spawn {
        config: Some(
            r#"
            [[profiles]]
            name = "image"
            content_types = ["image/heic"]
            max_size = 10000000
            final_prefix = "media/images/"

            [[profiles.variants]]
            name = "card"
            width = 32
            height = 32
            fit = "inside"
            "#
            .to_owned(),
        ),
        ..Spawn::default()
    }
}

fn bx(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut b = u32::try_from(body.len() + 8)
        .expect("box")
        .to_be_bytes()
        .to_vec();
    b.extend(kind);
    b.extend(body);
    b
}

fn full(version: u8, body: &[u8]) -> Vec<u8> {
    [&[version, 0, 0, 0][..], body].concat()
}

/// A 64 × 64 HEIC of one item (its `hvcC` libheif's own) whose `iloc` lists `extents` times
/// the file's first `length` bytes.
fn named_again_and_again(hvcc: &[u8], extents: u16, length: u32) -> Vec<u8> {
    let ftyp = bx(b"ftyp", b"heic\0\0\0\0mif1heic");
    let hdlr = bx(b"hdlr", &full(0, b"\0\0\0\0pict\0\0\0\0\0\0\0\0\0\0\0\0\0"));
    let pitm = bx(b"pitm", &full(0, &[0, 1]));
    let infe = bx(b"infe", &full(2, b"\0\x01\0\0hvc1\0"));
    let iinf = bx(b"iinf", &full(0, &[&[0, 1][..], &infe].concat()));
    let ispe = bx(b"ispe", &full(0, &[0, 0, 0, 64, 0, 0, 0, 64]));
    let ipco = bx(b"ipco", &[ispe, hvcc.to_vec()].concat());
    let ipma = bx(b"ipma", &full(0, &[0, 0, 0, 1, 0, 1, 2, 0x81, 0x82]));
    let iprp = bx(b"iprp", &[ipco, ipma].concat());
    // version 1; offsets and lengths of 4 bytes; one item: id 1, method 0, data reference 0
    let mut iloc = vec![0x44, 0x00, 0, 1, 0, 1, 0, 0, 0, 0];
    iloc.extend(extents.to_be_bytes());
    for _ in 0..extents {
        iloc.extend(0u32.to_be_bytes());
        iloc.extend(length.to_be_bytes());
    }
    let iloc = bx(b"iloc", &full(1, &iloc));
    let meta = bx(b"meta", &full(0, &[hdlr, pitm, iinf, iprp, iloc].concat()));
    [ftyp, meta, bx(b"mdat", &[0; 16])].concat()
}

#[tokio::test]
async fn a_heic_naming_its_bytes_again_and_again_is_refused_and_the_server_goes_on() {
    if !upcommit_heif::can_encode(upcommit_heif::Codec::Hevc) {
        panic!("this libheif has no HEVC encoder; the test command installs one");
    }
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let rgb: Vec<u8> = (0..64 * 64 * 3).map(|i| (i % 251) as u8).collect();
    let honest =
        upcommit_heif::encode(&rgb, 64, 64, 3, upcommit_heif::Codec::Hevc, 80).expect("encode");
    let at = honest.windows(4).position(|w| w == b"hvcC").expect("hvcC") - 4;
    let size = u32::from_be_bytes(honest[at..at + 4].try_into().expect("size")) as usize;
    let hvcc = &honest[at..at + size];

    // 65,535 × 400,000 bytes: 26 GB, from a file of half a megabyte the commit reads whole.
    let hostile = named_again_and_again(hvcc, u16::MAX, 400_000);
    assert!(hostile.len() > 400_000 && hostile.len() < 1024 * 1024);
    let p = app
        .uploaded_bytes(&alice, "image", "image/heic", hostile)
        .await;
    let r = app.commit(&alice, &p.key, None).await;
    assert_eq!(
        crate::helpers::error_code(r).await,
        (422, "image_unreadable".to_owned())
    );

    // Still serving: an honest HEIC commits with its size and renders.
    let handle: Value = app
        .commit(
            &alice,
            &app.uploaded_bytes(&alice, "image", "image/heic", honest)
                .await
                .key,
            None,
        )
        .await
        .json()
        .await
        .expect("handle");
    assert_eq!(
        handle["image"],
        serde_json::json!({"width": 64, "height": 64}),
        "{handle}"
    );
    let id = handle["id"].as_str().expect("id");
    let r = app
        .get(&format!("/v1/files/{id}/variants/card"), Some(&alice))
        .await;
    assert_eq!(r.status(), 200);
}
