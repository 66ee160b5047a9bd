"""Deletion rate on LocalStack: DeleteObjects in batches of 1,000 (what the sweeper does) against
one DeleteObject per key. Usage: python bench/delete_batch.py [N] (LocalStack's venv has boto3)."""
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:4566", region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
bucket = f"bench-delete-{uuid.uuid4().hex[:8]}"
s3.create_bucket(Bucket=bucket)


def fill(prefix):
    keys = [f"{prefix}/{i:06d}" for i in range(N)]
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=b"x"), keys))
    return keys


keys = fill("one")
t = time.perf_counter()
for k in keys:
    s3.delete_object(Bucket=bucket, Key=k)
one = time.perf_counter() - t

keys = fill("batch")
t = time.perf_counter()
for i in range(0, len(keys), 1000):
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})
batch = time.perf_counter() - t

print(f'{{"keys": {N}, "one_by_one_keys_per_s": {N / one:.0f}, "batched_keys_per_s": {N / batch:.0f}, "speedup": {one / batch:.1f}}}')
