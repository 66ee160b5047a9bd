"""Creates the local development bucket: versioned, with the lifecycle rules from the shared
rules file. Idempotent. Used by scripts/run.sh against LocalStack only."""
import json
import sys

import boto3


def lifecycle(rules_path):
    rules = []
    for r in json.load(open(rules_path))["rules"]:
        rule = {"ID": r["id"], "Status": "Enabled", "Filter": {"Prefix": r["prefix"]}}
        if "expiration_days" in r:
            rule["Expiration"] = {"Days": r["expiration_days"]}
        if r.get("expired_object_delete_marker"):
            rule["Expiration"] = {"ExpiredObjectDeleteMarker": True}
        if "noncurrent_expiration_days" in r:
            rule["NoncurrentVersionExpiration"] = {"NoncurrentDays": r["noncurrent_expiration_days"]}
        if "abort_incomplete_multipart_days" in r:
            rule["AbortIncompleteMultipartUpload"] = {"DaysAfterInitiation": r["abort_incomplete_multipart_days"]}
        rules.append(rule)
    return {"Rules": rules}


def main():
    endpoint, bucket, rules_path = sys.argv[1:4]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    existing = [b["Name"] for b in s3.list_buckets().get("Buckets", [])]
    if bucket not in existing:
        s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration=lifecycle(rules_path))
    s3.put_bucket_cors(
        Bucket=bucket,
        CORSConfiguration={
            "CORSRules": [
                {
                    "AllowedOrigins": ["*"],
                    "AllowedMethods": ["PUT", "POST", "GET"],
                    "AllowedHeaders": ["*"],
                    "ExposeHeaders": ["ETag"],
                    "MaxAgeSeconds": 600,
                }
            ]
        },
    )
    print(f"bucket {bucket} ready: versioned, lifecycle rules applied")


if __name__ == "__main__":
    main()
