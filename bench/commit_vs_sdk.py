"""Commit latency against the raw S3 sequence it performs, on the same LocalStack in one run.
Usage: python bench/commit_vs_sdk.py BASE TOKEN BUCKET [N]. The raw sequence is what a commit
did to S3 before single-use URLs: HEAD, ranged GET (If-Match), HEAD of the final key, CopyObject
(copy-source-if-match), HEAD to verify, DeleteObject of the tmp version (kept as the reference;
a commit now makes two: a ranged GET and a CopyObject guarded by copy-source-if-match and
If-None-Match). The server-side time of each commit is read from the server's own /metrics: the
growth of the commit route's duration sum across that one request (scraped outside the timing)."""
import os
import re
import json
import statistics
import sys
import time
import uuid

import boto3
import requests

BASE, TOKEN, BUCKET = sys.argv[1], sys.argv[2], sys.argv[3]
N = int(sys.argv[4]) if len(sys.argv) > 4 else 100
H = {"Authorization": f"Bearer {TOKEN}"}
s3 = boto3.client("s3", endpoint_url=os.environ.get("UPCOMMIT_S3_ENDPOINT", "http://127.0.0.1:4566"), region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
body = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\0\0\0\0\0\0\0\0IDAT" + bytes(64 * 1024 - 41)
http = requests.Session()


SUM = re.compile(r'^upcommit_http_request_duration_seconds_sum\{[^}]*route="/v1/files"[^}]*status="201"[^}]*\} (\S+)$', re.M)


def commit_seconds_so_far():
    return sum(float(v) for v in SUM.findall(http.get(f"{BASE}/metrics").text))


def pct(xs, p):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * p))] * 1000, 2)


raw, ours, server = [], [], []
for _ in range(N):
    src, dst = f"bench/{uuid.uuid4().hex}/a.png", f"bench-final/{uuid.uuid4().hex}/a.png"
    put = s3.put_object(Bucket=BUCKET, Key=src, Body=body, ContentType="image/png")
    t = time.perf_counter()
    h = s3.head_object(Bucket=BUCKET, Key=src)
    s3.get_object(Bucket=BUCKET, Key=src, Range="bytes=0-63", IfMatch=h["ETag"])["Body"].read()
    try:
        s3.head_object(Bucket=BUCKET, Key=dst)
    except s3.exceptions.ClientError:
        pass
    s3.copy_object(Bucket=BUCKET, Key=dst, CopySource={"Bucket": BUCKET, "Key": src}, CopySourceIfMatch=h["ETag"],
                   MetadataDirective="REPLACE", ContentType="image/png", Metadata={"upcommit-upload-id": "x"})
    s3.head_object(Bucket=BUCKET, Key=dst)
    s3.delete_object(Bucket=BUCKET, Key=src, VersionId=put.get("VersionId", "null"))
    raw.append(time.perf_counter() - t)

    p = http.post(f"{BASE}/v1/uploads", headers=H, json={"profile": "image", "content_type": "image/png", "size": len(body), "filename": "a.png"}).json()
    http.put(p["url"], data=body, headers={k: v for k, v in p["headers"].items() if k.lower() != "content-length"})
    before = commit_seconds_so_far()
    t = time.perf_counter()
    r = http.post(f"{BASE}/v1/files", headers=H, json={"key": p["key"]})
    ours.append(time.perf_counter() - t)
    assert r.status_code == 201, r.text
    server.append(commit_seconds_so_far() - before)

print(json.dumps({
    "n": N,
    "raw_sdk_ms": {"p50": pct(raw, 0.5), "p99": pct(raw, 0.99), "mean": round(statistics.mean(raw) * 1000, 2)},
    "commit_ms": {"p50": pct(ours, 0.5), "p99": pct(ours, 0.99), "mean": round(statistics.mean(ours) * 1000, 2)},
    "commit_server_side_ms": {"p50": pct(server, 0.5), "p99": pct(server, 0.99), "mean": round(statistics.mean(server) * 1000, 2)},
    "ratio_p50": round(pct(ours, 0.5) / pct(raw, 0.5), 2),
}))
