#!/usr/bin/env bash
# sf-serve under open-loop load against the offline `sf-trainer translate` on the same checkpoint.
#
#   bench/serve_load.sh [BUILD_DIR] [CHECKPOINT]
#
# Without CHECKPOINT a small model (d_model 256, 3+3 layers) is trained for STEPS (default 60)
# steps on Multi30k-tiny first; its translations are poor but its arithmetic is a real model's.
# Then, on LINES (default 500) sentences of the Multi30k test set (tiny's, repeated, when the full
# corpus is absent), beam BEAM (default 5), THREADS (default 2) OpenMP threads:
#   1. offline: `sf-trainer translate` on all of them; sentences/s and target tokens/s, net of the
#      program's start (the time of translating one sentence is subtracted);
#   2. sf-serve, one sentence per request, paced open-loop (bench/http_paced_load.cc) at rising
#      rates (RATES, fractions of the offline rate) for DURATION (default 8) seconds each, over 1, 8 and
#      32 keep-alive connections: achieved sentences/s at saturation (the best achieved rate with
#      no errors) as a ratio of offline, then p50/p99 latency at half of that rate.
# It prints the figures and asserts nothing. Needs the sf-trainer, sf-serve and
# http_paced_load_bench targets built in BUILD_DIR.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:-$here/../build}" && pwd)"
checkpoint="${2:-}"
trainer="$build/trainer/sf-trainer"
serve="$build/serve/sf-serve"
load="$build/bench/http_paced_load_bench"
for b in "$trainer" "$serve" "$load"; do
  [[ -x "$b" ]] || { echo "no $b (build sf-trainer, sf-serve and http_paced_load_bench)" >&2; exit 2; }
done
LINES="${LINES:-500}"; BEAM="${BEAM:-5}"; THREADS="${THREADS:-2}"; SECONDS_EACH="${DURATION:-8}"
STEPS="${STEPS:-60}"; RATES="${RATES:-0.25 0.5 0.75 0.9 1.0 1.1}"
data="$here/../../shared/data"

work="$(mktemp -d)"
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

if [[ -z "$checkpoint" ]]; then
  mkdir -p "$work/data"
  cp "$data/multi30k-de-en-tiny/"{train,valid}.{de,en} "$work/data/"
  chmod u+w "$work/data/"*
  cat >"$work/small.yaml" <<EOF
name: serve-bench
data:
  train: {src: data/train.de, tgt: data/train.en}
  valid: {src: data/valid.de, tgt: data/valid.en}
  tokenizer: {type: sentencepiece, vocab_size: 2000, model_type: bpe, shared: true}
hyperparameters:
  arch: transformer
  d_model: 256
  heads: 4
  encoder_layers: 3
  decoder_layers: 3
  ffn_dim: 1024
  dropout: 0.1
  share_embeddings: true
  lr: 0.001
  lr_schedule: {type: inverse_sqrt, warmup: 20}
  optimizer: {type: adamw}
  max_tokens: 2000
  beam_size: $BEAM
searcher: {name: single, metric: validation_loss, max_length: {batches: $STEPS}}
EOF
  echo "training a small model for $STEPS steps ..." >&2
  (cd "$work" && "$trainer" train small.yaml --output run --no-test --threads "$THREADS" --quiet 2>"$work/train.log") ||
    { cat "$work/train.log" >&2; exit 1; }
  checkpoint="$work/run/latest"
fi

# The sentences, and one request body per sentence.
src="$data/multi30k-de-en/test.de"
[[ -r "$src" ]] || src="$data/multi30k-de-en-tiny/test.de"
while [[ $(cat "$work/src" 2>/dev/null | wc -l) -lt "$LINES" ]]; do cat "$src" >>"$work/src"; done
head -n "$LINES" "$work/src" >"$work/sentences"
python3 - "$work/sentences" "$BEAM" >"$work/bodies" <<'EOF'
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    print(json.dumps({"text": [line.rstrip("\n")], "beam": int(sys.argv[2])}, ensure_ascii=False))
EOF

now() { date +%s.%N; }
t0=$(now); "$trainer" translate --checkpoint "$checkpoint" --beam "$BEAM" --threads "$THREADS" <"$work/sentences" >"$work/offline.txt"; t1=$(now)
head -n 1 "$work/sentences" | "$trainer" translate --checkpoint "$checkpoint" --beam "$BEAM" --threads "$THREADS" >/dev/null; t2=$(now)
offline_s=$(awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { s = (b - a) - (c - b); if (s <= 0) s = b - a; printf "%.3f", s }')

"$serve" --checkpoint "$checkpoint" --port 0 --threads "$THREADS" >"$work/serve.out" 2>"$work/serve.err" &
server_pid=$!
for _ in $(seq 1 600); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/serve.out" | head -n 1)
[[ -n "$port" ]] || { cat "$work/serve.err" >&2; exit 1; }
for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.05; done

# All sentences in one request: the target token count (the same search, so the same tokens),
# and a check that the server's texts equal the offline ones.
python3 - "$work/sentences" "$BEAM" >"$work/all.json" <<'EOF'
import json, sys
print(json.dumps({"text": [l.rstrip("\n") for l in open(sys.argv[1], encoding="utf-8")], "beam": int(sys.argv[2])}))
EOF
curl -sf -X POST --data-binary @"$work/all.json" "http://127.0.0.1:$port/v1/translate" >"$work/all.out"
read -r tokens same < <(python3 - "$work/all.out" "$work/offline.txt" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))["translations"]
offline = open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]
print(sum(x["tokens"] for x in t), "identical" if [x["text"] for x in t] == offline else "DIFFERENT")
EOF
)
offline_rate=$(awk -v n="$LINES" -v s="$offline_s" 'BEGIN { printf "%.1f", n / s }')
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; threads $THREADS, beam $BEAM, $LINES sentences"
echo "offline sf-trainer translate: ${offline_s} s  ${offline_rate} sentences/s  $(awk -v t="$tokens" -v s="$offline_s" 'BEGIN { printf "%.0f", t / s }') target tokens/s  ($tokens tokens; server output $same)"

field() { local v; v=$(sed -n "s/^$1: //p" "$2"); echo "${v:-0}"; }
# One paced run, cut off at 4x its length (a server far past saturation drains for minutes).
paced() {  # rate conns output
  : >"$3"
  timeout $((SECONDS_EACH * 4 + 10)) "$load" 127.0.0.1 "$port" /v1/translate "$1" "$SECONDS_EACH" "$2" \
    --post-bodies "$work/bodies" >"$3" || true
  grep -q '^requests:' "$3" || echo "connection_errors: 1" >>"$3"  # cut off: not a valid point
}
for conns in 1 8 32; do
  best=0; best_line=""
  for f in $RATES; do
    rate=$(awk -v r="$offline_rate" -v f="$f" 'BEGIN { printf "%.0f", r * f < 1 ? 1 : r * f }')
    paced "$rate" "$conns" "$work/run.txt"
    achieved=$(field achieved_requests_per_second "$work/run.txt")
    errs=$(( $(field connection_errors "$work/run.txt") + $(field non_200 "$work/run.txt") ))
    printf '  conns %2d offered %5s/s achieved %5s/s p50 %8s ms p99 %8s ms errors %s\n' "$conns" "$rate" "$achieved" \
      "$(field latency_p50_ms "$work/run.txt")" "$(field latency_p99_ms "$work/run.txt")" "$errs"
    if [[ "$errs" == 0 ]] && awk -v a="$achieved" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$achieved; fi
  done
  half=$(awk -v b="$best" 'BEGIN { printf "%.0f", b / 2 < 1 ? 1 : b / 2 }')
  paced "$half" "$conns" "$work/half.txt"
  printf 'conns %2d: saturation %s sentences/s = %s of offline; at half (%s/s): p50 %s ms p99 %s ms\n' "$conns" "$best" \
    "$(awk -v a="$best" -v b="$offline_rate" 'BEGIN { printf "%.2f", a / b }')" "$half" \
    "$(field latency_p50_ms "$work/half.txt")" "$(field latency_p99_ms "$work/half.txt")"
done
curl -sf "http://127.0.0.1:$port/metrics" | grep -E '^sf_serve_(batch_sentences|batch_requests)_(sum|count)|^sf_serve_shared' || true
