#!/usr/bin/env bash
# The API while interactive sessions run through the master's proxy (issue 44, "Faults": a task
# that floods output or holds a WebSocket open must not slow the API). On a local cluster (one
# agent with NOTEBOOKS + 1 CPU slots, 200 experiments stored as in bench/api_load.sh),
# GET /api/v1/experiments is measured with wrk (-t2 -c32 -d10s) and at a fixed 1,000 requests/s
# (bench/http_paced_load.cc, 32 connections, 10 s):
#   1. with no sessions (the baseline);
#   2. while bench/proxy_sessions.py holds NOTEBOOKS (default 20) notebooks' kernel channels open
#      through the proxy, each running `print(1)` every 2 s;
#   3. the same plus one shell's terminal (bash on a pipe) printing `yes` flat out, its output
#      read as fast as it comes (a draining client, not one that stops reading);
#   4. with no sessions again, after their tasks were killed.
# With sessions it also prints, per measurement, the shell's bytes/s through the proxy and the
# kernels' round trips (succeeded, failed, p50/p99/max); for every measurement, the CPU used
# meanwhile (% of one core: the master, the shell task, proxy_sessions.py, the whole host), since
# on a small host the sessions' processes and the API share the same cores.
# Prints figures and asserts nothing. Everything runs on loopback and stops by itself.
#
#   bench/proxy_load.sh [BUILD_DIR]      (default: build; needs wrk, python3-tornado and
#                                         python3-notebook, from deploy/install-deps.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SF="$BUILD/cli/sf"
NOTEBOOKS=${NOTEBOOKS:-20}
DIR=$(mktemp -d /tmp/sf-proxy-load-XXXXXX)
chmod 755 "$DIR"
HTTP=${SF_BENCH_HTTP_PORT:-18580}
GRPC=${SF_BENCH_GRPC_PORT:-18590}
SESSIONS_PID=
cleanup() {
  local status=$?
  if [ -n "$SESSIONS_PID" ]; then
    kill "$SESSIONS_PID" 2>/dev/null || true
    wait "$SESSIONS_PID" 2>/dev/null || true
  fi
  if [ "$status" != 0 ]; then  # what the cluster and the sessions' tasks said, kept for a look
    local keep="$DIR-failed"
    mkdir -p "$keep" && cp -r "$DIR/logs" "$DIR"/sessions.json* "$keep/" 2>/dev/null || true
    echo "proxy_load.sh failed (status $status): logs kept in $keep" >&2
  fi
  "$SF" deploy local down --dir "$DIR" --delete-data >/dev/null 2>&1 || true
}
trap cleanup EXIT
export XDG_CONFIG_HOME="$DIR/config"
"$SF" deploy local up --dir "$DIR" --agents 1 --cpu-slots $((NOTEBOOKS + 1)) --port "$HTTP" \
  --grpc-port "$GRPC" --no-tls --no-auth >/dev/null
URL="http://127.0.0.1:$HTTP"
MASTER_PID=$(cat "$DIR/master.pid")
. bench/lib/load_experiments.sh
store_load_experiments "$URL" 200

# CPU time (utime + stime, clock ticks) of processes, and of the whole host (/proc/stat).
TICK=$(getconf CLK_TCK)
ticks() {
  local t=0 p
  for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo $t
}
# The host's busy time comes from /proc/stat's tick sampling, which misses work that wakes on the
# timer and sleeps again before the next tick (the paced client's, the master's answers to it):
# it says whether the cores were saturated, not how busy a paced run kept them.
host_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
shell_group() {  # this cluster's shell task's processes (its server, bash, yes): its process group
  local p
  for p in $(pgrep -f 'm steadfast.shell' || true); do
    case "$(readlink "/proc/$p/cwd" 2>/dev/null)" in
      "$DIR"/*) pgrep -g "$(ps -o pgid= -p "$p" | tr -d ' ')" || true; return;;
    esac
  done
}
cpu_mark() {
  echo "$(date +%s.%N) $(ticks "$MASTER_PID") $(ticks $(shell_group)) $(ticks ${SESSIONS_PID:-}) $(host_ticks)"
}
cpu_report() {  # MARK_BEFORE MARK_AFTER
  awk -v hz="$TICK" -v cores="$(nproc)" -v a="$1" -v b="$2" 'BEGIN {
    split(a, x, " "); split(b, y, " "); s = (y[1] - x[1]) * hz / 100
    for (i = 2; i <= 5; ++i) p[i] = (y[i] < x[i]) ? "(ended meanwhile)" : sprintf("%.0f", (y[i] - x[i]) / s)
    printf "cpu_percent_of_one_core: master %s, shell task %s, proxy_sessions.py %s, host (%d cores = %d) %s\n",
      p[2], p[3], p[4], cores, 100 * cores, p[5] }'
}
STATS="$DIR/sessions.json"
snapshot() { if [ -n "$SESSIONS_PID" ]; then cp "$STATS" "$DIR/$1.json"; fi; }
window() { if [ -n "$SESSIONS_PID" ]; then /usr/bin/python3 bench/proxy_sessions.py window "$DIR/$1.json" "$DIR/$2.json"; fi; }
measure() {  # LABEL: wrk, then the paced client; what the sessions did meanwhile and the CPU used
  local m0 m1 m2
  echo "== $1: GET /api/v1/experiments (200 stored, page of 100), wrk -t2 -c32 -d10s"
  snapshot a; m0=$(cpu_mark)
  wrk -t2 -c32 -d10s --latency "$URL/api/v1/experiments" | grep -E "Requests/sec|Latency  |  50%|  99%|Non-2xx|Socket errors"
  snapshot b; m1=$(cpu_mark)
  window a b
  cpu_report "$m0" "$m1"
  echo "== $1: GET /api/v1/experiments at a fixed 1,000 requests/s (32 connections, 10 s)"
  { "$BUILD/bench/http_paced_load_bench" 127.0.0.1 "$HTTP" /api/v1/experiments 1000 10 32 || true; } \
    | grep -E "achieved|p50|p99_ms|max|non_200|errors"
  snapshot c; m2=$(cpu_mark)
  window b c
  cpu_report "$m1" "$m2"
  echo "master_threads: $(ls "/proc/$MASTER_PID/task" | wc -l)"
}
wait_for() {  # KEY: until proxy_sessions.py says KEY (ready, flooding) in its stats file
  for _ in $(seq 1 1200); do
    kill -0 "$SESSIONS_PID" 2>/dev/null || { echo "proxy_sessions.py ended before $1" >&2; exit 1; }
    [ -f "$STATS" ] && /usr/bin/python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))[sys.argv[2]] else 1)' "$STATS" "$1" && return
    sleep 0.5
  done
  echo "proxy_sessions.py: not $1 after 10 minutes" >&2
  exit 1
}
rss() {  # PID...: their resident memory together
  [ $# -gt 0 ] || { echo "?"; return; }
  awk '/VmRSS/ {s += $2} END {printf "%.0f MiB", s / 1024}' $(for p in "$@"; do echo "/proc/$p/status"; done) 2>/dev/null || echo "?"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
measure "no sessions"
/usr/bin/python3 bench/proxy_sessions.py run --master "$URL" --notebooks "$NOTEBOOKS" --stats "$STATS" \
  > >(sed 's/^/  /') 2>&1 &
SESSIONS_PID=$!
wait_for ready
sleep 5  # the kernels' first cells and Jupyter's start-up work settle
echo "load with $NOTEBOOKS notebooks, before measuring: $(cut -d' ' -f1-3 /proc/loadavg)"
measure "$NOTEBOOKS kernel channels open (print(1) every 2 s each)"
kill -USR1 "$SESSIONS_PID"
wait_for flooding
sleep 2
measure "$NOTEBOOKS kernel channels + 1 shell printing flat out (drained)"
echo "rss: shell task $(rss $(shell_group)), proxy_sessions.py $(rss "$SESSIONS_PID"), sf-master $(rss "$MASTER_PID")"
kill "$SESSIONS_PID"
wait "$SESSIONS_PID" || true
SESSIONS_PID=
echo "== over the whole time the sessions were open"
/usr/bin/python3 - "$STATS" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"kernel_round_trips_ok: {len(s['round_trips'])}, failed: {len(s['failed'])}, "
      f"sessions_dropped: {len(s['dropped'])}, errors: {len(s['errors'])}")
EOF
if compgen -G "$STATS.task-*.log" >/dev/null; then  # the logs of tasks whose sessions had trouble
  mkdir -p "$DIR-kept" && cp "$STATS".task-*.log "$DIR-kept/"
  echo "logs of the tasks whose sessions dropped or failed: $DIR-kept"
fi
task_processes() {  # processes working in this cluster's task directories (Jupyter, kernels, the shell)
  local p
  for p in $(pgrep -f 'python3|yes|bash' || true); do
    case "$(readlink "/proc/$p/cwd" 2>/dev/null)" in "$DIR"/local-agent-*/tasks/*) echo "$p";; esac
  done
}
t0=$(date +%s.%N)
for _ in $(seq 1 600); do [ -z "$(task_processes)" ] && break; sleep 0.1; done
awk -v t0="$t0" -v t1="$(date +%s.%N)" -v left="$(task_processes | wc -l)" \
  'BEGIN { printf "processes of the killed tasks: gone %.1f s after the kills answered (%d left)\n", t1 - t0, left }'
sleep 2
measure "no sessions, after"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
