# An example of a module that needs lifecycle rules on a bucket it does not own.
#
# It used to declare its own aws_s3_bucket_lifecycle_configuration "cache" for the upload
# bucket. Applied beside the environment's lifecycle configuration, each apply replaced the
# other's whole document. Now it exports its rule as data (output lifecycle_rules) and the
# environment's one lifecycle owner writes it together with every other rule.
#
# The removed block makes terraform forget the old resource WITHOUT destroying it. Deleting the
# resource block alone would plan a destroy, and destroying a lifecycle configuration is
# DeleteBucketLifecycle: the whole document, every rule of every owner, until the environment's
# resource writes it again (or forever, if that apply fails). See docs/operations.md.
removed {
  from = aws_s3_bucket_lifecycle_configuration.cache

  lifecycle {
    destroy = false
  }
}

# What the resizer may touch: read final images, write its cache.
data "aws_iam_policy_document" "resizer" {
  statement {
    actions   = ["s3:GetObject"]
    resources = ["${var.bucket_arn}/media/images/*"]
  }
  statement {
    actions   = ["s3:PutObject", "s3:GetObject"]
    resources = ["${var.bucket_arn}/cache/*"]
  }
}
