variable "bucket_arn" {
  description = "The upload bucket the service reads sources from and writes cache/ to."
  type        = string
}

variable "source_prefixes" {
  description = "Final prefixes of the profiles that have variants (each ending with /): where renders read their sources."
  type        = list(string)
  default     = ["media/images/"]
}
