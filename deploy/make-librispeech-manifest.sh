#!/usr/bin/env bash
# Writes a speech manifest (docs/speech.md) for a LibriSpeech-style tree:
#
#   ./deploy/make-librispeech-manifest.sh ROOT OUT.tsv
#
# ROOT/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac with, per chapter,
# ROOT/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt ("<utt-id> TRANSCRIPT" lines).
# The manifest's audio paths are relative to OUT.tsv's directory, its speaker column is the
# LibriSpeech speaker id, durations come from soxi. A transcript line whose audio file is missing,
# or an audio file without a transcript line, is an error naming the file (and line); then no
# manifest is written.
# Exit status: 0 written, 1 the tree is inconsistent or soxi failed, 2 bad arguments.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
NAME=make-librispeech-manifest.sh

usage() {  # the header's synopsis and tree layout
  sed -n '4,7p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
}
die() {  # die STATUS MESSAGE
  echo "$NAME: $2" >&2
  exit "$1"
}

case "${1:-}" in -h|--help) usage ;; esac
[ $# -eq 2 ] || die 2 "expected ROOT OUT.tsv, got $# argument(s) (see --help)"
for a in "$1" "$2"; do
  case "$a" in -*) die 2 "unknown flag '$a' (expected ROOT OUT.tsv)" ;; esac
done
[ -d "$1" ] || die 2 "ROOT '$1' is not a directory"
[ -d "$(dirname "$2")" ] || die 2 "OUT.tsv '$2': directory $(dirname "$2") does not exist"
for tool in soxi /usr/bin/python3; do
  command -v "$tool" >/dev/null 2>&1 || die 1 "$tool not found (deploy/install-deps.sh installs it)"
done

LC_ALL=C.UTF-8 exec /usr/bin/python3 "$REPO/deploy/librispeech_manifest.py" "$1" "$2"
