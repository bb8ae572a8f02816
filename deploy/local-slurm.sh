#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for development and end-to-end tests.
#
#   local-slurm.sh up DIR [--nodes N] [--cpus-per-node C]   start it (default 2 nodes, C = nproc)
#   local-slurm.sh down DIR                                 stop it; safe to run twice
#   local-slurm.sh status DIR                               print its state; exit 0 only if all runs
#   local-slurm.sh kill-node DIR NODE                       SIGKILL everything on NODE (a crash)
#   local-slurm.sh start-node DIR NODE                      start NODE's slurmd again
#
# Contract:
# - Runs as root, on Debian 12's slurm-wlm 22.05 and munge (deploy/install-deps.sh). Everything it
#   writes is under DIR (slurm.conf, munge key, sockets, pid files, logs, slurmctld state, job
#   completion records), except the network namespaces and links below; nothing in /etc/slurm or
#   /etc/munge is read or written.
# - `up` starts munged (its own key, socket, pid and log file under DIR), slurmctld in the host's
#   namespaces, and one slurmd per node, each node in its own network namespace (`ip netns`,
#   named sfslurm<T>-node<i>) and UTS namespace (`unshare --uts`, hostname node<i>), plus a
#   private mount namespace whose /etc/hosts names the host and every node. The nodes sit on a
#   bridge sfslurm<T> with addresses 10.252.T.(i+1)/24; the host is 10.252.T.1 on that bridge and
#   is each node's default route. T is derived from DIR and probed, so clusters started from
#   different DIRs at once do not collide; so is slurmctld's TCP port.
# - `up` returns once `sinfo` shows every node idle (60 s at most) and prints, on stdout, the
#   environment a client needs as KEY=VALUE lines (also written to DIR/env):
#     SLURM_CONF=DIR/slurm.conf          what sbatch/squeue/sacct/scancel/sinfo read
#     SF_SLURM_HOST_ADDR=10.252.T.1      where a job on a node reaches a listener on the host
#     SF_SLURM_PARTITION=debug           the one partition (Default=YES)
#     SF_SLURM_NODES=node1,node2
#     SF_SLURM_JOBCOMP=DIR/accounting/jobcomp.txt   finished jobs; read with `sacct -c`
#   Progress and errors go to stderr. `up` on a DIR whose cluster is running fails; `up` after
#   `down` reuses DIR's slurmctld state, so job ids keep counting up.
# - `down` stops every process it started (pid files under DIR, and every process left in a
#   node's network namespace), then deletes the namespaces, links and bridge. Running it on a
#   DIR that is already down, or was never up, does nothing and succeeds.
# - Every failure exits non-zero with a line naming what failed and the log to read.
set -euo pipefail

readonly PROG="local-slurm.sh"
readonly NET_PREFIX="10.252"
readonly SLURMD_PORT=6818  # each slurmd has its own network namespace, so one port serves all
readonly MUNGE_SOCKET_SUFFIX="/munge/munge.socket"

# shellcheck source=deploy/lib/script.sh
. "$(dirname "$0")/lib/script.sh"

usage() { usage_lines 4 8; }

need_tools() {
  need_tools_from "slurm-wlm, munge, iproute2, util-linux" \
    slurmctld slurmd munged mungekey munge unmunge sinfo scontrol ip nsenter unshare ss
}

# Loads DIR/cluster.env (written by `up`) into the shell: TAG, NODES, CPUS, CTLD_PORT, ...
load_env() {
  [ -f "$DIR/cluster.env" ] || return 1
  # shellcheck disable=SC1091
  source "$DIR/cluster.env"
}

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
read_pid() { [ -f "$1" ] && tr -dc '0-9' <"$1" || true; }

node_names() {
  local i
  for ((i = 1; i <= NODES; i++)); do echo "node$i"; done
}
node_ns() { echo "sfslurm${TAG}-$1"; }
node_addr() { echo "${NET_PREFIX}.${TAG}.$((${1#node} + 1))"; }
host_addr() { echo "${NET_PREFIX}.${TAG}.1"; }
bridge_name() { echo "sfslurm${TAG}"; }

# Stops pid: SIGTERM, up to 10 s, then SIGKILL.
stop_pid() {
  local pid="$1" i
  pid_alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    pid_alive "$pid" || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

# Kills every process whose network namespace is ns (slurmd, slurmstepd, job tasks).
kill_ns_pids() {
  local ns="$1" sig="$2" pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [ -z "$pids" ] || kill "-$sig" $pids 2>/dev/null || true
}

# --- up ------------------------------------------------------------------------------------------

# Picks T for 10.252.T.0/24 and the bridge sfslurm<T>: DIR's previous T if free, else one derived
# from DIR's path, else the next free one. Creating the bridge is the lock: `ip link add` fails if
# a parallel `up` took that name first.
allocate_network() {
  local start tries t
  start=$(( $(printf '%s' "$DIR" | cksum | cut -d' ' -f1) % 200 + 20 ))
  [ -n "${PREVIOUS_TAG:-}" ] && start="$PREVIOUS_TAG"
  for ((tries = 0; tries < 200; tries++)); do
    t=$(( (start - 20 + tries) % 200 + 20 ))
    if ip -4 addr show 2>/dev/null | grep -q "inet ${NET_PREFIX}\.${t}\." ||
       ip -4 route show 2>/dev/null | grep -q "^${NET_PREFIX}\.${t}\."; then
      continue
    fi
    if ip link add "sfslurm${t}" type bridge 2>/dev/null; then
      TAG="$t"
      return 0
    fi
  done
  die "network: no free 10.252.T.0/24 subnet and sfslurmT bridge name (T = 20..219)"
}

# A TCP port no one listens on, derived from T: 17000+T, then steps of 200.
allocate_port() {
  local p
  for ((p = 17000 + TAG; p < 65000; p += 200)); do
    if [ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ]; then
      CTLD_PORT="$p"
      return 0
    fi
  done
  die "slurmctld: no free TCP port found from $((17000 + TAG)) up"
}

write_cluster_env() {
  cat >"$DIR/cluster.env" <<EOF
# Written by $PROG up; read by down/status. Do not edit while the cluster runs.
TAG=$TAG
NODES=$NODES
CPUS=$CPUS
CTLD_PORT=${CTLD_PORT:-}
STATE=up
EOF
}

setup_network() {
  local br node ns i host_if peer_if
  br=$(bridge_name)
  ip addr add "$(host_addr)/24" dev "$br" || die "network: could not address bridge $br"
  ip link set "$br" up || die "network: could not bring bridge $br up"
  for node in $(node_names); do
    i=${node#node}
    ns=$(node_ns "$node")
    host_if="sfs${TAG}n${i}h"
    peer_if="sfs${TAG}n${i}p"
    ip netns add "$ns" || die "network: ip netns add $ns failed"
    ip link add "$host_if" type veth peer name "$peer_if" &&
      ip link set "$host_if" master "$br" &&
      ip link set "$host_if" up &&
      ip link set "$peer_if" netns "$ns" &&
      ip -n "$ns" link set lo up &&
      ip -n "$ns" addr add "$(node_addr "$node")/24" dev "$peer_if" &&
      ip -n "$ns" link set "$peer_if" up &&
      ip -n "$ns" route add default via "$(host_addr)" ||
      die "network: could not wire $node (namespace $ns, veth $host_if/$peer_if to $br)"
  done
}

write_hosts() {
  local node
  {
    echo "# /etc/hosts inside the nodes of the local Slurm cluster in $DIR"
    echo "127.0.0.1 localhost"
    echo "::1 localhost ip6-localhost ip6-loopback"
    echo "$(host_addr) $(hostname -s) sfhost"
    for node in $(node_names); do echo "$(node_addr "$node") $node"; done
  } >"$DIR/etc/hosts"
  # The nodes have no route to the host's DNS server; a lookup that misses /etc/hosts (getent
  # asks for IPv6 first) would wait for its timeouts. Pointing them at a resolver that is not
  # there makes such misses fail at once.
  printf '%s\n' "# /etc/resolv.conf inside the nodes: no DNS, names come from /etc/hosts" \
    "nameserver 127.0.0.1" "options timeout:1 attempts:1" >"$DIR/etc/resolv.conf"
}

start_munge() {
  local key="$DIR/munge/munge.key" sock="$DIR$MUNGE_SOCKET_SUFFIX" log="$DIR/log/munged.log" i
  chmod 755 "$DIR/munge"  # the key is 0600; the socket must be reachable by job users too
  if [ ! -s "$key" ]; then
    mungekey --create --keyfile="$key" >>"$log" 2>&1 || die "munge: mungekey failed (see $log)"
  fi
  chmod 600 "$key"
  # --force: DIR may sit under a directory that munged's permission checks refuse (writable by
  # group or others without the sticky bit); this munged serves one test cluster only.
  munged --force --key-file="$key" --socket="$sock" --pid-file="$DIR/run/munged.pid" \
    --log-file="$log" --seed-file="$DIR/munge/munged.seed" >>"$log" 2>&1 ||
    die "munge: munged did not start (see $log)"
  for ((i = 0; i < 50; i++)); do
    if munge -S "$sock" -n 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  die "munge: munged does not answer on $sock (see $log)"
}

write_slurm_conf() {
  local node nodelist
  nodelist=$(node_names | paste -sd, -)
  cat >"$DIR/slurm.conf" <<EOF
# Written by $PROG up for the local cluster in $DIR; rewritten on every up.
# Why each choice: docs/slurm.md, "A local Slurm cluster for development and tests".
ClusterName=steadfast
SlurmctldHost=$(hostname -s)($(host_addr))
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root

# munge, with this cluster's own munged (socket under DIR)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR$MUNGE_SOCKET_SUFFIX

StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/nodes/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info

# No cgroups: this runs in containers without cgroup delegation. linuxproc finds a step's
# processes by walking /proc from slurmstepd; task/none binds nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none

# No slurmdbd: finished jobs go to a text file that \`sacct -c\` reads (plain sacct needs slurmdbd).
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/accounting/jobcomp.txt

SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The nodes share this machine's CPUs: take CPUs= below as given, not what slurmd detects.
SlurmdParameters=config_overrides
# A node that stops answering is NOT_RESPONDING, then DOWN, after SlurmdTimeout; a slurmd that
# comes back makes its node usable again.
SlurmdTimeout=10
ReturnToService=2
SlurmctldTimeout=10
MessageTimeout=5
KillWait=5
InactiveLimit=0
MinJobAge=300
MailProg=/bin/true

NodeName=DEFAULT CPUs=$CPUS State=UNKNOWN
EOF
  for node in $(node_names); do
    echo "NodeName=$node NodeHostname=$node NodeAddr=$(node_addr "$node")" >>"$DIR/slurm.conf"
  done
  echo "PartitionName=debug Nodes=$nodelist Default=YES MaxTime=INFINITE State=UP" >>"$DIR/slurm.conf"
}

start_slurmctld() {
  local log="$DIR/log/slurmctld.log" out="$DIR/log/slurmctld.out" pid i
  nohup setsid slurmctld -D -f "$DIR/slurm.conf" >>"$out" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$DIR/run/slurmctld.pid"
  for ((i = 0; i < 150; i++)); do
    pid_alive "$pid" || die "slurmctld exited at start (see $log and $out)"
    if scontrol ping 2>/dev/null | grep -q 'is UP'; then return 0; fi
    sleep 0.2
  done
  die "slurmctld does not answer on port $CTLD_PORT after 30 s (see $log and $out)"
}

start_slurmd() {
  local node="$1" ns pid out="$DIR/log/slurmd-$1.out"
  ns=$(node_ns "$node")
  mkdir -p "$DIR/nodes/$node"
  chmod 755 "$DIR/nodes/$node"
  # nsenter --net: the node's network namespace. Not `ip netns exec`, which remounts /sys for the
  # namespace and so hides /sys/fs/cgroup, and slurmd 22.05 will not start without a cgroup
  # filesystem to detect (even with proctrack/linuxproc and task/none).
  # unshare --uts: its own hostname. --mount: its own /etc/hosts and /etc/resolv.conf, bound
  # from DIR/etc; slave propagation, so mounts made on the host later still show on the node.
  # Every step execs, so $! is slurmd's pid.
  nohup setsid nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation slave \
    sh -c 'hostname "$1" && mount --bind "$2/hosts" /etc/hosts &&
           mount --bind "$2/resolv.conf" /etc/resolv.conf && exec slurmd -D -N "$1" -f "$3"' \
    slurmd "$node" "$DIR/etc" "$DIR/slurm.conf" >>"$out" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$DIR/run/slurmd-$node.pid"
  sleep 0.2
  pid_alive "$pid" || die "slurmd on $node exited at start (see $DIR/log/slurmd-$node.log and $out)"
}

# Waits until sinfo shows every node idle.
wait_idle() {
  local deadline=$((SECONDS + 60)) states node
  while ((SECONDS < deadline)); do
    states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u || true)
    if [ -n "$states" ] && ! echo "$states" | grep -qv ' idle$' &&
       [ "$(echo "$states" | wc -l)" -eq "$NODES" ]; then
      return 0
    fi
    for node in $(node_names); do
      pid_alive "$(read_pid "$DIR/run/slurmd-$node.pid")" ||
        die "slurmd on $node exited (see $DIR/log/slurmd-$node.log and $DIR/log/slurmd-$node.out)"
    done
    sleep 0.5
  done
  die "nodes not idle after 60 s: $(echo "$states" | paste -sd' ' -) (see $DIR/log/slurmctld.log and $DIR/log/slurmd-node*.log)"
}

print_env() {
  {
    echo "SLURM_CONF=$DIR/slurm.conf"
    echo "SF_SLURM_HOST_ADDR=$(host_addr)"
    echo "SF_SLURM_PARTITION=debug"
    echo "SF_SLURM_NODES=$(node_names | paste -sd, -)"
    echo "SF_SLURM_JOBCOMP=$DIR/accounting/jobcomp.txt"
  } >"$DIR/env"
  cat "$DIR/env"
}

cmd_up() {
  NODES=2
  CPUS=$(nproc)
  while [ $# -gt 0 ]; do
    case "$1" in
      --nodes) NODES="${2:?--nodes needs a number}"; shift 2 ;;
      --cpus-per-node) CPUS="${2:?--cpus-per-node needs a number}"; shift 2 ;;
      *) die "up: unknown argument '$1'" ;;
    esac
  done
  [[ "$NODES" =~ ^[0-9]+$ ]] && ((NODES >= 1 && NODES <= 250)) || die "up: --nodes must be 1..250"
  [[ "$CPUS" =~ ^[0-9]+$ ]] && ((CPUS >= 1)) || die "up: --cpus-per-node must be at least 1"
  need_root "network namespaces, slurmd as root"
  need_tools
  [[ "$DIR" != *[[:space:]]* ]] || die "up: DIR must not contain whitespace (slurm.conf paths): '$DIR'"
  # munged's socket path must fit in a sockaddr_un (108 bytes).
  ((${#DIR} + ${#MUNGE_SOCKET_SUFFIX} < 108)) || die "up: DIR is too long for a unix socket path: $DIR"
  mkdir -p "$DIR"
  local want_nodes="$NODES" want_cpus="$CPUS"
  PREVIOUS_TAG=""
  if [ -f "$DIR/cluster.env" ]; then
    if cmd_status_quiet; then die "up: a cluster is already running in $DIR (run down first)"; fi
    PREVIOUS_TAG=$(sed -n 's/^TAG=//p' "$DIR/cluster.env")
    # A half-started or crashed cluster: clean it up before starting again.
    ( cmd_down >/dev/null 2>&1 ) || true
  fi
  NODES="$want_nodes"
  CPUS="$want_cpus"
  mkdir -p "$DIR"/{etc,munge,run,log,ctld,nodes,accounting}
  rm -f "$DIR"/run/*.pid "$DIR/env"

  # From here on a failure stops what this up started (the logs under DIR stay for reading).
  trap 'rc=$?; if [ "$rc" -ne 0 ]; then ( cmd_down >/dev/null 2>&1 ) || true; fi' EXIT
  allocate_network
  CTLD_PORT=""
  write_cluster_env  # from here on, down can undo what exists
  export SLURM_CONF="$DIR/slurm.conf"
  say "network: bridge $(bridge_name) $(host_addr)/24, $NODES nodes"
  setup_network
  allocate_port
  write_cluster_env
  write_hosts
  start_munge
  write_slurm_conf
  say "slurmctld on $(host_addr):$CTLD_PORT"
  start_slurmctld
  local node
  for node in $(node_names); do start_slurmd "$node"; done
  wait_idle
  say "up: $(node_names | paste -sd' ' -) idle in partition debug (logs in $DIR/log)"
  print_env
  trap - EXIT
}

# --- down / status / nodes -----------------------------------------------------------------------

cmd_down() {
  if ! load_env; then
    say "down: no cluster in $DIR"
    return 0
  fi
  export SLURM_CONF="$DIR/slurm.conf"
  local node ns
  for node in $(node_names); do
    stop_pid "$(read_pid "$DIR/run/slurmd-$node.pid")"
    ns=$(node_ns "$node")
    if ip netns list 2>/dev/null | grep -q "^$ns\b"; then
      kill_ns_pids "$ns" TERM
      sleep 0.2
      kill_ns_pids "$ns" KILL
    fi
  done
  stop_pid "$(read_pid "$DIR/run/slurmctld.pid")"
  stop_pid "$(read_pid "$DIR/run/munged.pid")"
  for node in $(node_names); do
    ns=$(node_ns "$node")
    if ip netns list 2>/dev/null | grep -q "^$ns\b"; then
      ip netns del "$ns" 2>/dev/null || say "down: could not delete namespace $ns"
    fi
    # The veth pair goes with its namespace; a pair that never got there is removed here.
    ip link del "sfs${TAG}${node/node/n}h" 2>/dev/null || true
  done
  ip link del "$(bridge_name)" 2>/dev/null || true
  rm -f "$DIR"/run/*.pid "$DIR/munge/munge.socket" "$DIR/munge/munge.socket.lock" "$DIR/env"
  sed -i 's/^STATE=.*/STATE=down/' "$DIR/cluster.env"
  if [ "${STATE:-up}" = down ]; then say "down: the cluster in $DIR was already down"; return 0; fi
  say "down: stopped the cluster in $DIR"
}

# Exit 0 if munged, slurmctld and every slurmd of DIR's cluster run.
cmd_status_quiet() {
  load_env || return 1
  pid_alive "$(read_pid "$DIR/run/munged.pid")" || return 1
  pid_alive "$(read_pid "$DIR/run/slurmctld.pid")" || return 1
  local node
  for node in $(node_names); do pid_alive "$(read_pid "$DIR/run/slurmd-$node.pid")" || return 1; done
}

cmd_status() {
  if ! load_env; then
    echo "no cluster in $DIR"
    return 1
  fi
  if [ "${STATE:-up}" = down ]; then
    echo "the cluster in $DIR is down"
    return 1
  fi
  export SLURM_CONF="$DIR/slurm.conf"
  local rc=0 name pid node
  for name in munged slurmctld $(for node in $(node_names); do echo "slurmd-$node"; done); do
    pid=$(read_pid "$DIR/run/$name.pid")
    if pid_alive "$pid"; then echo "$name: running (pid $pid)"; else echo "$name: stopped"; rc=1; fi
  done
  echo "network: bridge $(bridge_name) $(host_addr)/24; slurmctld port ${CTLD_PORT:-none}"
  for node in $(node_names); do echo "$node: $(node_addr "$node") in namespace $(node_ns "$node")"; done
  if pid_alive "$(read_pid "$DIR/run/slurmctld.pid")"; then sinfo -N -o '%N %P %T %c %E' || rc=1; fi
  return "$rc"
}

valid_node() {
  load_env || die "no cluster in $DIR"
  local n="${1:-}"
  [[ "$n" =~ ^node[0-9]+$ ]] && ((${n#node} >= 1 && ${n#node} <= NODES)) ||
    die "no node '$n' in $DIR (nodes: $(node_names | paste -sd' ' -))"
}

cmd_kill_node() {
  need_root "network namespaces, slurmd as root"
  valid_node "${1:-}"
  kill -KILL "$(read_pid "$DIR/run/slurmd-$1.pid")" 2>/dev/null || true
  kill_ns_pids "$(node_ns "$1")" KILL
  say "kill-node: killed every process on $1"
}

cmd_start_node() {
  need_root "network namespaces, slurmd as root"
  valid_node "${1:-}"
  export SLURM_CONF="$DIR/slurm.conf"
  if pid_alive "$(read_pid "$DIR/run/slurmd-$1.pid")"; then die "start-node: slurmd on $1 already runs"; fi
  start_slurmd "$1"
  say "start-node: slurmd on $1 started"
}

[ $# -ge 2 ] || usage
CMD="$1"
DIR=$(realpath -m "$2")
shift 2
case "$CMD" in
  up) cmd_up "$@" ;;
  down) need_root "network namespaces, slurmd as root"; cmd_down ;;
  status) cmd_status ;;
  kill-node) cmd_kill_node "$@" ;;
  start-node) cmd_start_node "$@" ;;
  *) usage ;;
esac
