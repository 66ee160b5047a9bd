# The renditions' module (issue 37): upcommit renders images into cache/ itself, and this module
# holds what that needs of a bucket it does not own — the cache/ lifecycle rules and the IAM
# policy of the service's renditions.
#
# It used to declare its own aws_s3_bucket_lifecycle_configuration "cache" for the upload
# bucket. Applied beside the environment's lifecycle configuration, each apply replaced the
# other's whole document. Now it exports its rules as data (output lifecycle_rules) and the
# environment's one lifecycle owner writes them together with every other rule.
#
# The rules themselves are in infra/lifecycle-rules.json (those under cache/), which the service
# compiles in: `upcommit bucket apply-lifecycle` writes the same rules, and `upcommit doctor`
# requires them while a profile has variants. The environment takes every other rule of the
# file, this module the cache/ ones, so each rule reaches the one lifecycle document once.
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

locals {
  cache_rules = [
    for r in jsondecode(file("${path.module}/../../lifecycle-rules.json")).rules : r
    if r.prefix == "cache/"
  ]
}

# What rendering touches, and nothing more: the sources are read (HEAD, ranged and whole GETs)
# under the profiles' final prefixes; under cache/ a rendition is looked up (HEAD), written
# (PUT If-None-Match: *), handed out as a presigned GET, and every version of a deleted file's
# renditions is listed and deleted (hygiene's deletion, reconcile's removal of renditions
# whose file is gone). Attach it to the service's role beside its other statements.
data "aws_iam_policy_document" "renditions" {
  statement {
    sid       = "ReadSources"
    actions   = ["s3:GetObject"]
    resources = [for p in var.source_prefixes : "${var.bucket_arn}/${p}*"]
  }
  statement {
    sid = "WriteAndDeleteRenditions"
    actions = [
      "s3:GetObject",
      "s3:PutObject",
      "s3:DeleteObject",
      "s3:DeleteObjectVersion",
    ]
    resources = ["${var.bucket_arn}/cache/*"]
  }
  statement {
    sid       = "ListRenditions"
    actions   = ["s3:ListBucket", "s3:ListBucketVersions"]
    resources = [var.bucket_arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["cache/*"]
    }
  }
}
