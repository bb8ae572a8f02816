#!/usr/bin/env bash
# Proves deploy/make-speech-corpus.sh and deploy/make-librispeech-manifest.sh (docs/speech.md):
# a tiny synthetic corpus is byte-identical for the same seed whatever --jobs is and differs for
# another; its manifests are well-formed and agree with the audio (16 kHz mono, durations, WAV
# and FLAC); test voices and sentences never occur in training; bad arguments exit 2 naming the
# flag; the LibriSpeech writer lists a small LibriSpeech-style tree and names a missing or
# undescribed file.
#
#   tests/speech/speech_corpus_test.sh [SOURCE_DIR]      (SOURCE_DIR defaults to this checkout)
#
# Needs espeak-ng and sox (deploy/install-deps.sh) and the shared Multi30k corpus beside the
# checkout (../shared/data/multi30k-de-en). Exit 0 when every check passes, 1 when one fails.
# Everything lives under one mktemp directory, removed at exit. About 15 s.
set -euo pipefail

src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
build="$src/deploy/make-speech-corpus.sh"
libri="$src/deploy/make-librispeech-manifest.sh"
multi30k="$src/../shared/data/multi30k-de-en"
tmp=$(mktemp -d /tmp/speech_corpus_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export LC_ALL=C.UTF-8

fail() {
  echo "speech_corpus_test: FAIL: $*" >&2
  exit 1
}
for tool in espeak-ng sox soxi sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || fail "'$tool' is not installed (run deploy/install-deps.sh)"
done
[ -f "$multi30k/train.en" ] || fail "the shared corpus $multi30k is missing"

tiny=(--sentences 24 --valid 6 --test 6)

# --- Determinism: same seed, different --jobs → same bytes; another seed → different. --------
"$build" "$tmp/a" "${tiny[@]}" --seed 7 --jobs 2 >"$tmp/a.out" 2>"$tmp/a.err" \
  || { cat "$tmp/a.err" >&2; fail "building corpus a"; }
"$build" "$tmp/b" "${tiny[@]}" --seed 7 --jobs 1 >/dev/null 2>&1 || fail "building corpus b"
"$build" "$tmp/c" "${tiny[@]}" --seed 8 --jobs 2 >/dev/null 2>&1 || fail "building corpus c"
grep -q "^total  *36 utterances" "$tmp/a.out" || fail "summary: $(cat "$tmp/a.out")"
diff -r "$tmp/a" "$tmp/b" >/dev/null || fail "seed 7 with --jobs 2 and --jobs 1 differ"
hashes() { (cd "$1" && find . -type f | sort | xargs sha256sum); }
[ "$(hashes "$tmp/a")" = "$(hashes "$tmp/b")" ] || fail "sha256 of corpus a and b differ"
for s in train valid test; do
  ! cmp -s "$tmp/a/$s.tsv" "$tmp/c/$s.tsv" || fail "$s.tsv identical for seeds 7 and 8"
done
[ "$(cd "$tmp/a" && cat audio/*/* | sha256sum)" != "$(cd "$tmp/c" && cat audio/*/* | sha256sum)" ] \
  || fail "audio identical for seeds 7 and 8"
cmp -s "$tmp/a/LICENSE-or-SOURCE.txt" "$multi30k/LICENSE-or-SOURCE.txt" \
  || fail "the source's license note was not copied"
grep -q "^Seed: 7$" "$tmp/a/README.txt" || fail "README.txt does not state the seed"

# --- Manifests agree with the audio. ---------------------------------------------------------
check_manifest() {  # check_manifest DIR SPLIT COUNT
  local dir=$1 split=$2 count=$3 m="$1/$2.tsv"
  [ "$(head -n1 "$m")" = "$(printf 'id\taudio\tduration\ttext\tspeaker')" ] || fail "$m: header"
  [ "$(tail -n +2 "$m" | wc -l)" -eq "$count" ] || fail "$m: expected $count utterances"
  awk -F'\t' -v m="$m" -v sp="$split" 'NR > 1 {
      if (NF != 5) { print m ":" NR ": " NF " columns" ; bad = 1 }
      if ($1 !~ "^" sp "-[0-9][0-9][0-9][0-9][0-9][0-9]$") { print m ":" NR ": id " $1; bad = 1 }
      if ($3 !~ /^[0-9]+\.[0-9][0-9][0-9]$/) { print m ":" NR ": duration " $3; bad = 1 }
      if ($4 == "" || $4 ~ /^ | $/) { print m ":" NR ": empty or untrimmed text"; bad = 1 }
      if ($5 !~ /^en[-a-z0-9]*\+[a-z0-9]+$/) { print m ":" NR ": speaker " $5; bad = 1 }
      if (NR > 2 && $1 <= prev) { print m ":" NR ": ids not ascending"; bad = 1 }
      prev = $1
    } END { exit bad }' "$m" >&2 || fail "$m: malformed lines (above)"
  [ "$(cut -f1 "$m" | sort | uniq -d)" = "" ] || fail "$m: duplicate ids"
  tail -n +2 "$m" | while IFS=$'\t' read -r id audio duration _ _; do
    f="$dir/$audio"
    [ -f "$f" ] || fail "$m: $id: $audio does not exist"
    [ "$(soxi -r "$f")" = 16000 ] || fail "$f: not 16 kHz"
    [ "$(soxi -c "$f")" = 1 ] || fail "$f: not mono"
    [ "$(soxi -b "$f")" = 16 ] || fail "$f: not 16-bit"
    actual=$(soxi -D "$f")
    awk -v a="$actual" -v d="$duration" 'BEGIN { x = a - d; exit !(x < 0.01 && x > -0.01) }' \
      || fail "$f: soxi says ${actual}s, manifest says ${duration}s"
  done
}
for s in train valid test; do
  n=$([ $s = train ] && echo 24 || echo 6)
  check_manifest "$tmp/a" $s "$n"
done
[ "$(cat "$tmp"/a/*.tsv | grep -v '^id' | cut -f1 | sort | uniq -d)" = "" ] || fail "ids repeat"
wavs=$(find "$tmp/a/audio" -name '*.wav' | wc -l)
flacs=$(find "$tmp/a/audio" -name '*.flac' | wc -l)
{ [ "$wavs" -gt 0 ] && [ "$flacs" -gt 0 ]; } \
  || fail "expected WAV and FLAC files, got $wavs and $flacs"
[ $((wavs + flacs)) -eq 36 ] || fail "expected 36 audio files, found $((wavs + flacs))"
first() { find "$tmp/a/audio" -name "*.$1" | sort | head -n1; }
head -c4 "$(first flac)" | grep -q fLaC || fail "$(first flac) is not FLAC"
head -c4 "$(first wav)" | grep -q RIFF || fail "$(first wav) is not WAV"

# --- Held out: test voices and sentences never occur in training. ------------------------------
held_out=$(sed -n '/occur$/,/^$/p' "$tmp/a/README.txt" | grep '^  en' | sed 's/^ *//' | sort)
[ "$(echo "$held_out" | wc -l)" -ge 5 ] || fail "README.txt lists no held-out voices"
column() { tail -n +2 "$1" | cut -f"$2" | sort -u; }
trim() { sed 's/^[[:space:]]*//; s/[[:space:]]*$//' "$@" | sort -u; }
for corpus in a c; do
  seen=$(cat <(column "$tmp/$corpus/train.tsv" 5) <(column "$tmp/$corpus/valid.tsv" 5) | sort -u)
  test_voices=$(column "$tmp/$corpus/test.tsv" 5)
  [ -z "$(comm -12 <(echo "$seen") <(echo "$test_voices"))" ] \
    || fail "$corpus: a test voice is in train/valid"
  [ -z "$(comm -23 <(echo "$test_voices") <(echo "$held_out"))" ] \
    || fail "$corpus: a test voice is not one of README.txt's held-out voices"
  [ -z "$(comm -12 <(echo "$seen") <(echo "$held_out"))" ] \
    || fail "$corpus: a held-out voice is in train/valid"
  [ -z "$(comm -12 <(column "$tmp/$corpus/test.tsv" 4) <(trim "$multi30k/train.en"))" ] \
    || fail "$corpus: a test sentence occurs in train.en"
  [ -z "$(comm -23 <(column "$tmp/$corpus/test.tsv" 4) <(trim "$multi30k/test.en"))" ] \
    || fail "$corpus: a test sentence is not from test.en"
  [ -z "$(comm -23 <(column "$tmp/$corpus/train.tsv" 4) <(trim "$multi30k/train.en"))" ] \
    || fail "$corpus: a train sentence is not from train.en"
done

# A source whose test.en is mostly train.en sentences: only the 5 that aren't may be chosen.
mkdir "$tmp/src"
head -n 300 "$multi30k/train.en" >"$tmp/src/train.en"
cp "$multi30k/LICENSE-or-SOURCE.txt" "$tmp/src/"
{ sed -n '1,20p' "$multi30k/valid.en"; sed -n '1,40p' "$tmp/src/train.en"; } >"$tmp/src/valid.en"
{ sed -n '41,70p' "$tmp/src/train.en"; sed -n '1,5p' "$multi30k/test.en"
  sed -n '71,80p' "$tmp/src/train.en" | sed 's/^/  /; s/$/ /'; } >"$tmp/src/test.en"
"$build" "$tmp/d" --source "$tmp/src" --sentences 40 --valid 20 --test 5 --jobs 2 >/dev/null 2>&1 \
  || fail "building from the overlapping source"
[ "$(column "$tmp/d/test.tsv" 4)" = "$(sed -n '1,5p' "$multi30k/test.en" | trim)" ] \
  || fail "test sentences: expected exactly test.en's 5 sentences not in train.en"
[ -z "$(comm -12 <(column "$tmp/d/valid.tsv" 4) <(trim "$tmp/src/train.en"))" ] \
  || fail "a valid sentence occurs in train.en"
set +e
"$build" "$tmp/e" --source "$tmp/src" --sentences 40 --valid 20 --test 6 >/dev/null 2>"$tmp/err"
rc=$?
set -e
{ [ $rc -eq 2 ] && grep -q -- "--test 6" "$tmp/err"; } \
  || fail "--test above the usable sentences: rc $rc, $(cat "$tmp/err")"
[ ! -e "$tmp/e" ] || fail "a failed build left $tmp/e behind"

# --- Bad arguments: exit 2 with a message naming the cause. ------------------------------------
expect_usage_error() {  # expect_usage_error WORD ARGS...
  local word=$1 rc
  shift
  set +e
  "$build" "$@" >/dev/null 2>"$tmp/err"
  rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$* exited $rc, not 2"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$*: expected a one-line error, got: $(cat "$tmp/err")"
  grep -q -- "$word" "$tmp/err" || fail "$*: error does not name '$word': $(cat "$tmp/err")"
}
expect_usage_error --sentences "$tmp/x" --sentences abc
expect_usage_error --seed "$tmp/x" --seed=-3
expect_usage_error --bogus "$tmp/x" --bogus 1
expect_usage_error --source "$tmp/x" --source "$tmp/nowhere"
expect_usage_error --jobs "$tmp/x" --jobs
expect_usage_error OUT_DIR --test 3
expect_usage_error "$tmp/a" "$tmp/a" "${tiny[@]}"

# --- The LibriSpeech manifest writer. ----------------------------------------------------------
# ROOT/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac from corpus a's first train files.
root="$tmp/LibriSpeech/dev-tiny"
mkdir -p "$root/19/198" "$root/84/121123" "$tmp/manifests"
i=0
tail -n +2 "$tmp/a/train.tsv" | head -n 5 | while IFS=$'\t' read -r _ audio _ text _; do
  i=$((i + 1))
  if [ $i -le 3 ]; then chapter=19/198; else chapter=84/121123; fi
  prefix=${chapter/\//-}
  sox "$tmp/a/$audio" "$root/$chapter/$prefix-000$i.flac"
  echo "$prefix-000$i ${text^^}" >>"$root/$chapter/$prefix.trans.txt"
done
"$libri" "$root" "$tmp/manifests/dev.tsv" >/dev/null 2>"$tmp/err" \
  || { cat "$tmp/err" >&2; fail "librispeech writer"; }
m="$tmp/manifests/dev.tsv"
[ "$(head -n1 "$m")" = "$(printf 'id\taudio\tduration\ttext\tspeaker')" ] || fail "$m: header"
expected_ids="19-198-0001 19-198-0002 19-198-0003 84-121123-0004 84-121123-0005 "
[ "$(tail -n +2 "$m" | cut -f1 | tr '\n' ' ')" = "$expected_ids" ] \
  || fail "$m: ids $(tail -n +2 "$m" | cut -f1 | tr '\n' ' ')"
[ "$(tail -n +2 "$m" | cut -f5 | tr '\n' ' ')" = "19 19 19 84 84 " ] || fail "$m: speakers"
awk -F'\t' 'NF != 5 { exit 1 }' "$m" || fail "$m: a line without 5 columns"
tail -n +2 "$m" | while IFS=$'\t' read -r id audio duration text _; do
  [ "${audio#../}" != "$audio" ] || fail "$m: $id: audio path $audio not relative to the manifest"
  f="$tmp/manifests/$audio"
  [ -f "$f" ] || fail "$m: $id: $audio does not exist relative to the manifest"
  [ "$(basename "$f")" = "$id.flac" ] || fail "$m: $id: wrong file $audio"
  awk -v a="$(soxi -D "$f")" -v d="$duration" \
    'BEGIN { x = a - d; exit !(x < 0.0011 && x > -0.0011) }' \
    || fail "$m: $id: duration $duration"
  grep -qxF "$id $text" "$(dirname "$f")"/*.trans.txt || fail "$m: $id: text '$text'"
done

# A transcript line without its audio file: the error names the file and the line.
rm "$root/19/198/19-198-0002.flac"
rm "$m"
set +e
"$libri" "$root" "$m" >/dev/null 2>"$tmp/err"
rc=$?
set -e
[ $rc -eq 1 ] || fail "missing flac: exit $rc, not 1"
{ grep -qF "19-198.trans.txt:2" "$tmp/err" \
  && grep -qF "$root/19/198/19-198-0002.flac" "$tmp/err"; } \
  || fail "missing flac: error does not name it and its line: $(cat "$tmp/err")"
[ ! -e "$m" ] || fail "a manifest was written despite the error"
# An audio file no transcript line describes: the error names it.
sed -i '/^19-198-0002 /d' "$root/19/198/19-198.trans.txt"
sox "$tmp/a/$(sed -n 2p "$tmp/a/train.tsv" | cut -f2)" "$root/84/121123/84-121123-0009.flac"
set +e
"$libri" "$root" "$m" >/dev/null 2>"$tmp/err"
rc=$?
set -e
{ [ $rc -eq 1 ] && grep -qF "$root/84/121123/84-121123-0009.flac" "$tmp/err"; } \
  || fail "undescribed flac: exit $rc, $(cat "$tmp/err")"
set +e
"$libri" "$root" >/dev/null 2>"$tmp/err"
rc=$?
set -e
[ $rc -eq 2 ] || fail "librispeech writer with one argument: exit $rc, not 2"

echo "speech_corpus_test: all checks passed"
