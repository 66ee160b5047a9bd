#!/usr/bin/env bash
# The capability probe's cost: starts a Garage node of its own (scripts/lib.sh), creates a bucket,
# runs `upcommit doctor` (the whole probe plus the bucket-configuration reads) against it, and
# prints the requests the node logged and the time doctor took. Needs a built target/debug/upcommit.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
GARAGE_S3_PORT=${GARAGE_S3_PORT:-3960} start_garage >/dev/null 2>&1
trap 'kill "$STARTED_GARAGE_PID" 2>/dev/null || true' EXIT
export AWS_ACCESS_KEY_ID=$GARAGE_KEY_ID AWS_SECRET_ACCESS_KEY=$GARAGE_SECRET AWS_REGION=us-east-1
"$LOCALSTACK_VENV/bin/python" - "$GARAGE_ENDPOINT" <<'PY'
import sys, boto3
boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1").create_bucket(Bucket="probe-requests")
PY
db=$(mktemp -d)
requests() { grep -v "error " "$GARAGE_DIR/garage.log" | grep -c "(key GK" || true; }
before=$(requests)
start=$(date +%s.%N)
UPCOMMIT_BUCKET=probe-requests UPCOMMIT_S3_ENDPOINT=$GARAGE_ENDPOINT DATABASE_URL="sqlite://$db/doctor.db" \
  UPCOMMIT_JWT_SECRET=0123456789abcdef0123456789abcdef UPCOMMIT_ACCEPT_STORE_GAPS=$GARAGE_GAPS \
  target/debug/upcommit doctor >/dev/null 2>&1 || true
end=$(date +%s.%N)
echo "upcommit doctor on Garage $GARAGE_VERSION: $(($(requests) - before)) requests, $(echo "$end - $start" | bc) s"
rm -rf "$db"
