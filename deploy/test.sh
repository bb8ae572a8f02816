#!/usr/bin/env bash
# Runs every Steadfast test: installs dependencies (Debian 12, as root), builds with warnings
# as errors, builds and tests the web dashboard, and runs the whole CTest suite (labels: unit,
# db, cli, engine, agent, dist, e2e, chaos).
#
#   ./deploy/test.sh                 everything
#   ./deploy/test.sh -L unit         pass-through arguments go to ctest
#
# BUILD_DIR (default: build) and JOBS (default: nproc) may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

if [ "$(id -u)" -eq 0 ]; then
  ./deploy/install-deps.sh
else
  echo "test.sh: not root; assuming dependencies are installed (deploy/install-deps.sh)" >&2
fi

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSF_WERROR=ON -DSF_TESTS=ON \
  -DSF_BENCH=ON >"$BUILD_DIR.configure.log" 2>&1 || { cat "$BUILD_DIR.configure.log"; exit 1; }
# The API description generated from the proto (docs/api.md), which the dashboard's types must
# match; then the dashboard: its unit and offline browser tests, and the build the master serves
# (the end-to-end ctest drives it in Chromium against a real cluster).
cmake --build "$BUILD_DIR" -j "$JOBS" --target openapi_json
if [ -f webui/package.json ]; then
  case "$BUILD_DIR" in /*) openapi="$BUILD_DIR/openapi.json" ;; *) openapi="$PWD/$BUILD_DIR/openapi.json" ;; esac
  SF_OPENAPI_JSON="$openapi" bash tests/webui/run.sh
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$JOBS" "$@"
