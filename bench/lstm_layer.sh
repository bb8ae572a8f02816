#!/usr/bin/env bash
# One LSTM layer's training step (forward + backward over a packed batch): the engine
# (bench/lstm_layer_bench.cc, trainer/nn/lstm.h) vs PyTorch's nn.LSTM
# (bench/pytorch_lstm_bench.py), one after the other in the same run, fp32 and bf16.
#
#   bench/lstm_layer.sh [BUILD_DIR]
#
# Sizes: BATCH sequences of lengths MIN_LEN..MAX_LEN (the same lengths on both sides), INPUT and
# HIDDEN; THREADS threads each (PyTorch: torch.set_num_threads, ATEN_CPU_CAPABILITY=avx512,
# OpenBLAS from PEER_BLAS_DIR when present); medians of STEPS timed steps after WARMUP. Prints
# tokens/s of each and the ratio per precision. Needs /usr/bin/python3 with python3-torch.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
ours="$build/bench/lstm_layer_bench"
[[ -x "$ours" ]] || { echo "no lstm_layer_bench at $ours (build the lstm_layer_bench target)" >&2; exit 2; }

BATCH="${BATCH:-64}"; MIN_LEN="${MIN_LEN:-10}"; MAX_LEN="${MAX_LEN:-30}"
INPUT="${INPUT:-256}"; HIDDEN="${HIDDEN:-256}"; THREADS="${THREADS:-2}"
STEPS="${STEPS:-20}"; WARMUP="${WARMUP:-3}"
PEER_BLAS_DIR="${PEER_BLAS_DIR:-/usr/lib/x86_64-linux-gnu/openblas-pthread}"
peer_env=(ATEN_CPU_CAPABILITY=avx512 OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS")
[[ -e "$PEER_BLAS_DIR/libblas.so.3" ]] && peer_env+=(LD_LIBRARY_PATH="$PEER_BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

args=(--batch "$BATCH" --min-len "$MIN_LEN" --max-len "$MAX_LEN" --input "$INPUT" --hidden "$HIDDEN"
      --steps "$STEPS" --warmup "$WARMUP")
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }

echo "LSTM layer, fwd+bwd: batch $BATCH, lengths $MIN_LEN..$MAX_LEN, input $INPUT, hidden $HIDDEN, $THREADS threads ($(lscpu | sed -n 's/^Model name: *//p'))"
printf '%-9s %14s %14s %8s\n' precision "ours tok/s" "pytorch tok/s" ratio
for precision in fp32 bf16; do
  o="$(OMP_NUM_THREADS="$THREADS" "$ours" "${args[@]}" --precision "$precision")"
  p="$(env "${peer_env[@]}" /usr/bin/python3 "$here/pytorch_lstm_bench.py" "${args[@]}" --precision "$precision" --threads "$THREADS")"
  ot="$(field tokens_per_s "$o")"; pt="$(field tokens_per_s "$p")"
  printf '%-9s %14s %14s %8s\n' "$precision" "$ot" "$pt" "$(awk -v a="$ot" -v b="$pt" 'BEGIN { printf "%.2fx", a / b }')"
done
