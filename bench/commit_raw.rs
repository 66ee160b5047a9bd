//! The raw S3 sequence of one commit, driven by the Rust SDK (as the service drives it), for
//! comparison with a whole commit: HEAD, ranged GET with If-Match, HEAD of the final key,
//! CopyObject with copy-source-if-match, HEAD to verify, DeleteObject of the tmp version — the
//! sequence before single-use URLs, kept as the reference. Beside it, interleaved in the same
//! loop so LocalStack's drift hits all alike, the two ways of keeping a PUT URL single-use
//! after commit: the same sequence without the DeleteObject (the tmp object stays until the URL
//! expires; what the service does) and with a zero-byte tombstone PutObject in its place.
//! `cargo run --release --example commit_raw -- BUCKET [N]` with UPCOMMIT_S3_ENDPOINT set.

use std::time::Instant;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::MetadataDirective;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let bucket = args.next().expect("bucket");
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let endpoint =
        std::env::var("UPCOMMIT_S3_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:4566".into());
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .load()
        .await;
    let client = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .endpoint_url(endpoint)
            .force_path_style(true)
            .build(),
    );
    let mut body = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    body.resize(64 * 1024, 0);
    let mut times: [Vec<f64>; 3] = Default::default();
    for i in 0..n {
        for (variant, out) in times.iter_mut().enumerate() {
            let src = format!("bench-raw/{i}/{variant}/{}/a.png", std::process::id());
            let dst = format!("bench-raw-final/{i}/{variant}/{}/a.png", std::process::id());
            let put = client
                .put_object()
                .bucket(&bucket)
                .key(&src)
                .content_type("image/png")
                .body(ByteStream::from(body.clone()))
                .send()
                .await
                .expect("put");
            let t = Instant::now();
            let head = client
                .head_object()
                .bucket(&bucket)
                .key(&src)
                .send()
                .await
                .expect("head");
            let etag = head.e_tag().unwrap_or_default().to_owned();
            client
                .get_object()
                .bucket(&bucket)
                .key(&src)
                .range("bytes=0-63")
                .if_match(&etag)
                .send()
                .await
                .expect("get")
                .body
                .collect()
                .await
                .expect("body");
            let _ = client.head_object().bucket(&bucket).key(&dst).send().await;
            client
                .copy_object()
                .bucket(&bucket)
                .key(&dst)
                .copy_source(format!("{bucket}/{src}"))
                .copy_source_if_match(&etag)
                .metadata_directive(MetadataDirective::Replace)
                .metadata("upcommit-upload-id", "x")
                .content_type("image/png")
                .send()
                .await
                .expect("copy");
            client
                .head_object()
                .bucket(&bucket)
                .key(&dst)
                .send()
                .await
                .expect("verify");
            match variant {
                0 => {
                    let mut del = client.delete_object().bucket(&bucket).key(&src);
                    if let Some(v) = put.version_id() {
                        del = del.version_id(v);
                    }
                    del.send().await.expect("delete");
                }
                1 => {}
                _ => {
                    client
                        .put_object()
                        .bucket(&bucket)
                        .key(&src)
                        .body(ByteStream::from(Vec::new()))
                        .send()
                        .await
                        .expect("tombstone");
                }
            }
            out.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let [six, five, tombstone] = times.map(|mut t| {
        t.sort_by(f64::total_cmp);
        let p = |q: f64| t[((t.len() as f64 * q) as usize).min(t.len() - 1)];
        format!("{{\"p50\": {:.2}, \"p99\": {:.2}}}", p(0.5), p(0.99))
    });
    println!(
        "{{\"n\": {n}, \"raw_rust_sdk_ms\": {six}, \"five_calls_delete_deferred_ms\": {five}, \"six_calls_tombstone_ms\": {tombstone}}}"
    );
}
