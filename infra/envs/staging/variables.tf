variable "region" {
  type    = string
  default = "eu-west-1"
}

variable "bucket_name" {
  type    = string
  default = "acme-upcommit-staging"
}

variable "cors_allowed_origins" {
  type    = list(string)
  default = ["https://staging.app.example.com"]
}
