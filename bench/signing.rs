//! In-process cost of one presigned PUT URL (SigV4 query signature, Content-Type,
//! Content-Length and If-None-Match signed). `cargo run --release --example signing`.

use std::collections::BTreeMap;
use std::time::Instant;

use upcommit::signing::query::{presign, PresignRequest};
use upcommit::signing::{S3Location, SigningCredentials};

fn main() {
    let creds = SigningCredentials {
        access_key_id: "AKIAIOSFODNN7EXAMPLE".into(),
        secret_access_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        session_token: None,
    };
    let location = S3Location::virtual_hosted("examplebucket", "us-east-1");
    let mut headers = BTreeMap::new();
    headers.insert("content-type".to_owned(), "image/png".to_owned());
    headers.insert("content-length".to_owned(), "1024".to_owned());
    headers.insert("if-none-match".to_owned(), "*".to_owned());
    let n = 200_000u32;
    let now = chrono::Utc::now();
    let started = Instant::now();
    let mut total = 0usize;
    for i in 0..n {
        let key = format!("tmp/2026/11/30/{i:032x}/a.png");
        let url = presign(
            &PresignRequest {
                method: "PUT",
                location: &location,
                key: &key,
                headers: headers.clone(),
                query: BTreeMap::new(),
                region: "us-east-1",
                now,
                expires_secs: 900,
            },
            &creds,
        );
        total += url.len();
    }
    let per = started.elapsed().as_secs_f64() / f64::from(n);
    println!(
        "{{\"urls\": {n}, \"micros_per_url\": {:.2}, \"urls_per_second\": {:.0}, \"bytes\": {total}}}",
        per * 1e6,
        1.0 / per
    );
}
