output "lifecycle_rules" {
  description = "The cache/ rules of infra/lifecycle-rules.json, for the environment's one lifecycle owner."
  value       = local.cache_rules
}

output "renditions_policy_json" {
  description = "IAM policy of what the service's renditions do in the bucket."
  value       = data.aws_iam_policy_document.renditions.json
}
