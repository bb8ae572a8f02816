"""Writes a speech manifest for a LibriSpeech tree: deploy/make-librispeech-manifest.sh's worker.

Run through deploy/make-librispeech-manifest.sh, which checks the arguments. Standard library
only, plus soxi for the durations.

The tree: ROOT/<speaker>/<chapter>/<speaker>-<chapter>-<utterance>.flac, and per chapter
ROOT/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt with lines "<utterance id> TRANSCRIPT".
Every transcript line must name an existing audio file and every audio file must have a
transcript line; otherwise nothing is written and each mismatch is reported with its file (and
line). The manifest's format is the synthetic corpus's (docs/speech.md): a header, then id,
audio (relative to the manifest's directory), duration (seconds, 3 decimals), text, speaker.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

NAME = "make-librispeech-manifest.sh"
ID = re.compile(r"^(\d+)-(\d+)-(\d+)$")
MAX_REPORTED = 20


class DataError(Exception):
    """The tree is not a consistent LibriSpeech tree; the message names each problem."""


def sort_key(uid: str) -> tuple:
    m = ID.match(uid)
    return (0, *map(int, m.groups())) if m else (1, uid)


def scan(root: str) -> list[tuple[str, str, str, str]]:
    """(id, audio path, transcript, speaker) for each utterance under root."""
    errors: list[str] = []
    utterances = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        audio = {f[: -len(".flac")]: os.path.join(dirpath, f) for f in filenames
                 if f.endswith(".flac")}  # fmt: skip
        transcripts = sorted(f for f in filenames if f.endswith(".trans.txt"))
        described: set[str] = set()
        for name in transcripts:
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, start=1):
                    line = line.rstrip("\r\n")
                    if not line.strip():
                        continue
                    uid, _, text = line.partition(" ")
                    text = text.strip()
                    where = f"{path}:{number}"
                    if not text:
                        errors.append(f"{where}: no transcript after '{uid}'")
                        continue
                    if "\t" in text:
                        errors.append(f"{where}: transcript contains a tab")
                        continue
                    if uid in described:
                        errors.append(f"{where}: '{uid}' is described twice")
                        continue
                    described.add(uid)
                    if uid not in audio:
                        errors.append(
                            f"{where}: names '{uid}', but "
                            f"{os.path.join(dirpath, uid + '.flac')} does not exist"
                        )
                        continue
                    m = ID.match(uid)
                    speaker = m.group(1) if m else os.path.basename(os.path.dirname(dirpath))
                    utterances.append((uid, audio[uid], text, speaker))
        for uid in sorted(set(audio) - described):
            where = ", ".join(os.path.join(dirpath, t) for t in transcripts) or (
                f"{dirpath} (no *.trans.txt there)"
            )
            errors.append(f"{audio[uid]}: no transcript line for '{uid}' in {where}")
    if errors:
        shown = errors[:MAX_REPORTED]
        if len(errors) > MAX_REPORTED:
            shown.append(f"... and {len(errors) - MAX_REPORTED} more")
        raise DataError("\n".join(shown))
    if not utterances:
        raise DataError(f"{root}: no utterances (no *.flac with *.trans.txt lines under it)")
    return sorted(utterances, key=lambda u: sort_key(u[0]))


def durations(paths: list[str]) -> list[str]:
    """Each file's duration in seconds, 3 decimals, from soxi (many files per call)."""
    out: list[str] = []
    for start in range(0, len(paths), 500):
        chunk = paths[start : start + 500]
        result = subprocess.run(["soxi", "-D", *chunk], capture_output=True, text=True)
        lines = result.stdout.split()
        if result.returncode != 0 or len(lines) != len(chunk):
            raise DataError(f"soxi -D failed on {chunk[0]} ...: {result.stderr.strip()}")
        out += [f"{float(x):.3f}" for x in lines]
    return out


def main() -> int:
    root, manifest = sys.argv[1], sys.argv[2]
    utterances = scan(root)
    base = os.path.dirname(os.path.abspath(manifest))
    seconds = durations([u[1] for u in utterances])
    partial = f"{manifest}.partial.{os.getpid()}"
    try:
        with open(partial, "w", encoding="utf-8", newline="\n") as f:
            f.write("id\taudio\tduration\ttext\tspeaker\n")
            for (uid, path, text, speaker), duration in zip(utterances, seconds):
                audio = os.path.relpath(os.path.abspath(path), base)
                f.write(f"{uid}\t{audio}\t{duration}\t{text}\t{speaker}\n")
        os.replace(partial, manifest)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    total = sum(float(s) for s in seconds)
    speakers = len({u[3] for u in utterances})
    print(f"{manifest}: {len(utterances)} utterances, {speakers} speakers, {total / 3600:.3f} h")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except DataError as e:
        for line in str(e).splitlines():
            print(f"{NAME}: {line}", file=sys.stderr)
        sys.exit(1)
