#!/usr/bin/env bash
# Steadfast's engine vs PyTorch on one GPU, one after the other in the same run.
#
#   bench/trainer_vs_pytorch_gpu.sh [BUILD_DIR]
#
# For each model (ARCHS, default "transformer_base transformer_big") and target tokens per step
# (TOKENS, default "8192 32768"; batch = tokens / TGT_LEN, SRC_LEN = TGT_LEN = 64 by default):
#   - `sf-trainer bench --device cuda --precision bf16` (everything device-resident, cuBLASLt),
#   - bench/pytorch_transformer_bench.py --device cuda --precision bf16: nn.Transformer with
#     label-smoothed loss, fused AdamW and bf16 autocast, eager and (COMPILE=1, the default)
#     torch.compile,
# same sizes, vocabulary (VOCAB) and dropout, medians of STEPS timed steps after WARMUP. Prints
# each run's JSON and a table: tokens/s of each, our speed-up over eager PyTorch, our model FLOP
# rate as a fraction of the bf16 cuBLASLt GEMM rate measured in the same run, and peak device
# memory (our device allocator's peak; torch.cuda.max_memory_allocated); then our step's phases
# on the device's clock (sf-trainer bench's device_*_s).
# Targets (issue 13): >= 1.3x eager PyTorch, >= 0.5 of the GEMM rate, memory <= PyTorch's.
#
# Needs a GPU, an sf-trainer built with SF_CUDA=ON, and a python with torch (PYTHON, default
# python3). Exits 2 with a message where there is no GPU.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
trainer="$build/trainer/sf-trainer"
[[ -x "$trainer" ]] || { echo "no sf-trainer at $trainer (build the sf-trainer target)" >&2; exit 2; }
PYTHON="${PYTHON:-python3}"
ARCHS="${ARCHS:-transformer_base transformer_big}"
TOKENS="${TOKENS:-8192 32768}"
SRC_LEN="${SRC_LEN:-64}"; TGT_LEN="${TGT_LEN:-64}"; VOCAB="${VOCAB:-32000}"
STEPS="${STEPS:-20}"; WARMUP="${WARMUP:-5}"; COMPILE="${COMPILE:-1}"

if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "no GPU visible to $PYTHON's torch (or no torch): nothing to compare on this machine" >&2
  exit 2
fi
field() { "$PYTHON" -c "import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], '-'))" "$1" "$2"; }

echo "gpu: $("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name(0))'), torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
echo "config: src_len=$SRC_LEN tgt_len=$TGT_LEN vocab=$VOCAB steps=$STEPS warmup=$WARMUP compile=$COMPILE"
rows=()
phases=()
for arch in $ARCHS; do
  for tokens in $TOKENS; do
    batch=$((tokens / TGT_LEN))
    common=(--arch "$arch" --precision bf16 --batch "$batch" --src-len "$SRC_LEN" --tgt-len "$TGT_LEN"
            --vocab "$VOCAB" --steps "$STEPS" --warmup "$WARMUP" --json)
    ours=$("$trainer" bench --device cuda "${common[@]}")
    echo "steadfast $arch $tokens: $ours"
    eager=$("$PYTHON" "$here/pytorch_transformer_bench.py" --device cuda "${common[@]}")
    echo "pytorch eager $arch $tokens: $eager"
    compiled="{}"
    if [[ "$COMPILE" == 1 ]]; then
      compiled=$("$PYTHON" "$here/pytorch_transformer_bench.py" --device cuda --compile "${common[@]}" || echo "{}")
      echo "pytorch compiled $arch $tokens: $compiled"
    fi
    ot=$(field "$ours" tokens_per_s); et=$(field "$eager" tokens_per_s); ct=$(field "$compiled" tokens_per_s)
    speedup=$("$PYTHON" -c "print('%.2f' % ($ot / $et))")
    phases+=("$arch $tokens: forward $(field "$ours" device_forward_s) s, backward $(field "$ours" device_backward_s) s, optimizer $(field "$ours" device_optimizer_s) s")
    rows+=("| $arch | $tokens | $ot | $et | $ct | **${speedup}x** | $(field "$ours" achieved_gflops) | $(field "$ours" fraction_of_gemm_rate) of $(field "$ours" gemm_gflops) | $(field "$ours" engine_peak_buffer_mb) | $(field "$eager" device_peak_mb) | $(field "$compiled" device_peak_mb) |")
  done
done
echo
echo "| model | target tokens/step | steadfast tokens/s | pytorch eager | pytorch compiled | speed-up vs eager | steadfast GFLOP/s | of bf16 GEMM GFLOP/s | steadfast peak MB | eager peak MB | compiled peak MB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "steadfast's step on the device's clock (CUDA events, medians):"
printf '  %s\n' "${phases[@]}"
