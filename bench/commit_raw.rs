//! The raw S3 sequence of one commit, driven by the Rust SDK (as the service drives it), for
//! comparison with a whole commit: HEAD, ranged GET with If-Match, HEAD of the final key,
//! CopyObject with copy-source-if-match, HEAD to verify, DeleteObject of the tmp version — the
//! six-call sequence of before, kept as the reference, each call timed on its own. Beside it,
//! interleaved in the same loop so LocalStack's drift hits both alike, the two calls a commit
//! makes now: a ranged GET and a CopyObject guarded by copy-source-if-match and If-None-Match.
//! With a server and a token, a third variant in the same loop commits through upcommit itself:
//! presign (timed on its own from this client) and the PUT outside the commit's timing, then
//! `POST /v1/files` timed from this client (reqwest,
//! one kept-alive connection: the same kind of client as the SDK's) and server-side (the growth of
//! the commit route's duration sum on `/metrics`, scraped outside the timing).
//! `cargo run --release --example commit_raw -- BUCKET [N [SERVER TOKEN]]` with
//! UPCOMMIT_S3_ENDPOINT set.

use std::time::Instant;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, MetadataDirective};

fn main() {
    let rt = if std::env::var("BENCH_MT").is_ok() {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    rt.expect("runtime").block_on(run());
}

async fn run() {
    let mut args = std::env::args().skip(1);
    let bucket = args.next().expect("bucket");
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let service = args.next().zip(args.next());
    let http = reqwest::Client::new();
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
    let mut body =
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\0\0\0\0\0\0\0\0IDAT"
            .to_vec();
    body.resize(64 * 1024, 0);
    // Per call of the six-call reference: HEAD tmp, ranged GET, HEAD final, CopyObject, verify
    // HEAD, DeleteObject; and the whole of each sequence.
    let mut calls: [Vec<f64>; 6] = Default::default();
    let mut six = Vec::new();
    let mut two = Vec::new();
    let mut two_checksum = Vec::new();
    // Each call of the two, both two-call variants: the GET and the CopyObject.
    let mut two_get = Vec::new();
    let mut two_copy = Vec::new();
    let mut client_side = Vec::new();
    let mut server_side = Vec::new();
    let mut presigns = Vec::new();
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;
    for i in 0..n {
        if let Some((base, token)) = &service {
            let (presign_ms, client_ms, server_ms) =
                service_commit(&http, base, token, &body).await;
            presigns.push(presign_ms);
            client_side.push(client_ms);
            server_side.push(server_ms);
        }
        for variant in 0..3 {
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
            if variant > 0 {
                // What a commit does now: one ranged GET (type, size, ETag, first bytes), one
                // CopyObject guarded on both sides whose answer is the verification; variant 2
                // also asks S3 for the copy's CRC64NVME, as a commit does.
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
                two_get.push(ms(start));
                let copy_start = Instant::now();
                let mut copy = client
                    .copy_object()
                    .bucket(&bucket)
                    .key(&dst)
                    .copy_source(format!("{bucket}/{src}"))
                    .copy_source_if_match(&etag)
                    .if_none_match("*")
                    .metadata_directive(MetadataDirective::Replace)
                    .metadata("upcommit-upload-id", "x")
                    .content_type("image/png");
                if variant == 2 {
                    copy = copy.checksum_algorithm(ChecksumAlgorithm::Crc64Nvme);
                }
                copy.send().await.expect("copy");
                two_copy.push(ms(copy_start));
                if variant == 1 {
                    &mut two
                } else {
                    &mut two_checksum
                }
                .push(ms(start));
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
    let p50 = |t: &[f64]| {
        let mut t = t.to_vec();
        t.sort_by(f64::total_cmp);
        t.get(t.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let reference = p50(&six);
    let service = if client_side.is_empty() {
        String::new()
    } else {
        format!(
            ", \"presign_client_ms\": {}, \"commit_client_ms\": {}, \"commit_server_ms\": {}, \"ratio_p50_client\": {:.2}, \"ratio_p50_server\": {:.2}",
            stats(presigns.clone()),
            stats(client_side.clone()),
            stats(server_side.clone()),
            p50(&client_side) / reference,
            p50(&server_side) / reference
        )
    };
    let mean = |t: &[f64]| t.iter().sum::<f64>() / t.len().max(1) as f64;
    eprintln!(
        "two-call means: GetObject {:.2} ms, CopyObject {:.2} ms",
        mean(&two_get),
        mean(&two_copy)
    );
    println!(
        "{{\"n\": {n}, \"raw_six_calls_ms\": {}, \"raw_two_calls_ms\": {}, \"ratio_p50_two_calls\": {:.2}, \"raw_two_calls_with_checksum_ms\": {}{service}, \"six_calls_each_ms\": {{{}}}}}",
        stats(six.clone()),
        stats(two.clone()),
        p50(&two) / reference,
        stats(two_checksum.clone()),
        per_call.join(", ")
    );
}

/// One commit through upcommit: presign timed from here, the upload untimed, then the commit
/// timed from here and as the server measured it. Returns (presign ms, client ms, server ms).
async fn service_commit(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    body: &[u8],
) -> (f64, f64, f64) {
    let presign_start = Instant::now();
    let presigned: serde_json::Value = http
        .post(format!("{base}/v1/uploads"))
        .bearer_auth(token)
        .json(&serde_json::json!({"profile": "image", "content_type": "image/png", "size": body.len(), "filename": "a.png"}))
        .send()
        .await
        .expect("presign")
        .json()
        .await
        .expect("presign body");
    let presign_ms = presign_start.elapsed().as_secs_f64() * 1000.0;
    let mut put = http.put(presigned["url"].as_str().expect("url"));
    for (name, value) in presigned["headers"].as_object().expect("headers") {
        if !name.eq_ignore_ascii_case("content-length") {
            put = put.header(name, value.as_str().expect("header value"));
        }
    }
    let status = put.body(body.to_vec()).send().await.expect("put").status();
    assert!(status.is_success(), "upload answered {status}");
    let key = presigned["key"].as_str().expect("key").to_owned();
    let before = commit_seconds_so_far(http, base).await;
    let start = Instant::now();
    let committed = http
        .post(format!("{base}/v1/files"))
        .bearer_auth(token)
        .json(&serde_json::json!({"key": key}))
        .send()
        .await
        .expect("commit");
    let status = committed.status();
    committed.bytes().await.expect("commit body");
    let client_ms = start.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(status, 201, "commit answered {status}");
    let server_ms = (commit_seconds_so_far(http, base).await - before) * 1000.0;
    (presign_ms, client_ms, server_ms)
}

/// The commit route's duration sum (201 answers) on the server's /metrics.
async fn commit_seconds_so_far(http: &reqwest::Client, base: &str) -> f64 {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body");
    text.lines()
        .filter(|l| {
            l.starts_with("upcommit_http_request_duration_seconds_sum{")
                && l.contains("route=\"/v1/files\"")
                && l.contains("status=\"201\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
