# Staging: the upload bucket, its one lifecycle owner, and the modules that need rules in it.
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
  # The service embeds the same file, so what terraform writes and what `upcommit doctor`
  # expects cannot disagree.
  upcommit_rules = [
    for r in jsondecode(file("${path.module}/../../lifecycle-rules.json")).rules : r
    if r.prefix != "cache/"
  ]
}

module "upload_bucket" {
  source               = "../../modules/upload-bucket"
  bucket_name          = var.bucket_name
  cors_allowed_origins = var.cors_allowed_origins
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

