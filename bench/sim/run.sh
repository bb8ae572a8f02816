#!/usr/bin/env bash
# The cluster at scale, simulated (issue 45): a real master and PostgreSQL from `sf deploy local up
# --agents 0`, and bench/sim/cluster_sim.cc's simulated agents and trainers speaking the real
# AgentLink and TrialLink (no training). While it runs, the experiment list is read at a fixed 200
# requests/s (bench/http_paced_load.cc). Prints, per scenario: the simulator's figures (trial
# starts/s, metric rows/s, the slot-freed-to-next-report gap), the master's scheduling passes
# (p50/p99 over the last minute, the longest), its CPU seconds and peak RSS, the database's size
# per 1,000 trials, the trials by state, and the list's latency during the run. Everything runs on
# loopback and stops by itself.
#
#   bench/sim/run.sh [SCENARIO.yaml ...]     (default: every bench/sim/scenarios/*.yaml)
#   BUILD=build (env) names the build directory.
#   PG_STATEMENTS=1 (env): PostgreSQL runs with pg_stat_statements, and the statements that took
#   the most of its time are printed after each scenario (where the database's CPU goes).
#   PG_ASYNC_COMMIT=1 (env): PostgreSQL commits every transaction without waiting for the disk
#   (synchronous_commit = off for the whole server): an upper bound for what flushes cost, not a
#   setting the master uses (it defers only the flushes nobody waits for: master/db/database.h).
#   KILL_MASTER_EVERY=S (env): chaos — every S seconds the master is killed (SIGKILL) and started
#   again on the same database (`sf deploy local up`); master_kills counts them. The master's
#   CPU, RSS and threads are then the last master's. KILL_MASTER_FOR=T (env): only during the
#   first T seconds, then the master is left up (does everything end once the chaos stops?).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SF="$BUILD/cli/sf"
SIM="$BUILD/bench/cluster_sim"
PACED="$BUILD/bench/http_paced_load_bench"
for bin in "$SF" "$SIM" "$PACED"; do
  [ -x "$bin" ] || { echo "no $bin (build the sf, cluster_sim and http_paced_load_bench targets)" >&2; exit 2; }
done
DATA="$(cd ..; pwd)/shared/data/multi30k-de-en-tiny"
HTTP=${SF_BENCH_HTTP_PORT:-18580}
GRPC=${SF_BENCH_GRPC_PORT:-18590}
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(bench/sim/scenarios/*.yaml)

DIR=
PACED_PID=
CHAOS_PID=
cleanup() {
  [ -z "$PACED_PID" ] || kill "$PACED_PID" 2>/dev/null || true
  [ -z "$CHAOS_PID" ] || kill "$CHAOS_PID" 2>/dev/null || true
  [ -n "$DIR" ] && "$SF" deploy local down --dir "$DIR" --delete-data >/dev/null 2>&1
  [ -n "$DIR" ] && rm -rf "$DIR"
  return 0
}
trap cleanup EXIT

# CPU seconds (user + system) of a process, from /proc/PID/stat.
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
# CPU seconds of the whole machine (every core's busy time), from /proc/stat.
machine_cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { printf "%.2f", ($2 + $3 + $4 + $7 + $8) / hz }' /proc/stat; }
# CPU seconds of the local cluster's PostgreSQL (its postmaster and every backend alive now: the
# master's pooled connections live as long as it does).
postgres_cpu_seconds() {
  local total=0 pid
  for pid in $(pgrep -f "postgres.*$DIR/postgres" || true); do
    total=$(awk -v t="$total" -v c="$(cpu_seconds "$pid" 2>/dev/null || echo 0)" 'BEGIN { print t + c }')
  done
  for pid in $(pgrep -P "$(pgrep -f -o "postgres.*$DIR/postgres" || echo 1)" || true); do
    total=$(awk -v t="$total" -v c="$(cpu_seconds "$pid" 2>/dev/null || echo 0)" 'BEGIN { print t + c }')
  done
  echo "$total"
}
# A sample of the master's /metrics.
metric() { curl -sf "http://127.0.0.1:$HTTP/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

echo "cluster simulator on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
for scenario in "${scenarios[@]}"; do
  DIR=$(mktemp -d /tmp/sf-sim-XXXXXX)
  chmod 755 "$DIR"
  export XDG_CONFIG_HOME="$DIR/config"
  # The master config the scenario's pools need (fair_share pools), given to every `up`.
  "$SIM" --scenario "$scenario" --print-master-config > "$DIR/master.yaml"
  UP_FLAGS=(--dir "$DIR" --agents 0 --port "$HTTP" --grpc-port "$GRPC" --no-tls --no-auth)
  [ -s "$DIR/master.yaml" ] && UP_FLAGS+=(--master-config "$DIR/master.yaml")
  "$SF" deploy local up "${UP_FLAGS[@]}" >/dev/null
  if [ "${PG_STATEMENTS:-0}" = 1 ]; then  # restarted once with the extension loaded
    "$SF" deploy local down --dir "$DIR" >/dev/null
    echo "shared_preload_libraries = 'pg_stat_statements'" >> "$DIR/postgres/data/postgresql.conf"
    "$SF" deploy local up "${UP_FLAGS[@]}" >/dev/null
  fi
  PG="host=127.0.0.1 port=$(cat "$DIR/postgres/port") user=postgres dbname=steadfast"
  if [ "${PG_ASYNC_COMMIT:-0}" = 1 ]; then psql "$PG" -qc "ALTER SYSTEM SET synchronous_commit = off" -c "SELECT pg_reload_conf()" >/dev/null; fi
  MASTER_PID=$(cat "$DIR/master.pid")
  cpu0=$(cpu_seconds "$MASTER_PID")
  machine0=$(machine_cpu_seconds)
  pg0=$(postgres_cpu_seconds)
  db0=$(psql "$PG" -tAc "SELECT pg_database_size('steadfast')")
  # The list at a fixed 200 requests/s for as long as the simulation runs (in 5 s windows; the
  # worst window is printed).
  ( while :; do "$PACED" 127.0.0.1 "$HTTP" /api/v1/experiments 200 5 8 2>/dev/null || true; done ) \
    > "$DIR/paced.log" &
  PACED_PID=$!
  CHAOS_PID=
  if [ -n "${KILL_MASTER_EVERY:-}" ]; then
    chaos_end=$(( $(date +%s) + ${KILL_MASTER_FOR:-1000000000} ))
    ( while sleep "$KILL_MASTER_EVERY" && [ "$(date +%s)" -lt "$chaos_end" ]; do
        kill -9 "$(cat "$DIR/master.pid")" 2>/dev/null || true
        echo kill >> "$DIR/chaos.log"
        "$SF" deploy local up "${UP_FLAGS[@]}" >> "$DIR/chaos.log" 2>&1 || echo "restart failed" >> "$DIR/chaos.log"
      done ) &
    CHAOS_PID=$!
  fi
  echo "== $(basename "$scenario")"
  set +e
  "$SIM" --scenario "$scenario" --master-url "http://127.0.0.1:$HTTP" --master-grpc "127.0.0.1:$GRPC" \
    --join-token-file "$DIR/join-token" --data-dir "$DATA" > "$DIR/sim.out" 2> "$DIR/sim.err"
  sim_status=$?
  set -e
  if [ -n "$CHAOS_PID" ]; then
    kill "$CHAOS_PID" 2>/dev/null || true
    wait "$CHAOS_PID" 2>/dev/null || true
    CHAOS_PID=
    # A restart the loop had begun finishes; the master then runs for the figures below.
    "$SF" deploy local up "${UP_FLAGS[@]}" >/dev/null 2>&1 || true
    echo "master_kills=$(grep -c '^kill' "$DIR/chaos.log" 2>/dev/null || true)"
    echo "master_restarts_failed=$(grep -c '^restart failed' "$DIR/chaos.log" 2>/dev/null || true)"
    { grep -B3 '^restart failed' "$DIR/chaos.log" 2>/dev/null || true; } | sed 's/^/  chaos: /' | tail -8
    MASTER_PID=$(cat "$DIR/master.pid")
    cpu0=0
  fi
  kill "$PACED_PID" 2>/dev/null || true
  wait "$PACED_PID" 2>/dev/null || true
  PACED_PID=
  cat "$DIR/sim.out"
  [ "$sim_status" -eq 0 ] || { echo "cluster_sim exited $sim_status; its last lines:"; tail -5 "$DIR/sim.err"; }
  echo "master_cpu_seconds=$(awk -v a="$cpu0" -v b="$(cpu_seconds "$MASTER_PID")" 'BEGIN { printf "%.1f", b - a }')"
  # Where the machine's CPU went while the scenario ran: the master, PostgreSQL, and the rest
  # (the simulator's agents and trainers, the paced list, the system).
  machine=$(awk -v a="$machine0" -v b="$(machine_cpu_seconds)" 'BEGIN { printf "%.1f", b - a }')
  echo "machine_cpu_seconds=$machine"
  echo "postgres_cpu_seconds=$(awk -v a="$pg0" -v b="$(postgres_cpu_seconds)" 'BEGIN { printf "%.1f", b - a }')"
  echo "master_peak_rss_mb=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$MASTER_PID/status")"
  echo "master_threads=$(awk '/Threads/ { print $2 }' "/proc/$MASTER_PID/status")"
  echo "scheduling_pass_p50_ms=$(metric 'steadfast_scheduling_pass_seconds{quantile="0.5"}' | awk '{ printf "%.3f", $1 * 1000 }')"
  echo "scheduling_pass_p99_ms=$(metric 'steadfast_scheduling_pass_seconds{quantile="0.99"}' | awk '{ printf "%.3f", $1 * 1000 }')"
  echo "scheduling_pass_max_ms=$(metric steadfast_scheduling_pass_max_seconds | awk '{ printf "%.3f", $1 * 1000 }')"
  echo "scheduling_passes=$(metric steadfast_scheduling_pass_seconds_count)"
  trials=$(psql "$PG" -tAc "SELECT count(*) FROM trials")
  db1=$(psql "$PG" -tAc "SELECT pg_database_size('steadfast')")
  echo "trials=$trials"
  echo "trials_by_state=$(psql "$PG" -tAc "SELECT string_agg(state || ':' || n, ' ' ORDER BY state) FROM (SELECT state, count(*) n FROM trials GROUP BY state) s")"
  echo "experiments_by_state=$(psql "$PG" -tAc "SELECT string_agg(state || ':' || n, ' ' ORDER BY state) FROM (SELECT state, count(*) n FROM experiments GROUP BY state) s")"
  echo "metric_rows_stored=$(psql "$PG" -tAc "SELECT count(*) FROM metrics")"
  # Experiments that did not end, with their trials' states and what the searcher's snapshot
  # says (a chaos run's leftovers, to tell a stuck searcher from a stuck trial).
  echo "unfinished_experiments=$(psql "$PG" -tAc "SELECT string_agg(e.id || ':' || e.state || ':done=' ||
      coalesce(s.snapshot->>'done', '?') || ':' || (SELECT string_agg(t.state || '/' || t.completed_length || '/' ||
      t.target_length || (CASE WHEN t.closing THEN '/closing' ELSE '' END), ',') FROM trials t WHERE t.experiment_id = e.id
      AND t.state <> 'COMPLETED'), ' ') FROM experiments e LEFT JOIN searcher_snapshots s ON s.experiment_id = e.id
      WHERE e.state NOT IN ('COMPLETED', 'CANCELED', 'ERROR')")"
  echo "db_mb_per_1000_trials=$(awk -v a="$db0" -v b="$db1" -v t="$trials" 'BEGIN { if (t > 0) printf "%.1f", (b - a) / 1048576 / t * 1000; else print "n/a" }')"
  # The worst 5 s window of the list's latency while the simulation ran.
  awk '$1 == "latency_p99_ms:" { if ($2 + 0 > w) w = $2 + 0; n++ } END { printf "api_list_windows=%d\napi_list_worst_p99_ms=%.2f\n", n, w }' "$DIR/paced.log"
  awk '$1 == "latency_max_ms:" { if ($2 + 0 > w) w = $2 + 0 } $1 == "non_200:" { e += $2 } END { printf "api_list_worst_max_ms=%.2f\napi_list_non_200=%d\n", w, e }' "$DIR/paced.log"
  if [ "${PG_STATEMENTS:-0}" = 1 ]; then
    echo "postgres_top_statements (calls, total ms, mean ms, statement):"
    psql "$PG" -tA -F ' | ' -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
      -c "SELECT calls, round(total_exec_time), round(mean_exec_time::numeric, 3), left(regexp_replace(query, '\s+', ' ', 'g'), 110)
          FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 20" | sed 's/^/  /'
  fi
  "$SF" deploy local down --dir "$DIR" --delete-data >/dev/null 2>&1 || true
  rm -rf "$DIR"
  DIR=
done
