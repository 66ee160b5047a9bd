"""Soak driver: mixed presign → upload → commit for a bounded time against a running upcommit,
sampling the server's resident memory. Usage: python bench/soak.py BASE TOKEN PID SECONDS WORKERS
Prints one JSON line: operations, status counts, 5xx count, RSS samples (MiB)."""
import json
import random
import sys
import threading
import time

import requests

BASE, TOKEN, PID, SECONDS, WORKERS = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
H = {"Authorization": f"Bearer {TOKEN}"}
PNG = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"
stop_at = time.time() + SECONDS
lock = threading.Lock()
counts = {}
ops = [0]


def count(kind, status):
    with lock:
        counts[f"{kind} {status}"] = counts.get(f"{kind} {status}", 0) + 1


def worker(seed):
    rnd = random.Random(seed)
    s = requests.Session()
    while time.time() < stop_at:
        size = rnd.randint(100, 64 * 1024)
        body = PNG + bytes(size - len(PNG))
        r = s.post(f"{BASE}/v1/uploads", headers=H, json={"profile": "image", "content_type": "image/png", "size": size, "filename": "soak.png"})
        count("presign", r.status_code)
        if r.status_code != 201:
            continue
        p = r.json()
        put = s.put(p["url"], data=body, headers={k: v for k, v in p["headers"].items() if k.lower() != "content-length"})
        count("upload", put.status_code)
        if rnd.random() < 0.1:
            continue  # abandoned: never committed, left under tmp/ for the lifecycle rule
        c = s.post(f"{BASE}/v1/files", headers=H, json={"key": p["key"]})
        count("commit", c.status_code)
        if rnd.random() < 0.05:  # a client retry after success
            c2 = s.post(f"{BASE}/v1/files", headers=H, json={"key": p["key"]})
            count("commit-retry", c2.status_code)
        with lock:
            ops[0] += 1


def rss_mib():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
for t in threads:
    t.start()
samples = []
while any(t.is_alive() for t in threads):
    samples.append(round(rss_mib(), 1))
    time.sleep(5)
for t in threads:
    t.join()
five_xx = sum(n for k, n in counts.items() if k.split()[1].startswith("5"))
print(json.dumps({"seconds": SECONDS, "workers": WORKERS, "committed_uploads": ops[0], "status_counts": counts, "5xx": five_xx, "rss_mib_samples": samples}))
