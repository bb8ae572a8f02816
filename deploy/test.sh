#!/usr/bin/env bash
# Runs every Steadfast test: installs dependencies (Debian 12, as root), builds with warnings
# as errors, and runs the whole CTest suite (unit, db, cli, engine labels).
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
cmake --build "$BUILD_DIR" -j "$JOBS"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$JOBS" "$@"
