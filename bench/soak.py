"""Soak driver: mixed presign → upload → commit for a bounded time against a running upcommit,
sampling the server's resident memory. Usage: python bench/soak.py BASE TOKEN PID SECONDS WORKERS
Prints one JSON line: operations, status counts, 5xx count, RSS samples (MiB), and per window of
SOAK_WINDOW seconds (default 300) the p50/p99 of presign and commit as the client saw them, the
RSS and, when SOAK_STATS_CMD is set, that command's JSON (catalog rows and sizes) at the window's end."""
import json
import os
import random
import subprocess
import sys
import threading
import time

import requests

BASE, TOKEN, PID, SECONDS, WORKERS = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
H = {"Authorization": f"Bearer {TOKEN}"}
PNG = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\0\0\0\0\0\0\0\0IDAT"
stop_at = time.time() + SECONDS
lock = threading.Lock()
counts = {}
ops = [0]
WINDOW = float(os.environ.get("SOAK_WINDOW", "300"))
STATS_CMD = os.environ.get("SOAK_STATS_CMD")
started = time.time()
latencies = {}  # (window index, kind) -> [seconds]


def timed(kind, fn):
    t0 = time.perf_counter()
    r = fn()
    dt = time.perf_counter() - t0
    with lock:
        latencies.setdefault((int((time.time() - started) // WINDOW), kind), []).append(dt)
    return r


def count(kind, status):
    with lock:
        counts[f"{kind} {status}"] = counts.get(f"{kind} {status}", 0) + 1


def worker(seed):
    rnd = random.Random(seed)
    s = requests.Session()
    while time.time() < stop_at:
        size = rnd.randint(100, 64 * 1024)
        body = PNG + bytes(size - len(PNG))
        r = timed("presign", lambda: s.post(f"{BASE}/v1/uploads", headers=H, json={"profile": "image", "content_type": "image/png", "size": size, "filename": "soak.png"}))
        count("presign", r.status_code)
        if r.status_code != 201:
            continue
        p = r.json()
        put = s.put(p["url"], data=body, headers={k: v for k, v in p["headers"].items() if k.lower() != "content-length"})
        count("upload", put.status_code)
        if rnd.random() < 0.1:
            continue  # abandoned: never committed, left under tmp/ for the lifecycle rule
        c = timed("commit", lambda: s.post(f"{BASE}/v1/files", headers=H, json={"key": p["key"]}))
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
def stats():
    if not STATS_CMD:
        return None
    out = subprocess.run(STATS_CMD, shell=True, capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr.strip()[-300:]}


def pct(xs, q):
    xs = sorted(xs)
    return round(1000 * xs[min(len(xs) - 1, int(q * len(xs)))], 2) if xs else None


samples = []
windows = []
next_window = started + WINDOW
while any(t.is_alive() for t in threads):
    samples.append(round(rss_mib(), 1))
    if time.time() >= next_window:
        windows.append({"end_s": round(time.time() - started), "rss_mib": samples[-1], "catalog": stats()})
        print(json.dumps({"progress": windows[-1]}), file=sys.stderr, flush=True)
        next_window += WINDOW
    time.sleep(5)
for t in threads:
    t.join()
windows.append({"end_s": round(time.time() - started), "rss_mib": round(rss_mib(), 1), "catalog": stats()})
for i, w in enumerate(windows):
    for kind in ("presign", "commit"):
        xs = latencies.get((i, kind), [])
        w[kind] = {"n": len(xs), "p50_ms": pct(xs, 0.5), "p99_ms": pct(xs, 0.99)}
five_xx = sum(n for k, n in counts.items() if k.split()[1].startswith("5"))
print(json.dumps({"seconds": SECONDS, "workers": WORKERS, "committed_uploads": ops[0], "status_counts": counts, "5xx": five_xx, "rss_mib_samples": samples, "windows": windows}))
