"""Where a commit's time goes, from the server's own /metrics on stdin: the mean commit as the
server saw it, and the mean time of the S3 and database calls made during the run (per commit).
Used by bench/commit.sh and bench/commit_stores.sh (run with the server's background jobs off)."""
import json, re, sys
sums, counts = {}, {}
for line in sys.stdin:
    m = re.match(r"(upcommit_\w+)_(sum|count)\{(.*)\} (\S+)", line)
    if m:
        (sums if m[2] == "sum" else counts)[(m[1], m[3])] = float(m[4])
def total(metric, pred=lambda labels: True):
    return sum(v for (n, l), v in sums.items() if n == metric and pred(l))
q = chr(34)
commit = [k for k in counts if k[0] == "upcommit_http_request_duration_seconds" and "route=" + q + "/v1/files" + q in k[1] and "status=" + q + "201" + q in k[1]]
n = sum(counts[k] for k in commit)
server = sum(sums[k] for k in commit)
s3 = total("upcommit_s3_request_duration_seconds", lambda l: not re.search("Bucket", l))
db = total("upcommit_db_query_duration_seconds")
def per_op(metric):
    out = {}
    for (name, labels), v in sums.items():
        op = re.search("operation=" + q + "([^" + q + "]+)", labels)
        if name == metric and op and "Bucket" not in op[1]:
            c = counts.get((name, labels), 0)
            out[op[1]] = {"calls": int(c), "mean_ms": round(v / c * 1000, 2) if c else None}
    return out
print(json.dumps({"commits": int(n), "server_ms_per_commit": round(server / n * 1000, 2),
    "s3_ms_per_commit_all_object_calls": round(s3 / n * 1000, 2),
    # The commit's own cost above its S3 calls (catalog, signing, HTTP): issue 36's < 2 ms.
    "overhead_ms_per_commit": round((server - s3) / n * 1000, 2),
    "db_ms_per_request_all_calls": round(db / n * 1000, 2),
    "s3_by_operation": per_op("upcommit_s3_request_duration_seconds"),
    "db_by_operation": per_op("upcommit_db_query_duration_seconds")}))