#!/usr/bin/env bash
# Load on a real local cluster: wrk against GET /api/v1/experiments (with 200 experiments
# stored), then metric ingestion from many simulated trainers over TrialLink. Prints requests/s,
# latency percentiles and metric rows/s, then the PostgreSQL ceiling for the same rows (COPY and
# multi-row INSERT straight into the database) and the master/COPY ratio. Everything runs on
# loopback and stops by itself.
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
"$SF" deploy local up --dir "$DIR" --agents 1 --port "$HTTP" --grpc-port "$GRPC" >/dev/null
URL="http://127.0.0.1:$HTTP"
DATA="$(cd ..; pwd)/shared/data/multi30k-de-en-tiny"
for i in $(seq 1 200); do
  YAML="name: load-$i
data: {train: {src: $DATA/train.de, tgt: $DATA/train.en}}
hyperparameters: {dropout: {type: categorical, vals: [0.0, 0.1]}}
searcher: {name: grid, metric: validation_loss, max_length: {batches: 1000000}}"
  /usr/bin/python3 -c 'import json,sys; print(json.dumps({"configYaml": sys.argv[1], "activate": False}))' "$YAML" \
    | curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary @- "$URL/api/v1/experiments"
done
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
echo "== metric ingestion: 64 simulated trainers x 500 reports, 1 row per call"
"$BUILD/bench/metric_ingest_bench" "127.0.0.1:$GRPC" 1 64 500 1 | tee "$DIR/ingest1.txt"
echo "== metric ingestion: 64 simulated trainers x 2000 rows, 10 rows per call"
"$BUILD/bench/metric_ingest_bench" "127.0.0.1:$GRPC" 65 64 2000 10 | tee "$DIR/ingest10.txt"
# The PostgreSQL ceiling: the same 128,000 rows straight into the master's database (a scratch
# copy of its metrics table), by COPY, by multi-row INSERT and by the master's own statement
# (jsonb_to_recordset, 64 trainers x 10 rows per transaction), each batch its own transaction.
echo "== PostgreSQL ceiling: 64 x 2000 rows by COPY (10,000 rows/transaction), multi-row INSERT (1,000 rows/statement), the master's statement (640 rows/transaction)"
PG="host=127.0.0.1 port=$(cat "$DIR/postgres/port") user=postgres dbname=steadfast"
"$BUILD/bench/pg_ingest_ceiling_bench" "$PG" 128000 | tee "$DIR/ceiling.txt"
rate() { awk -v k="$1:" '$1 == k {print $2}' "$2"; }
awk -v m1="$(rate rows_per_second "$DIR/ingest1.txt")" -v m10="$(rate rows_per_second "$DIR/ingest10.txt")" \
    -v copy="$(rate copy_rows_per_second "$DIR/ceiling.txt")" -v ins="$(rate insert_rows_per_second "$DIR/ceiling.txt")" \
    -v own="$(rate master_statement_rows_per_second "$DIR/ceiling.txt")" \
    'BEGIN { printf "master_1_row_per_call / copy: %.3f\nmaster_10_rows_per_call / copy: %.3f\nmaster_10_rows_per_call / multi_row_insert: %.3f\nmaster_10_rows_per_call / master_statement: %.3f\n", m1 / copy, m10 / copy, m10 / ins, m10 / own }'
