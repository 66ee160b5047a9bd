output "lifecycle_rules" {
  description = "Rules this module needs in the bucket's lifecycle document, for the environment's one lifecycle owner."
  value = [
    {
      id                         = "resize-cache-expire"
      prefix                     = "cache/"
      expiration_days            = var.cache_days
      noncurrent_expiration_days = 1
    },
  ]
}

output "resizer_policy_json" {
  description = "IAM policy for the resizer's role."
  value       = data.aws_iam_policy_document.resizer.json
}
