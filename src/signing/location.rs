//! Where the bucket is reached: path-style on a custom endpoint (LocalStack, MinIO), or
//! virtual-hosted on AWS.

use super::uri_encode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    /// `http` or `https`.
    pub scheme: String,
    /// The Host header value, with the port when it is not the default.
    pub host: String,
    /// `/bucket` for path-style addressing, empty for virtual-hosted.
    pub path_prefix: String,
}

impl S3Location {
    /// Path-style on a custom endpoint such as `http://127.0.0.1:4566`.
    pub fn path_style(endpoint: &str, bucket: &str) -> Option<Self> {
        let (scheme, rest) = endpoint.split_once("://")?;
        let host = rest.trim_end_matches('/');
        if host.is_empty() || host.contains('/') || !(scheme == "http" || scheme == "https") {
            return None;
        }
        Some(Self {
            scheme: scheme.into(),
            host: host.into(),
            path_prefix: format!("/{}", uri_encode(bucket, false)),
        })
    }

    /// AWS virtual-hosted style: `https://bucket.s3.region.amazonaws.com`.
    pub fn virtual_hosted(bucket: &str, region: &str) -> Self {
        Self {
            scheme: "https".into(),
            host: format!("{bucket}.s3.{region}.amazonaws.com"),
            path_prefix: String::new(),
        }
    }

    /// The canonical (already encoded) path of an object.
    pub fn object_path(&self, key: &str) -> String {
        format!("{}/{}", self.path_prefix, uri_encode(key, true))
    }

    /// The URL a browser POST form is sent to.
    pub fn post_url(&self) -> String {
        format!("{}://{}{}/", self.scheme, self.host, self.path_prefix)
    }

    pub fn origin(&self) -> String {
        format!("{}://{}", self.scheme, self.host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_style_keeps_port_and_bucket_in_path() {
        let l = S3Location::path_style("http://127.0.0.1:4566/", "my-bucket").expect("valid");
        assert_eq!(l.host, "127.0.0.1:4566");
        assert_eq!(l.object_path("tmp/a b.png"), "/my-bucket/tmp/a%20b.png");
        assert_eq!(l.post_url(), "http://127.0.0.1:4566/my-bucket/");
        assert!(S3Location::path_style("127.0.0.1:4566", "b").is_none());
        assert!(S3Location::path_style("ftp://h", "b").is_none());
    }

    #[test]
    fn virtual_hosted_puts_bucket_in_host() {
        let l = S3Location::virtual_hosted("examplebucket", "eu-west-1");
        assert_eq!(l.host, "examplebucket.s3.eu-west-1.amazonaws.com");
        assert_eq!(l.object_path("test.txt"), "/test.txt");
    }
}
