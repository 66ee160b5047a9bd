//! The commit's two S3 calls through upcommit's own `S3Store` (its client configuration, timing
//! interceptor and spans), outside the server: a ranged GET and the guarded CopyObject, mean ms
//! of each. Set against `commit_raw`'s bare-SDK means on the same LocalStack, it tells whether a
//! gap between the server's `/metrics` and the bare calls comes from the store or from the
//! server around it (BENCHMARKS.md). `BENCH_MT=1` runs it on a two-worker runtime like the
//! server's. `cargo run --release --example store_calls -- BUCKET [N]` with UPCOMMIT_S3_ENDPOINT.
use aws_sdk_s3::primitives::ByteStream;
use std::time::Instant;
use upcommit::config::S3Settings;
use upcommit::domain::checksum::ChecksumAlgorithm;
use upcommit::domain::keys::FinalKey;
use upcommit::storage::{CopySource, ObjectStore, PromoteRequest, S3Store};

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
    rt.expect("rt").block_on(run());
}

async fn run() {
    let mut args = std::env::args().skip(1);
    let bucket = args.next().expect("bucket");
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let endpoint = std::env::var("UPCOMMIT_S3_ENDPOINT").expect("UPCOMMIT_S3_ENDPOINT");
    let settings = S3Settings {
        bucket: bucket.clone(),
        endpoint: Some(endpoint.clone()),
        region: "us-east-1".into(),
        cors_origins: vec![],
        accept_gaps: Default::default(),
    };
    let metrics = std::sync::Arc::new(upcommit::metrics::Metrics::new());
    let store = S3Store::connect_observed(&settings, metrics)
        .await
        .expect("store");
    let client = store.client().clone();
    let mut body =
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\0\0\0\0\0\0\0\0IDAT"
            .to_vec();
    body.resize(64 * 1024, 0);
    let (mut g, mut c) = (Vec::new(), Vec::new());
    for i in 0..n {
        let src = format!("tmp/2026/12/01/{i}-{}/a.png", std::process::id());
        let dst = FinalKey::from_trusted(format!("media/x/{i}-{}/a.png", std::process::id()));
        client
            .put_object()
            .bucket(&bucket)
            .key(&src)
            .content_type("image/png")
            .body(ByteStream::from(body.clone()))
            .send()
            .await
            .expect("call");
        let t = Instant::now();
        let s = store.sniff(&src, 64).await.expect("get").expect("object");
        g.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        store
            .promote(&PromoteRequest {
                src: CopySource::of(&src, &s.head),
                dst: &dst,
                upload_id: "x",
                content_type: "image/png",
                checksum: ChecksumAlgorithm::Crc64Nvme,
                legacy_guard: false,
            })
            .await
            .expect("call");
        c.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let mean = |t: &[f64]| t.iter().sum::<f64>() / t.len() as f64;
    println!("store: GET {:.2} COPY {:.2}", mean(&g), mean(&c));
}
