#!/usr/bin/env bash
# Beam search on the GPU (DeviceDecoder) vs on the CPU (Translator's OpenMP search), on the same
# checkpoint and sentences: `sf-trainer translate --device cuda` against `--device cpu`.
#
#   bench/beam_device.sh CHECKPOINT [SOURCE_FILE] [BUILD_DIR]
#
# CHECKPOINT: a directory written by `sf-trainer train` (e.g. runs/multi30k/latest). SOURCE_FILE
# defaults to the Multi30k test2016 German side; LINES (default 1000) of it are translated with
# BEAM (default 5); the CPU search uses THREADS (default: all cores). Prints sentences/s of
# each, the ratio, and how many output lines are identical (the two searches pick the same
# hypotheses up to GEMM rounding, so a few near-ties may differ). Needs a visible GPU.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
ckpt="${1:?usage: bench/beam_device.sh CHECKPOINT [SOURCE_FILE] [BUILD_DIR]}"
src="${2:-$here/../../shared/data/multi30k-de-en/test.de}"
build="${3:-$here/../build}"
trainer="$build/trainer/sf-trainer"
[[ -x "$trainer" ]] || { echo "no sf-trainer at $trainer (build the sf-trainer target)" >&2; exit 2; }
[[ -r "$src" ]] || { echo "can't read $src" >&2; exit 2; }
LINES="${LINES:-1000}"; BEAM="${BEAM:-5}"; THREADS="${THREADS:-0}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
head -n "$LINES" "$src" >"$work/src"
n=$(wc -l <"$work/src")

run() {  # $1 = device, $2 = output file; prints seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$trainer" translate --checkpoint "$ckpt" --beam "$BEAM" --threads "$THREADS" --device "$1" \
    <"$work/src" >"$2"
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}

gpu_s=$(run cuda "$work/gpu")
cpu_s=$(run cpu "$work/cpu")
same=$(paste -d '\t' "$work/gpu" "$work/cpu" | awk -F '\t' '$1 == $2 { k++ } END { print k + 0 }')
printf 'sentences: %d  beam: %d  cpu threads: %s\n' "$n" "$BEAM" "$([[ $THREADS == 0 ]] && nproc || echo "$THREADS")"
printf 'gpu search:  %8.2f s  %8.1f sentences/s\n' "$gpu_s" "$(awk -v n="$n" -v s="$gpu_s" 'BEGIN { print n / s }')"
printf 'cpu search:  %8.2f s  %8.1f sentences/s\n' "$cpu_s" "$(awk -v n="$n" -v s="$cpu_s" 'BEGIN { print n / s }')"
printf 'speedup (gpu / cpu): %.2fx   (both include loading the checkpoint)\n' \
  "$(awk -v a="$cpu_s" -v b="$gpu_s" 'BEGIN { print a / b }')"
printf 'identical lines: %d of %d\n' "$same" "$n"
