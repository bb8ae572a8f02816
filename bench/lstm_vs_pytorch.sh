#!/usr/bin/env bash
# The engine's LSTM vs PyTorch on this machine, one after the other in the same run, fp32 and
# bf16 (bf16 GEMM operands on our side; torch.autocast("cpu", bfloat16) on PyTorch's):
#   layer: one LSTM layer's training step over a packed batch (trainer/nn/lstm.h) vs torch.nn.LSTM;
#   model: fairseq's lstm model's training step (trainer/models/lstm_model.h) vs the same model
#          written with torch.nn;
#   arch:  `sf-trainer bench --arch lstm_small` (the preset as a trial trains it: the training
#          step with its optimizer, through the model interface) vs the same shapes in torch.nn,
#          BATCH sentence pairs of LEN tokens each side (the bench's synthetic batches).
# Ours: bench/lstm_bench.cc (`lstm_bench layer|model`) and sf-trainer bench; PyTorch's:
# bench/pytorch_lstm_bench.py.
#
#   bench/lstm_vs_pytorch.sh [BUILD_DIR]
#
# Sizes: BATCH sentences of lengths MIN_LEN..MAX_LEN (the same on both sides); the layer at
# INPUT x HIDDEN, the model at DIM (every size; fairseq's lstm_wiseman_iwslt_de_en is 256) with
# VOCAB and LAYERS; THREADS threads each (PyTorch: torch.set_num_threads, ATEN_CPU_CAPABILITY=avx512 where the CPU has AVX-512,
# OpenBLAS from PEER_BLAS_DIR when present); medians of STEPS timed steps after WARMUP. WHAT
# (default "layer model arch") picks the comparisons. Prints tokens/s of each, the ratio and each
# process's peak RSS. Needs
# /usr/bin/python3 with python3-torch. Peak RSS of each process by /usr/bin/time (PyTorch's
# includes the interpreter and torch's libraries, ~300 MB before any tensor).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
[[ -x "$build/bench/lstm_bench" ]] || { echo "no lstm_bench in $build/bench (build the lstm_bench target)" >&2; exit 2; }
[[ -x "$build/trainer/sf-trainer" ]] || { echo "no sf-trainer in $build/trainer" >&2; exit 2; }

WHAT="${WHAT:-layer model arch}"
BATCH="${BATCH:-64}"; MIN_LEN="${MIN_LEN:-10}"; MAX_LEN="${MAX_LEN:-30}"
INPUT="${INPUT:-256}"; HIDDEN="${HIDDEN:-256}"; DIM="${DIM:-256}"; VOCAB="${VOCAB:-8000}"; LAYERS="${LAYERS:-1}"
THREADS="${THREADS:-2}"; STEPS="${STEPS:-10}"; WARMUP="${WARMUP:-2}"; LEN="${LEN:-20}"
PEER_BLAS_DIR="${PEER_BLAS_DIR:-/usr/lib/x86_64-linux-gnu/openblas-pthread}"
peer_env=(OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS")
# PyTorch's AVX-512 kernels where the CPU has AVX-512 (forcing them elsewhere is SIGILL).
grep -qw avx512f /proc/cpuinfo && peer_env+=(ATEN_CPU_CAPABILITY=avx512)
[[ -e "$PEER_BLAS_DIR/libblas.so.3" ]] && peer_env+=(LD_LIBRARY_PATH="$PEER_BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }
common=(--batch "$BATCH" --min-len "$MIN_LEN" --max-len "$MAX_LEN" --steps "$STEPS" --warmup "$WARMUP")

# lstm_small's sizes for the peer (common/config/hyperparameter_schema.cc, docs/models.md).
lstm_small=(--enc-embed 256 --enc-hidden 256 --bidirectional --dec-embed 256 --dec-hidden 512 --out-embed 256 --tied)

compare_arch() {  # `sf-trainer bench --arch lstm_small` vs the peer with the same shapes
  echo "sf-trainer bench --arch lstm_small, training step: batch $BATCH, $LEN tokens each side, vocab $VOCAB, $THREADS threads ($(lscpu | sed -n 's/^Model name: *//p'))"
  printf '%-9s %14s %14s %8s %14s %14s\n' precision "ours tok/s" "pytorch tok/s" ratio "ours RSS MB" "pytorch RSS MB"
  for precision in fp32 bf16; do
    local o p ot pt
    o="$({ /usr/bin/time -f 'peak_rss_kb=%M' "$build/trainer/sf-trainer" bench --arch lstm_small --batch "$BATCH" \
           --src-len "$LEN" --tgt-len "$LEN" --vocab "$VOCAB" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" \
           --no-gemm-peak --precision "$precision"; } 2>&1)"
    p="$({ env "${peer_env[@]}" /usr/bin/time -f 'peak_rss_kb=%M' /usr/bin/python3 "$here/pytorch_lstm_bench.py" model \
           --batch "$BATCH" --min-len "$LEN" --max-len "$LEN" --vocab "$VOCAB" --layers 1 "${lstm_small[@]}" \
           --steps "$STEPS" --warmup "$WARMUP" --precision "$precision" --threads "$THREADS"; } 2>&1)"
    ot="$(sed -n 's/^tokens_per_s: *\([0-9.]*\).*/\1/p' <<<"$o")"; pt="$(field tokens_per_s "$p")"
    [[ -n "$ot" && -n "$pt" ]] || { echo "a side failed:"; echo "$o"; echo "$p"; exit 1; } >&2
    printf '%-9s %14s %14s %8s %14s %14s\n' "$precision" "$ot" "$pt" "$(awk -v a="$ot" -v b="$pt" 'BEGIN { printf "%.2fx", a / b }')" \
      "$(( $(field peak_rss_kb "$o") / 1024 ))" "$(( $(field peak_rss_kb "$p") / 1024 ))"
  done
}

compare() {  # title, what (layer / model), extra arguments...
  local title="$1" what="$2"; shift 2
  echo "$title, $THREADS threads ($(lscpu | sed -n 's/^Model name: *//p'))"
  printf '%-9s %14s %14s %8s %14s %14s\n' precision "ours tok/s" "pytorch tok/s" ratio "ours RSS MB" "pytorch RSS MB"
  for precision in fp32 bf16; do
    local o p ot pt
    o="$({ OMP_NUM_THREADS="$THREADS" /usr/bin/time -f 'peak_rss_kb=%M' "$build/bench/lstm_bench" "$what" "${common[@]}" "$@" \
           --precision "$precision"; } 2>&1)"
    p="$({ env "${peer_env[@]}" /usr/bin/time -f 'peak_rss_kb=%M' /usr/bin/python3 "$here/pytorch_lstm_bench.py" "$what" "${common[@]}" "$@" \
           --precision "$precision" --threads "$THREADS"; } 2>&1)"
    ot="$(field tokens_per_s "$o")"; pt="$(field tokens_per_s "$p")"
    printf '%-9s %14s %14s %8s %14s %14s\n' "$precision" "$ot" "$pt" "$(awk -v a="$ot" -v b="$pt" 'BEGIN { printf "%.2fx", a / b }')" \
      "$(( $(field peak_rss_kb "$o") / 1024 ))" "$(( $(field peak_rss_kb "$p") / 1024 ))"
  done
}

for what in $WHAT; do
  case "$what" in
    layer) compare "LSTM layer, fwd+bwd: batch $BATCH, lengths $MIN_LEN..$MAX_LEN, input $INPUT, hidden $HIDDEN" \
             layer --input "$INPUT" --hidden "$HIDDEN" ;;
    model) compare "lstm model, training step: batch $BATCH, lengths $MIN_LEN..$MAX_LEN, dim $DIM, vocab $VOCAB, layers $LAYERS" \
             model --dim "$DIM" --vocab "$VOCAB" --layers "$LAYERS" ;;
    arch) compare_arch ;;
    *) echo "WHAT: layer, model or arch, not $what" >&2; exit 2 ;;
  esac
done
