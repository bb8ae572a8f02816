#!/usr/bin/env bash
# The newcomer's one command: installs dependencies (Debian 12, as root), builds Steadfast and
# the dashboard, brings up the embedded default — a local cluster with its own PostgreSQL, a
# master and agents, with TLS on every channel (a private CA of its own) — and runs the main job,
# experiments/quickstart.yaml, to completion.
#
#   ./deploy/quickstart.sh [EXPERIMENT.yaml]
#
# The cluster stays up afterwards (dashboard URL printed); stop it with
#   build/cli/sf deploy local down            (add --delete-data to remove its database)
# BUILD_DIR, JOBS, SF_LOCAL_DIR, SF_AGENTS and SF_HTTP_PORT may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
EXPERIMENT=${1:-experiments/quickstart.yaml}
AGENTS=${SF_AGENTS:-2}
HTTP_PORT=${SF_HTTP_PORT:-8080}
GRPC_PORT=${SF_GRPC_PORT:-8090}

if [ "$(id -u)" -eq 0 ]; then
  ./deploy/install-deps.sh
else
  echo "quickstart.sh: not root; assuming dependencies are installed (deploy/install-deps.sh)" >&2
fi

if [ -f webui/package.json ]; then
  echo "== building the dashboard (webui/)"
  (cd webui && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent)
fi

echo "== building Steadfast"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$BUILD_DIR.configure.log" 2>&1 \
  || { cat "$BUILD_DIR.configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$JOBS" --target sf sf-master sf-agent sf-trainer

SF="$BUILD_DIR/cli/sf"
DIR_ARGS=()
if [ -n "${SF_LOCAL_DIR:-}" ]; then DIR_ARGS=(--dir "$SF_LOCAL_DIR"); fi

echo "== validating $EXPERIMENT"
"$SF" config validate "$EXPERIMENT"

echo "== starting the local cluster"
"$SF" deploy local up --agents "$AGENTS" --cpu-slots 1 --port "$HTTP_PORT" --grpc-port "$GRPC_PORT" "${DIR_ARGS[@]}"

# `deploy local up` wrote the master's URL and CA to sf's defaults file (~/.config/steadfast/cli.json),
# so plain sf commands reach it.
echo "== running $EXPERIMENT"
"$SF" experiment create "$EXPERIMENT" --follow
echo "== done: dashboard at https://127.0.0.1:$HTTP_PORT/  (stop the cluster: $SF deploy local down)"
