#!/usr/bin/env bash
# Distributed training costs on this machine, side by side in one run.
#
#   bench/allreduce.sh [BUILD_DIR]
#
# 1. Allreduce bandwidth for SIZES MiB (default "1 4 16 64") with WORLD ranks (default 2)
#    under mpirun: a plain in-place MPI_Allreduce loop (the peer), our MPI communicator with
#    f32 on the wire, and with bf16 on the wire (compression; bandwidth counted in f32 payload
#    bytes, so it shows what the gradient sync gains). Median of ITERS after 2 warm-ups; the
#    modes alternate REPEATS times and each cell is the median. Ratio = ours / raw bus bandwidth.
#    Both under mpirun with Open MPI's shared-memory transport (one machine).
# 2. Training: `sf-trainer bench` of ARCH (default transformer_tiny) in PRECISION (bf16) with
#    WORLD ranks x 1 thread under mpirun against 1 rank x WORLD threads on the same global
#    batch (BATCH rows of SRC_LEN/TGT_LEN tokens in total). Reports tokens/s of each, the time
#    the allreduce ran per step, the time the step waited for it, and the fraction hidden
#    behind backward.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
bench="$build/bench/allreduce_bench"
trainer="$build/trainer/sf-trainer"
for b in "$bench" "$trainer"; do
  [[ -x "$b" ]] || { echo "missing $b (build the allreduce_bench and sf-trainer targets)" >&2; exit 2; }
done

WORLD="${WORLD:-2}"; SIZES="${SIZES:-1 4 16 64}"; ITERS="${ITERS:-20}"; REPEATS="${REPEATS:-3}"
ARCH="${ARCH:-transformer_tiny}"; PRECISION="${PRECISION:-bf16}"
BATCH="${BATCH:-128}"; SRC_LEN="${SRC_LEN:-32}"; TGT_LEN="${TGT_LEN:-32}"; STEPS="${STEPS:-6}"
BUCKET_MB="${BUCKET_MB:-25}"
# Both modes run with the MPI setting our communicator sets for itself (a waiting rank yields
# its core to the training threads instead of spinning), so the ratio is our own overhead.
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1
        -x OMPI_MCA_mpi_yield_when_idle=1 -np "$WORLD")
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT

echo "== allreduce: $WORLD ranks, sizes $SIZES MiB, $ITERS iterations, $REPEATS alternating repeats"
for r in $(seq "$REPEATS"); do
  for mode in raw ours ours-bf16; do
    "${mpirun[@]}" "$bench" "$mode" $SIZES --iters "$ITERS" | tee -a "$tmp/ar.txt"
  done
done
python3 - "$tmp/ar.txt" <<'PY'
import sys, statistics, collections
cells = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kv = dict(p.split("=") for p in line.split())
    cells[(kv["mode"], int(kv["mib"]))].append(float(kv["busbw_gbs"]))
sizes = sorted({m for _, m in cells})
print()
print("| MiB | MPI_Allreduce busbw GB/s | ours (f32) GB/s | ours / MPI | ours, bf16 on the wire (f32-equivalent) GB/s |")
print("|---|---|---|---|---|")
for m in sizes:
    raw = statistics.median(cells[("raw", m)]); ours = statistics.median(cells[("ours", m)])
    bf = statistics.median(cells[("ours-bf16", m)])
    print(f"| {m} | {raw:.2f} | {ours:.2f} | {ours / raw:.2f} | {bf:.2f} |")
PY

echo
echo "== training: $ARCH $PRECISION, global batch $BATCH x $SRC_LEN/$TGT_LEN tokens"
per_rank=$((BATCH / WORLD))
common=(--arch "$ARCH" --precision "$PRECISION" --src-len "$SRC_LEN" --tgt-len "$TGT_LEN" --steps "$STEPS"
        --warmup 2 --no-gemm-peak --bucket-mb "$BUCKET_MB")
"$trainer" bench "${common[@]}" --batch "$BATCH" --threads "$WORLD" > "$tmp/one.txt"
"${mpirun[@]}" "$trainer" bench "${common[@]}" --batch "$per_rank" --threads 1 > "$tmp/dist.txt"
python3 - "$tmp/one.txt" "$tmp/dist.txt" "$WORLD" <<'PY'
import sys
def read(p): return dict(l.strip().split(": ", 1) for l in open(p) if ": " in l)
one, dist, w = read(sys.argv[1]), read(sys.argv[2]), sys.argv[3]
print(f"| run | tokens/s | step s | allreduce s/step | waited s/step | hidden | bytes/step |")
print("|---|---|---|---|---|---|---|")
print(f"| 1 rank x {w} threads | {one['tokens_per_s']} | {one['step_s']} | | | | |")
print(f"| {w} ranks x 1 thread | {dist['tokens_per_s']} | {dist['step_s']} | {dist['allreduce_s']} | "
      f"{dist['allreduce_wait_s']} | {dist['allreduce_hidden_fraction']} | {dist['allreduce_bytes_per_step']} |")
print(f"ratio {w} ranks / 1 rank: {float(dist['tokens_per_s']) / float(one['tokens_per_s']):.2f}")
PY
