variable "bucket_id" {
  description = "The bucket whose whole lifecycle document this module writes."
  type        = string
}

variable "rules" {
  description = <<-EOT
    Every rule of the bucket, as data in the shape of infra/lifecycle-rules.json: objects with
    id, prefix, and any of expiration_days, noncurrent_expiration_days,
    expired_object_delete_marker, abort_incomplete_multipart_days. Modules that need rules
    export them as outputs; the environment concatenates them here.
  EOT
  type        = any

  validation {
    condition     = alltrue([for r in var.rules : can(r.id) && can(r.prefix)])
    error_message = "Every rule needs an id and a prefix."
  }

  validation {
    condition     = length(distinct([for r in var.rules : r.id])) == length(var.rules)
    error_message = "Rule ids must be unique."
  }
}
