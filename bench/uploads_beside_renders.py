"""Presign and commit latency with every render slot busy, beside the same on an idle server
(issue 46, item 7: renders must not take the upload path's CPU). Run by
bench/uploads_beside_renders.sh, which starts the server; this drives it over HTTP with the
standard library only. Prints one JSON line per phase."""
import json
import statistics
import sys
import threading
import time
import urllib.request

base, token, photo_path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
photo = open(photo_path, "rb").read()


def png(w, h):
    import struct
    import zlib
    raw = b"".join(b"\0" + bytes((x * 7 + y) % 256 for x in range(w * 3)) for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


small = png(16, 16)


def call(method, url, body=None, headers=None, auth=True):
    h = dict(headers or {})
    if auth:
        h["Authorization"] = f"Bearer {token}"
    data = body
    if isinstance(body, dict):
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def upload(content_type, data):
    t0 = time.perf_counter()
    s, b = call("POST", f"{base}/v1/uploads", {"profile": "image", "content_type": content_type, "size": len(data)})
    assert s == 201, (s, b)
    presign_ms = (time.perf_counter() - t0) * 1000
    p = json.loads(b)
    s, b = call("PUT", p["url"], data, {"Content-Type": content_type, "If-None-Match": "*"}, auth=False)
    assert s == 200, (s, b)
    t1 = time.perf_counter()
    s, b = call("POST", f"{base}/v1/files", {"key": p["key"]})
    assert s == 201, (s, b)
    return presign_ms, (time.perf_counter() - t1) * 1000, json.loads(b)["id"]


def pct(xs, q):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1)


def phase(name, renders=None):
    presign, commit = [], []
    for _ in range(n):
        p, c, _ = upload("image/png", small)
        presign.append(p)
        commit.append(c)
    out = {"phase": name, "uploads": n,
           "presign_ms": {"p50": pct(presign, 0.5), "p99": pct(presign, 0.99), "max": round(max(presign), 1)},
           "commit_ms": {"p50": pct(commit, 0.5), "p99": pct(commit, 0.99), "max": round(max(commit), 1)}}
    if renders is not None:
        out["renders"] = dict(renders)
    print(json.dumps(out), flush=True)
    return out


files = [upload("image/jpeg", photo)[2] for _ in range(60)]
variants = ["big1", "big2", "big3"]
phase("warm-up")
idle = phase("idle")
stop = threading.Event()
counts = {}
lock = threading.Lock()
todo = [(f, v) for v in variants for f in files]


def renderer():
    while not stop.is_set():
        with lock:
            if not todo:
                return
            f, v = todo.pop()
        s, _ = call("GET", f"{base}/v1/files/{f}/variants/{v}")
        with lock:
            counts[s] = counts.get(s, 0) + 1


threads = [threading.Thread(target=renderer) for _ in range(2)]
for t in threads:
    t.start()
time.sleep(1)
busy = phase("every render slot busy", counts)
stop.set()
for t in threads:
    t.join()
ratio = {k: round(busy[k]["p99"] / max(idle[k]["p99"], 0.1), 2) for k in ("presign_ms", "commit_ms")}
print(json.dumps({"p99_busy_over_idle": ratio, "renders_answered": counts}), flush=True)
