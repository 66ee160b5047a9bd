variable "bucket_id" {
  description = "The upload bucket the resizer reads media/ from and writes cache/ to."
  type        = string
}

variable "bucket_arn" {
  type = string
}

variable "cache_days" {
  description = "Days a resized rendition stays in cache/ before it is rebuilt on demand."
  type        = number
  default     = 30
}
