"""Driver of bench/render_memory.sh and bench/rendition_urls.sh (issue 37): makes the JPEGs,
commits them through the API, fires concurrent rendition requests and reads the server's
memory from /proc. Standard library and Pillow only (the Pillow venv of the scripts).

  render_memory.py make DIR                        four 8660 x 5774 photo-like JPEGs, about
                                                   10 MB each: baseline-{a,b}.jpg (quality 90)
                                                   and progressive-{a,b}.jpg (quality 90,
                                                   progressive); prints one JSON line per file
  render_memory.py small DIR                       one 2400 x 1600 baseline JPEG (small.jpg)
  render_memory.py commit BASE PROFILE FILE...     presign, PUT with exactly the returned
                                                   headers, commit; prints {"FILE": "id", ...}
  render_memory.py render BASE PID ID@VARIANT...   one request per id for its variant, all at
                                                   once, each retrying a 503 render_busy after
                                                   its Retry-After; prints one JSON line: VmRSS
                                                   and VmHWM of PID before, VmHWM after every
                                                   request answered 200, the largest VmRSS
                                                   sampled every 10 ms, the largest
                                                   upcommit_render_memory_held_bytes (the
                                                   renders' estimates) read from /metrics every
                                                   20 ms, each request's statuses, times and
                                                   answer
  render_memory.py get BASE ID VARIANT             one request; prints the status and answer

The bearer token comes from UPCOMMIT_BENCH_TOKEN.
"""
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

W, H = 8660, 5774
MIB = 1024 * 1024


def token():
    return os.environ["UPCOMMIT_BENCH_TOKEN"]


def call(method, url, body=None, headers=None, timeout=600):
    """(status, headers, body bytes); HTTP errors are answers, not exceptions."""
    data = None
    hdrs = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        if not isinstance(body, bytes):
            hdrs.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def api(method, base, path, body=None):
    return call(method, base + path, body, {"Authorization": "Bearer " + token()})


def photo(grain=4.0):
    """A photo-like 8660 x 5774 RGB image: two gradients, coarse colour noise upscaled
    (blotches), and a fine grain at full size (what makes a photo's JPEG large)."""
    from PIL import Image, ImageChops

    g = Image.linear_gradient("L").resize((W, H), Image.BILINEAR)
    g2 = Image.linear_gradient("L").rotate(90).resize((W, H), Image.BILINEAR)
    chans = []
    for i, sigma in enumerate((50, 60, 70)):
        coarse = Image.effect_noise((W // 16 + i, H // 16), sigma).resize((W, H), Image.BICUBIC)
        fine = Image.effect_noise((W, H), grain)
        base = g2 if i == 1 else g
        chans.append(ImageChops.add(ImageChops.multiply(base, coarse), fine, offset=-128))
    return Image.merge("RGB", chans)


def describe(path):
    from PIL import Image, JpegImagePlugin

    with Image.open(path) as im:
        return {
            "file": os.path.basename(path),
            "bytes": os.path.getsize(path),
            "width": im.width,
            "height": im.height,
            "progressive": bool(im.info.get("progressive") or im.info.get("progression")),
            # Pillow's sampling code: 2 = 4:2:0, 1 = 4:2:2, 0 = 4:4:4.
            "subsampling": {0: "4:4:4", 1: "4:2:2", 2: "4:2:0"}.get(
                JpegImagePlugin.get_sampling(im), "other"),
        }


def make(d):
    for name in ("a", "b"):
        im = photo()
        im.save(f"{d}/baseline-{name}.jpg", "JPEG", quality=90)
        im.save(f"{d}/progressive-{name}.jpg", "JPEG", quality=90, progressive=True)
        del im
    for kind in ("baseline", "progressive"):
        for name in ("a", "b"):
            print(json.dumps(describe(f"{d}/{kind}-{name}.jpg")))


def small(d):
    from PIL import Image

    Image.linear_gradient("L").resize((2400, 1600)).convert("RGB").save(f"{d}/small.jpg", "JPEG", quality=90)
    print(json.dumps(describe(f"{d}/small.jpg")))


def commit(base, profile, files):
    ids = {}
    for path in files:
        size = os.path.getsize(path)
        st, _, body = api("POST", base, "/v1/uploads", {
            "profile": profile, "content_type": "image/jpeg", "size": size,
            "filename": os.path.basename(path),
        })
        if st != 201 and st != 200:
            sys.exit(f"presign of {path}: {st} {body[:400]!r}")
        p = json.loads(body)
        with open(path, "rb") as f:
            data = f.read()
        # Exactly the returned headers (Content-Length is urllib's from the body).
        hdrs = {k: v for k, v in (p.get("headers") or {}).items() if k.lower() != "content-length"}
        st, _, body = call("PUT", p["url"], data, hdrs)
        if st != 200:
            sys.exit(f"PUT of {path}: {st} {body[:400]!r}")
        st, _, body = api("POST", base, "/v1/files", {"key": p["key"]})
        if st != 201:
            sys.exit(f"commit of {path}: {st} {body[:400]!r}")
        h = json.loads(body)
        ids[os.path.basename(path)] = h["id"]
        print(f"committed {os.path.basename(path)} ({size} bytes) as {h['id']}: image {h.get('image')}",
              file=sys.stderr)
    print(json.dumps(ids))


def status_kib(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def held_bytes(base):
    _, _, body = call("GET", base + "/metrics", timeout=5)
    for line in body.decode().splitlines():
        if line.startswith("upcommit_render_memory_held_bytes"):
            return int(float(line.split()[-1]))
    return None


def render(base, pid, items):
    before = status_kib(pid)
    sampled = {"max_rss_kib": before["VmRSS"], "at": 0.0, "max_held": 0}
    done = threading.Event()
    t0 = time.monotonic()

    def held_sampler():
        while not done.is_set():
            h = held_bytes(base)
            if h is not None and h > sampled["max_held"]:
                sampled["max_held"] = h
            time.sleep(0.02)

    def sampler():
        while not done.is_set():
            try:
                rss = status_kib(pid)["VmRSS"]
            except OSError:
                return
            if rss > sampled["max_rss_kib"]:
                sampled["max_rss_kib"], sampled["at"] = rss, round(time.monotonic() - t0, 3)
            time.sleep(0.01)

    results = [None] * len(items)
    barrier = threading.Barrier(len(items))

    def one(i, item):
        fid, _, variant = item.partition("@")
        statuses, answer = [], None
        barrier.wait()
        start = time.monotonic()
        while True:
            a = time.monotonic()
            st, hdrs, body = api("GET", base, f"/v1/files/{fid}/variants/{variant}")
            took = time.monotonic() - a
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = body[:400].decode(errors="replace")
            entry = {"status": st, "at_s": round(a - t0, 3), "took_s": round(took, 3)}
            if st != 200:
                entry["answer"] = parsed
                retry = {k.lower(): v for k, v in hdrs.items()}.get("retry-after")
                entry["retry_after"] = retry
            statuses.append(entry)
            if st == 503 and isinstance(parsed, dict) and parsed.get("error", {}).get("code") == "render_busy" \
                    and len(statuses) < 200:
                time.sleep(float(retry or 1))
                continue
            answer = parsed
            break
        results[i] = {"id": fid, "variant": variant, "statuses": statuses, "total_s": round(time.monotonic() - start, 3),
                      "answer": answer}

    samplers = [threading.Thread(target=f, daemon=True) for f in (sampler, held_sampler)]
    for s in samplers:
        s.start()
    threads = [threading.Thread(target=one, args=(i, item)) for i, item in enumerate(items)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = status_kib(pid)
    done.set()
    for s in samplers:
        s.join()
    print(json.dumps({
        "rss_before_mib": round(before["VmRSS"] / 1024, 1),
        "hwm_before_mib": round(before["VmHWM"] / 1024, 1),
        "hwm_after_mib": round(after["VmHWM"] / 1024, 1),
        "rss_after_mib": round(after["VmRSS"] / 1024, 1),
        "max_rss_sampled_mib": round(sampled["max_rss_kib"] / 1024, 1),
        "max_rss_sampled_at_s": sampled["at"],
        "max_held_estimate_mib": round(sampled["max_held"] / MIB, 1),
        "wall_s": round(time.monotonic() - t0, 3),
        "all_200": all(r["statuses"][-1]["status"] == 200 for r in results),
        "requests": results,
    }))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "make":
        make(args[0])
    elif cmd == "small":
        small(args[0])
    elif cmd == "commit":
        commit(args[0], args[1], args[2:])
    elif cmd == "render":
        render(args[0], int(args[1]), args[2:])
    elif cmd == "get":
        st, _, body = api("GET", args[0], f"/v1/files/{args[1]}/variants/{args[2]}")
        print(st, body.decode(errors="replace"))
        sys.exit(0 if st == 200 else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
