#!/usr/bin/env bash
# A throwaway Ceph cluster on loopback for the tests: one monitor, N OSDs (BlueStore, each on
# a sparse file in DIR), M RADOS Gateways (S3), `auth none`, no manager. Debian's packages
# (bookworm: 16.2.15, Pacific); installs them when missing.
#
#   scripts/ceph.sh start DIR [--osds N] [--gateways M] [--port P] [--mon-port Q]
#                             [--archive-class CLASS] [--frontend "OPTS"]
#   scripts/ceph.sh stop DIR
#
# `start` makes DIR (which must not exist), starts the cluster, creates the S3 user and, with
# --archive-class, adds that storage class to the default placement (RGW refuses every class
# but STANDARD until an operator adds it: docs/stores.md). It writes DIR/env (shell
# assignments: CEPH_ENDPOINTS, space-separated gateway URLs, CEPH_KEY_ID, CEPH_SECRET) and
# each daemon's pid to DIR/run/<name>.pid (osd.0, osd.1, …, client.rgw.gw1, …), so a test can
# kill one. --frontend appends OPTS to each gateway's beast frontend line (e.g. tcp_nodelay=1,
# see BENCHMARKS.md). Gateway i listens on port P+i-1 (P defaults to 7480); the monitor on Q (msgr v2;
# 3300 by default) and Q+1 (v1); the OSDs on free ports of 6800-7300, all on 127.0.0.1.
# `stop` kills every daemon of DIR and removes DIR.
#
# What makes it start in seconds and reliably (issue 36): the monitor's map in the two-address
# form (monmaptool --addv), `ms mon client mode = crc` (with auth none the gateway otherwise
# insists on a secure monitor connection and hangs for 300 s), short paxos intervals, the S3
# user created before any storage class is added (that initialises the default zone), and a
# pool size no larger than the OSDs.
set -euo pipefail

CEPH_KEY_ID="${CEPH_KEY_ID:-UPCOMMITTESTKEY0000}"
CEPH_SECRET="${CEPH_SECRET:-upcommit-test-secret-0123456789abcdef0123}"

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

ensure_ceph_installed() {
  if command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null &&
    command -v radosgw >/dev/null && command -v radosgw-admin >/dev/null &&
    command -v monmaptool >/dev/null; then
    return 0
  fi
  log "installing Ceph (ceph-mon ceph-osd radosgw ceph-common) from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    ceph-mon ceph-osd radosgw ceph-common >/dev/null
}

# Waits up to $2 tenths of a second for the command $1 (a string) to succeed.
wait_for() {
  local i
  for i in $(seq 1 "$2"); do
    if eval "$1" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 1
}

start() {
  local dir=$1
  shift
  local osds=1 gateways=1 port=7480 mon_port=3300 archive_class="" frontend=""
  while [ $# -gt 0 ]; do
    case "$1" in
    --osds) osds=$2; shift 2 ;;
    --gateways) gateways=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --mon-port) mon_port=$2; shift 2 ;;
    --archive-class) archive_class=$2; shift 2 ;;
    --frontend) frontend=$2; shift 2 ;;
    *) log "unknown option $1"; return 2 ;;
    esac
  done
  [ ! -e "$dir" ] || { log "$dir exists"; return 2; }
  ensure_ceph_installed
  local size=$((osds < 3 ? osds : 3)) min=$((osds < 3 ? 1 : 2))
  # Each OSD's BlueStore on a sparse file of its own (disk is used as data arrives): the
  # store-facing suite leaves several GiB behind, more than memory-backed OSDs could hold.
  local block_bytes=$((64 * 1024 * 1024 * 1024))
  local mon_v2=$mon_port mon_v1=$((mon_port + 1))
  local fsid conf="$dir/ceph.conf"
  fsid=$(cat /proc/sys/kernel/random/uuid)
  mkdir -p "$dir/run" "$dir/log" "$dir/mon" "$dir/osd"
  local addrs="[v2:127.0.0.1:$mon_v2,v1:127.0.0.1:$mon_v1]"
  cat >"$conf" <<CONF
[global]
fsid = $fsid
mon host = $addrs
public addr = 127.0.0.1
cluster addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = $size
osd pool default min size = $min
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
osd objectstore = bluestore
bluestore block create = true
bluestore block size = $block_bytes
bluestore block db create = false
bluestore block wal create = false
bluestore fsck on mount = false
osd memory target = 1073741824
mon allow pool delete = true
# Failure reports count per OSD, not per host: every OSD here is on one host, where the
# default (host) never gathers the two reporters a hung OSD needs to be marked down (a dead
# one is, at once, by the refused connections).
mon osd reporter subtree level = osd
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
paxos propose interval = 0.05
paxos min wait = 0.01
ms mon client mode = crc
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
mon data = $dir/mon/\$cluster-\$id
osd data = $dir/osd/\$cluster-\$id
keyring = $dir/keyring
CONF
  local g
  # A gateway killed mid-completion holds that upload's completion lock for this long (RGW's
  # default, 600 s, would stall a test run that meets it by chance for ten minutes; see
  # docs/stores.md, "A Ceph cluster, and a node lost").
  printf '[client]\nrgw mp lock max time = 60\n' >>"$conf"
  for g in $(seq 1 "$gateways"); do
    printf '[client.rgw.gw%s]\nrgw frontends = beast endpoint=127.0.0.1:%s%s\n' \
      "$g" $((port + g - 1)) "${frontend:+ $frontend}" >>"$conf"
  done
  local t0=$SECONDS
  ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  monmaptool --create --fsid "$fsid" --addv a "$addrs" "$dir/monmap" >/dev/null
  ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" 2>>"$dir/log/setup.log"
  ceph-mon -c "$conf" -i a 2>>"$dir/log/setup.log"
  local n uuid id
  for n in $(seq 1 "$osds"); do
    uuid=$(cat /proc/sys/kernel/random/uuid)
    id=$(ceph -c "$conf" --connect-timeout 30 osd new "$uuid")
    mkdir -p "$dir/osd/ceph-$id"
    ceph-osd -c "$conf" -i "$id" --mkfs --osd-uuid "$uuid" >>"$dir/log/setup.log" 2>&1
    ceph-osd -c "$conf" -i "$id" >>"$dir/log/setup.log" 2>&1
  done
  wait_for "[ \$(ceph -c '$conf' osd stat -f json | grep -o '\"num_up_osds\":[0-9]*' | cut -d: -f2) = $osds ]" 600 ||
    { tail -n 30 "$dir"/log/*.log >&2; log "the OSDs did not come up"; return 1; }
  # The user first: it initialises the default zone, which the placement commands then extend.
  radosgw-admin -c "$conf" user create --uid=upcommit --display-name=upcommit \
    --access-key="$CEPH_KEY_ID" --secret-key="$CEPH_SECRET" >/dev/null 2>>"$dir/log/setup.log"
  if [ -n "$archive_class" ]; then
    radosgw-admin -c "$conf" zonegroup placement add --rgw-zonegroup default \
      --placement-id default-placement --storage-class "$archive_class" >/dev/null 2>>"$dir/log/setup.log"
    radosgw-admin -c "$conf" zone placement add --rgw-zone default \
      --placement-id default-placement --storage-class "$archive_class" \
      --data-pool "default.rgw.$(echo "$archive_class" | tr '[:upper:]' '[:lower:]').data" \
      >/dev/null 2>>"$dir/log/setup.log"
  fi
  local endpoints=""
  for g in $(seq 1 "$gateways"); do
    radosgw -c "$conf" -n "client.rgw.gw$g" 2>>"$dir/log/setup.log"
    endpoints="$endpoints http://127.0.0.1:$((port + g - 1))"
  done
  endpoints=${endpoints# }
  local e
  for e in $endpoints; do
    wait_for "curl -sf -o /dev/null '$e/'" 600 ||
      { tail -n 30 "$dir"/log/*rgw*.log >&2; log "the gateway at $e did not answer"; return 1; }
  done
  {
    printf 'CEPH_ENDPOINTS=%q\n' "$endpoints"
    printf 'CEPH_KEY_ID=%q\nCEPH_SECRET=%q\n' "$CEPH_KEY_ID" "$CEPH_SECRET"
  } >"$dir/env"
  log "Ceph $(ceph-mon --version | awk '{print $3}') up in $((SECONDS - t0)) s: $osds OSD(s), gateways $endpoints ($dir)"
}

stop() {
  local dir=$1 pid f
  [ -d "$dir/run" ] || return 0
  for f in "$dir"/run/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    # A daemon a test hung (SIGSTOP) takes its TERM only once it runs again.
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
  for f in "$dir"/run/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    wait_for "! kill -0 $pid" 100 || kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

case "${1:-}" in
start) shift; start "$@" ;;
stop) shift; stop "$@" ;;
*) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac
