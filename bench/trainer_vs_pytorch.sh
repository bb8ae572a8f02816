#!/usr/bin/env bash
# Steadfast's engine vs PyTorch on this machine, one after the other in the same run.
#
#   bench/trainer_vs_pytorch.sh [BUILD_DIR]
#
# For each model (ARCHS, default "transformer_tiny transformer_base") and precision
# (PRECISIONS, default "fp32 bf16"): `sf-trainer bench` and bench/pytorch_transformer_bench.py
# (torch.nn.Transformer, ATEN_CPU_CAPABILITY=avx512, torch.set_num_threads = THREADS), same
# sizes and tokens per batch (BATCH x SRC_LEN / TGT_LEN, VOCAB), medians of STEPS timed steps
# after WARMUP. Prints target tokens/s of each, the ratio, peak RSS of each, and a table row per
# configuration. Needs /usr/bin/python3 with python3-torch.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
trainer="$build/trainer/sf-trainer"
[[ -x "$trainer" ]] || { echo "no sf-trainer at $trainer (build the sf-trainer target)" >&2; exit 2; }

ARCHS="${ARCHS:-transformer_tiny transformer_base}"
PRECISIONS="${PRECISIONS:-fp32 bf16}"
THREADS="${THREADS:-2}"
BATCH="${BATCH:-128}"; SRC_LEN="${SRC_LEN:-32}"; TGT_LEN="${TGT_LEN:-32}"; VOCAB="${VOCAB:-8000}"
STEPS="${STEPS:-5}"; WARMUP="${WARMUP:-2}"

# PyTorch's fp32 GEMMs go through the system BLAS (Debian's libblas.so.3 alternative). The
# reference (netlib) BLAS runs at ~5 GFLOP/s and would make a meaningless peer: use OpenBLAS,
# from PEER_BLAS_DIR, or the installed libopenblas0-pthread, when there is one.
PEER_BLAS_DIR="${PEER_BLAS_DIR:-/usr/lib/x86_64-linux-gnu/openblas-pthread}"
peer_env=(ATEN_CPU_CAPABILITY=avx512 OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS")
if [[ -e "$PEER_BLAS_DIR/libblas.so.3" ]]; then
  peer_env+=(LD_LIBRARY_PATH="$PEER_BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  peer_blas="$PEER_BLAS_DIR/libblas.so.3"
else
  peer_blas="system libblas.so.3 ($(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)); WARNING: if this is the reference BLAS, PyTorch fp32 is ~30x slower than with OpenBLAS"
fi

field() { /usr/bin/python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "pytorch fp32 BLAS: $peer_blas"
echo "config: batch=$BATCH src_len=$SRC_LEN tgt_len=$TGT_LEN vocab=$VOCAB threads=$THREADS steps=$STEPS warmup=$WARMUP"
rows=()
for arch in $ARCHS; do
  for prec in $PRECISIONS; do
    ours=$("$trainer" bench --arch "$arch" --precision "$prec" --batch "$BATCH" --src-len "$SRC_LEN" \
             --tgt-len "$TGT_LEN" --vocab "$VOCAB" --steps "$STEPS" --warmup "$WARMUP" \
             --threads "$THREADS" --json)
    theirs=$(env "${peer_env[@]}" /usr/bin/python3 \
               "$here/pytorch_transformer_bench.py" --arch "$arch" --precision "$prec" \
               --batch "$BATCH" --src-len "$SRC_LEN" --tgt-len "$TGT_LEN" --vocab "$VOCAB" \
               --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" --json)
    echo "steadfast $arch $prec: $ours"
    echo "pytorch   $arch $prec: $theirs"
    ot=$(field "$ours" tokens_per_s); pt=$(field "$theirs" tokens_per_s)
    orss=$(field "$ours" peak_rss_mb); prss=$(field "$theirs" peak_rss_mb)
    ratio=$(/usr/bin/python3 -c "print('%.2f' % ($ot / $pt))")
    mratio=$(/usr/bin/python3 -c "print('%.2f' % ($orss / $prss))")
    rows+=("| $arch | $prec | $ot | $pt | ${ratio}x | $orss | $prss | $mratio | $(field "$ours" achieved_gflops) | $(field "$ours" fraction_of_gemm_rate) |")
  done
done
echo
echo "| model | precision | steadfast tokens/s | pytorch tokens/s | speed-up | steadfast peak RSS MB | pytorch peak RSS MB | RSS ratio | steadfast GFLOP/s | of GEMM rate |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
