#!/usr/bin/env bash
# Load on a real local cluster: wrk against GET /api/v1/experiments (with 200 experiments
# stored), then metric ingestion from many simulated trainers over TrialLink. Prints requests/s,
# latency percentiles and metric rows/s. Everything runs on loopback and stops by itself.
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
cleanup() { "$SF" deploy local down --dir "$DIR" --delete-data >/dev/null 2>&1 || true; }
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
echo "== metric ingestion: 64 simulated trainers x 500 reports, 1 row per call"
"$BUILD/bench/metric_ingest_bench" "127.0.0.1:$GRPC" 1 64 500 1
echo "== metric ingestion: 64 simulated trainers x 2000 rows, 10 rows per call"
"$BUILD/bench/metric_ingest_bench" "127.0.0.1:$GRPC" 65 64 2000 10
