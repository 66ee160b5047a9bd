variable "region" {
  type    = string
  default = "eu-west-1"
}

variable "bucket_name" {
  type    = string
  default = "acme-upcommit-prod"
}

variable "cors_allowed_origins" {
  type    = list(string)
  default = ["https://app.example.com"]
}

variable "access_log_bucket" {
  description = "The account's existing access-log bucket."
  type        = string
  default     = "acme-s3-access-logs"
}
