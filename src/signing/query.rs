//! Presigned URLs (SigV4 query authentication) with a chosen set of signed headers.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use super::{
    amz_date, credential_scope, sign, uri_encode_into, S3Location, SigningCredentials, ALGORITHM,
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
///
/// Written into one buffer per part (no map clones, no string per pair, the canonical request
/// hashed as it is produced): signing was the largest single cost of a presign in the profile
/// (BENCHMARKS.md, 2026-12-01). [`presign_reference`] in the tests is the plain form it must
/// equal.
pub fn presign(req: &PresignRequest<'_>, creds: &SigningCredentials) -> String {
    // `host` joins the signed headers in name order (a caller's own `host` is replaced, as a
    // map insert would).
    let mut headers: Vec<(&str, &str)> = Vec::with_capacity(req.headers.len() + 1);
    let mut host_placed = false;
    for (k, v) in &req.headers {
        match k.as_str().cmp("host") {
            std::cmp::Ordering::Less => headers.push((k, v)),
            std::cmp::Ordering::Equal => {}
            std::cmp::Ordering::Greater => {
                if !host_placed {
                    headers.push(("host", &req.location.host));
                    host_placed = true;
                }
                headers.push((k, v));
            }
        }
    }
    if !host_placed {
        headers.push(("host", &req.location.host));
    }
    let mut signed_headers = String::with_capacity(64);
    for (i, (k, _)) in headers.iter().enumerate() {
        if i > 0 {
            signed_headers.push(';');
        }
        signed_headers.push_str(k);
    }

    let date = amz_date(req.now);
    let scope = credential_scope(req.now, req.region);
    let credential = format!("{}/{scope}", creds.access_key_id);
    let expires = req.expires_secs.to_string();
    let mut amz: Vec<(&str, &str)> = vec![
        ("X-Amz-Algorithm", ALGORITHM),
        ("X-Amz-Credential", &credential),
        ("X-Amz-Date", &date),
        ("X-Amz-Expires", &expires),
        ("X-Amz-SignedHeaders", &signed_headers),
    ];
    if let Some(token) = &creds.session_token {
        amz.push(("X-Amz-Security-Token", token));
    }
    // The caller's parameters and ours in one name order; ours win a clash, as map inserts
    // made after the caller's did. BTreeMap orders by the raw name; SigV4 orders by the encoded
    // name. Our names are all unreserved characters, so both orders agree.
    let mut query: Vec<(&str, &str)> = req
        .query
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .filter(|(k, _)| !amz.iter().any(|(a, _)| a == k))
        .collect();
    query.extend(amz);
    query.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut canonical_query = String::with_capacity(256);
    for (i, (k, v)) in query.iter().enumerate() {
        if i > 0 {
            canonical_query.push('&');
        }
        uri_encode_into(&mut canonical_query, k, false);
        canonical_query.push('=');
        uri_encode_into(&mut canonical_query, v, false);
    }

    let mut path = String::with_capacity(req.location.path_prefix.len() + req.key.len() + 16);
    path.push_str(&req.location.path_prefix);
    path.push('/');
    uri_encode_into(&mut path, req.key, true);

    let mut canonical_request = Sha256::new();
    for part in [req.method, "\n", &path, "\n", &canonical_query, "\n"] {
        canonical_request.update(part.as_bytes());
    }
    for (k, v) in &headers {
        for part in [k, ":", v.trim(), "\n"] {
            canonical_request.update(part.as_bytes());
        }
    }
    for part in ["\n", &signed_headers, "\nUNSIGNED-PAYLOAD"] {
        canonical_request.update(part.as_bytes());
    }
    let string_to_sign = format!(
        "{ALGORITHM}\n{date}\n{scope}\n{}",
        hex::encode(canonical_request.finalize())
    );
    let signature = sign(creds, req.now, req.region, &string_to_sign);

    let mut url = String::with_capacity(
        req.location.scheme.len()
            + req.location.host.len()
            + path.len()
            + canonical_query.len()
            + signature.len()
            + 24,
    );
    for part in [
        req.location.scheme.as_str(),
        "://",
        &req.location.host,
        &path,
        "?",
        &canonical_query,
        "&X-Amz-Signature=",
        &signature,
    ] {
        url.push_str(part);
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    use crate::signing::aws_example_credentials as example_creds;
    use crate::signing::uri_encode;

    /// The plain form of [`presign`] (maps and one string per part), as it was before the
    /// single-buffer rewrite: the fast form must produce exactly this.
    fn presign_reference(req: &PresignRequest<'_>, creds: &SigningCredentials) -> String {
        let mut headers = req.headers.clone();
        headers.insert("host".into(), req.location.host.clone());
        let signed_headers = headers.keys().cloned().collect::<Vec<_>>().join(";");
        let mut query = req.query.clone();
        query.insert("X-Amz-Algorithm".into(), ALGORITHM.into());
        query.insert(
            "X-Amz-Credential".into(),
            format!(
                "{}/{}/{}/s3/aws4_request",
                creds.access_key_id,
                req.now.format("%Y%m%d"),
                req.region
            ),
        );
        let date = req.now.format("%Y%m%dT%H%M%SZ").to_string();
        query.insert("X-Amz-Date".into(), date.clone());
        query.insert("X-Amz-Expires".into(), req.expires_secs.to_string());
        query.insert("X-Amz-SignedHeaders".into(), signed_headers.clone());
        if let Some(token) = &creds.session_token {
            query.insert("X-Amz-Security-Token".into(), token.clone());
        }
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
            "{ALGORITHM}\n{date}\n{}/{}/s3/aws4_request\n{}",
            req.now.format("%Y%m%d"),
            req.region,
            hex::encode(Sha256::digest(canonical_request.as_bytes()))
        );
        let signature = sign(creds, req.now, req.region, &string_to_sign);
        format!(
            "{}://{}{path}?{canonical_query}&X-Amz-Signature={signature}",
            req.location.scheme, req.location.host
        )
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any key, header set (a caller's `host` included), extra query (names that sort
        /// before, between and after ours, and ones that clash with ours), session token and
        /// time: the fast form signs exactly what the plain form signs.
        #[test]
        fn the_single_buffer_form_equals_the_plain_form(
            key in "[a-zA-Z0-9/ ._~%+-]{0,40}|\\PC{0,20}",
            headers in prop::collection::btree_map(
                "host|content-length|content-type|if-none-match|a|zz|x-amz-meta-[a-z]{1,5}",
                "[ -~]{0,12}",
                0..5,
            ),
            query in prop::collection::btree_map(
                "X-Amz-Date|X-Amz-Expires|X-Amz-Security-Token|A|X-Amz-B|Y|response-[a-z-]{1,20}",
                "\\PC{0,16}",
                0..4,
            ),
            token in prop::option::of("[A-Za-z0-9/+=]{1,30}"),
            secs in 0_i64..4_102_444_799,
            expires_secs in 1_u64..700_000,
            path_style in any::<bool>(),
        ) {
            let location = if path_style {
                S3Location::path_style("http://127.0.0.1:4566", "b-1").expect("valid")
            } else {
                S3Location::virtual_hosted("examplebucket", "eu-west-1")
            };
            let mut creds = example_creds();
            creds.session_token = token;
            let req = PresignRequest {
                method: "PUT",
                location: &location,
                key: &key,
                headers,
                query,
                region: "eu-west-1",
                now: Utc.timestamp_opt(secs, 0).single().expect("valid"),
                expires_secs,
            };
            prop_assert_eq!(presign(&req, &creds), presign_reference(&req, &creds));
        }
    }

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
