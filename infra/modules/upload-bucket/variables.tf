variable "bucket_name" {
  description = "Name of the upload bucket."
  type        = string
}

variable "cors_allowed_origins" {
  description = "Browser origins that upload straight to the bucket (presigned PUT and POST). The same list goes to the service as UPCOMMIT_CORS_ORIGINS, so `upcommit doctor` checks it."
  type        = list(string)
  default     = []
}

variable "kms_key_arn" {
  description = "KMS key for default encryption; null keeps SSE-S3 (AES256)."
  type        = string
  default     = null
}

variable "access_log_bucket" {
  description = "Bucket that receives server access logs; null turns access logging off."
  type        = string
  default     = null
}
