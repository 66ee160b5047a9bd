//! Filenames in any script: the key holds an ASCII slug that keeps the extension, the upload and
//! the handle keep the name as written, and the download (S3's own answer to the presigned GET)
//! carries it as RFC 6266 `filename*=UTF-8''…`.

use percent_encoding::percent_decode_str;
use serde_json::{json, Value};

use crate::helpers::{media, spawn_app, Presigned};

/// (name as sent, name as kept, the key's last segment).
const NAMES: [(&str, &str, &str); 6] = [
    ("फोटो.jpg", "फोटो.jpg", "file.jpg"),
    ("写真.jpg", "写真.jpg", "file.jpg"),
    ("🎉 party 😀.jpg", "🎉 party 😀.jpg", "party.jpg"),
    // Arabic with a right-to-left mark, which is dropped from the kept name.
    ("\u{200F}صورة العائلة.jpg", "صورة العائلة.jpg", "file.jpg"),
    // Decomposed é (e + U+0301) is kept in NFC.
    ("cafe\u{301}.jpg", "caf\u{e9}.jpg", "cafe.jpg"),
    (".jpg", ".jpg", "file.jpg"),
];

fn disposition_name(header: &str) -> (String, String) {
    let ascii = header
        .split("filename=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("ASCII filename")
        .to_owned();
    let ext = header
        .split("filename*=UTF-8''")
        .nth(1)
        .expect("extended filename")
        .split(';')
        .next()
        .expect("value");
    let decoded = percent_decode_str(ext)
        .decode_utf8()
        .expect("UTF-8")
        .into_owned();
    (ascii, decoded)
}

#[tokio::test]
async fn names_in_any_script_keep_their_extension_in_the_key_and_download_under_their_own_name() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    for (sent, kept, slug) in NAMES {
        let resp = app
            .presign(
                &alice,
                json!({"profile": "image", "content_type": "image/jpeg", "size": 600, "filename": sent, "method": "PUT"}),
            )
            .await;
        assert_eq!(resp.status(), 201, "{sent:?}");
        let p: Presigned = resp.json().await.expect("presign");
        assert!(
            p.key.ends_with(&format!("/{}/{slug}", p.upload_id)),
            "{sent:?} -> {}",
            p.key
        );
        assert!(app
            .upload(&p, media("image/jpeg", 600), "image/jpeg")
            .await
            .is_success());

        let resp = app.commit(&alice, &p.key, None).await;
        assert_eq!(resp.status(), 201, "{sent:?}");
        let h: Value = resp.json().await.expect("handle");
        assert_eq!(
            h["key"],
            format!("media/images/{}/{slug}", p.upload_id).as_str()
        );
        assert_eq!(h["original_filename"], kept, "{sent:?}");
        let id = h["id"].as_str().expect("id").to_owned();

        // Stored on both rows.
        let sql = |table: &str, col: &str, v: &str| {
            format!("SELECT original_filename FROM {table} WHERE {col} = '{v}'")
        };
        assert_eq!(
            app.db.strings(&sql("uploads", "id", &p.upload_id)).await,
            vec![kept]
        );
        assert_eq!(
            app.db.strings(&sql("file_handles", "id", &id)).await,
            vec![kept]
        );
        let read: Value = app
            .get(&format!("/v1/files/{id}"), Some(&alice))
            .await
            .json()
            .await
            .expect("handle");
        assert_eq!(read["original_filename"], kept);

        // The redirect's presigned GET makes S3 answer with both forms of the name.
        let (_, download) = app.download(&id, &alice).await;
        assert_eq!(download.status(), 200, "{sent:?}");
        let header = download.headers()["content-disposition"]
            .to_str()
            .expect("an ASCII header")
            .to_owned();
        assert!(header.starts_with("attachment;"), "{header}");
        assert_eq!(
            disposition_name(&header),
            (slug.to_owned(), kept.to_owned()),
            "{header}"
        );
        assert_eq!(
            download.bytes().await.expect("bytes").to_vec(),
            media("image/jpeg", 600)
        );
    }
}

#[tokio::test]
async fn a_file_without_a_name_downloads_under_its_key_name_only() {
    let app = spawn_app().await;
    let alice = app.token("alice");
    let resp = app
        .presign(
            &alice,
            json!({"profile": "image", "content_type": "image/png", "size": 300, "method": "PUT"}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let p: Presigned = resp.json().await.expect("presign");
    assert!(app
        .upload(&p, media("image/png", 300), "image/png")
        .await
        .is_success());
    let h: Value = app
        .commit(&alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    assert!(h.get("original_filename").is_none(), "{h}");
    let id = h["id"].as_str().expect("id");
    let (_, download) = app.download(id, &alice).await;
    assert_eq!(
        download.headers()["content-disposition"].to_str().ok(),
        Some("attachment; filename=\"file\"")
    );
}
