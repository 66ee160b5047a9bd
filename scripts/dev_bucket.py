"""Creates the local development bucket as infra/modules/upload-bucket configures a real one:
versioned, default encryption, CORS for browser uploads. Idempotent. Used by scripts/run.sh
against LocalStack only. The lifecycle document has one owner, and here that owner is
`upcommit bucket apply-lifecycle --yes`, which run.sh calls next."""
import sys

import boto3


def main():
    endpoint, bucket, origins = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    existing = [b["Name"] for b in s3.list_buckets().get("Buckets", [])]
    if bucket not in existing:
        s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_encryption(
        Bucket=bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )
    s3.put_bucket_cors(
        Bucket=bucket,
        CORSConfiguration={
            "CORSRules": [
                {
                    "AllowedOrigins": origins,
                    "AllowedMethods": ["PUT", "POST", "GET"],
                    "AllowedHeaders": ["*"],
                    "ExposeHeaders": ["ETag"],
                    "MaxAgeSeconds": 600,
                }
            ]
        },
    )
    print(f"bucket {bucket} ready: versioned, encrypted, CORS for {', '.join(origins)}")


if __name__ == "__main__":
    main()
