#!/usr/bin/env bash
# Installs every Debian package Steadfast builds, tests and runs with.
#
# Run as root on Debian 12. Idempotent: packages already present are skipped and the
# script stays quiet; a package that can't be had stops the script with its name.
# CUDA, cuBLAS and NCCL are not installed here: they come from the CUDA toolkit already on
# the machine (/usr/local/cuda), which CMake finds by itself when present.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  # RPC and wire types
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  # database
  libpqxx-dev libpq-dev postgresql postgresql-common postgresql-contrib
  # HTTP (Beast/Asio), config, metrics
  libboost-dev libboost-system-dev libyaml-cpp-dev prometheus-cpp-dev
  # TLS on every channel (libssl-dev, below): the `openssl` tool makes `sf deploy local`'s private
  # CA and certificates
  openssl
  # command lines (every program and subcommand parses its flags with CLI11)
  libcli11-dev
  # crypto: HMAC task tokens and random secrets (OpenSSL); password hashes (argon2id, libsodium)
  libssl-dev libsodium-dev
  # user trials' code: the context directory travels as a tar.gz (common/context/)
  libarchive-dev
  # engine: GEMMs (Debian's oneDNN CMake config also wants OpenCL), tokenizer, CPU allreduce
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers libsentencepiece-dev sentencepiece
  libopenmpi-dev openmpi-bin
  # speech corpus (deploy/make-speech-corpus.sh): espeak-ng reads the sentences; sox (and soxi)
  # resamples, adds noise and writes WAV and FLAC, FLAC through libsox-fmt-base
  espeak-ng sox libsox-fmt-base
  # speech front end (trainer/speech): audio files (libsndfile), the FFT (FFTW3)
  libsndfile1-dev libfftw3-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev python3 python3-torch python3-numpy wrk
  # the steadfast Python package (Core API for user trials): TrialLink stubs and their runtime,
  # boto3 and PyYAML for checkpoints on S3 (the experiment's checkpoint_storage), and pip to
  # install it from the tree offline (tests/python/test_pip_install.py)
  python3-grpcio python3-protobuf python3-boto3 python3-yaml python3-pip python3-setuptools
  # notebooks on the cluster (sf notebook start, docs/tasks.md): the Jupyter Notebook server
  python3-notebook
  # the CI path a pipeline takes (e2e_tls_test: sf token create, then curl with a Bearer token)
  curl
  # Slurm as a resource manager (docs/slurm.md): slurmctld, slurmd and the client tools (sbatch,
  # squeue, sacct, scancel) from slurm-wlm, munge to authenticate them; deploy/local-slurm.sh runs
  # a local cluster with them, its nodes in network namespaces made with iproute2 and unshare
  slurm-wlm munge iproute2 util-linux
  # object storage (docs/object-storage.md): libcurl for S3 requests and libxml2 for their
  # answers; deploy/local-s3.sh runs a single-node Ceph 16.2 (mon, mgr, one OSD) with a RADOS
  # Gateway as a local S3 server for tests, with the ceph, ceph-authtool and radosgw-admin tools
  # (ceph-common) and uuidgen (uuid-runtime).
  # Their systemd units are installed but not started: the script starts the daemons itself.
  libcurl4-openssl-dev libxml2-dev ceph-mon ceph-mgr ceph-osd radosgw ceph-common uuid-runtime
  # an optimized BLAS for the PyTorch peer in bench/ (its fp32 GEMMs go through BLAS)
  libopenblas0-pthread
  # web UI build and browser tests
  nodejs npm chromium
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: must run as root (apt-get install)" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
# node and npm may come from elsewhere (a newer Node.js on PATH); accept those.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  filtered=()
  for p in "${missing[@]}"; do
    case "$p" in nodejs|npm) ;; *) filtered+=("$p") ;; esac
  done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq >/tmp/steadfast-apt-update.log 2>&1; then
  echo "install-deps.sh: apt-get update failed (see /tmp/steadfast-apt-update.log)" >&2
  exit 1
fi
for p in "${missing[@]}"; do
  if ! apt-cache show "$p" >/dev/null 2>&1; then
    echo "install-deps.sh: package '$p' is not available from the configured Debian sources" >&2
    exit 1
  fi
done
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/steadfast-apt-install.log 2>&1; then
  tail -n 20 /tmp/steadfast-apt-install.log >&2
  echo "install-deps.sh: apt-get install failed for: ${missing[*]}" >&2
  exit 1
fi
for p in "${missing[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    echo "install-deps.sh: package '$p' did not install" >&2
    exit 1
  fi
done
echo "install-deps.sh: done"
