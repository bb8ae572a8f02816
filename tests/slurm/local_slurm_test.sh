#!/usr/bin/env bash
# Proves deploy/local-slurm.sh: a real two-node Slurm cluster on this machine whose nodes have
# their own hostnames and addresses, run jobs across nodes, reach the host, and fail the way a
# real cluster's nodes fail.
#
#   tests/slurm/local_slurm_test.sh [SOURCE_DIR]      (SOURCE_DIR defaults to this checkout)
#
# Exit 0 when every check passes, 1 when one fails (its cluster directory and logs are kept and
# named), 77 (skipped) when not root or when network namespaces cannot be made here. Everything
# it starts lives under one mktemp directory and is stopped at exit. About 40 s.
set -euo pipefail

src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
cluster="$src/deploy/local-slurm.sh"

if [ "$(id -u)" -ne 0 ]; then
  echo "local_slurm_test: skipped: needs root (network namespaces, slurmd as root)"
  exit 77
fi
for tool in ip unshare nsenter; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "local_slurm_test: skipped: '$tool' is not installed (iproute2, util-linux)"
    exit 77
  fi
done
probe="sfslurmprobe$$"
if ! ip netns add "$probe" 2>/dev/null; then
  echo "local_slurm_test: skipped: 'ip netns add' is not permitted here (no CAP_SYS_ADMIN/NET_ADMIN)"
  exit 77
fi
if ! ip netns exec "$probe" unshare --uts true 2>/dev/null; then
  ip netns del "$probe"
  echo "local_slurm_test: skipped: 'unshare --uts' is not permitted here"
  exit 77
fi
ip netns del "$probe"
for tool in sbatch squeue sacct scancel sinfo scontrol slurmctld slurmd munged; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "local_slurm_test: FAIL: '$tool' is not installed (run deploy/install-deps.sh)" >&2
    exit 1
  fi
done
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/sf-slurm-test.XXXXXX")
dir="$scratch/cluster"
dir2="$scratch/cluster2"
failures=0
listener_pid=""
cleanup() {
  [ -z "$listener_pid" ] || kill "$listener_pid" 2>/dev/null || true
  "$cluster" down "$dir2" >/dev/null 2>&1 || true
  "$cluster" down "$dir" >/dev/null 2>&1 || true
  if [ "$failures" -eq 0 ]; then
    rm -rf "$scratch"
  else
    echo "local_slurm_test: kept $scratch (logs in $dir/log)" >&2
  fi
}
trap cleanup EXIT

check() { echo "check: $*"; }
ok() { echo "  ok: $*"; }
fail() {
  echo "  FAIL: $*" >&2
  failures=$((failures + 1))
}

# The job's state from squeue while slurmctld remembers it (MinJobAge), else from the job
# completion file (sacct -c).
job_state() {
  local s
  s=$(squeue -h -t all -j "$1" -o %T 2>/dev/null | head -n1 || true)
  [ -n "$s" ] || s=$(sacct -c -n -X -j "$1" -o state 2>/dev/null | awk 'NR == 1 {print $1}' || true)
  echo "${s:-UNKNOWN}"
}

# wait_state JOB SECONDS STATE...: waits until the job is in one of the states; prints the last.
wait_state() {
  local job="$1" deadline=$((SECONDS + $2)) s want
  shift 2
  while :; do
    s=$(job_state "$job")
    for want in "$@"; do
      if [ "$s" = "$want" ]; then echo "$s"; return 0; fi
    done
    if ((SECONDS >= deadline)); then echo "$s"; return 1; fi
    sleep 0.25
  done
}

# run_job NAME SBATCH_ARGS...: submits a batch job with its output in $scratch/NAME.out and waits
# (30 s) for it to finish; succeeds if it COMPLETED.
run_job() {
  local name="$1" job state
  shift
  job=$(sbatch --parsable -o "$scratch/$name.out" "$@") || { fail "sbatch $* refused"; return 1; }
  state=$(wait_state "$job" 30 COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY) ||
    { fail "job $job ($name) still $state after 30 s"; return 1; }
  [ "$state" = COMPLETED ] || { fail "job $job ($name) ended $state: $(cat "$scratch/$name.out")"; return 1; }
}

# node_state NODE: slurmctld's view, e.g. IDLE, IDLE+NOT_RESPONDING, DOWN+NOT_RESPONDING.
node_state() { scontrol show node "$1" 2>/dev/null | sed -n 's/^ *State=\([^ ]*\).*/\1/p'; }

# --- the cluster ---------------------------------------------------------------------------------
check "local-slurm.sh up with 2 nodes"
start=$SECONDS
if ! "$cluster" up "$dir" --nodes 2 >"$scratch/up.env" 2>"$scratch/up.log"; then
  cat "$scratch/up.log" >&2
  fail "local-slurm.sh up failed"
  exit 1
fi
set -a
# shellcheck disable=SC1091
source "$scratch/up.env"
set +a
host_addr="$SF_SLURM_HOST_ADDR"
[ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ] || fail "up printed no SLURM_CONF"
ok "up in $((SECONDS - start)) s: $(sinfo -h -N -o '%N=%T' | paste -sd' ' -), host at $host_addr"

check "up on a running cluster is refused"
if "$cluster" up "$dir" >/dev/null 2>"$scratch/up-again.log"; then
  fail "a second up on $dir succeeded"
else
  ok "$(cat "$scratch/up-again.log")"
fi

# --- jobs ------------------------------------------------------------------------------------------
check "sbatch --wrap hostname runs on a node named node1 or node2"
if run_job hostname --wrap hostname; then
  out=$(cat "$scratch/hostname.out")
  if [[ "$out" =~ ^node[12]$ ]]; then ok "printed '$out'"; else fail "printed '$out'"; fi
fi

check "a --nodes 2 --ntasks 2 job's srun hostname prints both nodes"
if run_job srun --nodes 2 --ntasks 2 --wrap 'srun hostname'; then
  out=$(sort "$scratch/srun.out" | paste -sd' ' -)
  if [ "$out" = "node1 node2" ]; then ok "printed '$out'"; else fail "printed '$out'"; fi
fi

check "rank 1 connects to a TCP port rank 0 listens on, across nodes"
cat >"$scratch/ranks.sh" <<EOF
#!/bin/bash
# Rank 0 listens on 29500; rank 1 connects to rank 0's node by name and sends its hostname.
first=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | head -n1)
if [ "\$SLURM_PROCID" = 0 ]; then
  exec $python -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 29500))
s.listen(1)
s.settimeout(20)
c, addr = s.accept()
print("rank0 on %s got %r from %s" % (socket.gethostname(), c.recv(100).decode().strip(), addr[0]))'
fi
for i in \$(seq 200); do
  if (echo "hello from \$(hostname)" >"/dev/tcp/\$first/29500") 2>/dev/null; then
    echo "rank1 on \$(hostname) reached \$first:29500"
    exit 0
  fi
  sleep 0.1
done
echo "rank1 on \$(hostname) could not reach \$first:29500"
exit 1
EOF
chmod +x "$scratch/ranks.sh"
if run_job ranks --nodes 2 --ntasks 2 --wrap "srun $scratch/ranks.sh"; then
  node2_addr=$(getent hosts node2 2>/dev/null | awk '{print $1}' || true)
  [ -n "$node2_addr" ] || node2_addr="${host_addr%.*}.3"
  if grep -q "rank0 on node1 got 'hello from node2' from $node2_addr" "$scratch/ranks.out" &&
     grep -q "rank1 on node2 reached node1:29500" "$scratch/ranks.out"; then
    ok "$(paste -sd';' "$scratch/ranks.out")"
  else
    fail "$(paste -sd';' "$scratch/ranks.out")"
  fi
fi

check "a job on a node reaches a TCP listener on the host at $host_addr"
"$python" -c '
import socket, sys
s = socket.socket()
s.bind(("0.0.0.0", 0))
s.listen(1)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
__import__("os").rename(sys.argv[1] + ".tmp", sys.argv[1])
s.settimeout(30)
c, addr = s.accept()
open(sys.argv[2], "w").write("%s from %s\n" % (c.recv(100).decode().strip(), addr[0]))
' "$scratch/host.port" "$scratch/host.got" &
listener_pid=$!
for _ in $(seq 50); do [ -s "$scratch/host.port" ] && break; sleep 0.1; done
port=$(cat "$scratch/host.port" 2>/dev/null || true)
if [ -z "$port" ]; then
  fail "the host listener did not start"
elif run_job tohost --wrap "exec bash -c 'echo hello-from-\$(hostname) >/dev/tcp/$host_addr/$port'"; then
  wait "$listener_pid" 2>/dev/null || true
  listener_pid=""
  got=$(cat "$scratch/host.got" 2>/dev/null || true)
  if [[ "$got" =~ ^hello-from-node[12]\ from\ ${host_addr%.*}\. ]]; then ok "host got '$got'"; else fail "host got '$got'"; fi
fi

check "scancel of a running job makes it CANCELLED in squeue and sacct -c"
job=$(sbatch --parsable -o /dev/null --wrap 'sleep 300')
if state=$(wait_state "$job" 30 RUNNING); then
  scancel "$job"
  if state=$(wait_state "$job" 15 CANCELLED); then
    acct=""
    for _ in $(seq 40); do
      acct=$(sacct -c -n -X -j "$job" -o state 2>/dev/null | awk 'NR == 1 {print $1}' || true)
      [ -n "$acct" ] && break
      sleep 0.25
    done
    if [ "$acct" = CANCELLED ]; then ok "squeue: $state, sacct -c: $acct"; else fail "sacct -c says '$acct'"; fi
  else
    fail "job $job is $state after scancel"
  fi
else
  fail "job $job never ran (state $state)"
fi

check "a job asking for 3 nodes of 2 is refused at submit or pends with a reason"
if job=$(sbatch --parsable --nodes 3 -o /dev/null --wrap hostname 2>"$scratch/n3.err"); then
  # Record every reason squeue shows over 4 s: the one set at submit may be replaced by the
  # scheduler's on its next pass.
  reasons=""
  for _ in $(seq 16); do
    reason=$(squeue -h -j "$job" -o %r 2>/dev/null || true)
    [[ " $reasons " == *" $reason "* ]] || reasons="${reasons:+$reasons }$reason"
    sleep 0.25
  done
  state=$(job_state "$job")
  if [ "$state" = PENDING ] && [ -n "$reason" ] && [ "$reason" != None ]; then
    ok "accepted as job $job, PENDING; reasons seen: $reasons"
  else
    fail "job $job is $state with reason '$reason'"
  fi
  scancel "$job" 2>/dev/null || true
else
  ok "refused at submit: $(cat "$scratch/n3.err")"
fi

check "killing node2's slurmd makes node2 NOT_RESPONDING, then DOWN; a running --no-requeue job NODE_FAIL"
timeout=$(scontrol show config | sed -n 's/^SlurmdTimeout *= *\([0-9]*\).*/\1/p')
job=$(sbatch --parsable -o /dev/null --nodelist node2 --no-requeue --wrap 'sleep 300')
wait_state "$job" 30 RUNNING >/dev/null || fail "job $job on node2 never ran"
killed=$SECONDS
"$cluster" kill-node "$dir" node2 2>/dev/null
not_responding="" down=""
while ((SECONDS - killed <= 2 * timeout + 10)); do
  s=$(node_state node2)
  if [ -z "$not_responding" ] && [[ "$s" == *NOT_RESPONDING* || "$s" == DOWN* ]]; then
    not_responding=$((SECONDS - killed))
  fi
  if [[ "$s" == DOWN* ]]; then down=$((SECONDS - killed)); break; fi
  sleep 0.5
done
# slurmctld pings every SlurmdTimeout/3 s and marks a node NOT_RESPONDING once a ping has failed
# through its retries (MessageTimeout, 5 s): SlurmdTimeout plus a few seconds at worst.
if [ -z "$not_responding" ] || ((not_responding > timeout + 5)); then
  fail "node2 not NOT_RESPONDING within SlurmdTimeout=$timeout s + 5 s (state $(node_state node2))"
elif [ -z "$down" ]; then
  fail "node2 NOT_RESPONDING after $not_responding s but not DOWN after $((SECONDS - killed)) s"
else
  ok "NOT_RESPONDING after $not_responding s, DOWN after $down s (SlurmdTimeout=$timeout s)"
fi
if state=$(wait_state "$job" 15 NODE_FAIL); then
  ok "job $job on node2: $state (sacct -c: $(sacct -c -n -X -j "$job" -o state | awk 'NR == 1 {print $1}'))"
else
  fail "job $job on node2 is $state, not NODE_FAIL"
fi

check "start-node node2 brings it back to idle (ReturnToService=2)"
"$cluster" start-node "$dir" node2 2>/dev/null
back=""
for _ in $(seq 60); do
  if [ "$(sinfo -h -n node2 -o %T)" = idle ]; then back=1; break; fi
  sleep 0.25
done
if [ -n "$back" ]; then ok "node2 idle"; else fail "node2 is $(node_state node2)"; fi

check "a second cluster from another directory gets its own subnet and port"
if env -u SLURM_CONF "$cluster" up "$dir2" --nodes 1 --cpus-per-node 1 >"$scratch/up2.env" 2>"$scratch/up2.log"; then
  conf2=$(sed -n 's/^SLURM_CONF=//p' "$scratch/up2.env")
  addr2=$(sed -n 's/^SF_SLURM_HOST_ADDR=//p' "$scratch/up2.env")
  port1=$(sed -n 's/^SlurmctldPort=//p' "$SLURM_CONF")
  port2=$(sed -n 's/^SlurmctldPort=//p' "$conf2")
  nodes2=$(SLURM_CONF="$conf2" sinfo -h -N -o '%N=%T' | paste -sd' ' -)
  if [ "$addr2" != "$host_addr" ] && [ "$port1" != "$port2" ] && [ "$nodes2" = "node1=idle" ] &&
     [ "$(sinfo -h -N -o '%N=%T' | paste -sd' ' -)" = "node1=idle node2=idle" ]; then
    ok "first $host_addr:$port1, second $addr2:$port2 ($nodes2)"
  else
    fail "first $host_addr:$port1, second $addr2:$port2 ($nodes2)"
  fi
else
  cat "$scratch/up2.log" >&2
  fail "the second cluster did not come up"
fi
"$cluster" down "$dir2" 2>/dev/null

# --- down ------------------------------------------------------------------------------------------
check "down stops every process and removes the namespaces and links; a second down succeeds"
tag=$(sed -n 's/^TAG=//p' "$dir/cluster.env")
pids=$(cat "$dir"/run/*.pid 2>/dev/null || true)
if "$cluster" down "$dir" 2>/dev/null && "$cluster" down "$dir" 2>/dev/null; then
  left=""
  for p in $pids; do kill -0 "$p" 2>/dev/null && left="$left pid $p"; done
  ip netns list | grep -q "^sfslurm${tag}-" && left="$left namespaces"
  ip link show | grep -qE "(sfslurm${tag}|sfs${tag}n[0-9]+[hp])[:@]" && left="$left links"
  if [ -z "$left" ]; then ok "nothing left"; else fail "left behind:$left"; fi
else
  fail "down failed"
fi
if "$cluster" status "$dir" >/dev/null 2>&1; then fail "status says the cluster runs after down"; fi

echo "local_slurm_test: $failures failure(s) in $SECONDS s"
[ "$failures" -eq 0 ]
