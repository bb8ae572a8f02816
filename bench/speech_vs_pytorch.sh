#!/usr/bin/env bash
# The engine's speech recogniser vs the same model in PyTorch on this machine, one after the other
# in the same run, fp32 and bf16 (bf16 GEMM operands on our side; torch.autocast("cpu",
# bfloat16) on PyTorch's): one training step (forward, CTC loss, backward) of
# trainer/models/speech_ctc.h on a synthetic batch of BATCH utterances of MIN_FRAMES..MAX_FRAMES
# 10 ms frames of 80 log-mel features. Ours: bench/speech_ctc_bench.cc; PyTorch's:
# bench/pytorch_speech_bench.py (nn.Conv2d, nn.TransformerEncoder, F.ctc_loss).
#
#   bench/speech_vs_pytorch.sh [BUILD_DIR]
#
# Sizes (env): CHANNELS (subsampling convolutions, 64), DIM (256), HEADS (4), LAYERS (6), FFN
# (1024), VOCAB (40); THREADS threads each (2); medians of STEPS timed steps after WARMUP.
# Prints frames/s of each, the ratio and each process's peak RSS (PyTorch's includes the
# interpreter and torch's libraries, ~300 MB before any tensor). Needs /usr/bin/python3 with
# python3-torch.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
[[ -x "$build/bench/speech_ctc_bench" ]] || { echo "no speech_ctc_bench in $build/bench (build the speech_ctc_bench target)" >&2; exit 2; }

BATCH="${BATCH:-16}"; MIN_FRAMES="${MIN_FRAMES:-300}"; MAX_FRAMES="${MAX_FRAMES:-400}"
CHANNELS="${CHANNELS:-64}"; DIM="${DIM:-256}"; HEADS="${HEADS:-4}"; LAYERS="${LAYERS:-6}"; FFN="${FFN:-1024}"
VOCAB="${VOCAB:-40}"; THREADS="${THREADS:-2}"; STEPS="${STEPS:-10}"; WARMUP="${WARMUP:-2}"
PEER_BLAS_DIR="${PEER_BLAS_DIR:-/usr/lib/x86_64-linux-gnu/openblas-pthread}"
peer_env=(OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS")
[[ -e "$PEER_BLAS_DIR/libblas.so.3" ]] && peer_env+=(LD_LIBRARY_PATH="$PEER_BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }
args=(--batch "$BATCH" --min-frames "$MIN_FRAMES" --max-frames "$MAX_FRAMES" --conv-channels "$CHANNELS" --dim "$DIM"
      --heads "$HEADS" --layers "$LAYERS" --ffn "$FFN" --vocab "$VOCAB" --steps "$STEPS" --warmup "$WARMUP")

echo "speech recogniser training step: $BATCH utterances of $MIN_FRAMES-$MAX_FRAMES frames, conv $CHANNELS, d $DIM, $LAYERS layers, $THREADS threads ($(lscpu | sed -n 's/^Model name: *//p'))"
printf '%-9s %14s %14s %8s %14s %14s\n' precision "ours frames/s" "pytorch fr/s" ratio "ours RSS MB" "pytorch RSS MB"
for precision in fp32 bf16; do
  o="$({ OMP_NUM_THREADS="$THREADS" /usr/bin/time -f 'peak_rss_kb=%M' "$build/bench/speech_ctc_bench" "${args[@]}" \
         --precision "$precision"; } 2>&1)"
  p="$({ env "${peer_env[@]}" /usr/bin/time -f 'peak_rss_kb=%M' /usr/bin/python3 "$here/pytorch_speech_bench.py" \
         "${args[@]}" --precision "$precision" --threads "$THREADS"; } 2>&1)"
  ot="$(field frames_per_s "$o")"; pt="$(field frames_per_s "$p")"
  [[ -n "$ot" && -n "$pt" ]] || { echo "a side failed:"; echo "$o"; echo "$p"; exit 1; } >&2
  printf '%-9s %14s %14s %8s %14s %14s\n' "$precision" "$ot" "$pt" "$(awk -v a="$ot" -v b="$pt" 'BEGIN { printf "%.2fx", a / b }')" \
    "$(( $(field peak_rss_kb "$o") / 1024 ))" "$(( $(field peak_rss_kb "$p") / 1024 ))"
done
