#!/usr/bin/env bash
# Builds the synthetic English speech corpus (docs/speech.md): Multi30k's English sentences read
# by espeak-ng in many voices, at varied speed and pitch, some with noise or a tempo change,
# resampled by sox to 16 kHz mono, with TSV manifests.
#
#   ./deploy/make-speech-corpus.sh OUT_DIR [--sentences N] [--valid N] [--test N] [--seed S]
#                                  [--jobs J] [--source DIR]
#
#   --sentences N  training utterances (default 6000), from train.en
#   --valid N      validation utterances (default 300), from valid.en
#   --test N       test utterances (default 300), from test.en, in voices held out of train/valid
#   --seed S       the plan's random seed (default 1); same seed and counts, same bytes
#   --jobs J       parallel synthesis jobs (default: nproc); does not change the output
#   --source DIR   Multi30k directory (default: ../shared/data/multi30k-de-en from the repo root)
#
# Writes OUT_DIR/{train,valid,test}.tsv, OUT_DIR/audio/<split>/<id>.wav|.flac, OUT_DIR/plan.txt,
# OUT_DIR/README.txt and the source's LICENSE-or-SOURCE.txt. OUT_DIR must not exist or be empty;
# the corpus is built beside it and moved into place only when complete.
# Exit status: 0 built, 1 a tool or the synthesis failed, 2 bad arguments or source.
# Needs espeak-ng and sox (deploy/install-deps.sh) and Debian's /usr/bin/python3.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
NAME=make-speech-corpus.sh

usage() {  # the header's synopsis and options
  sed -n '6,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
}
die() {  # die STATUS MESSAGE
  echo "$NAME: $2" >&2
  exit "$1"
}

OUT_DIR=
SENTENCES=6000
VALID=300
TEST=300
SEED=1
JOBS=$(nproc)
SOURCE=$REPO/../shared/data/multi30k-de-en

while [ $# -gt 0 ]; do
  arg=$1
  shift
  case "$arg" in
    -h|--help) usage ;;
    --sentences|--valid|--test|--seed|--jobs|--source)
      [ $# -gt 0 ] || die 2 "$arg needs a value"
      value=$1
      shift
      ;;
    --sentences=*|--valid=*|--test=*|--seed=*|--jobs=*|--source=*)
      value=${arg#*=}
      arg=${arg%%=*}
      ;;
    -*) die 2 "unknown flag '$arg' (see --help)" ;;
    *)
      [ -z "$OUT_DIR" ] || die 2 "one OUT_DIR only (got '$OUT_DIR' and '$arg')"
      OUT_DIR=$arg
      continue
      ;;
  esac
  if [ "$arg" != --source ] && ! [[ "$value" =~ ^[0-9]+$ ]]; then
    die 2 "$arg: '$value' is not a non-negative integer"
  fi
  case "$arg" in
    --sentences) SENTENCES=$((10#$value)) ;;
    --valid) VALID=$((10#$value)) ;;
    --test) TEST=$((10#$value)) ;;
    --seed) SEED=$((10#$value)) ;;
    --jobs) JOBS=$((10#$value)) ;;
    --source) SOURCE=$value ;;
  esac
done

[ -n "$OUT_DIR" ] || die 2 "missing OUT_DIR (see --help)"
[ "$SENTENCES" -ge 1 ] || die 2 "--sentences: must be at least 1"
[ "$JOBS" -ge 1 ] || die 2 "--jobs: must be at least 1"
for f in train.en valid.en test.en LICENSE-or-SOURCE.txt; do
  [ -f "$SOURCE/$f" ] || die 2 "--source: $SOURCE/$f not found (the Multi30k corpus, en side)"
done
if [ -e "$OUT_DIR" ] && { [ ! -d "$OUT_DIR" ] || [ -n "$(ls -A "$OUT_DIR")" ]; }; then
  die 2 "OUT_DIR '$OUT_DIR' exists and is not an empty directory"
fi
for tool in espeak-ng sox soxi /usr/bin/python3; do
  command -v "$tool" >/dev/null 2>&1 || die 1 "$tool not found (deploy/install-deps.sh installs it)"
done

# Build beside OUT_DIR, then move into place: a failed or interrupted build leaves no corpus
# that looks complete.
OUT_DIR=${OUT_DIR%/}
PARTIAL="$OUT_DIR.partial.$$"
trap 'rm -rf "$PARTIAL"' EXIT
mkdir -p "$PARTIAL"
# sox would otherwise start an OpenMP team per process; the parallelism is --jobs.
OMP_NUM_THREADS=1 LC_ALL=C.UTF-8 /usr/bin/python3 "$REPO/deploy/speech_corpus.py" "$PARTIAL" \
  --sentences "$SENTENCES" --valid "$VALID" --test "$TEST" --seed "$SEED" --jobs "$JOBS" \
  --source "$SOURCE"
[ ! -d "$OUT_DIR" ] || rmdir "$OUT_DIR"
mv "$PARTIAL" "$OUT_DIR"
trap - EXIT
echo "corpus in $OUT_DIR (README.txt)"
