#!/usr/bin/env bash
# A real S3 server on this one machine, for development and tests: a single-node Ceph cluster
# (one monitor, one manager, one BlueStore OSD on a sparse file) with a RADOS Gateway in front.
#
#   local-s3.sh up DIR [--port P] [--bucket NAME] [--size GIB] [--access-key K --secret-key S]
#   local-s3.sh down DIR [--delete-data]     stop it; safe to run twice; --delete-data removes DIR
#   local-s3.sh status DIR                   print its state; exit 0 only if every daemon runs
#   local-s3.sh gateway DIR                  start the gateway again if it is not running
#
# Contract:
# - Runs as root, on Debian 12's Ceph 16.2 (ceph-mon, ceph-mgr, ceph-osd, radosgw, ceph-common;
#   deploy/install-deps.sh). Everything it writes is under DIR: ceph.conf, keyrings, the mon's and
#   mgr's data, the OSD and its block file (DIR/osd.0.block, sparse, --size GiB, default 4), logs,
#   pid files and admin sockets. Nothing in /etc/ceph, /var/lib/ceph or /var/log/ceph is read or
#   written, and no systemd unit is involved. Every daemon listens on 127.0.0.1 only: the mon on
#   the first free port from 13300 (msgr2), the mgr and OSD on free ports in 6800-7300, and the
#   gateway on P (--port; default 7480, else the next free port above it).
# - Pools have one replica (size 1, min_size 1): this is a test server, not storage.
# - `up` returns once the OSD is up, every placement group is active+clean and the gateway answers
#   HTTP: about 30 s from an empty DIR, 15 s after `down`, on two busy cores. The first `up`
#   creates the S3 user `steadfast` (keys from --access-key/--secret-key, else random ones; these
#   and --size count only then); any `up` creates bucket NAME if --bucket is given, and
#   prints on stdout the environment a client needs as KEY=VALUE lines (also written to
#   DIR/s3.env, so a test can `source` it):
#     SF_S3_ENDPOINT=http://127.0.0.1:P
#     AWS_ACCESS_KEY_ID=...  AWS_SECRET_ACCESS_KEY=...  AWS_DEFAULT_REGION=us-east-1
#   Progress and errors go to stderr. `up` on a DIR whose server runs says so and succeeds; `up`
#   after `down` starts the same cluster again, with its data, user and keys.
# - `down` stops every daemon `up` started (pid files under DIR): SIGTERM, then SIGKILL after 30 s.
#   Running it on a DIR that is down, or never was up, does nothing and succeeds.
# - `gateway` starts only the RADOS Gateway, on the port it had, when its process is gone (for
#   tests that kill it mid-request); the rest of the cluster must be running. A running gateway
#   is left alone.
# - Every failure exits non-zero with a line naming what failed and the tail of the log to read;
#   a failed `up` stops the daemons it started.
set -euo pipefail

readonly PROG="local-s3.sh"
readonly MON_PORT_FIRST=13300
readonly RGW_PORT_DEFAULT=7480
readonly S3_USER="steadfast"
readonly REGION="us-east-1"
readonly STOP_TIMEOUT_S=30
# Each daemon's name, in start order; down stops them in reverse.
readonly DAEMONS=(mon.a mgr.x osd.0 client.rgw.local)

# shellcheck source=deploy/lib/script.sh
. "$(dirname "$0")/lib/script.sh"

usage() { usage_lines 5 8; }

need_tools() {
  need_tools_from "ceph-mon ceph-mgr ceph-osd radosgw ceph-common uuid-runtime curl openssl" \
    ceph ceph-mon ceph-mgr ceph-osd radosgw radosgw-admin ceph-authtool monmaptool \
    uuidgen ss curl openssl
}

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
read_pid() { if [ -f "$1" ]; then tr -dc '0-9' <"$1"; fi; }
pid_file() { echo "$DIR/run/$1.pid"; }
log_file() { echo "$DIR/log/$1.log"; }
daemon_pid() { read_pid "$(pid_file "$1")"; }
daemon_alive() { pid_alive "$(daemon_pid "$1")"; }
port_free() { [ -z "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }

# Every Ceph command line names DIR's config; none falls back to /etc/ceph.
ceph_cli() { ceph --conf "$CONF" --connect-timeout 15 "$@"; }
rgw_admin() { radosgw-admin --conf "$CONF" "$@"; }

# The last lines of a daemon's log and of its stdout/stderr, for an error message.
log_tail() {
  local name="$1" f
  for f in "$(log_file "$name")" "$DIR/log/$name.out"; do
    [ -s "$f" ] || continue
    echo "--- last lines of $f:" >&2
    { grep -v '^[[:space:]]*$' "$f" || true; } | tail -n 15 >&2
  done
}

# Dies naming daemon $1 and what went wrong ($2), with its log's tail.
daemon_failed() {
  log_tail "$1"
  die "$1: $2 (logs: $(log_file "$1"), $DIR/log/$1.out)"
}

# Loads DIR/cluster.env (written by the first `up`): FSID, MON_PORT, RGW_PORT, OSD_UUID, SIZE_GIB.
load_env() {
  [ -f "$DIR/cluster.env" ] || return 1
  # shellcheck disable=SC1091
  source "$DIR/cluster.env"
  CONF="$DIR/ceph.conf"
}

write_cluster_env() {
  cat >"$DIR/cluster.env" <<EOF
# Written by $PROG up; read by up, down and status.
FSID=$FSID
MON_PORT=$MON_PORT
RGW_PORT=$RGW_PORT
OSD_UUID=$OSD_UUID
SIZE_GIB=$SIZE_GIB
EOF
}

# Starts daemon $1 in the foreground of its own session (so Ctrl-C on `up` leaves it alone),
# records its pid and checks it is still alive a moment later. The rest of the line is the command.
start_daemon() {
  local name="$1" pid
  shift
  : >"$DIR/log/$name.out"
  setsid "$@" --conf "$CONF" -f </dev/null >>"$DIR/log/$name.out" 2>&1 &
  pid=$!
  echo "$pid" >"$(pid_file "$name")"
  sleep 0.5
  pid_alive "$pid" || daemon_failed "$name" "exited at start"
}

# Waits until command "$2..." succeeds, up to $1 seconds, while daemon $DAEMON stays alive.
wait_for() {
  local timeout="$1" what="$2" daemon="$3" deadline
  shift 3
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    daemon_alive "$daemon" || daemon_failed "$daemon" "exited while waiting for $what"
    ((SECONDS < deadline)) || daemon_failed "$daemon" "$what: not after ${timeout} s"
    sleep 1
  done
}

# --- configuration -------------------------------------------------------------------------------

# The whole cluster's configuration. The options that matter on one small machine:
# - size 1 pools need osd_pool_default_size=1 and mon_allow_pool_size_one; the POOL_NO_REDUNDANCY
#   warning is switched off, as is the autoscaler (it would resize the pools' 8 PGs).
# - msgr1 is off: the mon listens on msgr2 only, on 127.0.0.1 (public_addr, cluster_addr).
# - memory: osd_memory_target cannot go below 896 MiB in 16.2, so BlueStore's cache is fixed at
#   128 MiB instead (autotune off); fewer OSD shards and gateway threads than the defaults.
# - every path (data, keyrings, logs, sockets, pid files, crash dumps, the cluster log) is under
#   DIR; Ceph's defaults would point at /var/lib/ceph, /var/log/ceph and /var/run/ceph.
write_ceph_conf() {
  cat >"$CONF" <<EOF
# Written by $PROG; the single-node test cluster in $DIR.
[global]
fsid = $FSID
mon_host = [v2:127.0.0.1:$MON_PORT]
mon_initial_members = a
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_msgr1 = false
ms_bind_ipv6 = false
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
auth_allow_insecure_global_id_reclaim = false
keyring = $DIR/keyring/\$name.keyring
run_dir = $DIR/run
crash_dir = $DIR/crash
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
mon_max_pg_per_osd = 500
mon_data_avail_warn = 5
mon_data_avail_crit = 2

[mon]
mon_data = $DIR/mon
keyring = $DIR/mon/keyring
mon_cluster_log_file = $DIR/log/ceph.log
# No optional mgr modules (the defaults are restful, iostat, nfs).
mgr_initial_modules =
log_file = $DIR/log/\$name.log
pid_file = $DIR/run/\$name.pid
admin_socket = $DIR/run/\$name.asok

[mgr]
mgr_data = $DIR/mgr
log_file = $DIR/log/\$name.log
pid_file = $DIR/run/\$name.pid
admin_socket = $DIR/run/\$name.asok

[osd]
osd_data = $DIR/osd
osd_objectstore = bluestore
bluestore_block_path = $DIR/osd.0.block
bluestore_block_create = true
bluestore_block_size = $((SIZE_GIB * 1024 * 1024 * 1024))
bluestore_cache_autotune = false
bluestore_cache_size = 134217728
osd_memory_target = 939524096
osd_op_num_shards = 2
osd_op_num_threads_per_shard = 1
log_file = $DIR/log/\$name.log
pid_file = $DIR/run/\$name.pid
admin_socket = $DIR/run/\$name.asok

[client.rgw.local]
rgw_data = $DIR/rgw
rgw_thread_pool_size = 16
rgw_enable_usage_log = false
log_file = $DIR/log/\$name.log
pid_file = $DIR/run/\$name.pid
admin_socket = $DIR/run/\$name.asok
EOF
}

# Keys for the mon, the admin client, the mgr and the gateway. The mon's keyring carries all of
# them, so `ceph-mon --mkfs` puts them into the cluster's auth database at once; the OSD's key is
# added by `ceph osd new`.
make_keyrings() {
  local k="$DIR/keyring"
  mkdir -p "$k"
  ceph-authtool --create-keyring "$k/mon.keyring" --gen-key -n mon. --cap mon 'allow *'
  ceph-authtool --create-keyring "$k/client.admin.keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *'
  ceph-authtool --create-keyring "$k/mgr.x.keyring" --gen-key -n mgr.x \
    --cap mon 'allow profile mgr' --cap osd 'allow *' --cap mds 'allow *'
  ceph-authtool --create-keyring "$k/client.rgw.local.keyring" --gen-key -n client.rgw.local \
    --cap mon 'allow rw' --cap osd 'allow rwx' --cap mgr 'allow rw'
  local other
  for other in client.admin mgr.x client.rgw.local; do
    ceph-authtool "$k/mon.keyring" --import-keyring "$k/$other.keyring"
  done
  chmod 600 "$k"/*.keyring
}

# --- daemons -------------------------------------------------------------------------------------

mon_is_up() { ceph_cli mon stat; }

start_mon() {
  if [ ! -f "$DIR/mon/store.db/CURRENT" ]; then
    monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" "$DIR/monmap" >/dev/null
    ceph-mon --conf "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/keyring/mon.keyring" \
      >"$DIR/log/mon.a.mkfs.log" 2>&1 || {
        tail -n 15 "$DIR/log/mon.a.mkfs.log" >&2
        die "mon.a: ceph-mon --mkfs failed (see $DIR/log/mon.a.mkfs.log)"
      }
  fi
  port_free "$MON_PORT" || die "mon.a: port 127.0.0.1:$MON_PORT (in its monmap) is taken"
  say "mon.a on 127.0.0.1:$MON_PORT"
  start_daemon mon.a ceph-mon -i a
  wait_for 60 "quorum" mon.a mon_is_up
}

start_mgr() {
  mkdir -p "$DIR/mgr"
  say "mgr.x"
  start_daemon mgr.x ceph-mgr -i x
}

osd_is_up() { ceph_cli osd stat | grep -q '1 up.*1 in'; }

# The first start registers OSD 0 with the mon (`ceph osd new`, which also adds its key) and
# formats BlueStore on DIR/osd.0.block (DIR/osd/block links to it), a sparse file of SIZE_GIB GiB.
start_osd() {
  if [ ! -f "$DIR/osd/fsid" ]; then
    mkdir -p "$DIR/osd"
    local secret id
    secret=$(ceph-authtool --gen-print-key)
    id=$(printf '{"cephx_secret": "%s"}' "$secret" | ceph_cli osd new "$OSD_UUID" -i -) ||
      die "osd.0: 'ceph osd new' failed"
    [ "$id" = 0 ] || die "osd.0: the mon gave this OSD id '$id', expected 0"
    ceph-authtool --create-keyring "$DIR/keyring/osd.0.keyring" -n osd.0 --add-key "$secret" >/dev/null
    chmod 600 "$DIR/keyring/osd.0.keyring"
    say "osd.0: BlueStore on $DIR/osd.0.block (${SIZE_GIB} GiB, sparse)"
    ceph-osd --conf "$CONF" -i 0 --mkfs --osd-uuid "$OSD_UUID" >"$DIR/log/osd.0.mkfs.log" 2>&1 || {
      tail -n 15 "$DIR/log/osd.0.mkfs.log" >&2
      die "osd.0: ceph-osd --mkfs failed (see $DIR/log/osd.0.mkfs.log and $DIR/log/osd.0.log)"
    }
  fi
  say "osd.0"
  start_daemon osd.0 ceph-osd -i 0
  wait_for 120 "the OSD to be up and in" osd.0 osd_is_up
}

rgw_answers() { curl -fsS -o /dev/null --max-time 5 "http://127.0.0.1:$RGW_PORT/"; }

start_rgw() {
  mkdir -p "$DIR/rgw"
  say "client.rgw.local (S3) on 127.0.0.1:$RGW_PORT"
  start_daemon client.rgw.local radosgw -n client.rgw.local \
    --rgw-frontends "beast endpoint=127.0.0.1:$RGW_PORT"
  wait_for 120 "HTTP on 127.0.0.1:$RGW_PORT" client.rgw.local rgw_answers
}

# Every PG active+clean ("N pgs: N active+clean; ...").
pgs_clean() {
  local stat
  stat=$(ceph_cli pg stat) || return 1
  [[ "$stat" =~ ^([0-9]+)\ pgs:\ ([0-9]+)\ active\+clean\; ]] &&
    [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] && [ "${BASH_REMATCH[1]}" != 0 ]
}

# Waits for clean PGs, then reports health; only HEALTH_ERR is fatal (a WARN is printed).
wait_healthy() {
  wait_for 120 "every placement group active+clean" osd.0 pgs_clean
  local health
  health=$(ceph_cli health detail 2>&1) || die "ceph health failed: $health"
  case "$health" in
    HEALTH_OK*) ;;
    HEALTH_ERR*) die "cluster health: $health (see $DIR/log/ceph.log)" ;;
    *) say "cluster health: $(echo "$health" | head -n 5 | paste -sd' ' -)" ;;
  esac
}

# --- S3 user, bucket, environment ----------------------------------------------------------------

# Creates the S3 user once; its keys stay in DIR/s3-keys for later `up`s.
make_user() {
  if [ -f "$DIR/s3-keys" ]; then
    local wanted="$ACCESS_KEY"
    # shellcheck disable=SC1091
    source "$DIR/s3-keys"
    [ -z "$wanted" ] || [ "$wanted" = "$ACCESS_KEY" ] ||
      say "up: --access-key ignored: the user '$S3_USER' in $DIR keeps its keys (down --delete-data to change them)"
    return 0
  fi
  [ -n "$ACCESS_KEY" ] || ACCESS_KEY=$(openssl rand -hex 10 | tr 'a-f' 'A-F')
  [ -n "$SECRET_KEY" ] || SECRET_KEY=$(openssl rand -hex 20)
  local out
  out=$(rgw_admin user create --uid "$S3_USER" --display-name "Steadfast tests" \
          --access-key "$ACCESS_KEY" --secret-key "$SECRET_KEY" 2>&1) ||
    die "radosgw-admin user create failed: $(echo "$out" | tail -n 5)"
  printf 'ACCESS_KEY=%s\nSECRET_KEY=%s\n' "$ACCESS_KEY" "$SECRET_KEY" >"$DIR/s3-keys"
  chmod 600 "$DIR/s3-keys"
  say "S3 user '$S3_USER' created"
}

# PUT /NAME, signed with SigV4. A bucket this user already owns is fine. curl 7.88 does not send
# x-amz-content-sha256 by itself, and the gateway rejects a SigV4 request without it
# (SignatureDoesNotMatch); given the header, curl signs it and uses its value as the payload hash.
make_bucket() {
  local name="$1" code body="$DIR/log/create-bucket.out"
  code=$(curl -sS -o "$body" -w '%{http_code}' --max-time 30 \
           --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
           -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X PUT "http://127.0.0.1:$RGW_PORT/$name") || die "bucket $name: curl failed"
  case "$code" in
    200) say "bucket '$name' ready" ;;
    409) grep -q BucketAlreadyOwnedByYou "$body" || die "bucket $name: HTTP 409: $(cat "$body")"
         say "bucket '$name' ready" ;;
    *) die "bucket $name: HTTP $code: $(cat "$body")" ;;
  esac
}

print_env() {
  {
    echo "SF_S3_ENDPOINT=http://127.0.0.1:$RGW_PORT"
    echo "AWS_ACCESS_KEY_ID=$ACCESS_KEY"
    echo "AWS_SECRET_ACCESS_KEY=$SECRET_KEY"
    echo "AWS_DEFAULT_REGION=$REGION"
  } >"$DIR/s3.env"
  chmod 600 "$DIR/s3.env"
  cat "$DIR/s3.env"
}

# --- commands ------------------------------------------------------------------------------------

# True if directory $1 holds nothing but the log, run and crash folders `up` makes first.
only_scratch() {
  local f
  for f in "$1"/* "$1"/.[!.]*; do
    [ -e "$f" ] || continue
    case "${f##*/}" in log|run|crash) ;; *) return 1 ;; esac
  done
}

all_running() {
  local d
  for d in "${DAEMONS[@]}"; do daemon_alive "$d" || return 1; done
}

# The gateway's port: --port if given (it must be free), else DIR's previous one or the default,
# and the next free one above it if taken.
choose_rgw_port() {
  local want="$1" p
  if [ -n "$want" ]; then
    port_free "$want" || die "up: --port $want: 127.0.0.1:$want is taken"
    RGW_PORT="$want"
    return 0
  fi
  for ((p = ${RGW_PORT:-$RGW_PORT_DEFAULT}; p < ${RGW_PORT:-$RGW_PORT_DEFAULT} + 100; p++)); do
    if port_free "$p"; then RGW_PORT="$p"; return 0; fi
  done
  die "up: no free port for the gateway from ${RGW_PORT:-$RGW_PORT_DEFAULT} up"
}

choose_mon_port() {
  local p
  for ((p = MON_PORT_FIRST; p < MON_PORT_FIRST + 100; p++)); do
    if port_free "$p"; then MON_PORT="$p"; return 0; fi
  done
  die "up: no free port for the mon from $MON_PORT_FIRST up"
}

cmd_up() {
  local port="" bucket="" size=4
  ACCESS_KEY=""
  SECRET_KEY=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --port) port="${2:?--port needs a number}"; shift 2 ;;
      --bucket) bucket="${2:?--bucket needs a name}"; shift 2 ;;
      --size) size="${2:?--size needs a number of GiB}"; shift 2 ;;
      --access-key) ACCESS_KEY="${2:?--access-key needs a value}"; shift 2 ;;
      --secret-key) SECRET_KEY="${2:?--secret-key needs a value}"; shift 2 ;;
      *) die "up: unknown argument '$1'" ;;
    esac
  done
  [ -z "$port" ] || { [[ "$port" =~ ^[0-9]+$ ]] && ((port >= 1024 && port < 65536)); } ||
    die "up: --port must be 1024..65535"
  if ! [[ "$size" =~ ^[0-9]+$ ]] || ((size < 2)); then die "up: --size must be at least 2 (GiB)"; fi
  [ -z "$bucket" ] || [[ "$bucket" =~ ^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$ ]] ||
    die "up: --bucket '$bucket' is not a valid S3 bucket name"
  if [ -n "$ACCESS_KEY$SECRET_KEY" ] && { [ -z "$ACCESS_KEY" ] || [ -z "$SECRET_KEY" ]; }; then
    die "up: --access-key and --secret-key go together"
  fi
  need_root "daemons write under DIR as root"
  need_tools
  [[ "$DIR" != *[[:space:]]* ]] || die "up: DIR must not contain whitespace (ceph.conf paths): '$DIR'"
  # Admin sockets live in DIR/run and must fit in a sockaddr_un (108 bytes).
  ((${#DIR} + 40 < 108)) || die "up: DIR is too long for a unix socket path: $DIR"
  local started=$SECONDS
  if load_env; then
    if all_running; then
      say "up: already running in $DIR"
      make_user
      [ -z "$bucket" ] || make_bucket "$bucket"
      print_env
      return 0
    fi
    # Stopped, half-started or crashed: stop what is left, then start the same cluster again.
    ( cmd_down >/dev/null 2>&1 ) || true
  else
    [ ! -e "$DIR" ] || only_scratch "$DIR" ||
      die "up: $DIR is not empty and holds no cluster of $PROG (cluster.env is missing)"
    FSID=$(uuidgen)
    OSD_UUID=$(uuidgen)
    SIZE_GIB="$size"
    RGW_PORT=""
    choose_mon_port
  fi
  CONF="$DIR/ceph.conf"
  mkdir -p "$DIR"/{log,run,crash}
  choose_rgw_port "$port"
  write_cluster_env
  # Rewritten on every up, so a changed script applies to an existing DIR.
  write_ceph_conf
  [ -f "$DIR/keyring/mon.keyring" ] || make_keyrings >/dev/null

  # From here on a failure stops what this up started (the logs under DIR stay for reading).
  trap 'rc=$?; if [ "$rc" -ne 0 ]; then ( cmd_down >/dev/null 2>&1 ) || true; fi' EXIT
  start_mon
  start_mgr
  start_osd
  start_rgw
  wait_healthy
  make_user
  [ -z "$bucket" ] || make_bucket "$bucket"
  say "up: S3 on http://127.0.0.1:$RGW_PORT after $((SECONDS - started)) s (logs in $DIR/log)"
  print_env
  trap - EXIT
}

# Stops daemon $1: SIGTERM, up to STOP_TIMEOUT_S, then SIGKILL.
stop_daemon() {
  local name="$1" pid i
  pid=$(daemon_pid "$name")
  if pid_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < STOP_TIMEOUT_S * 10; i++)); do
      pid_alive "$pid" || break
      sleep 0.1
    done
    if pid_alive "$pid"; then
      say "down: $name (pid $pid) ignored SIGTERM for ${STOP_TIMEOUT_S} s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do pid_alive "$pid" || break; sleep 0.1; done
    fi
    STOPPED=$((STOPPED + 1))
  fi
  rm -f "$(pid_file "$name")"
}

cmd_down() {
  local delete=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --delete-data) delete=1; shift ;;
      *) die "down: unknown argument '$1'" ;;
    esac
  done
  STOPPED=0
  if load_env; then
    local i
    for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do stop_daemon "${DAEMONS[i]}"; done
    if ((STOPPED > 0)); then say "down: stopped $STOPPED daemons in $DIR"; else say "down: $DIR was already down"; fi
  else
    say "down: no cluster in $DIR"
  fi
  if [ -n "$delete" ] && [ -d "$DIR" ]; then
    # Only a DIR this script made (its cluster.env or nothing but logs) is removed.
    [ -f "$DIR/cluster.env" ] || only_scratch "$DIR" ||
      die "down: $DIR holds no cluster of $PROG; not deleting it"
    rm -rf "$DIR"
    say "down: deleted $DIR"
  fi
}

cmd_status() {
  if ! load_env; then
    echo "no cluster in $DIR"
    return 1
  fi
  local rc=0 name pid
  for name in "${DAEMONS[@]}"; do
    pid=$(daemon_pid "$name")
    if pid_alive "$pid"; then echo "$name: running (pid $pid)"; else echo "$name: stopped"; rc=1; fi
  done
  echo "mon: 127.0.0.1:$MON_PORT; S3: http://127.0.0.1:$RGW_PORT"
  if daemon_alive mon.a; then
    ceph_cli -s || rc=1
  fi
  return "$rc"
}

cmd_gateway() {
  need_root "daemons write under DIR as root"
  load_env || die "gateway: no cluster in $DIR (cluster.env is missing)"
  if daemon_alive client.rgw.local; then
    say "gateway: already running on 127.0.0.1:$RGW_PORT"
    return 0
  fi
  for name in mon.a mgr.x osd.0; do daemon_alive "$name" || die "gateway: $name is not running; use up"; done
  start_rgw
}

[ $# -ge 2 ] || usage
CMD="$1"
DIR=$(realpath -m "$2")
shift 2
case "$CMD" in
  up) cmd_up "$@" ;;
  down) need_root "daemons write under DIR as root"; cmd_down "$@" ;;
  status) cmd_status ;;
  gateway) cmd_gateway ;;
  *) usage ;;
esac
