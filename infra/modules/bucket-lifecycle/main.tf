# The bucket's ONE lifecycle configuration. PutBucketLifecycleConfiguration replaces the whole
# document, so a second aws_s3_bucket_lifecycle_configuration for the same bucket (in any module)
# would silently erase these rules on its next apply. Instantiate this module once per bucket,
# from the environment, and pass every rule in as data.

resource "aws_s3_bucket_lifecycle_configuration" "this" {
  #checkov:skip=CKV_AWS_300:The abort rule is data (upcommit-abort-incomplete-multipart in infra/lifecycle-rules.json) rendered by the dynamic block, which checkov does not expand; tests/infra verifies every environment's document holds it.
  bucket = var.bucket_id

  dynamic "rule" {
    for_each = var.rules
    content {
      id     = rule.value.id
      status = "Enabled"

      filter {
        prefix = rule.value.prefix
      }

      dynamic "expiration" {
        for_each = try(rule.value.expiration_days, null) == null ? [] : [rule.value.expiration_days]
        content {
          days = expiration.value
        }
      }

      # S3 does not accept ExpiredObjectDeleteMarker beside Days: it comes in a rule of its own.
      dynamic "expiration" {
        for_each = try(rule.value.expired_object_delete_marker, false) ? [true] : []
        content {
          expired_object_delete_marker = true
        }
      }

      dynamic "noncurrent_version_expiration" {
        for_each = try(rule.value.noncurrent_expiration_days, null) == null ? [] : [rule.value.noncurrent_expiration_days]
        content {
          noncurrent_days = noncurrent_version_expiration.value
        }
      }

      dynamic "abort_incomplete_multipart_upload" {
        for_each = try(rule.value.abort_incomplete_multipart_days, null) == null ? [] : [rule.value.abort_incomplete_multipart_days]
        content {
          days_after_initiation = abort_incomplete_multipart_upload.value
        }
      }
    }
  }
}
