#!/usr/bin/env bash
# What authentication costs a request: the same paced GET load (bench/http_paced_load.cc) on a
# local cluster without users (--no-auth) and on one with them, the second with an API token
# from `sf token create` on every request (each is looked up by its SHA-256, cached 5 s). Both
# plain HTTP (--no-tls), so only authentication differs. Prints p50/p99 and the master's CPU per
# request for each, and the ratios. Everything runs on loopback and stops by itself.
#
#   bench/auth_overhead.sh [BUILD_DIR] [PATH] [RATE] [SECONDS]
#   (defaults: build /api/v1/master 2000 10)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ROUTE=${2:-/api/v1/master}
RATE=${3:-2000}
SECONDS_=${4:-10}
SF="$BUILD/cli/sf"
HTTP=${SF_BENCH_HTTP_PORT:-18580}
GRPC=${SF_BENCH_GRPC_PORT:-18590}
DIR=$(mktemp -d /tmp/sf-auth-bench-XXXXXX)
chmod 755 "$DIR"
export XDG_CONFIG_HOME="$DIR/config"  # the bench's own sf session and defaults
cleanup() {
  "$SF" deploy local down --dir "$DIR/cluster" --delete-data >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT

clock_ticks=$(getconf CLK_TCK)
master_ticks() { awk '{print $14 + $15}' "/proc/$(cat "$DIR/cluster/master.pid")/stat"; }

# run LABEL: paced load on ROUTE; prints "LABEL p50_ms p99_ms non200 cpu_us_per_request".
run() {
  local before after out
  before=$(master_ticks)
  out=$("$BUILD/bench/http_paced_load_bench" 127.0.0.1 "$HTTP" "$ROUTE" "$RATE" "$SECONDS_" 16)
  after=$(master_ticks)
  local p50 p99 non200 done_
  p50=$(awk -F': ' '/^latency_p50_ms/ {print $2}' <<<"$out")
  p99=$(awk -F': ' '/^latency_p99_ms/ {print $2}' <<<"$out")
  non200=$(awk -F': ' '/^non_200/ {print $2}' <<<"$out")
  done_=$(awk -F': ' '/^requests/ {print $2}' <<<"$out")
  local cpu_us
  cpu_us=$(awk -v t=$((after - before)) -v hz="$clock_ticks" -v n="${done_:-1}" 'BEGIN {printf "%.1f", t / hz * 1e6 / n}')
  echo "$1 $p50 $p99 ${non200:-?} $cpu_us"
}

echo "== GET $ROUTE at $RATE/s for ${SECONDS_}s, 16 connections; plain HTTP"
"$SF" deploy local up --dir "$DIR/cluster" --agents 1 --port "$HTTP" --grpc-port "$GRPC" --no-tls --no-auth >/dev/null
off=$(SF_TOKEN= run no-auth)
"$SF" deploy local down --dir "$DIR/cluster" --delete-data >/dev/null
"$SF" deploy local up --dir "$DIR/cluster" --agents 1 --port "$HTTP" --grpc-port "$GRPC" --no-tls >/dev/null
SF_TOKEN=$("$SF" token create --name bench --master "http://127.0.0.1:$HTTP" 2>/dev/null)
on=$(SF_TOKEN="$SF_TOKEN" run api-token)
printf '%-10s %9s %9s %7s %16s\n' mode p50_ms p99_ms non200 master_cpu_us/req
printf '%-10s %9s %9s %7s %16s\n' $off
printf '%-10s %9s %9s %7s %16s\n' $on
awk -v a="$off" -v b="$on" 'BEGIN {split(a, x, " "); split(b, y, " ");
  printf "ratio (token / no auth): p50 %.2f, p99 %.2f, master CPU per request %.2f\n", y[2] / x[2], y[3] / x[3], y[5] / x[5]}'
