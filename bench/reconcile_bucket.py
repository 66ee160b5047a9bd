"""Fills a bucket on LocalStack with N objects laid out as the service lays out committed files
(media/images/<UUID v7-like id>/file.png, ids spread over 90 days), and a SQLite catalog with one
file handle per object, for bench/reconcile.sh. Run with the LocalStack venv's python (boto3).

usage: reconcile_bucket.py ENDPOINT BUCKET SQLITE_PATH N
       reconcile_bucket.py ENDPOINT BUCKET - 0 delete   (empties and deletes the bucket)
"""
import os
import random
import sqlite3
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config

endpoint, bucket, db_path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
random.seed(os.environ.get("BENCH_SEED", "16"))
run = os.environ.get("BENCH_SEED", "")
now_ms = int(time.time() * 1000)


def v7_like():
    ms = now_ms - random.randrange(90 * 86_400_000)
    return f"{ms:012x}7{random.getrandbits(76):019x}"


keys = sorted({f"media/images/{v7_like()}/file.png" for _ in range(n)})
s3 = boto3.client(
    "s3",
    endpoint_url=endpoint,
    aws_access_key_id="test",
    aws_secret_access_key="test",
    region_name="us-east-1",
    config=Config(max_pool_connections=64, retries={"max_attempts": 10}),
)
if sys.argv[5:] == ["delete"]:
    try:
        while True:
            page = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
            if not page:
                break
            s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": o["Key"]} for o in page], "Quiet": True})
        s3.delete_bucket(Bucket=bucket)
        print(f"deleted bucket {bucket}", file=sys.stderr)
    except s3.exceptions.NoSuchBucket:
        pass
    sys.exit(0)
try:
    s3.create_bucket(Bucket=bucket)
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass  # topping up a bucket filled before
started = time.time()


# BENCH_FILL_UNTIL (epoch seconds): stop putting then, and record handles for what was put.
until = float(os.environ.get("BENCH_FILL_UNTIL", "inf"))


def put(chunk):
    done = []
    for k in chunk:
        if time.time() > until:
            break
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
        done.append(k)
    return done


chunks = [keys[i : i + 500] for i in range(0, len(keys), 500)]
put_keys = []
with ThreadPoolExecutor(32) as pool:
    for i, done in enumerate(pool.map(put, chunks)):
        put_keys.extend(done)
        if i % 20 == 0:
            print(f"{len(put_keys)} objects after {time.time() - started:.0f} s", file=sys.stderr, flush=True)
keys = put_keys
print(f"{len(keys)} objects in {time.time() - started:.0f} s", file=sys.stderr)

db = sqlite3.connect(db_path)
db.executemany(
    "INSERT INTO file_handles (id, upload_id, key, size, content_type, etag, profile, created_by, created_at) "
    "VALUES (?, ?, ?, 1, 'image/png', 'e', 'image', 'bench', '2026-12-01T00:00:00+00:00')",
    ((f"f{run}{i}", f"u{run}{i}", k) for i, k in enumerate(keys)),
)
db.commit()
print(f"{len(keys)} handles in {db_path}", file=sys.stderr)
