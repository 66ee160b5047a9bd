# Production: as staging, plus SSE-KMS with a key of its own and server access logs.
# terraform init -backend-config=... && terraform apply

terraform {
  required_version = ">= 1.7"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0"
    }
  }
  backend "s3" {}
}

provider "aws" {
  region = var.region
}

locals {
  upcommit_rules = [
    for r in jsondecode(file("${path.module}/../../lifecycle-rules.json")).rules : r
    if r.prefix != "cache/"
  ]
}

resource "aws_kms_key" "uploads" {
  #checkov:skip=CKV2_AWS_64:The default key policy (account root) is intended; grants are made through IAM roles.
  description         = "upcommit uploads (${var.bucket_name})"
  enable_key_rotation = true
}

module "upload_bucket" {
  source               = "../../modules/upload-bucket"
  bucket_name          = var.bucket_name
  cors_allowed_origins = var.cors_allowed_origins
  kms_key_arn          = aws_kms_key.uploads.arn
  access_log_bucket    = var.access_log_bucket
}

module "image_resize" {
  source     = "../../modules/image-resize"
  bucket_arn = module.upload_bucket.bucket_arn
}

# The bucket's one lifecycle document: every rule of every module, as data.
module "lifecycle" {
  source    = "../../modules/bucket-lifecycle"
  bucket_id = module.upload_bucket.bucket_id
  rules     = concat(local.upcommit_rules, module.image_resize.lifecycle_rules)
}
