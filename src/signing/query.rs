//! Presigned URLs (SigV4 query authentication) with a chosen set of signed headers.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use super::{
    amz_date, credential_scope, sign, uri_encode, S3Location, SigningCredentials, ALGORITHM,
};

/// One request to presign.
#[derive(Debug, Clone)]
pub struct PresignRequest<'a> {
    pub method: &'a str,
    pub location: &'a S3Location,
    pub key: &'a str,
    /// Headers the client must send exactly, besides `host` (names lowercase).
    pub headers: BTreeMap<String, String>,
    /// Extra query parameters that become part of the signature (e.g. `response-content-disposition`).
    pub query: BTreeMap<String, String>,
    pub region: &'a str,
    pub now: DateTime<Utc>,
    pub expires_secs: u64,
}

/// Builds the presigned URL. The payload is `UNSIGNED-PAYLOAD`: the signed Content-Length is
/// what binds the size.
pub fn presign(req: &PresignRequest<'_>, creds: &SigningCredentials) -> String {
    let mut headers = req.headers.clone();
    headers.insert("host".into(), req.location.host.clone());
    let signed_headers = headers.keys().cloned().collect::<Vec<_>>().join(";");

    let mut query = req.query.clone();
    query.insert("X-Amz-Algorithm".into(), ALGORITHM.into());
    query.insert(
        "X-Amz-Credential".into(),
        format!(
            "{}/{}",
            creds.access_key_id,
            credential_scope(req.now, req.region)
        ),
    );
    query.insert("X-Amz-Date".into(), amz_date(req.now));
    query.insert("X-Amz-Expires".into(), req.expires_secs.to_string());
    query.insert("X-Amz-SignedHeaders".into(), signed_headers.clone());
    if let Some(token) = &creds.session_token {
        query.insert("X-Amz-Security-Token".into(), token.clone());
    }
    // BTreeMap orders by the raw name; SigV4 orders by the encoded name. Our names are all
    // unreserved characters, so both orders agree.
    let canonical_query = query
        .iter()
        .map(|(k, v)| format!("{}={}", uri_encode(k, false), uri_encode(v, false)))
        .collect::<Vec<_>>()
        .join("&");
    let canonical_headers: String = headers
        .iter()
        .map(|(k, v)| format!("{k}:{}\n", v.trim()))
        .collect();
    let path = req.location.object_path(req.key);
    let canonical_request = format!(
        "{}\n{path}\n{canonical_query}\n{canonical_headers}\n{signed_headers}\nUNSIGNED-PAYLOAD",
        req.method
    );
    let string_to_sign = format!(
        "{ALGORITHM}\n{}\n{}\n{}",
        amz_date(req.now),
        credential_scope(req.now, req.region),
        hex::encode(Sha256::digest(canonical_request.as_bytes()))
    );
    let signature = sign(creds, req.now, req.region, &string_to_sign);
    format!(
        "{}://{}{path}?{canonical_query}&X-Amz-Signature={signature}",
        req.location.scheme, req.location.host
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    use crate::signing::aws_example_credentials as example_creds;

    /// AWS's published example, "Authenticating Requests: Using Query Parameters".
    #[test]
    fn matches_the_aws_documentation_example() {
        let location = S3Location::virtual_hosted("examplebucket", "us-east-1");
        let location = S3Location {
            host: "examplebucket.s3.amazonaws.com".into(),
            ..location
        };
        let req = PresignRequest {
            method: "GET",
            location: &location,
            key: "test.txt",
            headers: BTreeMap::new(),
            query: BTreeMap::new(),
            region: "us-east-1",
            now: Utc
                .with_ymd_and_hms(2013, 5, 24, 0, 0, 0)
                .single()
                .expect("valid"),
            expires_secs: 86_400,
        };
        let url = presign(&req, &example_creds());
        assert_eq!(
            url,
            "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256\
             &X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request\
             &X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host\
             &X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        );
    }

    #[test]
    fn extra_headers_are_signed_and_listed() {
        let location = S3Location::path_style("http://127.0.0.1:4566", "b").expect("valid");
        let mut headers = BTreeMap::new();
        headers.insert("content-length".into(), "42".into());
        headers.insert("content-type".into(), "image/png".into());
        headers.insert("if-none-match".into(), "*".into());
        let req = PresignRequest {
            method: "PUT",
            location: &location,
            key: "tmp/2026/11/29/id/a.png",
            headers,
            query: BTreeMap::new(),
            region: "us-east-1",
            now: Utc
                .with_ymd_and_hms(2026, 11, 29, 12, 0, 0)
                .single()
                .expect("valid"),
            expires_secs: 900,
        };
        let a = presign(&req, &example_creds());
        assert!(a.starts_with("http://127.0.0.1:4566/b/tmp/2026/11/29/id/a.png?"));
        assert!(
            a.contains("X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost%3Bif-none-match")
        );
        let mut other = req.clone();
        other.headers.insert("content-length".into(), "43".into());
        assert_ne!(
            a,
            presign(&other, &example_creds()),
            "the length is part of the signature"
        );
    }
}
