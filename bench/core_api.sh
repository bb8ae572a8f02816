#!/usr/bin/env bash
# The Core API's costs on a real local cluster (docs/core-api.md; issue targets in brackets):
#  1. its overhead on a training loop: the same loop, in the same trial process, with and
#     without a metric report per step at 20 reports/s, in alternating repetitions (medians),
#     and the cost of one report call [< 2% at 20 reports/s];
#  2. the time from `sf experiment create` to the entrypoint's first line, with a context of
#     10 MiB of incompressible data (a new one each run, so every agent fetch is cold) [< 2 s].
# Everything runs on loopback (`sf deploy local up`, one agent) and stops by itself.
#
#   bench/core_api.sh [BUILD_DIR]      (default: build)
#   STEP_MS=50 STEPS=100 REPEATS=5 RUNS=3 bench/core_api.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SF="$BUILD/cli/sf"
DIR=$(mktemp -d /tmp/sf-core-api-bench-XXXXXX)
chmod 755 "$DIR"
HTTP=${SF_BENCH_HTTP_PORT:-18580}
GRPC=${SF_BENCH_GRPC_PORT:-18590}
RUNS=${RUNS:-3}
cleanup() { "$SF" deploy local down --dir "$DIR" --delete-data >/dev/null 2>&1 || true; }
trap cleanup EXIT
export XDG_CONFIG_HOME="$DIR/config"  # the bench's own sf defaults file
"$SF" deploy local up --dir "$DIR" --agents 1 --port "$HTTP" --grpc-port "$GRPC" --no-tls --no-auth >/dev/null
export SF_MASTER="http://127.0.0.1:$HTTP"

ERR_FILE="$DIR/create.err"
. bench/lib/sf_experiments.sh

echo "== 1. overhead of a metric report per step (STEP_MS=${STEP_MS:-50}, STEPS=${STEPS:-100}, REPEATS=${REPEATS:-5})"
CTX="$DIR/overhead"
mkdir -p "$CTX"
cp bench/core_api/overhead.py "$CTX/"
cat > "$CTX/exp.yaml" <<YAML
name: core-api-overhead
entrypoint: /usr/bin/python3 overhead.py
hyperparameters: {step_ms: ${STEP_MS:-50}, steps: ${STEPS:-100}, repeats: ${REPEATS:-5}}
searcher: {name: single, metric: overhead_percent, max_length: {batches: 1}}
YAML
ID=$(create "$CTX/exp.yaml")
echo "experiment $ID: $(wait_done "$ID")"
"$SF" trial logs "$(trial_of "$ID")" | grep -E "steps per repetition|without reports|overhead:" | sed 's/^.*\] //'

echo "== 2. sf experiment create -> the entrypoint's first line (10 MiB context, $RUNS runs)"
for run in $(seq 1 "$RUNS"); do
  CTX="$DIR/first-line-$run"
  mkdir -p "$CTX"
  cp bench/core_api/first_line.py "$CTX/"
  head -c $((10 << 20)) /dev/urandom > "$CTX/weights.bin"
  cat > "$CTX/exp.yaml" <<YAML
name: core-api-first-line-$run
entrypoint: /usr/bin/python3 first_line.py
searcher: {name: single, metric: validation_loss, max_length: {batches: 1}}
YAML
  T0=$(date +%s.%N)
  ID=$(create "$CTX/exp.yaml")
  STATE=$(wait_done "$ID")
  LINE=$("$SF" trial logs "$(trial_of "$ID")" | grep -o "first line at [0-9.]*" | head -1 | awk '{print $4}')
  awk -v a="$T0" -v b="$LINE" -v s="$STATE" -v r="$run" 'BEGIN { printf "run %d: %.2f s (%s)\n", r, b - a, s }'
done
