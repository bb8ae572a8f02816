#!/usr/bin/env bash
# Slurm as the resource manager against the agents, on this machine (docs/slurm.md "How fast"):
#  1. latency: `sf experiment create` to a user trial's first line (bench/core_api/first_line.py,
#     a few-KiB context), RUNS runs each on `sf deploy local up` (2 agents x 2 CPU slots) and on
#     `sf deploy local up --slurm` (2 Slurm nodes x 2 CPUs); every run and the median;
#  2. throughput: one grid experiment of TRIALS short trials (the same script, each a job or a
#     task of its own), jobs per minute from create to the experiment's end, and the master's
#     CPU time per trial (utime + stime of sf-master from /proc, before and after).
# Both clusters run the same experiments; each is brought up, measured and taken down in turn.
# Root only (the Slurm nodes are network namespaces).
#
#   sudo bench/slurm_scheduling.sh [BUILD_DIR]        (default: build)
#   RUNS=5 TRIALS=200 sudo bench/slurm_scheduling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SF="$PWD/$BUILD/cli/sf"
RUNS=${RUNS:-5}
TRIALS=${TRIALS:-200}
HTTP=${SF_BENCH_HTTP_PORT:-18680}
GRPC=${SF_BENCH_GRPC_PORT:-18690}
if [ "$(id -u)" != 0 ]; then echo "slurm_scheduling.sh: needs root (the local Slurm cluster)" >&2; exit 2; fi
WORK=$(mktemp -d /tmp/sf-slurm-bench-XXXXXX)
chmod 755 "$WORK"
export XDG_CONFIG_HOME="$WORK/config"
export SF_MASTER="http://127.0.0.1:$HTTP"
DIR=""
cleanup() {
  if [ -n "$DIR" ]; then "$SF" deploy local down --dir "$DIR" --delete-data >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

ERR_FILE="$WORK/create.err"
. bench/lib/sf_experiments.sh
master_cpu() {  # sf-master's utime + stime, in seconds
  awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$(cat "$DIR/master.pid")/stat"
}
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

measure() {  # $1 = label; the cluster in $DIR is up
  local label=$1 lat=() run ctx id line t0 state
  for run in $(seq 1 "$RUNS"); do
    ctx="$WORK/$label-first-line-$run"
    mkdir -p "$ctx"
    cp bench/core_api/first_line.py "$ctx/"
    printf 'name: %s-first-line-%s\nentrypoint: /usr/bin/python3 first_line.py\nsearcher: {name: single, metric: validation_loss, max_length: {batches: 1}}\n' \
      "$label" "$run" > "$ctx/exp.yaml"
    t0=$(date +%s.%N)
    id=$(create "$ctx/exp.yaml")
    state=$(wait_done "$id")
    line=$("$SF" trial logs "$(trial_of "$id")" | grep -o "first line at [0-9.]*" | head -1 | awk '{print $4}')
    lat+=("$(awk -v a="$t0" -v b="$line" 'BEGIN { printf "%.2f", b - a }')")
    echo "  $label run $run: ${lat[-1]} s to the first line ($state)"
  done
  echo "$label latency median: $(printf '%s\n' "${lat[@]}" | median) s over $RUNS runs" | tee -a "$WORK/summary"

  ctx="$WORK/$label-throughput"
  mkdir -p "$ctx"
  cp bench/core_api/first_line.py "$ctx/"
  vals=$(seq -s, 1 "$TRIALS")
  printf 'name: %s-throughput\nentrypoint: /usr/bin/python3 first_line.py\nhyperparameters: {i: {type: categorical, vals: [%s]}}\nsearcher: {name: grid, metric: validation_loss, max_length: {batches: 1}, max_concurrent_trials: %s}\nmax_restarts: 0\n' \
    "$label" "$vals" "$TRIALS" > "$ctx/exp.yaml"
  local cpu0 cpu1 t1
  cpu0=$(master_cpu)
  t0=$(date +%s.%N)
  id=$(create "$ctx/exp.yaml")
  state=$(wait_done "$id")
  t1=$(date +%s.%N)
  cpu1=$(master_cpu)
  awk -v n="$TRIALS" -v a="$t0" -v b="$t1" -v c0="$cpu0" -v c1="$cpu1" -v l="$label" -v s="$state" \
    'BEGIN { printf "%s throughput: %d trials in %.1f s = %.1f trials/minute (%s); master CPU %.1f ms per trial\n", l, n, b - a, n * 60 / (b - a), s, (c1 - c0) * 1000 / n }' |
    tee -a "$WORK/summary"
}

echo "== agents: sf deploy local up --agents 2 --cpu-slots 2"
DIR="$WORK/agents"
"$SF" deploy local up --dir "$DIR" --agents 2 --cpu-slots 2 --port "$HTTP" --grpc-port "$GRPC" --no-tls --no-auth >/dev/null
measure agents
"$SF" deploy local down --dir "$DIR" --delete-data >/dev/null
echo "== Slurm: sf deploy local up --slurm (2 nodes x 2 CPUs)"
DIR="$WORK/slurm"
"$SF" deploy local up --slurm --dir "$DIR" --port "$HTTP" --grpc-port "$GRPC" --no-tls --no-auth >/dev/null
measure slurm
echo "== summary ($(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'))"
cat "$WORK/summary"
