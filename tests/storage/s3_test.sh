#!/usr/bin/env bash
# The S3 client's tests against a real S3 server: brings up deploy/local-s3.sh (a single-node
# Ceph with a RADOS Gateway) in a fresh directory, runs the test binary with the server's
# endpoint, keys and bucket in its environment, and stops the server at exit.
#
#   tests/storage/s3_test.sh TEST_BINARY [gtest args]
#
# Exit: the binary's status; 77 (skipped) when not root (the Ceph daemons write as root); 1 when
# the server does not come up (its log tail is printed by local-s3.sh). About a minute.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
binary=$1
shift
if [ "$(id -u)" -ne 0 ]; then
  echo "s3_test: skipped: needs root (deploy/local-s3.sh)"
  exit 77
fi
dir=$(mktemp -d /tmp/sf-s3-test-XXXXXX)
cleanup() {
  bash "$src/deploy/local-s3.sh" down "$dir" --delete-data >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
# A free port for the gateway, away from the default a developer's own server may hold.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start=$(date +%s)
bash "$src/deploy/local-s3.sh" up "$dir" --port "$port" --bucket sf-test --size 2 >/dev/null
echo "s3_test: the local S3 server came up in $(($(date +%s) - start)) s"
set -a
# shellcheck disable=SC1091
. "$dir/s3.env"
set +a
export SF_S3_BUCKET=sf-test
export SF_S3_DIR="$dir"  # for tests that stop and start the gateway (local-s3.sh gateway)
"$binary" "$@"
