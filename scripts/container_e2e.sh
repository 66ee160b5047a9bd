#!/usr/bin/env bash
# The container image end to end: builds ./Containerfile with Debian's podman (runc, the
# CONTAINERS_CONF of scripts/lib.sh) and runs it against LocalStack as an operator would, with
# the settings in an env file and the port published.
#
# No container registry is reachable on these machines, so the base images come from Debian's
# packages: `debootstrap --variant=minbase bookworm` from the mirror apt is configured with,
# imported as localhost/upcommit-base:bookworm (the runtime base), and that plus gcc, libc6-dev,
# ca-certificates and the renderer's libraries (libturbojpeg0-dev, libwebp-dev, liblcms2-dev,
# libheif-dev) as localhost/upcommit-builder:bookworm (the build
# base), whose Rust is the host's toolchain, bind-mounted read-only at build time. Both are kept in podman's storage and
# reused (CONTAINER_E2E_REBASE=1 makes them again). The Containerfile's cache mounts (cargo's
# target directory and registry) live under $UPCOMMIT_CACHE/container, so a later run compiles
# only what changed. Cargo builds offline there, from that registry cache seeded with the host's
# ~/.cargo/registry (crates.io is not reachable from a container here, see below).
#
# Then, against a fresh LocalStack bucket (versioned, encrypted, our lifecycle rules written by
# the image's own `upcommit bucket apply-lifecycle --yes`), the container (`serve`, the image's
# default command, published on a free loopback port) must: pass its bucket checks (/readyz's
# bucket_config); run as uid 10001, as PID 1 without
# an init; pass `podman healthcheck run` (the image's HEALTHCHECK, `upcommit healthcheck`);
# serve a presign, a curl upload to the presigned URL and a commit (201, a handle under
# media/images/, the downloaded bytes identical); and on `podman stop` (SIGTERM) finish a commit
# that is in flight when the signal arrives (its body is sent only once the log shows the
# drain began: it must still answer 201), then exit 0, the log saying it drained, with SQLite's
# WAL merged into the one database file. The container reaches LocalStack (which listens on the
# host's loopback) through a forwarder on the host that accepts only podman's subnet and
# loopback; presigned URLs name that address, which the host reaches too.
#
# The systemd unit, deploy/systemd/upcommit.service: `systemd-analyze verify` must print nothing
# (with the image's binary as its ExecStart) and `systemd-analyze security` must rate it 2.0 or
# lower; then it runs under systemd as PID 1 of a container (these machines run no systemd),
# with the image's binary and an env file: it must answer on the env file's UPCOMMIT_LISTEN as a
# dynamic user with no capability, no new privileges, a seccomp filter and a read-only /, serve
# a commit, let docs/operations.md's one-off `systemd-run ... upcommit report` see it as the same
# uid, and stop on `systemctl stop` with exit status 0, drained.
#
# Prints the build's time (cold or warm), the image's size and the run's time. Called by
# scripts/test.sh after LocalStack is up; standalone: LOCALSTACK_ADDR must answer.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

started=$(date +%s)
ensure_localstack_installed
ensure_podman_installed
if ! localstack_up; then
  log "LocalStack does not answer on $LOCALSTACK_ADDR (scripts/test.sh starts it)"
  exit 1
fi

BASE_IMAGE=localhost/upcommit-base:bookworm
BUILDER_IMAGE=localhost/upcommit-builder:bookworm
SYSTEMD_IMAGE=localhost/upcommit-systemd:bookworm
# A tag of this run's own (removed at exit): runs of other checkouts may build at the same time.
IMAGE=localhost/upcommit:e2e-$$
CONTAINER_CACHE="${CONTAINER_E2E_CACHE:-$UPCOMMIT_CACHE/container}"
# buildah keeps a RUN's cache mounts under $TMPDIR/buildah-cache/<id>.
BUILD_TMP="$CONTAINER_CACHE/buildah-tmp"
TARGET_CACHE="$BUILD_TMP/buildah-cache/upcommit-target"
REGISTRY_CACHE="$BUILD_TMP/buildah-cache/upcommit-cargo-registry"
STOP_TIMEOUT=40

work=$(mktemp -d)
# Without systemd (these machines), podman logs an error for each health-check timer it cannot
# create or remove: harmless, since the test runs the check itself. Kept out of the output.
: >"$work/podman.log"
name="upcommit-e2e-$$"
forwarder_pid=""
cleanup_container_e2e() {
  podman rm -f -v -t 0 --ignore "$name" "$name-files" "$name-systemd" >/dev/null 2>&1 || true
  podman rmi "$IMAGE" >/dev/null 2>&1 || true
  if [ -n "$forwarder_pid" ]; then
    kill "$forwarder_pid" 2>/dev/null || true
    wait "$forwarder_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup_container_e2e EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
elapsed() { echo $(($(date +%s) - $1)); }

# --- the base images -----------------------------------------------------------------------
if [ -n "${CONTAINER_E2E_REBASE:-}" ]; then
  podman rmi -f "$SYSTEMD_IMAGE" "$BUILDER_IMAGE" "$BASE_IMAGE" >/dev/null 2>&1 || true
fi
if ! podman image exists "$BASE_IMAGE"; then
  mirror=$(debian_mirror)
  t=$(date +%s)
  log "debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  # What bookworm-slim leaves out too: downloaded packages, package lists, documentation.
  rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/* \
    "$work"/rootfs/usr/share/{doc,man,info,locale}/*
  tar -C "$work/rootfs" -c . | podman import --quiet --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$work/rootfs"
  log "imported $BASE_IMAGE ($(elapsed "$t") s)"
fi
mkdir -p "$work/builder"
cat >"$work/builder/Containerfile" <<EOF
FROM $BASE_IMAGE
RUN apt-get update \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev ca-certificates libturbojpeg0-dev libwebp-dev liblcms2-dev libheif-dev \\
    && rm -rf /var/lib/apt/lists/*
# As in the rust image: cargo's home here, the toolchain (bind-mounted at build time) on PATH.
ENV CARGO_HOME=/usr/local/cargo \\
    PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EOF
podman build --quiet -t "$BUILDER_IMAGE" "$work/builder" >"$work/builder.log" 2>&1 ||
  { tail -n 20 "$work/builder.log" >&2; log "building $BUILDER_IMAGE failed"; exit 1; }

# --- the image -----------------------------------------------------------------------------
sysroot=$(rustc --print sysroot)
[ -x "$sysroot/bin/cargo" ] || { log "no cargo in $sysroot/bin (rustc --print sysroot)"; exit 1; }
# Cargo builds offline inside the image build, from a registry cache seeded with the host's:
# on these machines crates.io answers a container only through a TLS interception whose CA the
# host alone trusts ("self-signed certificate in certificate chain"), and the host has every
# crate of Cargo.lock anyway (`cargo fetch` makes sure). Only the .crate files and the index
# are copied (new ones only); cargo unpacks the sources itself.
cargo fetch --locked --quiet
host_registry="${CARGO_HOME:-$HOME/.cargo}/registry"
mkdir -p "$REGISTRY_CACHE" "$TARGET_CACHE"
cp -a -u "$host_registry/index" "$host_registry/cache" "$REGISTRY_CACHE/"
if [ -d "$TARGET_CACHE/release" ]; then kind=warm; else kind=cold; fi
log "building $IMAGE ($kind: target cache $TARGET_CACHE; $("$sysroot/bin/cargo" --version) from the host, bind-mounted; cargo offline)"
t=$(date +%s)
# No layer cache (--layers=false): it would keep an untagged image of every build's stages,
# about 50 MB each, for a saving of seconds; cargo's cache mounts are what keep a build short.
TMPDIR="$BUILD_TMP" podman build --layers=false --format docker \
  --build-arg BUILD_BASE="$BUILDER_IMAGE" --build-arg RUNTIME_BASE="$BASE_IMAGE" \
  --build-arg CARGO_NET_OFFLINE=true \
  -v "$sysroot:/usr/local/rust:ro" \
  -t "$IMAGE" . >"$work/build.log" 2>&1 ||
  { tail -n 40 "$work/build.log" >&2; log "podman build failed"; exit 1; }
build_secs=$(elapsed "$t")
image_size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
log "built $IMAGE in $build_secs s ($kind build); image size $((image_size / 1000000)) MB"

# --- what the image declares -----------------------------------------------------------------
declared=$(podman image inspect --format '{{.Config.User}} {{json .Config.Entrypoint}} {{json .Config.Cmd}} {{.Config.StopSignal}} {{json .Config.Healthcheck.Test}}' "$IMAGE")
expected='10001:10001 ["/usr/local/bin/upcommit"] ["serve"] SIGTERM ["CMD","/usr/local/bin/upcommit","healthcheck"]'
[ "$declared" = "$expected" ] || { log "the image declares: $declared; expected: $expected"; exit 1; }

fail() {
  log "container e2e: $*"
  podman logs "$name" 2>&1 | tail -n 30 >&2 || true
  exit 1
}

# --- the systemd unit, with the image's binary as its ExecStart ------------------------------
mkdir -p "$work/bin"
podman create --name "$name-files" "$IMAGE" >/dev/null 2>>"$work/podman.log"
podman cp "$name-files:/usr/local/bin/upcommit" "$work/bin/upcommit"
podman rm -v "$name-files" >/dev/null 2>>"$work/podman.log"
if command -v systemd-analyze >/dev/null; then
  # verify resolves the unit's dependencies (network-online.target, ...) and checks ExecStart's
  # binary under --root: the host's system units, the unit, and the binary the image ships.
  unit_root="$work/unit-root"
  mkdir -p "$unit_root/etc/systemd/system" "$unit_root/usr/local/bin" "$unit_root/usr/lib/systemd"
  cp -a /usr/lib/systemd/system "$unit_root/usr/lib/systemd/"
  cp deploy/systemd/upcommit.service "$unit_root/etc/systemd/system/"
  cp "$work/bin/upcommit" "$unit_root/usr/local/bin/upcommit"
  # It warns (unknown keys, bad values) and still exits 0: any output fails.
  verified=$(systemd-analyze verify --root="$unit_root" upcommit.service 2>&1) ||
    fail "systemd-analyze verify: $verified"
  [ -z "$verified" ] || fail "systemd-analyze verify: $verified"
  exposure=$(systemd-analyze security --offline=true deploy/systemd/upcommit.service 2>&1 |
    sed -n 's/.*Overall exposure level for upcommit.service: \([0-9.]*\).*/\1/p')
  [ -n "$exposure" ] || fail "systemd-analyze security printed no exposure level"
  awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }' ||
    fail "systemd-analyze security rates the unit $exposure, above 2.0: a hardening option went"
  log "systemd unit: systemd-analyze verify clean; security exposure $exposure (2.0 at most)"
else
  log "systemd-analyze is not installed: deploy/systemd/upcommit.service is not checked"
fi

# --- LocalStack through a forwarder the container can reach ---------------------------------
read -r gateway subnet < <(podman network inspect podman --format '{{range .Subnets}}{{.Gateway}} {{.Subnet}}{{end}}')
forward_port=$(free_port)
python3 - "$forward_port" "${LOCALSTACK_ADDR%:*}" "${LOCALSTACK_ADDR##*:}" "$subnet" >"$work/forwarder.log" 2>&1 <<'PY' &
import asyncio, ipaddress, sys

port, target_host, target_port, subnet = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
allowed = [ipaddress.ip_network(subnet), ipaddress.ip_network("127.0.0.0/8")]


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def handle(reader, writer):
    peer = ipaddress.ip_address(writer.get_extra_info("peername")[0])
    if not any(peer in net for net in allowed):
        writer.close()
        return
    up_reader, up_writer = await asyncio.open_connection(target_host, target_port)
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    up_writer.close()
    writer.close()


async def main():
    # Every address: podman's bridge (the gateway address) exists only while a container runs.
    server = await asyncio.start_server(handle, "0.0.0.0", port)
    async with server:
        await server.serve_forever()


asyncio.run(main())
PY
forwarder_pid=$!

# --- the settings, as an operator's env file ------------------------------------------------
export UPCOMMIT_BUCKET="container-e2e-$(date +%s)-$$"
s3="http://$gateway:$forward_port"
cat >"$work/upcommit.env" <<ENV
UPCOMMIT_BUCKET=$UPCOMMIT_BUCKET
UPCOMMIT_S3_ENDPOINT=$s3
AWS_REGION=$AWS_REGION
AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID
AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY
UPCOMMIT_JWT_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
UPCOMMIT_ACCEPT_STORE_GAPS=$LOCALSTACK_GAPS
UPCOMMIT_CONFIG=/etc/upcommit/upcommit.toml
ENV
chmod 600 "$work/upcommit.env"
# The built-in profiles, the image profile with a variant: a rendition is drawn by a render
# worker (issue 46) inside the container's and the unit's own sandboxes.
cat >"$work/upcommit.toml" <<'TOML'
[[profiles]]
name = "image"
content_types = ["image/jpeg", "image/png", "image/webp", "image/heic"]
max_size = 20971520
final_prefix = "media/images/"

[[profiles.variants]]
name = "thumb"
width = 32
height = 32

[[profiles]]
name = "recording"
content_types = ["audio/mpeg", "audio/mp4", "audio/aac", "audio/ogg", "audio/webm", "audio/wav"]
max_size = 524288000
final_prefix = "media/recordings/"
TOML
chmod 644 "$work/upcommit.toml"
config_mount=(-v "$work/upcommit.toml:/etc/upcommit/upcommit.toml:ro")
"$LOCALSTACK_VENV/bin/python" scripts/dev_bucket.py "http://$LOCALSTACK_ADDR" "$UPCOMMIT_BUCKET" "" >/dev/null

# The lifecycle rules first, by a short-lived container of the same image (an operator
# command: the entrypoint is the binary), so that the server's first bucket check passes.
podman run --rm --env-file "$work/upcommit.env" "${config_mount[@]}" "$IMAGE" bucket apply-lifecycle --yes \
  >/dev/null 2>>"$work/podman.log" ||
  { cat "$work/podman.log" >&2; log "upcommit bucket apply-lifecycle --yes in a container failed"; exit 1; }
app_port=$(free_port)
podman run -d --name "$name" --env-file "$work/upcommit.env" "${config_mount[@]}" -p "127.0.0.1:$app_port:8080" \
  "$IMAGE" >/dev/null 2>>"$work/podman.log" ||
  { cat "$work/podman.log" >&2; log "podman run failed"; exit 1; }
base="http://127.0.0.1:$app_port"
for _ in $(seq 1 300); do
  curl -fsS "$base/readyz" >/dev/null 2>&1 && break
  [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] || break
  sleep 0.1
done
if ! curl -fsS "$base/readyz" >/dev/null 2>&1; then
  podman logs "$name" 2>&1 | tail -n 40 >&2
  log "the container did not become ready on $base"
  exit 1
fi
log "container $name ready on $base (S3 through $s3)"
# The drift watch's first run (at start) reads the bucket through the same path: every check,
# the lifecycle rules the image's own command wrote included, must pass.
for _ in $(seq 1 100); do
  config=$(curl -fsS "$base/readyz" | python3 -c 'import json, sys; print(json.load(sys.stdin)["checks"]["bucket_config"])')
  [ "$config" = pending ] || break
  sleep 0.1
done
[ "$config" = ok ] || { podman logs "$name" 2>&1 | tail -n 20 >&2; log "readyz: bucket_config $config, not ok"; exit 1; }

# --- who runs, and the health check ---------------------------------------------------------
uid=$(podman exec "$name" id -u)
[ "$uid" = 10001 ] || fail "the process runs as uid $uid, not 10001"
pid1=$(podman exec "$name" cat /proc/1/cmdline | tr '\0' ' ')
[ "$pid1" = "/usr/local/bin/upcommit serve " ] || fail "PID 1 is '$pid1', not upcommit serve"
pid1_uid=$(podman exec "$name" awk '/^Uid:/ {print $2}' /proc/1/status)
[ "$pid1_uid" = 10001 ] || fail "PID 1 runs as uid $pid1_uid"
podman healthcheck run "$name" >/dev/null || fail "podman healthcheck run: unhealthy"
health=$(podman inspect --format '{{.State.Health.Status}}' "$name")
[ "$health" = healthy ] || fail "health status '$health' after a passing check"
log "uid 10001 as PID 1 (no init); podman healthcheck run: $health"

# --- presign, upload, commit through the container's port -----------------------------------
token=$(podman exec "$name" /usr/local/bin/upcommit token --sub alice)
printf '\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\0\0\0\0\0\0\0\0IDAT%s' "$(head -c 64 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$work/photo.png"
size=$(stat -c %s "$work/photo.png")
presign() {
  curl -fsS -X POST "$base/v1/uploads" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' \
    -d "{\"profile\":\"image\",\"content_type\":\"image/png\",\"size\":$size,\"filename\":\"photo.png\"}"
}
field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
upload() {
  local url=$1 status
  status=$(curl -s -o /dev/null -w '%{http_code}' -X PUT "$url" -H 'Content-Type: image/png' \
    -H 'If-None-Match: *' --data-binary @"$work/photo.png")
  [ "$status" = 200 ] || fail "upload to the presigned URL answered $status"
}
presign >"$work/presign.json" || fail "presign failed"
url=$(field url <"$work/presign.json")
case "$url" in "$s3/"*) ;; *) fail "the presigned URL does not name $s3" ;; esac
upload "$url"
key=$(field key <"$work/presign.json")
status=$(curl -s -o "$work/handle.json" -w '%{http_code}' -X POST "$base/v1/files" \
  -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "{\"key\":\"$key\"}")
[ "$status" = 201 ] || fail "commit answered $status: $(cat "$work/handle.json")"
python3 - "$work/handle.json" "$size" <<'PY' || fail "the handle is not the committed file's"
import json, sys
handle = json.load(open(sys.argv[1]))
assert handle["key"].startswith("media/images/") and handle["key"].endswith("/photo.png"), handle
assert handle["size"] == int(sys.argv[2]) and handle["content_type"] == "image/png", handle
assert handle["created_by"] == "alice" and handle["status"] == "available", handle
PY
id=$(field id <"$work/handle.json")
curl -fsS -L -H "Authorization: Bearer $token" "$base/v1/files/$id/content" -o "$work/downloaded.png" ||
  fail "download of $id failed"
cmp -s "$work/photo.png" "$work/downloaded.png" || fail "the downloaded bytes differ"
log "presign, curl upload, commit (201, $(field key <"$work/handle.json")), download: identical bytes"

# A real PNG's rendition, drawn by a render worker (a child process under its own seccomp
# filter and memory limit) inside whatever sandbox the server runs in.
python3 - "$work/real.png" <<'PY'
import struct, sys, zlib
w, h = 64, 48
raw = b"".join(b"\0" + bytes(v for x in range(w) for v in (x * 4 % 256, y * 5 % 256, 128)) for y in range(h))
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) \
    + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
PY
rendition_check() {
  local base=$1 onfail=$2 psize key status rid
  psize=$(stat -c %s "$work/real.png")
  curl -fsS -X POST "$base/v1/uploads" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d "{\"profile\":\"image\",\"content_type\":\"image/png\",\"size\":$psize}" >"$work/rpresign.json" ||
    "$onfail" "presign of a real PNG failed"
  status=$(curl -s -o /dev/null -w '%{http_code}' -X PUT "$(field url <"$work/rpresign.json")" \
    -H 'Content-Type: image/png' -H 'If-None-Match: *' --data-binary @"$work/real.png")
  [ "$status" = 200 ] || "$onfail" "upload of a real PNG answered $status"
  key=$(field key <"$work/rpresign.json")
  status=$(curl -s -o "$work/rhandle.json" -w '%{http_code}' -X POST "$base/v1/files" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "{\"key\":\"$key\"}")
  [ "$status" = 201 ] || "$onfail" "commit of a real PNG answered $status"
  rid=$(field id <"$work/rhandle.json")
  status=$(curl -s -o "$work/rendition.json" -w '%{http_code}' -H "Authorization: Bearer $token" \
    "$base/v1/files/$rid/variants/thumb")
  [ "$status" = 200 ] || "$onfail" "the rendition answered $status: $(cat "$work/rendition.json")"
  curl -fsS "$(field url <"$work/rendition.json")" -o "$work/rendition.jpg" || "$onfail" "the rendition's URL"
  [ "$(head -c 3 "$work/rendition.jpg" | od -An -tx1 | tr -d ' ')" = ffd8ff ] ||
    "$onfail" "the rendition is not a JPEG"
}
rendition_check "$base" fail
log "a real PNG's rendition (32 x 32 JPEG) drawn by a render worker in the container"

# --- SIGTERM with a commit in flight --------------------------------------------------------
presign >"$work/presign2.json" || fail "second presign failed"
upload "$(field url <"$work/presign2.json")"
drain=0
python3 - "$app_port" "$token" "$(field key <"$work/presign2.json")" "$name" "$STOP_TIMEOUT" <<'PY' || drain=$?
import json, socket, subprocess, sys, time

port, token, key, name, stop_timeout = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
body = json.dumps({"key": key}).encode()
head = (f"POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()


def logs():
    return subprocess.run(["podman", "logs", name], capture_output=True, text=True).stderr


conn = socket.create_connection(("127.0.0.1", int(port)))
conn.sendall(head + body[:4])  # the request is in flight: its head read, its body not whole
time.sleep(0.5)
stop = subprocess.Popen(["podman", "stop", "-t", stop_timeout, name],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
deadline = time.monotonic() + 10
while "shutting down: finishing in-flight requests" not in logs():
    if time.monotonic() > deadline:
        sys.exit("no drain in the log 10 s after podman stop")
    time.sleep(0.1)
time.sleep(1)
if stop.poll() is not None:
    sys.exit(f"the container stopped with a commit in flight (podman stop: {stop.returncode})")
conn.sendall(body[4:])
conn.settimeout(30)
answer = b""
while chunk := conn.recv(65536):
    answer += chunk
status_line = answer.split(b"\r\n", 1)[0].decode()
if " 201 " not in status_line + " ":
    sys.exit(f"the commit in flight during SIGTERM answered {status_line!r}")
print(f"commit in flight during SIGTERM: {status_line}", file=sys.stderr)
_, err = stop.communicate(timeout=int(stop_timeout) + 20)
if stop.returncode != 0 or "SIGKILL" in err:
    sys.exit(f"podman stop: {stop.returncode} {err}")
PY
[ "$drain" -eq 0 ] || fail "the drain failed"
state=$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}' "$name")
[ "$state" = "exited 0 false" ] || fail "after SIGTERM: $state (expected exited 0)"
podman logs "$name" 2>&1 | grep -q 'stopped: every in-flight request answered, catalog closed' ||
  fail "the log does not say the drain finished"
# Into a directory that exists: podman 4.3 copies a volume's "/." to a path that does not exist
# into that path's parent, and gives the parent the volume's mode (0750 on /tmp, once).
mkdir "$work/state"
podman cp "$name:/var/lib/upcommit/." "$work/state/"
[ -s "$work/state/upcommit.db" ] || fail "no database in /var/lib/upcommit"
[ ! -e "$work/state/upcommit.db-wal" ] || fail "the WAL is still beside the database after a graceful stop"
log "SIGTERM: the commit in flight answered 201, exit code 0, the log says it drained, the WAL is merged"

# --- the systemd unit, started by systemd ---------------------------------------------------
# These machines do not run systemd; a container does: systemd as its PID 1 (podman's
# --systemd=always), CAP_SYS_ADMIN so that it can set up the unit's namespaces (ProtectSystem,
# PrivateTmp, ...), libturbojpeg0, libwebp7, liblcms2-2 and libheif1 (the libraries the binary links beyond libc, as
# an operator installs them), the unit and the image's binary mounted read-only where the unit's comment
# installs them, and an env file that also sets UPCOMMIT_LISTEN=0.0.0.0:8080, which must
# override the unit's own 127.0.0.1 (EnvironmentFile= after Environment=).
mkdir -p "$work/systemd"
cat >"$work/systemd/Containerfile" <<CONTAINERFILE
FROM $BASE_IMAGE
RUN apt-get update \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends systemd systemd-sysv dbus libturbojpeg0 libwebp7 liblcms2-2 libheif1 \\
    && apt-get clean && rm -rf /var/lib/apt/lists/*
STOPSIGNAL SIGRTMIN+3
CMD ["/sbin/init"]
CONTAINERFILE
podman build --quiet -t "$SYSTEMD_IMAGE" "$work/systemd" >"$work/systemd.log" 2>&1 ||
  { tail -n 20 "$work/systemd.log" >&2; log "building $SYSTEMD_IMAGE failed"; exit 1; }
{ cat "$work/upcommit.env"; echo "UPCOMMIT_LISTEN=0.0.0.0:8080"; } >"$work/unit.env"
chmod 600 "$work/unit.env"
unit_port=$(free_port)
podman run -d --name "$name-systemd" --systemd=always --cap-add SYS_ADMIN \
  -p "127.0.0.1:$unit_port:8080" \
  -v "$work/bin/upcommit:/usr/local/bin/upcommit:ro" \
  -v "$PWD/deploy/systemd/upcommit.service:/etc/systemd/system/upcommit.service:ro" \
  -v "$work/unit.env:/etc/upcommit/upcommit.env:ro" \
  "${config_mount[@]}" \
  "$SYSTEMD_IMAGE" >/dev/null 2>>"$work/podman.log" ||
  { cat "$work/podman.log" >&2; log "podman run of systemd failed"; exit 1; }
in_systemd() { podman exec "$name-systemd" "$@"; }
unit_fail() {
  log "systemd unit: $*"
  in_systemd journalctl -u upcommit --no-pager -n 30 >&2 || true
  exit 1
}
for _ in $(seq 1 100); do
  state=$(in_systemd systemctl is-system-running 2>/dev/null || true)
  case "$state" in running | degraded) break ;; esac
  sleep 0.2
done
case "$state" in running | degraded) ;; *) unit_fail "systemd in the container is '$state'" ;; esac
in_systemd systemctl enable --now upcommit >/dev/null 2>&1 || unit_fail "systemctl enable --now upcommit failed"
unit_base="http://127.0.0.1:$unit_port"
for _ in $(seq 1 100); do
  curl -fsS "$unit_base/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "$unit_base/readyz" >/dev/null 2>&1 || unit_fail "not ready on $unit_base (UPCOMMIT_LISTEN from the env file)"
main_pid=$(in_systemd systemctl show upcommit -p MainPID --value)
read -r unit_uid nnp seccomp cap_eff cap_bnd < <(in_systemd awk '
  /^Uid:/ {u=$2} /^NoNewPrivs:/ {n=$2} /^Seccomp:/ {s=$2} /^CapEff:/ {e=$2} /^CapBnd:/ {b=$2}
  END {print u, n, s, e, b}' "/proc/$main_pid/status")
# DynamicUser's range (systemd.exec(5)); no capability, no new privileges, a seccomp filter.
[ "$unit_uid" -ge 61184 ] && [ "$unit_uid" -le 65519 ] || unit_fail "runs as uid $unit_uid, not a dynamic user"
[ "$nnp $seccomp $cap_eff $cap_bnd" = "1 2 0000000000000000 0000000000000000" ] ||
  unit_fail "NoNewPrivs $nnp, Seccomp $seccomp, CapEff $cap_eff, CapBnd $cap_bnd"
# ProtectSystem=strict: / is read-only to the service; its state directory is not.
mounts=$(in_systemd awk '$5 == "/" || $5 == "/var/lib/private/upcommit" {print $5, $6}' "/proc/$main_pid/mountinfo")
echo "$mounts" | grep -q '^/ ro' || unit_fail "/ is not read-only to the service: $mounts"
echo "$mounts" | grep -q '^/var/lib/private/upcommit rw' || unit_fail "the state directory is not writable: $mounts"
base=$unit_base
presign >"$work/presign3.json" || unit_fail "presign failed"
upload "$(field url <"$work/presign3.json")"
status=$(curl -s -o "$work/handle3.json" -w '%{http_code}' -X POST "$base/v1/files" \
  -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d "{\"key\":\"$(field key <"$work/presign3.json")\"}")
[ "$status" = 201 ] || unit_fail "commit answered $status: $(cat "$work/handle3.json")"
rendition_check "$base" unit_fail
# docs/operations.md's one-off command: the same dynamic user, so the same uid on the SQLite file.
report=$(in_systemd systemd-run --pipe --wait --collect -p DynamicUser=yes -p User=upcommit \
  -p StateDirectory=upcommit -p WorkingDirectory=/var/lib/upcommit \
  -p EnvironmentFile=/etc/upcommit/upcommit.env \
  -p Environment=DATABASE_URL=sqlite:///var/lib/upcommit/upcommit.db \
  /usr/local/bin/upcommit report 2>&1) || unit_fail "the one-off report failed: $report"
echo "$report" | grep -Eq 'file_handles +2 rows' || unit_fail "the one-off report does not see the commit: $report"
owner=$(in_systemd stat -c %u /var/lib/private/upcommit/upcommit.db)
[ "$owner" = "$unit_uid" ] || unit_fail "after the one-off command the database belongs to uid $owner, not $unit_uid"
in_systemd systemctl stop upcommit
stopped=$(in_systemd systemctl show upcommit -p Result -p ExecMainStatus -p ActiveState | sort | tr '\n' ' ')
[ "$stopped" = "ActiveState=inactive ExecMainStatus=0 Result=success " ] || unit_fail "after systemctl stop: $stopped"
in_systemd journalctl -u upcommit --no-pager | grep -q 'stopped: every in-flight request answered, catalog closed' ||
  unit_fail "the journal does not say the drain finished"
in_systemd test ! -e /var/lib/private/upcommit/upcommit.db-wal || unit_fail "the WAL is still beside the database"
log "systemd unit under systemd: dynamic uid $unit_uid, no capabilities, seccomp, / read-only; commit 201 on the env file's UPCOMMIT_LISTEN; a rendition by a render worker under the unit's filter; the one-off report as the same uid; systemctl stop: exit 0, drained"

log "container e2e passed: build $build_secs s ($kind), image $((image_size / 1000000)) MB, whole run $(elapsed "$started") s"
