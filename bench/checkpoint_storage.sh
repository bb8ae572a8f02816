#!/usr/bin/env bash
# Checkpoint write and restore throughput for a transformer_base-sized checkpoint (about 0.9 GB
# with the AdamW moments): shared_fs in a directory against the local S3 server
# (deploy/local-s3.sh, Ceph's RADOS Gateway, its OSD on a file in the same directory's disk).
# Root (Ceph, and dropping the page cache before reads).
#
#   bash bench/checkpoint_storage.sh [build] [--params N] [--reps N]
#
# `build` first builds the bench with -j2. Prints the machine, then the bench's table.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = build ]; then
  shift
  cmake --build "$src/build" -j2 --target checkpoint_storage_bench
fi
bench="$src/build/bench/checkpoint_storage_bench"
[ -x "$bench" ] || { echo "checkpoint_storage.sh: $bench is not built (run with 'build')" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "checkpoint_storage.sh: needs root (Ceph daemons, drop_caches)" >&2; exit 2; }
work=$(mktemp -d /tmp/sf-ckpt-bench-XXXXXX)
cleanup() {
  bash "$src/deploy/local-s3.sh" down "$work/s3" --delete-data >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; disk of $work: $(df -h --output=source,size "$work" | tail -1)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
bash "$src/deploy/local-s3.sh" up "$work/s3" --port "$port" --bucket sf-bench --size 8 >/dev/null
set -a
# shellcheck disable=SC1091
. "$work/s3/s3.env"
set +a
SF_S3_BUCKET=sf-bench "$bench" --dir "$work/scratch" "$@"
