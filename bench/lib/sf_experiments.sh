# Shell helpers the cluster benches share (bench/core_api.sh, bench/slurm_scheduling.sh):
# source it after setting SF (the sf binary) and SF_MASTER; ERR_FILE is where sf's complaints go.
#   create FILE      prints the new experiment's id (exits the bench when sf refuses it)
#   wait_done ID     prints the experiment's final state (or "timeout" after 20 minutes)
#   trial_of ID      prints the id of the experiment's first trial

create() {
  local out err=${ERR_FILE:-/tmp/sf-bench-create.err}
  if ! out=$("$SF" experiment create "$1" 2>"$err"); then
    echo "sf experiment create $1 failed: $(cat "$err")" >&2
    exit 1
  fi
  sed -n 's/^created experiment \([0-9]*\).*/\1/p' <<<"$out"
}

wait_done() {
  local state
  for _ in $(seq 1 6000); do
    state=$("$SF" experiment describe "$1" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["experiment"]["state"])')
    case "$state" in *COMPLETED|*CANCELED|*ERROR) echo "$state"; return;; esac
    sleep 0.2
  done
  echo "timeout"
}

trial_of() {
  "$SF" trial list "$1" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["trials"][0]["id"])'
}
