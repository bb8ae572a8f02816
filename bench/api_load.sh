#!/usr/bin/env bash
# Load on a real local cluster: wrk against GET /api/v1/experiments (with 200 experiments
# stored, 3 trials each), the same route at a fixed 1,000 requests/s alone and during ingestion
# (bench/http_paced_load.cc), then metric ingestion from many simulated trainers over
# TrialLink. Prints requests/s, latency percentiles and metric rows/s, then the PostgreSQL
# ceiling for the same rows (COPY and multi-row INSERT straight into the database) and the
# master/COPY ratio. Everything runs on loopback and stops by itself.
#
#   bench/api_load.sh [BUILD_DIR]        (default: build; needs wrk, from deploy/install-deps.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SF="$BUILD/cli/sf"
DIR=$(mktemp -d /tmp/sf-api-load-XXXXXX)
chmod 755 "$DIR"
HTTP=${SF_BENCH_HTTP_PORT:-18480}
GRPC=${SF_BENCH_GRPC_PORT:-18490}
INGEST_PID=
cleanup() {
  [ -n "$INGEST_PID" ] && kill "$INGEST_PID" 2>/dev/null
  "$SF" deploy local down --dir "$DIR" --delete-data >/dev/null 2>&1 || true
}
trap cleanup EXIT
# The bench's own sf defaults file, so the user's (~/.config/steadfast/cli.json) stays as it is.
export XDG_CONFIG_HOME="$DIR/config"
# Plain HTTP and gRPC without users (--no-tls --no-auth): the figures are the server's, comparable
# with earlier runs (authentication costs one cached hash lookup per request).
"$SF" deploy local up --dir "$DIR" --agents 1 --port "$HTTP" --grpc-port "$GRPC" --no-tls --no-auth >/dev/null
URL="http://127.0.0.1:$HTTP"
PG="host=127.0.0.1 port=$(cat "$DIR/postgres/port") user=postgres dbname=steadfast"
# The simulated trainers make their TrialLink task tokens from the cluster's secret (as the
# master does for real trainers); it goes to them in the environment, not on a command line.
SF_TASK_TOKEN_SECRET_HEX=$(psql "$PG" -tAc "SELECT secret_hex FROM cluster_secrets WHERE name = 'task_tokens'")
export SF_TASK_TOKEN_SECRET_HEX
. bench/lib/load_experiments.sh
store_load_experiments "$URL" 200
echo "== GET /api/v1/experiments (200 stored, page of 100), wrk -t2 -c32 -d10s"
wrk -t2 -c32 -d10s --latency "$URL/api/v1/experiments" | grep -E "Requests/sec|Latency  |  50%|  99%"
echo "== GET /api/v1/experiments/1, wrk -t2 -c32 -d10s"
wrk -t2 -c32 -d10s --latency "$URL/api/v1/experiments/1" | grep -E "Requests/sec|  50%|  99%"
# The list again while 64 simulated trainers report metrics (trials 129-192, killed after wrk):
# reads and ingestion share the master and the two cores.
echo "== GET /api/v1/experiments while 64 simulated trainers report (10 rows per call), wrk -t2 -c32 -d10s"
"$BUILD/bench/metric_ingest_bench" "127.0.0.1:$GRPC" 129 64 1000000 10 >/dev/null 2>&1 &
INGEST_PID=$!
sleep 1
wrk -t2 -c32 -d10s --latency "$URL/api/v1/experiments" | grep -E "Requests/sec|Latency  |  50%|  99%"
kill "$INGEST_PID" 2>/dev/null || true
wait "$INGEST_PID" 2>/dev/null || true
INGEST_PID=
# The target's form: a fixed offered rate (open loop; latency from each request's due time), alone
# and while trainers report, first at a fixed 20,000 rows/s (64 trainers, 10 rows per call), then
# flat out.
paced() { { "$BUILD/bench/http_paced_load_bench" 127.0.0.1 "$HTTP" /api/v1/experiments 1000 10 32 || true; } \
            | grep -E "achieved|p50|p99_ms|max|non_200|errors"; }
echo "== GET /api/v1/experiments at a fixed 1,000 requests/s (32 connections, 10 s)"
paced
echo "== the same while 64 simulated trainers report 20,000 rows/s (10 rows per call, paced)"
"$BUILD/bench/metric_ingest_bench" "127.0.0.1:$GRPC" 129 64 1000000 10 --rows-per-second 20000 >/dev/null 2>&1 &
INGEST_PID=$!
sleep 1
paced
kill "$INGEST_PID" 2>/dev/null || true
wait "$INGEST_PID" 2>/dev/null || true
# Flat out: the metric rows stored during the paced window (counted in PostgreSQL) say what
# ingestion still gets while the reads are served. The list's pages come from the master's
# snapshot cache (master/db/snapshot_cache.h); GET /api/v1/experiments/1 always reads
# PostgreSQL, on the API's own connections.
metric_rows() { psql "$PG" -tAc "SELECT count(*) FROM metrics"; }
flat_out() {  # PATH FIRST_TRIAL [--reporter]: paced reads of PATH while 64 trainers report as
  # fast as they can (trials not used before, so every row they send is new and counted); with
  # --reporter through the Core API's batching MetricReporter, as real trainers now do
  "$BUILD/bench/metric_ingest_bench" "127.0.0.1:$GRPC" "$2" 64 1000000 10 ${3:-} >/dev/null 2>&1 &
  INGEST_PID=$!
  sleep 1
  local r0 r1 t0 t1
  r0=$(metric_rows); t0=$(date +%s.%N)
  { "$BUILD/bench/http_paced_load_bench" 127.0.0.1 "$HTTP" "$1" 1000 10 32 || true; } \
    | grep -E "achieved|p50|p99_ms|max|non_200|errors"
  r1=$(metric_rows); t1=$(date +%s.%N)
  awk -v r=$((r1 - r0)) -v t0="$t0" -v t1="$t1" 'BEGIN { printf "ingested_rows_per_second_meanwhile: %.0f\n", r / (t1 - t0) }'
  kill "$INGEST_PID" 2>/dev/null || true
  wait "$INGEST_PID" 2>/dev/null || true
  INGEST_PID=
}
echo "== the same while 64 simulated trainers report as fast as they can (10 rows per call)"
flat_out /api/v1/experiments 193
echo "== the same while 64 trainers report as fast as they can through the batching reporter (core_api/metric_reporter.h)"
flat_out /api/v1/experiments 385 --reporter
echo "== GET /api/v1/experiments/1 (never cached) at a fixed 1,000 requests/s, alone"
{ "$BUILD/bench/http_paced_load_bench" 127.0.0.1 "$HTTP" /api/v1/experiments/1 1000 10 32 || true; } \
  | grep -E "achieved|p50|p99_ms|max|non_200|errors"
echo "== the same while 64 simulated trainers report as fast as they can (10 rows per call)"
flat_out /api/v1/experiments/1 257
echo "== 64 simulated trainers alone, as fast as they can (10 rows per call), for the same 10 s"
r0=$(metric_rows); t0=$(date +%s.%N)
timeout 11 "$BUILD/bench/metric_ingest_bench" "127.0.0.1:$GRPC" 321 64 1000000 10 >/dev/null 2>&1 || true
r1=$(metric_rows); t1=$(date +%s.%N)
awk -v r=$((r1 - r0)) -v t0="$t0" -v t1="$t1" 'BEGIN { printf "ingested_rows_per_second: %.0f\n", r / (t1 - t0) }'
# CPU time (clock ticks, utime + stime) of the master and of the PostgreSQL server (postmaster and
# its backends) while a command runs, per 1,000 rows: on two shared cores the rates above are
# bounded by the CPU every party needs, and these say how much of it is the master's.
TICK=$(getconf CLK_TCK)
MASTER_PID=$(cat "$DIR/master.pid")
PG_PID=$(head -1 "$DIR/postgres/data/postmaster.pid")
ticks() { local t=0 p; for p in "$@"; do [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
pg_ticks() { ticks "$PG_PID" $(pgrep -P "$PG_PID"); }
with_cpu() {  # ROWS COMMAND...: runs it and prints master/PostgreSQL CPU per 1,000 rows
  local rows=$1; shift
  local m0 p0 m1 p1
  m0=$(ticks "$MASTER_PID"); p0=$(pg_ticks)
  "$@"
  m1=$(ticks "$MASTER_PID"); p1=$(pg_ticks)
  awk -v m=$((m1 - m0)) -v p=$((p1 - p0)) -v hz="$TICK" -v rows="$rows" 'BEGIN {
    printf "master_cpu_ms_per_1000_rows: %.1f\npostgres_cpu_ms_per_1000_rows: %.1f\nmaster_bound_rows_per_second_per_core: %.0f\n",
      1000 * m / hz / rows * 1000, 1000 * p / hz / rows * 1000, (m > 0 ? rows * hz / m : 0) }'
}
echo "== metric ingestion: 64 simulated trainers x 500 reports, 1 row per call"
with_cpu 32000 "$BUILD/bench/metric_ingest_bench" "127.0.0.1:$GRPC" 1 64 500 1 | tee "$DIR/ingest1.txt"
echo "== metric ingestion: 64 simulated trainers x 2000 rows, 10 rows per call"
with_cpu 128000 "$BUILD/bench/metric_ingest_bench" "127.0.0.1:$GRPC" 65 64 2000 10 | tee "$DIR/ingest10.txt"
# The PostgreSQL ceiling: the same 128,000 rows straight into the master's database (a scratch
# copy of its metrics table), by COPY, by multi-row INSERT and by the master's own statement
# (jsonb_to_recordset, 64 trainers x 10 rows per transaction), each batch its own transaction.
echo "== PostgreSQL ceiling: 64 x 2000 rows by COPY (10,000 rows/transaction), multi-row INSERT (1,000 rows/statement), the master's statement (640 rows/transaction)"
"$BUILD/bench/pg_ingest_ceiling_bench" "$PG" 128000 | tee "$DIR/ceiling.txt"
rate() { awk -v k="$1:" '$1 == k {print $2}' "$2"; }
awk -v m1="$(rate rows_per_second "$DIR/ingest1.txt")" -v m10="$(rate rows_per_second "$DIR/ingest10.txt")" \
    -v copy="$(rate copy_rows_per_second "$DIR/ceiling.txt")" -v ins="$(rate insert_rows_per_second "$DIR/ceiling.txt")" \
    -v own="$(rate master_statement_rows_per_second "$DIR/ceiling.txt")" \
    'BEGIN { printf "master_1_row_per_call / copy: %.3f\nmaster_10_rows_per_call / copy: %.3f\nmaster_10_rows_per_call / multi_row_insert: %.3f\nmaster_10_rows_per_call / master_statement: %.3f\n", m1 / copy, m10 / copy, m10 / ins, m10 / own }'
