//! Reading the live bucket's configuration (versioning, lifecycle, CORS, encryption) into the
//! domain's [`BucketView`], and converting lifecycle rules between the SDK's types and the
//! domain's [`Rule`]. A document that does not exist reads as empty, not as an error.

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::DateTimeFormat;
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, BucketVersioningStatus,
    ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter,
    NoncurrentVersionExpiration,
};
use aws_sdk_s3::Client;

use super::errors::classify;
use super::StoreError;
use crate::domain::bucket_check::{BucketView, CorsRule, ReadError, Versioning};
use crate::domain::lifecycle::Rule;

/// Reads every part of the view concurrently; each part fails on its own.
pub(super) async fn read_view(client: &Client, bucket: &str) -> BucketView {
    let (reachable, versioning, lifecycle, cors, encryption) = tokio::join!(
        async {
            client
                .head_bucket()
                .bucket(bucket)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| classify(e).to_string())
        },
        read_versioning(client, bucket),
        async {
            read_lifecycle(client, bucket)
                .await
                .map(|rules| rules.iter().map(rule_view).collect())
                .map_err(read_error)
        },
        read_cors(client, bucket),
        read_encryption(client, bucket),
    );
    BucketView {
        reachable,
        versioning,
        lifecycle,
        cors,
        encryption,
    }
}

/// The lifecycle document's rules as S3 holds them (empty when there is no document).
pub(super) async fn read_lifecycle(
    client: &Client,
    bucket: &str,
) -> Result<Vec<LifecycleRule>, StoreError> {
    match client
        .get_bucket_lifecycle_configuration()
        .bucket(bucket)
        .send()
        .await
    {
        Ok(out) => Ok(out.rules().to_vec()),
        Err(e) if has_code(&e, "NoSuchLifecycleConfiguration") => Ok(Vec::new()),
        Err(e) => Err(classify(e)),
    }
}

/// Writes the whole lifecycle document.
pub(super) async fn write_lifecycle(
    client: &Client,
    bucket: &str,
    rules: Vec<LifecycleRule>,
) -> Result<(), StoreError> {
    let doc = BucketLifecycleConfiguration::builder()
        .set_rules(Some(rules))
        .build()
        .map_err(|e| StoreError::Other(format!("lifecycle document: {e}")))?;
    client
        .put_bucket_lifecycle_configuration()
        .bucket(bucket)
        .lifecycle_configuration(doc)
        .send()
        .await
        .map_err(classify)?;
    Ok(())
}

async fn read_versioning(client: &Client, bucket: &str) -> Result<Versioning, ReadError> {
    let out = client
        .get_bucket_versioning()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| read_error(classify(e)))?;
    Ok(match out.status() {
        Some(BucketVersioningStatus::Enabled) => Versioning::Enabled,
        Some(_) => Versioning::Suspended,
        None => Versioning::Never,
    })
}

async fn read_cors(client: &Client, bucket: &str) -> Result<Vec<CorsRule>, ReadError> {
    match client.get_bucket_cors().bucket(bucket).send().await {
        Ok(out) => Ok(out
            .cors_rules()
            .iter()
            .map(|r| CorsRule {
                allowed_origins: r.allowed_origins().to_vec(),
                allowed_methods: r.allowed_methods().to_vec(),
                allowed_headers: r.allowed_headers().to_vec(),
                expose_headers: r.expose_headers().to_vec(),
            })
            .collect()),
        Err(e) if has_code(&e, "NoSuchCORSConfiguration") => Ok(Vec::new()),
        Err(e) => Err(read_error(classify(e))),
    }
}

async fn read_encryption(client: &Client, bucket: &str) -> Result<Vec<String>, ReadError> {
    match client.get_bucket_encryption().bucket(bucket).send().await {
        Ok(out) => Ok(out
            .server_side_encryption_configuration()
            .map(|c| {
                c.rules()
                    .iter()
                    .filter_map(|r| r.apply_server_side_encryption_by_default())
                    .map(|d| d.sse_algorithm().as_str().to_owned())
                    .collect()
            })
            .unwrap_or_default()),
        Err(e) if has_code(&e, "ServerSideEncryptionConfigurationNotFoundError") => Ok(Vec::new()),
        Err(e) => Err(read_error(classify(e))),
    }
}

/// Why a bucket configuration could not be read, for the fix doctor gives.
fn read_error(e: StoreError) -> ReadError {
    match e {
        StoreError::NotImplemented(what) => ReadError::NotImplemented(what),
        StoreError::Refused(what) if what.starts_with("403") => ReadError::Denied(what),
        other => ReadError::Failed(other.to_string()),
    }
}

fn has_code<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>, code: &str) -> bool {
    matches!(err, SdkError::ServiceError(se) if se.err().code() == Some(code))
}

/// The domain's view of a live rule: prefix from the filter (or the legacy top-level prefix),
/// tag and size conditions reduced to `narrowed`.
pub fn rule_view(raw: &LifecycleRule) -> Rule {
    let filter = raw.filter();
    let and = filter.and_then(LifecycleRuleFilter::and);
    #[allow(deprecated)]
    let prefix = filter
        .and_then(LifecycleRuleFilter::prefix)
        .or_else(|| and.and_then(|a| a.prefix()))
        .or_else(|| raw.prefix())
        .unwrap_or("");
    let narrowed = filter.is_some_and(|f| {
        f.tag().is_some()
            || f.object_size_greater_than().is_some()
            || f.object_size_less_than().is_some()
    }) || and.is_some_and(|a| {
        !a.tags().is_empty()
            || a.object_size_greater_than().is_some()
            || a.object_size_less_than().is_some()
    });
    let expiration = raw.expiration();
    let days = |d: Option<i32>| d.and_then(|d| u32::try_from(d).ok());
    Rule {
        id: raw.id().unwrap_or("").to_owned(),
        prefix: prefix.to_owned(),
        enabled: *raw.status() == ExpirationStatus::Enabled,
        narrowed,
        expiration_days: days(expiration.and_then(LifecycleExpiration::days)),
        expiration_date: expiration
            .and_then(LifecycleExpiration::date)
            .and_then(|d| d.fmt(DateTimeFormat::DateTime).ok()),
        expired_object_delete_marker: expiration
            .and_then(LifecycleExpiration::expired_object_delete_marker)
            .unwrap_or(false),
        noncurrent_expiration_days: days(
            raw.noncurrent_version_expiration()
                .and_then(NoncurrentVersionExpiration::noncurrent_days),
        ),
        abort_incomplete_multipart_days: days(
            raw.abort_incomplete_multipart_upload()
                .and_then(AbortIncompleteMultipartUpload::days_after_initiation),
        ),
    }
}

/// The SDK rule for one of our rules (which never carry dates or narrowing filters).
pub fn sdk_rule(rule: &Rule) -> Result<LifecycleRule, StoreError> {
    rule.validate().map_err(StoreError::Other)?;
    if rule.expiration_date.is_some() || rule.narrowed {
        return Err(StoreError::Other(format!(
            "rule {:?}: dated or filtered rules are not written by upcommit",
            rule.id
        )));
    }
    let days = |d: u32| i32::try_from(d).unwrap_or(i32::MAX);
    let mut b = LifecycleRule::builder()
        .id(&rule.id)
        .status(if rule.enabled {
            ExpirationStatus::Enabled
        } else {
            ExpirationStatus::Disabled
        })
        .filter(LifecycleRuleFilter::builder().prefix(&rule.prefix).build());
    if let Some(d) = rule.expiration_days {
        b = b.expiration(LifecycleExpiration::builder().days(days(d)).build());
    }
    if rule.expired_object_delete_marker {
        b = b.expiration(
            LifecycleExpiration::builder()
                .expired_object_delete_marker(true)
                .build(),
        );
    }
    if let Some(d) = rule.noncurrent_expiration_days {
        b = b.noncurrent_version_expiration(
            NoncurrentVersionExpiration::builder()
                .noncurrent_days(days(d))
                .build(),
        );
    }
    if let Some(d) = rule.abort_incomplete_multipart_days {
        b = b.abort_incomplete_multipart_upload(
            AbortIncompleteMultipartUpload::builder()
                .days_after_initiation(days(d))
                .build(),
        );
    }
    b.build()
        .map_err(|e| StoreError::Other(format!("rule {:?}: {e}", rule.id)))
}

/// A whole lifecycle document holding exactly `rules` (tests and the dev bucket use it).
pub fn lifecycle_configuration(rules: &[Rule]) -> Result<BucketLifecycleConfiguration, StoreError> {
    BucketLifecycleConfiguration::builder()
        .set_rules(Some(rules.iter().map(sdk_rule).collect::<Result<_, _>>()?))
        .build()
        .map_err(|e| StoreError::Other(format!("lifecycle document: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::required_rules;

    #[test]
    fn our_rules_survive_the_round_trip_through_sdk_types() {
        for rule in required_rules() {
            let raw = sdk_rule(rule).expect("converts");
            assert_eq!(&rule_view(&raw), rule);
        }
    }

    #[test]
    fn tag_and_size_filters_narrow_a_rule() {
        let raw = LifecycleRule::builder()
            .id("tagged")
            .status(ExpirationStatus::Enabled)
            .filter(
                LifecycleRuleFilter::builder()
                    .and(
                        aws_sdk_s3::types::LifecycleRuleAndOperator::builder()
                            .prefix("tmp/")
                            .object_size_greater_than(1024)
                            .build(),
                    )
                    .build(),
            )
            .expiration(LifecycleExpiration::builder().days(7).build())
            .build()
            .expect("rule");
        let view = rule_view(&raw);
        assert_eq!(view.prefix, "tmp/");
        assert!(view.narrowed);
        assert!(!view.covers("tmp/"));
    }

    #[test]
    fn dated_rules_are_never_written() {
        let mut r = Rule::new("dated", "tmp/");
        r.expiration_date = Some("2030-01-01T00:00:00Z".into());
        assert!(sdk_rule(&r).is_err());
    }
}
