#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run Steadfast's GPU checks, for the `device` tool.
#
#   bench/gpu_bundle.sh [BUILD_DIR]     -> .gpu-bundle/ (bundle.tar.xz + run.sh)
#
# The GPU machines lent to sessions have CUDA 13, PyTorch and a driver, but none of Debian's
# libraries the engine links (oneDNN, gRPC, Protobuf, Open MPI, ...) and no package registry. So
# the binaries are built here (SF_CUDA=ON) and travel with every shared library they load except
# the C runtime (libc, libm, libstdc++, libgcc_s, ld-linux) and CUDA's own (libcudart,
# libcublasLt, libnccl, libnvidia-ml: the machine's are used). The bundle is a compressed tar
# (oneDNN alone is 40 MB) so it stays under the tool's 64 MiB.
#
# On the machine (the device tool's `run`, carry [".gpu-bundle"]):
#   bash .gpu-bundle/run.sh          # all checks; logs and the table under $OUT (or ./gpu-out)
#   STEPS=10 ARCHS=transformer_base bash .gpu-bundle/run.sh bench
#   PACK=1 bash .gpu-bundle/run.sh tests    # logs in one archive (the tool returns few files)
# run.sh runs: nvidia-smi; the CUDA kernel, device-model and device-residency tests (the cuda
# cases must not skip there); the NCCL communicator test; sf-agent's slot detection through the
# real NVML; `sf-trainer train --device cuda` on the full Multi30k (validation BLEU by the
# device beam search) and bench/beam_device.sh on its checkpoint; and
# bench/trainer_vs_pytorch_gpu.sh. Each part alone: run.sh tests | e2e | bench (one device call
# is at most 10 minutes); `run.sh profile` times every kernel of one training step with Nsight
# Compute (PROFILE_ARCH, PROFILE_TOKENS, PROFILE_STEPS); `run.sh cluster` (also in all) brings up
# the local cluster on the machine (the carried PostgreSQL, `sf deploy local up --gpus`) and runs a
# native trial and the Core API example on the GPU slot to COMPLETED, their metrics read back from
# PostgreSQL (EXPECT_CUDA=0 rehearses it without a GPU). Every step has a time limit, so one hang cannot eat the call:
# TEST_TIMEOUT (per test binary, 240 s), E2E_TIMEOUT (420), BEAM_TIMEOUT (300), BENCH_TIMEOUT
# (540); E2E_EPOCHS (40) and E2E_PERIOD (20, epochs between validations) size the training run
# (40 epochs: the schedule of issue 47's BLEU goal). On an H200 (2026-11-30): tests 47 s, the
# 40-epoch run 57 s (beam comparison left out), bench base and big at 8k and 32k with COMPILE=0
# 96 s, one bench row with COMPILE=1 53 s, profile 17 s; the device starts in 40-60 s.
# Add `.gpu-bundle/` to .git/info/exclude.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
out="$root/.gpu-bundle"
grep -q "^SF_CUDA:BOOL=ON" "$build/CMakeCache.txt" ||
  { echo "$build is not an SF_CUDA=ON build" >&2; exit 2; }

bins=(trainer/sf-trainer trainer/data/sf-spm agent/sf-agent master/sf-master cli/sf
      tests/trainer/engine_kernels_test tests/trainer/engine_device_model_test
      tests/trainer/engine_device_residency_test)
[[ -x "$build/tests/trainer/distributed/dist_nccl_test" ]] && bins+=(tests/trainer/distributed/dist_nccl_test)
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/bench"
for b in "${bins[@]}"; do
  [[ -x "$build/$b" ]] || { echo "missing $build/$b (build it first)" >&2; exit 2; }
  cp "$build/$b" "$stage/bin/"
done
# The cluster part (run.sh cluster) needs PostgreSQL, which the GPU machines lack: Debian's
# server, copied in its own layout (PREFIX/lib/postgresql/V/{bin,lib}, PREFIX/share/postgresql/V)
# so it finds its share and library directories relative to itself; sf finds it through
# SF_POSTGRES_BIN_DIR (docs/cluster.md, "Local cluster"). Without LLVM's JIT (llvmjit.so pulls in
# LLVM; the server runs without it).
pg_bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
pg_version="$(basename "$(dirname "$pg_bin")")"
mkdir -p "$stage/pg/lib/postgresql/$pg_version/bin" "$stage/pg/lib/postgresql/$pg_version/lib" "$stage/pg/share/postgresql"
cp "$pg_bin"/{initdb,pg_ctl,postgres,psql} "$stage/pg/lib/postgresql/$pg_version/bin/"
find "$(dirname "$pg_bin")/lib" -maxdepth 1 -name '*.so' ! -name llvmjit.so -exec cp {} "$stage/pg/lib/postgresql/$pg_version/lib/" \;
cp -r "/usr/share/postgresql/$pg_version" "$stage/pg/share/postgresql/"
# The Core API's Python package (the build's copy, beside bin/ where sf-agent looks for it), the
# README's Core API example and its data; and Debian's gRPC and protobuf for Python 3.11, for a
# machine whose python3 lacks them.
cp -r "$build/python" "$stage/python"
find "$stage/python" \( -name '__pycache__' -o -name 'CMakeFiles' -o -name '*.cmake' -o -name 'CTestTestfile.cmake' \) -prune -exec rm -rf {} +
mkdir -p "$stage/pydeps/google" "$stage/examples"
cp -r /usr/lib/python3/dist-packages/grpc "$stage/pydeps/"
cp -r /usr/lib/python3/dist-packages/google/protobuf "$stage/pydeps/google/"
find "$stage/pydeps" -name '__pycache__' -prune -exec rm -rf {} +
cp -r "$root/examples/pytorch-transformer" "$stage/examples/"
rm -rf "$stage/examples/pytorch-transformer/steadfast-local"
# Every shared library they load, minus the C runtime and CUDA's.
skip='^(libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64|libcudart|libcublas|libcublasLt|libnccl|libnvidia-ml|libcuda|libdl|libpthread|librt)\.so'
for b in "$stage"/bin/* "$stage"/pg/lib/postgresql/*/bin/* "$stage"/pg/lib/postgresql/*/lib/*.so \
         $(find "$stage/pydeps" -name '*.so'); do
  ldd "$b" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  cp -L "$path" "$stage/lib/$name"
done
cp "$here/trainer_vs_pytorch_gpu.sh" "$here/pytorch_transformer_bench.py" "$here/beam_device.sh" "$stage/bench/"
data="$root/../shared/data/multi30k-de-en"
[[ -r "$data/train.de" ]] || { echo "missing $data (../shared beside the checkout)" >&2; exit 2; }
mkdir -p "$stage/data"
cp -r "$data" "$stage/data/"
cp -r "$data-tiny" "$stage/data/"
mkdir -p "$stage/bench/build/trainer"
ln -s ../../../bin/sf-trainer "$stage/bench/build/trainer/sf-trainer"

rm -rf "$out"
mkdir -p "$out"
tar -C "$stage" -cJf "$out/bundle.tar.xz" .
cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Unpacks the bundle and runs the GPU checks (see bench/gpu_bundle.sh). Argument: "all"
# (default), "tests", "cluster", "e2e", "bench" or "profile".
set -uo pipefail
what="${1:-all}"
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out"
dir="$(mktemp -d)"
tar -C "$dir" -xJf "$here/bundle.tar.xz"
cuda_lib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -e "$d/libcublasLt.so.13" || -e "$d/libcudart.so.13" ]] && cuda_lib="$d:$cuda_lib"
done
# CUDA's libraries also come with PyTorch's wheels (nvidia-*), where the toolkit lacks them.
for d in $(python3 - <<'PY' 2>/dev/null
import glob, os, site
for s in site.getsitepackages():
    for lib in glob.glob(os.path.join(s, "nvidia", "*", "lib")):
        print(lib)
PY
); do cuda_lib="$cuda_lib$d:"; done
export LD_LIBRARY_PATH="$dir/lib:${cuda_lib}${LD_LIBRARY_PATH:-}"
status=0
{
  nvidia-smi || true
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  for b in "$dir"/bin/*; do echo "== ldd $(basename "$b")"; ldd "$b" | grep -E "not found|cuda|cublas|nccl" || true; done
} > "$out/environment.txt" 2>&1
if [[ "$what" == all || "$what" == tests ]]; then
  for t in engine_kernels_test engine_device_model_test engine_device_residency_test dist_nccl_test; do
    [[ -x "$dir/bin/$t" ]] || continue
    rc=0
    (cd "$dir" && timeout "${TEST_TIMEOUT:-240}" "$dir/bin/$t" --gtest_color=no) > "$out/$t.log" 2>&1 || rc=$?
    if [[ $rc != 0 ]]; then
      status=1
      if [[ $rc == 124 ]]; then echo "$t: timed out after ${TEST_TIMEOUT:-240} s; its last lines:"
      else echo "$t: exit $rc; its last lines:"; fi
      tail -5 "$out/$t.log"
    fi
    echo "$t: $(grep -E '^\[  (PASSED  |FAILED  |SKIPPED )\] [0-9]+ test' "$out/$t.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED  \] [A-Z]' "$out/$t.log" | sort -u | head -20
  done
  mkdir -p "$dir/agent-work"
  timeout 20 "$dir/bin/sf-agent" --slots auto --master 127.0.0.1:1 --work-dir "$dir/agent-work" \
    > "$out/agent_slots.log" 2>&1 || true
  echo "sf-agent: $(grep -E 'cuda_device|no_cuda_devices' "$out/agent_slots.log" | head -4 | tr '\n' ' ')"
fi
if [[ "$what" == all || "$what" == cluster ]]; then
  # The cluster on the GPU: the carried PostgreSQL, sf-master and one sf-agent whose slots are
  # the GPUs NVML finds (`sf deploy local up --gpus`); then a native trial and the README's Core
  # API example (PyTorch on torch.cuda), each to COMPLETED, with their metrics read back from
  # PostgreSQL and the device each trained on from its logs. EXPECT_CUDA=0 rehearses it on a
  # machine without a GPU (CPU slot, CPU training). Logs: cluster_*.log.
  cluster_status=0
  fail() { echo "cluster: FAIL $*"; cluster_status=1; }
  chmod 755 "$dir"  # PostgreSQL runs as an unprivileged user: it must reach its binaries
  export SF_POSTGRES_BIN_DIR="$(ls -d "$dir"/pg/lib/postgresql/*/bin | head -1)"
  if ! python3 -c "import grpc, google.protobuf" 2>/dev/null; then
    if python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      cp -r "$dir/pydeps/." "$dir/python/"  # Debian's gRPC and protobuf, built for Python 3.11
      echo "cluster: python3 lacks grpc/protobuf: using the bundle's (Python 3.11)"
    else
      echo "cluster: python3 ($(python3 --version 2>&1)) has no grpc/protobuf and the bundle's are for 3.11: the Core API trial will fail"
    fi
  fi
  export HOME="$dir/home" XDG_CONFIG_HOME="$dir/home/config"  # sf's session and defaults, fresh
  mkdir -p "$HOME"
  cl="${CLUSTER_DIR:-/tmp/sf-gpu-cluster}"
  rm -rf "$cl"
  tls=()
  command -v openssl > /dev/null || tls=(--no-tls)  # up makes its certificates with openssl
  sf="$dir/bin/sf"
  timeout 180 "$sf" deploy local up --dir "$cl" --gpus --port "${CLUSTER_HTTP_PORT:-18080}" \
    --grpc-port "${CLUSTER_GRPC_PORT:-18090}" "${tls[@]}" > "$out/cluster_up.log" 2>&1 || fail "sf deploy local up: $(tail -3 "$out/cluster_up.log")"
  grep -E "local cluster is up" "$out/cluster_up.log"
  if [[ "${EXPECT_CUDA:-1}" == 1 ]] && ! grep -q "slots cuda0" "$out/cluster_up.log"; then fail "the agent found no GPU"; fi
  tiny="$dir/data/multi30k-de-en-tiny"
  cat > "$dir/cluster-native.yaml" <<YAML
name: gpu-cluster-native
data:
  train: {src: $tiny/train.de, tgt: $tiny/train.en}
  valid: {src: $tiny/valid.de, tgt: $tiny/valid.en}
  tokenizer: {type: sentencepiece, vocab_size: 1000, model_type: bpe, shared: true}
hyperparameters:
  arch: transformer_tiny
  dropout: 0.1
  lr: 0.002
  lr_schedule: {type: inverse_sqrt, warmup: 50}
  optimizer: {type: adamw, betas: [0.9, 0.98]}
  max_tokens: 2048
  share_embeddings: true
precision: bf16
resources: {slots_per_trial: 1}
searcher: {name: single, metric: validation_loss, max_length: {batches: 200}}
min_validation_period: {batches: 100}
scheduling_unit: 20
max_restarts: 0
YAML
  psql_q() {
    "$SF_POSTGRES_BIN_DIR/psql" -h 127.0.0.1 -p "$(cat "$cl/postgres/port")" -U postgres -d steadfast -At -c "$1"
  }
  check_experiment() {  # NAME FILE [--config ...]: created and followed to its end, then checked
    local name="$1" file="$2"; shift 2
    local log="$out/cluster_$name.log" rc=0
    timeout "${CLUSTER_WAIT_S:-300}" "$sf" experiment create "$file" "$@" --follow > "$log" 2>&1 || rc=$?
    local id
    id="$(sed -n 's/^created experiment \([0-9]*\).*/\1/p' "$log" | head -1)"
    [[ -n "$id" ]] || { fail "$name: not created: $(tail -3 "$log")"; return; }
    [[ $rc == 0 ]] || fail "$name: experiment $id did not complete (exit $rc; $(basename "$log"))"
    local trial
    trial="$(psql_q "SELECT min(id) FROM trials WHERE experiment_id = $id")"
    [[ -n "$trial" ]] && "$sf" trial logs "$trial" >> "$log" 2>&1
    local rows device
    rows="$(psql_q "SELECT t.state || ' ' || string_agg(m.kind || '=' || m.n, ' ' ORDER BY m.kind)
                    FROM trials t LEFT JOIN (SELECT trial_id, kind, count(*) AS n FROM metrics GROUP BY 1, 2) m
                    ON m.trial_id = t.id WHERE t.experiment_id = $id GROUP BY t.state" 2>&1)"
    # The native trainer logs `event=device device=cuda:0`, the example `managed trial on cuda:0`.
    device="$(grep -oE 'event=device device=[^ ]+|trial on [a-z]+(:[0-9]+)?' "$log" | head -1)"
    echo "cluster: $name: experiment $id, trial $trial: ${rows:-no rows}; ${device:-device not logged}"
    [[ "$rows" == COMPLETED*training=* && "$rows" == *validation=* ]] || fail "$name: its metrics are not in PostgreSQL"
    if [[ "${EXPECT_CUDA:-1}" == 1 && "$device" != *cuda* ]]; then fail "$name: did not train on the GPU"; fi
  }
  check_experiment native "$dir/cluster-native.yaml"
  check_experiment core_api "$dir/examples/pytorch-transformer/const.yaml" \
    --config entrypoint="python3 train.py" --config hyperparameters.data_dir="$tiny" \
    --config searcher.max_length.batches=200 --config hyperparameters.report_every=20
  cp "$cl"/logs/*.log "$out/" 2>/dev/null
  for f in "$out"/master.log "$out"/local-agent-0.log; do [[ -f "$f" ]] && mv "$f" "$out/cluster_$(basename "$f")"; done
  timeout 60 "$sf" deploy local down --dir "$cl" > "$out/cluster_down.log" 2>&1 || fail "sf deploy local down"
  [[ $cluster_status == 0 ]] && echo "cluster: ok" || status=1
fi
if [[ "$what" == all || "$what" == e2e ]]; then
  # Real data on the GPU: a transformer_base, bf16, trained for E2E_EPOCHS epochs of Multi30k
  # with validation BLEU (the device beam search) and the test set translated at the end; then
  # the same checkpoint searched on the GPU and on the CPU.
  d="$dir/data/multi30k-de-en"
  cat > "$dir/e2e.yaml" <<YAML
name: gpu-e2e
data:
  train: {src: $d/train.de, tgt: $d/train.en}
  valid: {src: $d/valid.de, tgt: $d/valid.en}
  test: {src: $d/test.de, tgt: $d/test.en}
  tokenizer: {type: sentencepiece, vocab_size: 8000, model_type: bpe, shared: true}
hyperparameters:
  arch: transformer_base
  dropout: 0.3
  normalize_before: true
  share_embeddings: true
  lr: 0.0007
  lr_schedule: {type: inverse_sqrt, warmup: 400}
  optimizer: {type: adamw, betas: [0.9, 0.98], weight_decay: 0.0001}
  max_tokens: 8192
  clip_norm: 1.0
  beam_size: 5
precision: bf16
searcher: {name: single, metric: bleu, smaller_is_better: false, max_length: {epochs: ${E2E_EPOCHS:-40}}}
min_validation_period: {epochs: ${E2E_PERIOD:-20}}
min_checkpoint_period: {epochs: ${E2E_PERIOD:-20}}
YAML
  (cd "$dir" && timeout "${E2E_TIMEOUT:-420}" "$dir/bin/sf-trainer" train "$dir/e2e.yaml" --device cuda --output "$dir/e2e-run") \
    > "$out/e2e_train.log" 2>&1 || status=1
  grep -E "device|validation|BLEU|error" "$out/e2e_train.log" | tail -12
  if [[ -d "$dir/e2e-run/latest" ]]; then
    (cd "$dir/bench" && timeout "${BEAM_TIMEOUT:-300}" bash ./beam_device.sh "$dir/e2e-run/latest" "$d/test.de" "$dir/bench/build") \
      > "$out/beam_device.log" 2>&1 || status=1
    cat "$out/beam_device.log"
  fi
fi
if [[ "$what" == all || "$what" == bench ]]; then
  (cd "$dir/bench" && timeout "${BENCH_TIMEOUT:-540}" bash ./trainer_vs_pytorch_gpu.sh "$dir/bench/build") \
    > "$out/bench.log" 2>&1 || status=1
  tail -8 "$out/bench.log"
fi
if [[ "$what" == profile ]]; then
  # Where a training step's device time goes, kernel by kernel: Nsight Compute times every
  # kernel of PROFILE_STEPS steps (one warm-up step first) of `sf-trainer bench`, and the table
  # sums them by kernel name. The clocks are left as they are (--clock-control none).
  ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
  [[ -x "$ncu_bin" ]] || { echo "no ncu on this machine" >&2; exit 2; }
  arch="${PROFILE_ARCH:-transformer_base}"; tokens="${PROFILE_TOKENS:-8192}"
  timeout "${PROFILE_TIMEOUT:-400}" "$ncu_bin" --clock-control none --metrics gpu__time_duration.sum \
    --csv --page raw "$dir/bin/sf-trainer" bench --device cuda --precision bf16 --arch "$arch" \
    --batch $((tokens / 64)) --src-len 64 --tgt-len 64 --vocab 32000 --warmup 1 \
    --steps "${PROFILE_STEPS:-1}" --no-gemm-peak > "$out/profile_raw.csv" 2> "$out/profile.err" || status=1
  python3 - "$out/profile_raw.csv" "$((${PROFILE_STEPS:-1} + 1))" <<'PY' | tee "$out/profile.txt"
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head = rows[0]
name, dur = head.index("Kernel Name"), head.index("gpu__time_duration.sum")
def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None
has_units = len(rows) > 1 and number(rows[1][dur]) is None  # a second row of units, if any
unit = rows[1][dur] if has_units else "ns"
data = rows[2:] if has_units else rows[1:]
scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0,
         "s": 1e3, "second": 1e3}[unit]
total, count = collections.Counter(), collections.Counter()
for r in data:
    k = r[name].split("(")[0][:90]
    total[k] += (number(r[dur]) or 0.0) * scale
    count[k] += 1
steps = int(sys.argv[2])
all_ms = sum(total.values())
print(f"kernels: {len(data)} launches over {steps} steps; device time per step {all_ms / steps:.2f} ms")
print("| kernel | launches/step | ms/step | share |")
print("|---|---|---|---|")
for k, ms in total.most_common(40):
    print(f"| {k} | {count[k] / steps:.1f} | {ms / steps:.3f} | {100 * ms / all_ms:.1f}% |")
PY
fi
# The device tool brings back only a few files of $OUT: PACK=1 folds this part's logs into one
# archive (logs-PART.tar.gz) and removes the loose files.
if [[ "${PACK:-0}" == 1 ]]; then
  (cd "$out" && find . -maxdepth 1 -type f ! -name '*.tar.gz' -printf '%P\n' | tar -czf "logs-$what.tar.gz" -T - &&
     find . -maxdepth 1 -type f ! -name '*.tar.gz' -delete)
fi
exit $status
RUN
chmod +x "$out/run.sh"
du -sh "$out"/*
echo "carry .gpu-bundle and run: bash .gpu-bundle/run.sh"
