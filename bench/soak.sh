#!/usr/bin/env bash
# The soak (issue 45) in one command: short experiments arriving continuously on a real local
# cluster for MINUTES (default 120) while the chaos suite's faults come on a seeded schedule,
# then the checks and the growth table of tests/e2e/soak_test.cc (ctest label `soak`; skipped in
# the plain test run, which does not set SF_SOAK_MINUTES).
#
#   bench/soak.sh [MINUTES]        BUILD=build (env) names the build directory;
#                                  SF_CHAOS_SEED=N replays a schedule;
#                                  SF_SOAK_SAMPLE_SECONDS=S samples every S s (default 30).
# Every sample also goes to $BUILD/soak-series.csv, drawn as $BUILD/soak-series.svg at the end
# (bench/soak_plot.py; the plots in docs/performance-scale.md).
# The run uses a snapshot of the build (hard links under $BUILD/soak-snapshot, taken at the start;
# the linker replaces a program rather than rewriting it), so rebuilding during a two-hour soak
# does not change the programs its faults restart.
# As root, link cuts are among the faults (network namespaces). Exit status: the test's.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
bin="$BUILD/tests/e2e/e2e_soak_test"
[ -x "$bin" ] || { echo "no $bin: build the e2e_soak_test target (and sf, sf-master, sf-agent, sf-trainer)" >&2; exit 2; }
snap="$(cd "$BUILD" && pwd)/soak-snapshot"
rm -rf "$snap" && mkdir -p "$snap"
for d in "$BUILD"/*; do
  [ "$(basename "$d")" = soak-snapshot ] || cp -al "$d" "$snap/"
done
echo "soak on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, ${1:-120} minutes, programs from $snap"
series="$(cd "$BUILD" && pwd)/soak-series.csv"
status=0
SF_BINARY_DIR="$snap" SF_SOAK_MINUTES="${1:-120}" SF_SOAK_SERIES_FILE="$series" \
  "$snap/tests/e2e/e2e_soak_test" --gtest_color=no || status=$?
python3 bench/soak_plot.py "$series" "${series%.csv}.svg" --title "soak, ${1:-120} minutes, $(nproc) cores" &&
  echo "series: $series, drawn in ${series%.csv}.svg"
exit "$status"
