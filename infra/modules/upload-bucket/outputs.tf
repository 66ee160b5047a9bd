output "bucket_id" {
  description = "The bucket's name, for the resources that configure it."
  value       = aws_s3_bucket.this.id
}

output "bucket_arn" {
  value = aws_s3_bucket.this.arn
}
