#!/usr/bin/env bash
# Beam search with the incremental decoder state (cached self-attention K/V, encoder K/V once)
# vs recomputing the whole prefix at every step, on the same checkpoint and sentences.
#
#   bench/beam_cache.sh CHECKPOINT [SOURCE_FILE] [BUILD_DIR]
#
# CHECKPOINT: a directory written by `sf-trainer train` (e.g. runs/multi30k/best). SOURCE_FILE
# defaults to the Multi30k test2016 German side; LINES (default 1000) of it are translated with
# BEAM (default 5) on THREADS (default 2). Prints sentences/s of each way and the ratio, and
# checks the two outputs are identical (exit 1 if not).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
ckpt="${1:?usage: bench/beam_cache.sh CHECKPOINT [SOURCE_FILE] [BUILD_DIR]}"
src="${2:-$here/../../shared/data/multi30k-de-en/test.de}"
build="${3:-$here/../build}"
trainer="$build/trainer/sf-trainer"
[[ -x "$trainer" ]] || { echo "no sf-trainer at $trainer (build the sf-trainer target)" >&2; exit 2; }
[[ -r "$src" ]] || { echo "can't read $src" >&2; exit 2; }
LINES="${LINES:-1000}"; BEAM="${BEAM:-5}"; THREADS="${THREADS:-2}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
head -n "$LINES" "$src" >"$work/src"
n=$(wc -l <"$work/src")

run() {  # $1 = output file, rest = extra flags; prints seconds
  local out="$1"; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$trainer" translate --checkpoint "$ckpt" --beam "$BEAM" --threads "$THREADS" "$@" <"$work/src" >"$out"
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}

cached_s=$(run "$work/cached")
full_s=$(run "$work/full" --no-cache)
printf 'sentences: %d  beam: %d  threads: %d\n' "$n" "$BEAM" "$THREADS"
printf 'cached decoder:      %8.2f s  %8.1f sentences/s\n' "$cached_s" "$(awk -v n="$n" -v s="$cached_s" 'BEGIN { print n / s }')"
printf 'full recomputation:  %8.2f s  %8.1f sentences/s\n' "$full_s" "$(awk -v n="$n" -v s="$full_s" 'BEGIN { print n / s }')"
printf 'speedup (cached / full): %.2fx\n' "$(awk -v a="$full_s" -v b="$cached_s" 'BEGIN { print a / b }')"
if cmp -s "$work/cached" "$work/full"; then
  echo "outputs: identical"
else
  echo "outputs: DIFFER" >&2
  diff "$work/cached" "$work/full" | head -20 >&2
  exit 1
fi
