#!/usr/bin/env bash
# Steadfast's engine vs PyTorch on this machine, one after the other in the same run.
#
#   bench/trainer_vs_pytorch.sh [BUILD_DIR]
#
# For each model (ARCHS, default "transformer_tiny transformer_base") and precision
# (PRECISIONS, default "fp32 bf16"): `sf-trainer bench` and bench/pytorch_transformer_bench.py
# (torch.nn.Transformer, ATEN_CPU_CAPABILITY=avx512 where the CPU has AVX-512, torch.set_num_threads = THREADS), same
# sizes and tokens per batch (BATCH x SRC_LEN / TGT_LEN, VOCAB), medians of STEPS timed steps
# after WARMUP. Prints target tokens/s of each, the ratio, peak RSS of each, and a table row per
# configuration. Needs /usr/bin/python3 with python3-torch.
#
# REPEATS (default 1) runs each pair that many times, alternating ours and PyTorch's; the table
# then shows the medians of the tokens/s and of the per-pair ratios (on a shared host the
# machine's speed drifts between runs minutes apart, and a pair run back to back sees less of
# it), and the largest peak RSS of each.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
trainer="$build/trainer/sf-trainer"
[[ -x "$trainer" ]] || { echo "no sf-trainer at $trainer (build the sf-trainer target)" >&2; exit 2; }

ARCHS="${ARCHS:-transformer_tiny transformer_base}"
PRECISIONS="${PRECISIONS:-fp32 bf16}"
THREADS="${THREADS:-2}"
BATCH="${BATCH:-128}"; SRC_LEN="${SRC_LEN:-32}"; TGT_LEN="${TGT_LEN:-32}"; VOCAB="${VOCAB:-8000}"
STEPS="${STEPS:-5}"; WARMUP="${WARMUP:-2}"; REPEATS="${REPEATS:-1}"

# PyTorch's fp32 GEMMs go through the system BLAS (Debian's libblas.so.3 alternative). The
# reference (netlib) BLAS runs at ~5 GFLOP/s and would make a meaningless peer: use OpenBLAS,
# from PEER_BLAS_DIR, or the installed libopenblas0-pthread, when there is one.
PEER_BLAS_DIR="${PEER_BLAS_DIR:-/usr/lib/x86_64-linux-gnu/openblas-pthread}"
peer_env=(OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS")
# PyTorch's AVX-512 kernels where the CPU has AVX-512 (forcing them elsewhere is SIGILL).
grep -qw avx512f /proc/cpuinfo && peer_env+=(ATEN_CPU_CAPABILITY=avx512)
if [[ -e "$PEER_BLAS_DIR/libblas.so.3" ]]; then
  peer_env+=(LD_LIBRARY_PATH="$PEER_BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  peer_blas="$PEER_BLAS_DIR/libblas.so.3"
else
  peer_blas="system libblas.so.3 ($(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)); WARNING: if this is the reference BLAS, PyTorch fp32 is ~30x slower than with OpenBLAS"
fi

field() { /usr/bin/python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "pytorch fp32 BLAS: $peer_blas"
echo "config: batch=$BATCH src_len=$SRC_LEN tgt_len=$TGT_LEN vocab=$VOCAB threads=$THREADS steps=$STEPS warmup=$WARMUP repeats=$REPEATS"
median() { /usr/bin/python3 -c "import statistics,sys; print('%.1f' % statistics.median(map(float, sys.argv[1:])))" "$@"; }
maximum() { /usr/bin/python3 -c "import sys; print('%.1f' % max(map(float, sys.argv[1:])))" "$@"; }
rows=()
for arch in $ARCHS; do
  for prec in $PRECISIONS; do
    ots=(); pts=(); ratios=(); orsss=(); prsss=()
    for ((rep = 1; rep <= REPEATS; ++rep)); do
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
      ots+=("$ot"); pts+=("$pt")
      ratios+=("$(/usr/bin/python3 -c "print($ot / $pt)")")
      orsss+=("$(field "$ours" peak_rss_mb)"); prsss+=("$(field "$theirs" peak_rss_mb)")
      if [[ "$REPEATS" -gt 1 ]]; then echo "pair $rep: ${ratios[-1]:0:4}x"; fi
    done
    ot=$(median "${ots[@]}"); pt=$(median "${pts[@]}")
    ratio=$(/usr/bin/python3 -c "import statistics,sys; print('%.2f' % statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}")
    orss=$(maximum "${orsss[@]}"); prss=$(maximum "${prsss[@]}")
    mratio=$(/usr/bin/python3 -c "print('%.2f' % ($orss / $prss))")
    rows+=("| $arch | $prec | $ot | $pt | ${ratio}x | $orss | $prss | $mratio | $(field "$ours" achieved_gflops) | $(field "$ours" fraction_of_gemm_rate) |")
  done
done
echo
echo "| model | precision | steadfast tokens/s | pytorch tokens/s | speed-up | steadfast peak RSS MB | pytorch peak RSS MB | RSS ratio | steadfast GFLOP/s | of GEMM rate |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
