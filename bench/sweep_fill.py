"""Fills a bucket with one day of abandoned tmp uploads for the sweep benchmark: N objects (1 byte
each) under tmp/2026/11/01/<id>/f.png, none recorded in any catalog. Creates the bucket (versioned,
as production is) unless it exists. Usage: python bench/sweep_fill.py BUCKET N
(LocalStack's venv has boto3: ~/.cache/upcommit/localstack-4.14.0-venv/bin/python)."""
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config

bucket, n = sys.argv[1], int(sys.argv[2])
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:4566", region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test",
                  config=Config(max_pool_connections=32))
try:
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass

keys = [f"tmp/2026/11/01/{uuid.uuid4().hex[:26]}/f.png" for _ in range(n)]
t = time.perf_counter()
with ThreadPoolExecutor(32) as ex:
    list(ex.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=b"x"), keys))
took = time.perf_counter() - t
print(f'{{"bucket": "{bucket}", "objects": {n}, "seconds": {took:.1f}, "per_s": {n / took:.0f}}}')
