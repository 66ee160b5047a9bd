//! Browser POST uploads: a SigV4-signed policy document. S3 checks every condition itself, so
//! a body of any other length than the declared one, or a different key or Content-Type, is
//! refused before it is stored.

use base64::Engine;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::domain::checksum::Checksum;

use super::{amz_date, credential_scope, sign, S3Location, SigningCredentials, ALGORITHM};

#[derive(Debug, Clone)]
pub struct PostPolicyRequest<'a> {
    pub location: &'a S3Location,
    pub bucket: &'a str,
    pub key: &'a str,
    pub content_type: &'a str,
    /// The declared size: the only length the form accepts.
    pub size: u64,
    pub region: &'a str,
    pub now: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// Bound exactly by the policy: S3 refuses a body with another checksum.
    pub checksum: Option<&'a Checksum>,
}

/// The form a client posts: the URL and the fields to send before the `file` field.
#[derive(Debug, Clone, PartialEq)]
pub struct PostForm {
    pub url: String,
    pub fields: Vec<(String, String)>,
}

/// The policy document: exact key, exact Content-Type, exactly the declared size (what the
/// owner was charged for; a profile's maximum would let a form declared at 1 KB store 20 MB).
pub fn policy_document(req: &PostPolicyRequest<'_>, creds: &SigningCredentials) -> Value {
    let mut conditions = vec![
        json!({ "bucket": req.bucket }),
        json!(["eq", "$key", req.key]),
        json!(["eq", "$Content-Type", req.content_type]),
        json!(["content-length-range", req.size, req.size]),
        json!({ "x-amz-algorithm": ALGORITHM }),
        json!({ "x-amz-credential": format!("{}/{}", creds.access_key_id, credential_scope(req.now, req.region)) }),
        json!({ "x-amz-date": amz_date(req.now) }),
    ];
    if let Some(token) = &creds.session_token {
        conditions.push(json!({ "x-amz-security-token": token }));
    }
    if let Some(c) = req.checksum {
        conditions.push(json!({ "x-amz-checksum-algorithm": c.algorithm.as_str() }));
        conditions.push(json!({ c.algorithm.header(): c.value }));
    }
    json!({
        "expiration": req.expires_at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        "conditions": conditions,
    })
}

/// The signature of a base64 policy is the SigV4 signature of that base64 text.
pub fn sign_policy(
    policy_b64: &str,
    creds: &SigningCredentials,
    now: DateTime<Utc>,
    region: &str,
) -> String {
    sign(creds, now, region, policy_b64)
}

pub fn build(req: &PostPolicyRequest<'_>, creds: &SigningCredentials) -> PostForm {
    let policy =
        base64::engine::general_purpose::STANDARD.encode(policy_document(req, creds).to_string());
    let signature = sign_policy(&policy, creds, req.now, req.region);
    let mut fields = vec![
        ("key".to_owned(), req.key.to_owned()),
        ("Content-Type".to_owned(), req.content_type.to_owned()),
        ("x-amz-algorithm".to_owned(), ALGORITHM.to_owned()),
        (
            "x-amz-credential".to_owned(),
            format!(
                "{}/{}",
                creds.access_key_id,
                credential_scope(req.now, req.region)
            ),
        ),
        ("x-amz-date".to_owned(), amz_date(req.now)),
    ];
    if let Some(token) = &creds.session_token {
        fields.push(("x-amz-security-token".to_owned(), token.clone()));
    }
    if let Some(c) = req.checksum {
        fields.push((
            "x-amz-checksum-algorithm".to_owned(),
            c.algorithm.as_str().to_owned(),
        ));
        fields.push((c.algorithm.header().to_owned(), c.value.clone()));
    }
    fields.push(("policy".to_owned(), policy));
    fields.push(("x-amz-signature".to_owned(), signature));
    PostForm {
        url: req.location.post_url(),
        fields,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    use crate::signing::aws_example_credentials as example_creds;

    /// AWS's published vector, "Browser-Based Upload using HTTP POST (Using AWS Signature
    /// Version 4)": the base64 policy as the page gives it, and its stated signature.
    #[test]
    fn matches_the_aws_post_example_signature() {
        const POLICY: &str =
            "eyAiZXhwaXJhdGlvbiI6ICIyMDE1LTEyLTMwVDEyOjAwOjAwLjAwMFoiLA0KICAiY29uZGl0aW9ucyI6IFsNCiAgICB7ImJ1Y2tldCI6ICJzaWd2NGV4YW1wbGVidWNrZXQifSwNCiAgICBbInN0YXJ0cy13aXRoIiwgIiRrZXkiLCAidXNlci91c2VyMS8iXSwNCiAgICB7ImFjbCI6ICJwdWJsaWMtcmVhZCJ9LA0KICAgIHsic3VjY2Vzc19hY3Rpb25fcmVkaXJlY3QiOiAiaHR0cDovL3NpZ3Y0ZXhhbXBsZWJ1Y2tldC5zMy5hbWF6b25hd3MuY29tL3N1Y2Nlc3NmdWxfdXBsb2FkLmh0bWwifSwNCiAgICBbInN0YXJ0cy13aXRoIiwgIiRDb250ZW50LVR5cGUiLCAiaW1hZ2UvIl0sDQogICAgeyJ4LWFtei1tZXRhLXV1aWQiOiAiMTQzNjUxMjM2NTEyNzQifSwNCiAgICB7IngtYW16LXNlcnZlci1zaWRlLWVuY3J5cHRpb24iOiAiQUVTMjU2In0sDQogICAgWyJzdGFydHMtd2l0aCIsICIkeC1hbXotbWV0YS10YWciLCAiIl0sDQoNCiAgICB7IngtYW16LWNyZWRlbnRpYWwiOiAiQUtJQUlPU0ZPRE5ON0VYQU1QTEUvMjAxNTEyMjkvdXMtZWFzdC0xL3MzL2F3czRfcmVxdWVzdCJ9LA0KICAgIHsieC1hbXotYWxnb3JpdGhtIjogIkFXUzQtSE1BQy1TSEEyNTYifSwNCiAgICB7IngtYW16LWRhdGUiOiAiMjAxNTEyMjlUMDAwMDAwWiIgfQ0KICBdDQp9";
        let now = Utc
            .with_ymd_and_hms(2015, 12, 29, 0, 0, 0)
            .single()
            .expect("valid");
        assert_eq!(
            sign_policy(POLICY, &example_creds(), now, "us-east-1"),
            "8afdbf4008c03f22c2cd3cdb72e4afbb1f6a588f3255ac628749a66d7f09699e"
        );
    }

    #[test]
    fn policy_binds_exact_key_type_and_declared_size() {
        let location = S3Location::path_style("http://127.0.0.1:4566", "uploads").expect("valid");
        let now = Utc
            .with_ymd_and_hms(2026, 11, 29, 12, 0, 0)
            .single()
            .expect("valid");
        let req = PostPolicyRequest {
            location: &location,
            bucket: "uploads",
            key: "tmp/2026/11/29/abc/a.png",
            content_type: "image/png",
            size: 1000,
            region: "us-east-1",
            now,
            expires_at: now + chrono::Duration::minutes(15),
            checksum: None,
        };
        let doc = policy_document(&req, &example_creds());
        assert_eq!(doc["expiration"], "2026-11-29T12:15:00.000Z");
        let conditions = doc["conditions"].as_array().expect("array");
        assert!(conditions.contains(&json!(["eq", "$key", "tmp/2026/11/29/abc/a.png"])));
        assert!(conditions.contains(&json!(["eq", "$Content-Type", "image/png"])));
        assert!(conditions.contains(&json!(["content-length-range", 1000, 1000])));
        let form = build(&req, &example_creds());
        assert_eq!(form.url, "http://127.0.0.1:4566/uploads/");
        let field = |n: &str| {
            form.fields
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.clone())
        };
        let policy = field("policy").expect("policy field");
        assert_eq!(
            field("x-amz-signature"),
            Some(sign_policy(&policy, &example_creds(), now, "us-east-1"))
        );
        assert_eq!(
            form.fields.last().map(|(k, _)| k.as_str()),
            Some("x-amz-signature")
        );
    }
}
