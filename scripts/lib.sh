# Shared helpers for the run and test scripts: install and start LocalStack and PostgreSQL
# from nothing, reuse what an earlier run left in the cache, and stop only what we started.
# shellcheck shell=bash

UPCOMMIT_CACHE="${UPCOMMIT_CACHE:-$HOME/.cache/upcommit}"
LOCALSTACK_VERSION="4.14.0"
LOCALSTACK_VENV="$UPCOMMIT_CACHE/localstack-$LOCALSTACK_VERSION-venv"
LOCALSTACK_ADDR="${LOCALSTACK_ADDR:-127.0.0.1:4566}"
# What LocalStack 4.14.0 lacks that a promise needs (docs/stores.md): it does not verify POST
# policy signatures. Servers the scripts start on it accept this gap by name.
LOCALSTACK_GAPS="post_signature"
INFRA_VENV="$UPCOMMIT_CACHE/infra-venv"
CHECKOV_VERSION="3.3.30"
SCHEMATHESIS_VENV="$UPCOMMIT_CACHE/schemathesis-venv"
SCHEMATHESIS_VERSION="4.32.5"
# PyJWT mints the identity-provider tokens of tests/api/identity.rs (a library this project did
# not write); the tests find its python through UPCOMMIT_TEST_PYJWT.
JWT_VENV="$UPCOMMIT_CACHE/jwt-venv"
PYJWT_VERSION="2.10.1"
# opentelemetry-proto (with the protobuf it pins) decodes the OTLP exports of
# tests/api/tracing.rs in tests/api/otlp_receiver.py; the tests find its python through
# UPCOMMIT_TEST_OTLP_PYTHON.
OTEL_VENV="$UPCOMMIT_CACHE/otlp-venv"
OTEL_PROTO_VERSION="1.38.0"
# standardwebhooks verifies every webhook of tests/api/events.rs in its test receiver
# (tests/api/webhook_receiver.py); the tests find its python through UPCOMMIT_TEST_WEBHOOK_PYTHON.
WEBHOOK_VENV="$UPCOMMIT_CACHE/webhook-venv"
STANDARDWEBHOOKS_VERSION="1.1.0"
# Garage, a second S3 implementation (distributed, self-hosted), which verifies POST policy
# signatures and ignores conditional writes: the store-facing tests run on it too. Built from
# crates.io into the cache (about 10 to 18 minutes on two cores, once).
GARAGE_VERSION="2.5.0"
GARAGE_ROOT="$UPCOMMIT_CACHE/garage-$GARAGE_VERSION"
GARAGE_S3_PORT="${GARAGE_S3_PORT:-3900}"
# The test key: imported into the throwaway cluster, never used anywhere else.
GARAGE_KEY_ID="GK0123456789abcdef01234567"
GARAGE_SECRET="0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
# What Garage 2.5.0 lacks that a promise needs (docs/stores.md): the test servers accept these,
# as an operator of Garage would, and tests/api/store_capabilities.rs checks the probe finds
# exactly them.
GARAGE_GAPS="conditional_put,conditional_copy,conditional_complete,versioning,storage_class,object_tags,encryption_config"
# The tests the Garage run leaves out, and why: scripts/test.sh (above its Garage step) and
# docs/stores.md ("The Garage run"). bench/stores.sh runs the same set on both stores.
GARAGE_SKIPS=(
  --skip sqs_sink --skip s3_proxy
  --skip bucket::a_failing_bucket_check_fails_readiness_when_configured_to
  --skip bucket::doctor_text_output_names_the_failed_check_and_its_fix
  --skip bucket::the_server_watch_reports_each_fault_in_the_admin_view_readiness_and_metrics
  --skip archive_class::a_file_over_the_single_copy_limit_is_archived_in_place_in_parts
  --skip hygiene::an_archival_killed_between_its_copy_and_its_cleanup_leaves_one_version_in_the_class
  --skip hygiene::a_link_whose_restore_fails_is_not_recorded_and_a_retry_restores_and_links
  --skip legacy_import::archiving_a_legacy_key_keeps_the_versions_written_before_upcommit_saw_it
  --skip legacy_import::an_older_version_of_other_bytes_survives_archiving_a_key_already_in_the_class
  --skip reconcile::on_a_suspended_bucket_an_object_replaced_while_quarantine_copies_it_is_kept
)
# Ceph's RADOS Gateway 16.2.15 from Debian's packages (scripts/ceph.sh), the store clusters
# run: the store-facing tests run on it twice, on a versioned bucket and on an unversioned one
# (which keeps conditional_put there but loses versions). What it lacks (docs/stores.md, "The
# RGW run"): the test servers accept exactly these.
CEPH_S3_PORT="${CEPH_S3_PORT:-7480}"
CEPH_MON_PORT="${CEPH_MON_PORT:-3300}"
RGW_GAPS_VERSIONED="conditional_put,conditional_copy,conditional_complete,part_copy_source_if_match,checksum_sha256,checksum_crc32c,checksum_crc64nvme,multipart_checksum,object_tags,encryption_config"
RGW_GAPS_UNVERSIONED="conditional_copy,conditional_complete,part_copy_source_if_match,checksum_sha256,checksum_crc32c,checksum_crc64nvme,multipart_checksum,versioning,object_tags,encryption_config"
# The tests the RGW runs leave out, and why: scripts/test.sh (above its RGW step) and
# docs/stores.md ("The RGW run").
RGW_SKIPS=(
  --skip sqs_sink --skip s3_proxy --skip garage_cluster --skip ceph_cluster
  --skip checksums::a_completion_refused_for_its_whole_checksum_can_be_completed_with_the_right_parts
  --skip checksums::a_large_object_without_the_declared_checksum_is_refused_before_its_copy
  --skip checksums::a_multipart_upload_with_a_full_object_checksum_binds_every_part_and_the_whole
  --skip checksums::a_post_form_with_a_checksum_stores_only_the_declared_bytes
  --skip checksums::a_put_url_with_a_checksum_stores_only_the_declared_bytes
  --skip checksums::a_retry_after_a_lost_copy_answer_verifies_the_checksum_and_records_once
  --skip checksums::a_rejected_retry_removes_the_copy_an_earlier_attempt_left
  --skip checksums::an_undeclared_upload_records_a_crc64nvme_s3_computed
  --skip checksums::commit_refuses_bytes_other_than_the_declared_ones_and_keeps_no_copy
  --skip checksums::presigns_with_malformed_or_unsuitable_checksums_are_refused_and_charge_nothing
  --skip checksums::an_object_arriving_at_the_final_key_during_a_copy_in_parts_is_kept
  --skip cli_upload::a_changed_source_file_is_not_resumed_and_nothing_is_committed
  --skip cli_upload::a_killed_multipart_upload_resumes_and_sends_only_the_missing_parts
)
# On the unversioned bucket, also the tests whose fault or subject is a version: a suspended
# versioning, the versions archival keeps or removes (as on Garage).
RGW_UNVERSIONED_SKIPS=(
  --skip bucket::a_failing_bucket_check_fails_readiness_when_configured_to
  --skip bucket::doctor_text_output_names_the_failed_check_and_its_fix
  --skip reconcile::on_a_suspended_bucket_an_object_replaced_while_quarantine_copies_it_is_kept
  --skip hygiene::an_archival_killed_between_its_copy_and_its_cleanup_leaves_one_version_in_the_class
  --skip legacy_import::archiving_a_legacy_key_keeps_the_versions_written_before_upcommit_saw_it
  --skip legacy_import::an_older_version_of_other_bytes_survives_archiving_a_key_already_in_the_class
)
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_REGION="${AWS_REGION:-us-east-1}"

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# LocalStack 4.14.0 needs Python 3.13: on 3.11 and 3.12 it starts but answers every S3 call with
# 500. It is the first version that enforces CopyObject's destination If-None-Match, which the
# two-call commit relies on (4.13.1 answers 200 and overwrites), so there is no fallback.
find_python313() {
  local candidate
  for candidate in "${UPCOMMIT_PYTHON313:-}" python3.13 \
    "$(pyenv root 2>/dev/null)"/versions/3.13*/bin/python3.13 \
    "$HOME"/.pyenv/versions/3.13*/bin/python3.13 /usr/local/bin/python3.13 /usr/bin/python3.13; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

# Python venv with localstack-core and the pins it needs.
ensure_localstack_installed() {
  if [ -x "$LOCALSTACK_VENV/bin/python" ] &&
    "$LOCALSTACK_VENV/bin/python" -c "import localstack, boto3" 2>/dev/null &&
    [ -f "$LOCALSTACK_VENV/.installed-$LOCALSTACK_VERSION" ]; then
    return 0
  fi
  local python
  if ! python=$(find_python313); then
    log "LocalStack $LOCALSTACK_VERSION needs Python 3.13 and none was found (tried python3.13 on PATH,"
    log "pyenv's versions/3.13*, /usr/local/bin and /usr/bin). Install one (e.g. 'pyenv install 3.13')"
    log "or point UPCOMMIT_PYTHON313 at its interpreter."
    return 1
  fi
  log "installing LocalStack $LOCALSTACK_VERSION with $python into $LOCALSTACK_VENV"
  mkdir -p "$UPCOMMIT_CACHE"
  rm -rf "$LOCALSTACK_VENV"
  "$python" -m venv "$LOCALSTACK_VENV"
  "$LOCALSTACK_VENV/bin/pip" install --quiet --disable-pip-version-check \
    "localstack-core[runtime]==$LOCALSTACK_VERSION" \
    'cbor2<5.7' 'pyopenssl<24.3' 'cryptography<44' service_identity boto3
  touch "$LOCALSTACK_VENV/.installed-$LOCALSTACK_VERSION"
}

# A Python tool pinned in a venv of its own (their dependency pins differ from LocalStack's and
# from each other's): ensure_pinned_tool VENV COMMAND PACKAGE VERSION.
ensure_pinned_tool() {
  local venv=$1 command=$2 package=$3 version=$4
  if [ -x "$venv/bin/$command" ] && [ -f "$venv/.installed-$version" ]; then
    return 0
  fi
  log "installing $package $version into $venv"
  mkdir -p "$UPCOMMIT_CACHE"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$package==$version"
  touch "$venv/.installed-$version"
}

ensure_checkov_installed() { ensure_pinned_tool "$INFRA_VENV" checkov checkov "$CHECKOV_VERSION"; }
ensure_pyjwt_installed() { ensure_pinned_tool "$JWT_VENV" python "pyjwt[crypto]" "$PYJWT_VERSION"; }
ensure_otlp_receiver_installed() { ensure_pinned_tool "$OTEL_VENV" python opentelemetry-proto "$OTEL_PROTO_VERSION"; }
ensure_webhook_receiver_installed() { ensure_pinned_tool "$WEBHOOK_VENV" python standardwebhooks "$STANDARDWEBHOOKS_VERSION"; }
ensure_schemathesis_installed() { ensure_pinned_tool "$SCHEMATHESIS_VENV" schemathesis schemathesis "$SCHEMATHESIS_VERSION"; }

# Debian's chromium and Node.js for the browser test, and playwright-core (pinned by
# tests/browser/package-lock.json; it drives the system chromium and downloads no browser);
# clients/js's TypeScript (its package-lock.json), which `npm pack` runs to write the types.
ensure_browser_installed() {
  local missing=()
  command -v chromium >/dev/null || missing+=(chromium)
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} from Debian's packages"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  local pkg npm_missing=()
  for pkg in playwright-core @uppy/core @uppy/aws-s3 esbuild typescript; do
    [ -d "tests/browser/node_modules/$pkg" ] || npm_missing+=("$pkg")
  done
  if [ ${#npm_missing[@]} -gt 0 ]; then
    log "installing tests/browser/package.json's packages (playwright-core, Uppy 6, esbuild, TypeScript) into tests/browser/node_modules"
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
  fi
  if [ ! -x clients/js/node_modules/.bin/tsc ]; then
    log "installing clients/js/package.json's devDependencies (TypeScript, for npm pack's generated upcommit.d.ts) into clients/js/node_modules"
    (cd clients/js && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

# Debian's libjpeg-turbo TurboJPEG library and headers (libturbojpeg0-dev, 2.1.5 on bookworm)
# libwebp (libwebp-dev, 1.2.4), Little CMS (liblcms2-dev, 2.14) and libheif (libheif-dev, 1.15,
# with libde265 and dav1d): the renderer's FFI crates (crates/upcommit-turbojpeg, -webp, -lcms,
# -heif) link them, so every build needs them.
ensure_turbojpeg_installed() {
  if [ -e /usr/include/turbojpeg.h ] && ldconfig -p | grep -q 'libturbojpeg\.so\.0' \
    && [ -e /usr/include/webp/encode.h ] && ldconfig -p | grep -q 'libwebp\.so\.7' \
    && [ -e /usr/include/lcms2.h ] && ldconfig -p | grep -q 'liblcms2\.so\.2' \
    && dpkg -s libheif-dev >/dev/null 2>&1; then
    return 0
  fi
  log "installing Debian's libturbojpeg0-dev, libwebp-dev, liblcms2-dev and libheif-dev (the renderer links libjpeg-turbo's TurboJPEG API, libwebp, Little CMS and libheif)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libturbojpeg0-dev libwebp-dev liblcms2-dev libheif-dev >/dev/null
}

# Debian's prometheus package: promtool for the rules' checks, prometheus for the alerts'
# end-to-end run (scripts/alerts_e2e.sh). Its maintainer scripts would start a prometheus
# service on :9090 and enable it at boot: a policy-rc.d that forbids starts is in place during
# the install (one that is already there stays as it is), and on a systemd host the unit is
# disabled. Recommends (node-exporter, another service) are not installed.
ensure_prometheus_installed() {
  if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
    return 0
  fi
  log "installing Debian's prometheus package (promtool, prometheus; its service is not started)"
  local policy=/usr/sbin/policy-rc.d added="" status=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# scripts/lib.sh: no service starts while prometheus is installed\nexit 101\n' >"$policy"
    chmod +x "$policy"
    added=1
  fi
  apt-get update -qq || status=$?
  [ "$status" -ne 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null || status=$?
  [ -z "$added" ] || rm -f "$policy"
  if [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  return "$status"
}

# Debian's podman for the container image's end-to-end run (scripts/container_e2e.sh), with
# Debian's runc (the default runtime, crun, cannot set limits or cgroups on these machines) and
# debootstrap, which builds the base images from the configured Debian mirror (no container
# registry is reachable here). Writes $PODMAN_CONF, the CONTAINERS_CONF every podman call of the
# scripts uses: no default ulimits, cgroupfs rather than systemd for cgroups, runc.
PODMAN_CONF="$UPCOMMIT_CACHE/podman/containers.conf"
ensure_podman_installed() {
  local missing=() cmd
  for cmd in podman runc debootstrap; do
    command -v "$cmd" >/dev/null || missing+=("$cmd")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} from Debian's packages"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  mkdir -p "$(dirname "$PODMAN_CONF")"
  cat >"$PODMAN_CONF" <<'CONF'
# Written by scripts/lib.sh (ensure_podman_installed) for the scripts' podman calls.
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
CONF
  export CONTAINERS_CONF="$PODMAN_CONF"
}

# The Debian mirror apt is configured with for the host's release (its main archive, not the
# security one), read from /etc/apt/sources.list.d/*.sources (deb822) or the one-line lists.
# Prints the URI; fails when none names the release.
debian_mirror() {
  python3 - "$(. /etc/os-release && echo "$VERSION_CODENAME")" <<'PY'
import glob, re, sys
release = sys.argv[1]
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
        if (fields.get("Enabled", "yes") != "no" and "deb" in fields.get("Types", "").split()
                and release in fields.get("Suites", "").split()):
            print(fields["URIs"].split()[0])
            sys.exit(0)
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        m = re.match(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
        if m and m.group(2) == release:
            print(m.group(1))
            sys.exit(0)
sys.exit(f"no apt source for {release} in /etc/apt")
PY
}

localstack_up() { curl -fsS "http://$LOCALSTACK_ADDR/_localstack/health" 2>/dev/null | grep -q '"s3": "\(available\|running\)"'; }

# Starts LocalStack (S3, and SQS for the event queue sink) on the host with signature validation on, unless one already answers.
# Sets STARTED_LOCALSTACK_PID when this call started it.
start_localstack() {
  ensure_localstack_installed
  if localstack_up; then
    log "LocalStack already answers on $LOCALSTACK_ADDR"
    return 0
  fi
  local logdir="$UPCOMMIT_CACHE/logs"
  mkdir -p "$logdir"
  log "starting LocalStack on $LOCALSTACK_ADDR (log: $logdir/localstack.log)"
  (
    cd "$UPCOMMIT_CACHE" &&
      SERVICES=s3,sqs S3_SKIP_SIGNATURE_VALIDATION=0 GATEWAY_LISTEN="$LOCALSTACK_ADDR" \
        LOCALSTACK_HOST="$LOCALSTACK_ADDR" DISABLE_EVENTS=1 DNS_ADDRESS=0 \
        exec "$LOCALSTACK_VENV/bin/python" -m localstack.runtime.main
  ) >"$logdir/localstack.log" 2>&1 &
  STARTED_LOCALSTACK_PID=$!
  for _ in $(seq 1 120); do
    if localstack_up; then log "LocalStack is up"; return 0; fi
    if ! kill -0 "$STARTED_LOCALSTACK_PID" 2>/dev/null; then
      tail -n 40 "$logdir/localstack.log" >&2
      log "LocalStack exited during start"
      return 1
    fi
    sleep 1
  done
  tail -n 40 "$logdir/localstack.log" >&2
  log "LocalStack did not become ready in 120 s"
  return 1
}

pg_bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

ensure_postgres_installed() {
  if pg_bindir >/dev/null; then return 0; fi
  log "installing PostgreSQL from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
}

# Starts a throwaway PostgreSQL cluster on a loopback port in a temporary directory.
# Sets PG_URL (admin URL) and PG_DATADIR.
start_postgres() {
  ensure_postgres_installed
  local bin port
  bin=$(pg_bindir)
  port="${UPCOMMIT_PG_PORT:-54329}"
  # A cluster left running by a killed run must not block this one: take the next free port.
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  PG_DATADIR=$(mktemp -d /tmp/upcommit-pg.XXXXXX)
  local as=()
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$PG_DATADIR"
    as=(runuser -u postgres --)
  fi
  log "starting PostgreSQL on 127.0.0.1:$port ($PG_DATADIR)"
  "${as[@]}" "$bin/initdb" -D "$PG_DATADIR/data" -U postgres --auth=trust -E UTF8 >"$PG_DATADIR/initdb.log" 2>&1 ||
    { cat "$PG_DATADIR/initdb.log" >&2; return 1; }
  "${as[@]}" "$bin/pg_ctl" -D "$PG_DATADIR/data" -l "$PG_DATADIR/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $PG_DATADIR -c max_connections=400 -c fsync=off" start >/dev/null ||
    { cat "$PG_DATADIR/server.log" >&2; return 1; }
  PG_URL="postgres://postgres@127.0.0.1:$port/postgres"
  PG_AS=("${as[@]}")
  PG_BIN="$bin"
}

stop_postgres() {
  [ -n "${PG_DATADIR:-}" ] || return 0
  "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATADIR/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_DATADIR"
}

# Serves `upcommit` ($1, built) as scripts/run.sh does for a script's run: a fresh bucket
# $UPCOMMIT_BUCKET (versioned, encrypted, CORS), our lifecycle rules, and `serve` with the
# caller's environment, logging to $2/server.log, until /healthz answers (10 s at most).
# Sets SERVED_PID; the caller stops it.
serve_for_script() {
  local bin=$1 work=$2
  "$LOCALSTACK_VENV/bin/python" scripts/dev_bucket.py "$UPCOMMIT_S3_ENDPOINT" "$UPCOMMIT_BUCKET" "$UPCOMMIT_CORS_ORIGINS"
  "$bin" bucket apply-lifecycle --yes >/dev/null
  "$bin" serve 2>"$work/server.log" &
  SERVED_PID=$!
  for _ in $(seq 1 100); do
    curl -fsS "http://$UPCOMMIT_LISTEN/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$SERVED_PID" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 40 "$work/server.log" >&2
  log "upcommit serve did not start"
  return 1
}

ensure_garage_installed() {
  if [ -x "$GARAGE_ROOT/bin/garage" ] && "$GARAGE_ROOT/bin/garage" --version 2>/dev/null | grep -q "$GARAGE_VERSION"; then
    return 0
  fi
  log "building Garage $GARAGE_VERSION from crates.io into $GARAGE_ROOT (once; 10-18 minutes on two cores)"
  CARGO_TARGET_DIR="$UPCOMMIT_CACHE/garage-build" \
    cargo install garage --version "$GARAGE_VERSION" --locked --root "$GARAGE_ROOT" >"$UPCOMMIT_CACHE/garage-build.log" 2>&1 ||
    { tail -n 40 "$UPCOMMIT_CACHE/garage-build.log" >&2; return 1; }
  rm -rf "$UPCOMMIT_CACHE/garage-build"
}

# Starts one Garage node on loopback (SQLite metadata, replication factor 1) in a temporary
# directory, gives it a layout, imports the test key with the right to create buckets.
# Sets GARAGE_ENDPOINT, GARAGE_DIR and STARTED_GARAGE_PID.
start_garage() {
  ensure_garage_installed
  local bin="$GARAGE_ROOT/bin/garage" port=$GARAGE_S3_PORT
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 10)); done
  GARAGE_DIR=$(mktemp -d /tmp/upcommit-garage.XXXXXX)
  cat >"$GARAGE_DIR/garage.toml" <<TOML
metadata_dir = "$GARAGE_DIR/meta"
data_dir = "$GARAGE_DIR/data"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:$((port + 1))"
rpc_public_addr = "127.0.0.1:$((port + 1))"
rpc_secret = "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"

[s3_api]
s3_region = "$AWS_REGION"
api_bind_addr = "127.0.0.1:$port"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:$((port + 3))"
TOML
  chmod 600 "$GARAGE_DIR/garage.toml"
  log "starting Garage $GARAGE_VERSION on 127.0.0.1:$port ($GARAGE_DIR)"
  "$bin" -c "$GARAGE_DIR/garage.toml" server >"$GARAGE_DIR/garage.log" 2>&1 &
  STARTED_GARAGE_PID=$!
  local node=""
  for _ in $(seq 1 100); do
    node=$("$bin" -c "$GARAGE_DIR/garage.toml" node id -q 2>/dev/null | cut -d@ -f1) && [ -n "$node" ] && break
    sleep 0.2
  done
  [ -n "$node" ] || { tail -n 40 "$GARAGE_DIR/garage.log" >&2; log "Garage did not start"; return 1; }
  # `node id` reads the node's key from disk: the RPC port may not listen yet (a loaded machine
  # refused the layout's connection). Wait until the node answers over RPC.
  local rpc=""
  for _ in $(seq 1 150); do
    garage_cli status >/dev/null 2>&1 && { rpc=up; break; }
    sleep 0.2
  done
  [ -n "$rpc" ] || { tail -n 40 "$GARAGE_DIR/garage.log" >&2; log "Garage's RPC did not answer"; return 1; }
  garage_cli layout assign -z dc1 -c 1G "$node" >/dev/null
  garage_cli layout apply --version 1 >/dev/null
  garage_cli key import --yes -n upcommit-test "$GARAGE_KEY_ID" "$GARAGE_SECRET" >/dev/null
  garage_cli key allow --create-bucket upcommit-test >/dev/null
  GARAGE_ENDPOINT="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "$GARAGE_ENDPOINT/" && { log "Garage is up"; return 0; }
    sleep 0.1
  done
  log "Garage's S3 API did not answer"
  return 1
}

garage_cli() { "$GARAGE_ROOT/bin/garage" -c "$GARAGE_DIR/garage.toml" "$@"; }

stop_garage() {
  [ -n "${STARTED_GARAGE_PID:-}" ] || return 0
  kill "$STARTED_GARAGE_PID" 2>/dev/null || true
  wait "$STARTED_GARAGE_PID" 2>/dev/null || true
  rm -rf "$GARAGE_DIR"
  STARTED_GARAGE_PID=""
}

# A fresh single-node Ceph cluster (Debian's RGW 16.2.15: one monitor, one OSD in memory, one
# gateway; scripts/ceph.sh) with the archive class GLACIER_IR added to its placement. Sets
# CEPH_DIR, CEPH_ENDPOINTS, CEPH_KEY_ID and CEPH_SECRET.
start_ceph() {
  CEPH_DIR=$(mktemp -d -u /tmp/upcommit-ceph.XXXXXX)
  bash scripts/ceph.sh start "$CEPH_DIR" --port "$CEPH_S3_PORT" --mon-port "$CEPH_MON_PORT" \
    --archive-class GLACIER_IR ${CEPH_FRONTEND:+--frontend "$CEPH_FRONTEND"}
  # shellcheck disable=SC1091
  source "$CEPH_DIR/env"
}

stop_ceph() {
  [ -n "${CEPH_DIR:-}" ] || return 0
  bash scripts/ceph.sh stop "$CEPH_DIR"
  CEPH_DIR=""
}

stop_localstack() {
  [ -n "${STARTED_LOCALSTACK_PID:-}" ] || return 0
  kill "$STARTED_LOCALSTACK_PID" 2>/dev/null || true
  wait "$STARTED_LOCALSTACK_PID" 2>/dev/null || true
}
