# The upload bucket and every whole-document configuration of it except the lifecycle, which
# the environment owns through module bucket-lifecycle (it collects the rules of every module).
# Each resource below is the only writer of its document: do not declare another one for the
# same bucket anywhere (see docs/operations.md, "One owner per document").

resource "aws_s3_bucket" "this" {
  #checkov:skip=CKV_AWS_144:Cross-region replication is a per-deployment choice (cost, data residency); tmp/ objects are disposable by design.
  #checkov:skip=CKV2_AWS_62:upcommit does not consume bucket events: a commit is an API call, not an S3 notification.
  #checkov:skip=CKV2_AWS_61:The lifecycle document is owned by module bucket-lifecycle, instantiated once per environment; a second declaration here would erase its rules.
  #checkov:skip=CKV_AWS_18:Access logging is configured by aws_s3_bucket_logging below when access_log_bucket is set.
  #checkov:skip=CKV_AWS_145:SSE-S3 is the default on purpose; pass kms_key_arn for SSE-KMS (the prod example does).
  bucket = var.bucket_name
}

# Versioned: a bug or a leaked credential cannot destroy a committed asset's bytes. The
# lifecycle's noncurrent-version expiry keeps tmp/ from piling up old versions.
resource "aws_s3_bucket_versioning" "this" {
  bucket = aws_s3_bucket.this.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "this" {
  bucket = aws_s3_bucket.this.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    bucket_key_enabled = var.kms_key_arn != null
  }
}

resource "aws_s3_bucket_public_access_block" "this" {
  bucket                  = aws_s3_bucket.this.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "this" {
  bucket = aws_s3_bucket.this.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

# Browsers upload with the presigned PUT or part URL (which signs Content-Type, If-None-Match and,
# when the upload declared one, the checksum and its algorithm) or the POST form, and read the
# ETag of the answer.
resource "aws_s3_bucket_cors_configuration" "this" {
  count  = length(var.cors_allowed_origins) > 0 ? 1 : 0
  bucket = aws_s3_bucket.this.id
  cors_rule {
    allowed_methods = ["PUT", "POST", "GET"]
    allowed_origins = var.cors_allowed_origins
    allowed_headers = [
      "content-type", "if-none-match",
      "x-amz-checksum-sha256", "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme",
      "x-amz-sdk-checksum-algorithm",
    ]
    expose_headers  = ["ETag"]
    max_age_seconds = 600
  }
}

resource "aws_s3_bucket_logging" "this" {
  count         = var.access_log_bucket == null ? 0 : 1
  bucket        = aws_s3_bucket.this.id
  target_bucket = var.access_log_bucket
  target_prefix = "s3-access/${var.bucket_name}/"
}

data "aws_iam_policy_document" "tls_only" {
  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.this.arn, "${aws_s3_bucket.this.arn}/*"]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "this" {
  bucket = aws_s3_bucket.this.id
  policy = data.aws_iam_policy_document.tls_only.json
}
