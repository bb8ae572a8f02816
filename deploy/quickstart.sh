#!/usr/bin/env bash
# The newcomer's one command: installs dependencies (Debian 12, as root), builds Steadfast and
# runs the main job, experiments/quickstart.yaml, on the embedded default.
#
# What "the embedded default" runs grows with the project; this command stays the same:
#   - today: validates the experiment with the same parser the master uses, prints its plan,
#     and trains one trial's model with the native engine (sf-trainer) when it is built;
#   - with the cluster: brings up a local cluster (private PostgreSQL, master, agents) and runs
#     the experiment to completion.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
EXPERIMENT=${1:-experiments/quickstart.yaml}

if [ "$(id -u)" -eq 0 ]; then
  ./deploy/install-deps.sh
else
  echo "quickstart.sh: not root; assuming dependencies are installed (deploy/install-deps.sh)" >&2
fi

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$BUILD_DIR.configure.log" 2>&1 \
  || { cat "$BUILD_DIR.configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$JOBS"

echo "== validating $EXPERIMENT"
"$BUILD_DIR/cli/sf" config validate "$EXPERIMENT"

if [ -x "$BUILD_DIR/trainer/sf-trainer" ] && "$BUILD_DIR/trainer/sf-trainer" --help 2>/dev/null | grep -q '^ *bench'; then
  echo "== training steps of the quickstart model with the native engine (synthetic batches)"
  "$BUILD_DIR/trainer/sf-trainer" bench --arch transformer_tiny --precision fp32 \
    --batch 32 --src-len 24 --tgt-len 24 --vocab 1000 --steps 5
fi
