//! The raw S3 sequence of one commit, driven by the Rust SDK (as the service drives it), for
//! comparison with a whole commit: HEAD, ranged GET with If-Match, HEAD of the final key,
//! CopyObject with copy-source-if-match, HEAD to verify, DeleteObject of the tmp version — the
//! six-call sequence of before, kept as the reference, each call timed on its own. Beside it,
//! interleaved in the same loop so LocalStack's drift hits both alike, the two calls a commit
//! makes now: a ranged GET and a CopyObject guarded by copy-source-if-match and If-None-Match.
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
    // Per call of the six-call reference: HEAD tmp, ranged GET, HEAD final, CopyObject, verify
    // HEAD, DeleteObject; and the whole of each sequence.
    let mut calls: [Vec<f64>; 6] = Default::default();
    let mut six = Vec::new();
    let mut two = Vec::new();
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;
    for i in 0..n {
        for variant in 0..2 {
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
            let start = Instant::now();
            if variant == 1 {
                // What a commit does now: one ranged GET (type, size, ETag, first bytes), one
                // CopyObject guarded on both sides whose answer is the verification.
                let got = client
                    .get_object()
                    .bucket(&bucket)
                    .key(&src)
                    .range("bytes=0-63")
                    .send()
                    .await
                    .expect("get");
                let etag = got.e_tag().unwrap_or_default().to_owned();
                got.body.collect().await.expect("body");
                client
                    .copy_object()
                    .bucket(&bucket)
                    .key(&dst)
                    .copy_source(format!("{bucket}/{src}"))
                    .copy_source_if_match(&etag)
                    .if_none_match("*")
                    .metadata_directive(MetadataDirective::Replace)
                    .metadata("upcommit-upload-id", "x")
                    .content_type("image/png")
                    .send()
                    .await
                    .expect("copy");
                two.push(ms(start));
                continue;
            }
            let t = Instant::now();
            let head = client
                .head_object()
                .bucket(&bucket)
                .key(&src)
                .send()
                .await
                .expect("head");
            calls[0].push(ms(t));
            let etag = head.e_tag().unwrap_or_default().to_owned();
            let t = Instant::now();
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
            calls[1].push(ms(t));
            let t = Instant::now();
            let _ = client.head_object().bucket(&bucket).key(&dst).send().await;
            calls[2].push(ms(t));
            let t = Instant::now();
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
            calls[3].push(ms(t));
            let t = Instant::now();
            client
                .head_object()
                .bucket(&bucket)
                .key(&dst)
                .send()
                .await
                .expect("verify");
            calls[4].push(ms(t));
            let t = Instant::now();
            let mut del = client.delete_object().bucket(&bucket).key(&src);
            if let Some(v) = put.version_id() {
                del = del.version_id(v);
            }
            del.send().await.expect("delete");
            calls[5].push(ms(t));
            six.push(ms(start));
        }
    }
    let stats = |mut t: Vec<f64>| {
        t.sort_by(f64::total_cmp);
        let p = |q: f64| t[((t.len() as f64 * q) as usize).min(t.len() - 1)];
        format!("{{\"p50\": {:.2}, \"p99\": {:.2}}}", p(0.5), p(0.99))
    };
    let names = [
        "head_tmp",
        "ranged_get",
        "head_final",
        "copy",
        "verify_head",
        "delete_tmp",
    ];
    let per_call: Vec<String> = names
        .iter()
        .zip(calls)
        .map(|(n, t)| format!("\"{n}\": {}", stats(t)))
        .collect();
    println!(
        "{{\"n\": {n}, \"raw_six_calls_ms\": {}, \"raw_two_calls_ms\": {}, \"six_calls_each_ms\": {{{}}}}}",
        stats(six),
        stats(two),
        per_call.join(", ")
    );
}
