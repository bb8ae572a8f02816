"""Builds the synthetic speech corpus: deploy/make-speech-corpus.sh's worker.

Run through deploy/make-speech-corpus.sh, which checks the arguments and the tools; this file
assumes both are good. Standard library only (Debian's /usr/bin/python3), plus the espeak-ng,
sox and soxi programs.

Two phases:
  1. plan: one random.Random per split, seeded from (seed, split), picks every utterance's
     sentence, voice and parameters. Everything random is decided here, as text.
  2. synthesis: a thread pool (--jobs) runs espeak-ng and sox for each planned utterance. Each
     utterance's commands depend only on its own plan line, and sox runs with -R (its fixed
     random seed) and -D (no dither), so the files are the same whatever --jobs is and whichever
     order the utterances finish in.

Manifests (OUT/{train,valid,test}.tsv, docs/speech.md): a header, then one line per utterance,
ordered by id: id, audio (relative to the manifest), duration (seconds, 3 decimals, from the
final file's sample count), text (the source sentence), speaker (the espeak-ng voice).
"""

from __future__ import annotations

import argparse
import array
import concurrent.futures
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import wave
from dataclasses import dataclass

SAMPLE_RATE = 16000


class BadInput(Exception):
    """An argument or the source corpus can't give the asked-for corpus (exit status 2)."""

SPLITS = ("train", "valid", "test")

# espeak-ng's English accents that ship with espeak-ng-data (the mbrola "mb/" voices need
# separate packages and are left out). Names as `espeak-ng --voices=en` lists them.
ACCENTS = (
    "en-gb",
    "en-us",
    "en-gb-scotland",
    "en-gb-x-gbclan",
    "en-gb-x-rp",
    "en-gb-x-gbcwmd",
    "en-029",
    "en-us-nyc",
)

# Voice variants (`espeak-ng --voices=variant`): the plain male and female ones and three of the
# Klatt-synthesiser ones. Left out: whisper, croak, robot and novelty variants, which trade
# intelligibility for effect.
VARIANTS = (
    "m1", "m2", "m3", "m4", "m5", "m6", "m7",
    "f1", "f2", "f3", "f4", "f5",
    "klatt", "klatt2", "klatt3",
)  # fmt: skip

# (accent, variant) pairs heard only in the test split. One per accent, each accent and each
# variant still heard in training with other partners, mostly plain voices (one Klatt): a model
# trained on the other voices should generalise to these, and the test set measures whether it
# does on voices it has never heard.
HELD_OUT_VOICES = (
    "en-gb+m4",
    "en-us+f2",
    "en-us+klatt2",
    "en-gb-scotland+m2",
    "en-gb-x-gbclan+f4",
    "en-gb-x-rp+m6",
    "en-gb-x-gbcwmd+f1",
    "en-029+m3",
    "en-us-nyc+m7",
)

# Fractions of each split's utterances that get each treatment; counts are rounded, at least
# one FLAC per non-empty split so that every split exercises both readers.
NOISE_FRACTION = 0.28
TEMPO_FRACTION = 0.20
FLAC_FRACTION = 0.15
NOISE_TYPES = ("whitenoise", "pinknoise", "brownnoise")


@dataclass(frozen=True)
class Utterance:
    """One planned utterance; every field is text so the plan is exact and printable."""

    id: str
    split: str
    source_line: int  # 1-based line in SPLIT.en
    text: str
    voice: str  # accent+variant
    speed: str  # espeak-ng -s, words per minute
    pitch: str  # espeak-ng -p, 0..99
    tempo: str  # sox tempo factor, "" for none
    noise: str  # sox synth noise type, "" for none
    snr_db: str  # signal-to-noise ratio of the added noise
    noise_offset: str  # samples of sox's fixed noise sequence skipped, so utterances differ
    peak_db: str  # final peak level, dBFS (the random gain)
    ext: str  # "wav" or "flac"

    @property
    def audio(self) -> str:
        return f"audio/{self.split}/{self.id}.{self.ext}"


PLAN_FIELDS = (
    "id", "split", "source_line", "voice", "speed", "pitch", "tempo", "noise", "snr_db",
    "noise_offset", "peak_db", "ext", "text",
)  # fmt: skip


def all_voices() -> list[str]:
    return [f"{a}+{v}" for a in ACCENTS for v in VARIANTS]


def read_sentences(path: str) -> list[tuple[int, str]]:
    """(1-based line, trimmed sentence) for each non-empty line, first occurrence only."""
    seen: set[str] = set()
    out: list[tuple[int, str]] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            text = line.strip()
            if not text or text in seen:
                continue
            # strip() removed the line's own ending; anything left would break the TSV.
            if any(c in text for c in "\t\r\n"):
                raise BadInput(f"{path}:{number}: sentence contains a tab or line break")
            seen.add(text)
            out.append((number, text))
    return out


def pick_indices(rng: random.Random, n: int, fraction: float, at_least_one: bool) -> set[int]:
    k = round(n * fraction)
    if at_least_one and n > 0:
        k = max(k, 1)
    return set(rng.sample(range(n), k))


def plan_split(
    split: str, count: int, seed: int, sentences: list[tuple[int, str]], voices: list[str]
) -> list[Utterance]:
    # A string seed is hashed with SHA-512 by random.seed: stable across runs and Python 3
    # versions, and one split's plan does not move when another split's count changes.
    rng = random.Random(f"steadfast-speech/{seed}/{split}")
    chosen = rng.sample(sentences, count)
    noisy = pick_indices(rng, count, NOISE_FRACTION, False)
    tempo = pick_indices(rng, count, TEMPO_FRACTION, False)
    flac = pick_indices(rng, count, FLAC_FRACTION, True)
    plan = []
    for i, (line, text) in enumerate(chosen):
        # Draw every parameter for every utterance, used or not, so each draw sits at a fixed
        # place in the sequence.
        voice = rng.choice(voices)
        speed = rng.randint(130, 200)
        pitch = rng.randint(25, 75)
        tempo_factor = rng.uniform(0.9, 1.1)
        noise_type = rng.choice(NOISE_TYPES)
        snr = rng.uniform(15.0, 35.0)
        offset = rng.randrange(0, 20 * SAMPLE_RATE)
        peak = rng.uniform(-12.0, -1.0)
        plan.append(
            Utterance(
                id=f"{split}-{i + 1:06d}",
                split=split,
                source_line=line,
                text=text,
                voice=voice,
                speed=str(speed),
                pitch=str(pitch),
                tempo=f"{tempo_factor:.3f}" if i in tempo else "",
                noise=noise_type if i in noisy else "",
                snr_db=f"{snr:.1f}" if i in noisy else "",
                noise_offset=str(offset) if i in noisy else "",
                peak_db=f"{peak:.1f}",
                ext="flac" if i in flac else "wav",
            )
        )
    return plan


def make_plan(args: argparse.Namespace) -> dict[str, list[Utterance]]:
    train = read_sentences(os.path.join(args.source, "train.en"))
    train_texts = {t for _, t in train}
    held_out = set(HELD_OUT_VOICES)
    seen_voices = [v for v in all_voices() if v not in held_out]
    counts = {"train": args.sentences, "valid": args.valid, "test": args.test}
    plan = {}
    for split in SPLITS:
        if split == "train":
            pool = train
        else:
            # Sentences that also occur in train.en are dropped: the test set's sentences are
            # never heard in training (and valid.en's neither, to keep it an honest check).
            pool = [
                (n, t)
                for n, t in read_sentences(os.path.join(args.source, f"{split}.en"))
                if t not in train_texts
            ]
        if counts[split] > len(pool):
            raise BadInput(
                f"--{'sentences' if split == 'train' else split} {counts[split]}: {split}.en has "
                f"only {len(pool)} usable distinct sentences"
            )
        voices = list(HELD_OUT_VOICES) if split == "test" else seen_voices
        plan[split] = plan_split(split, counts[split], args.seed, pool, voices)
    return plan


def run(cmd: list[str], stdin: str | None = None) -> None:
    result = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr.strip()}")


def wav_samples(path: str) -> array.array:
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, path
        data = array.array("h", w.readframes(w.getnframes()))
    if sys.byteorder == "big":
        data.byteswap()
    return data


def rms(samples: array.array) -> float:
    if not samples:
        return 0.0
    return math.sqrt(sum(s * s for s in samples) / len(samples))


def flac_sample_count(path: str) -> tuple[int, int, int]:
    """(samples, rate, channels) from a FLAC file's STREAMINFO block (always the first)."""
    with open(path, "rb") as f:
        head = f.read(4 + 4 + 34)
    if head[:4] != b"fLaC" or head[4] & 0x7F != 0:
        raise RuntimeError(f"{path}: not a FLAC file with STREAMINFO first")
    info = int.from_bytes(head[8 + 10 : 8 + 18], "big")  # rate:20 channels-1:3 bps-1:5 total:36
    total = info & ((1 << 36) - 1)
    channels = ((info >> 41) & 0x7) + 1
    rate = info >> 44
    return total, rate, channels


def sample_count(path: str) -> int:
    if path.endswith(".flac"):
        total, rate, channels = flac_sample_count(path)
    else:
        with wave.open(path, "rb") as w:
            total, rate, channels = w.getnframes(), w.getframerate(), w.getnchannels()
    if rate != SAMPLE_RATE or channels != 1:
        raise RuntimeError(f"{path}: {rate} Hz, {channels} channels; expected 16 kHz mono")
    return total


SOX = ["sox", "-R", "-D", "-V1"]  # fixed random seed, no dither, errors only


def synthesise(u: Utterance, out_dir: str, work_root: str) -> tuple[str, int]:
    """Writes u's audio file under out_dir; returns (id, samples)."""
    work = tempfile.mkdtemp(prefix=u.id + "-", dir=work_root)
    try:
        raw = os.path.join(work, "espeak.wav")
        run(
            ["espeak-ng", "-v", u.voice, "-s", u.speed, "-p", u.pitch, "-w", raw, "--stdin"],
            stdin=u.text + "\n",
        )
        final = os.path.join(out_dir, u.audio)
        shape = ["-r", str(SAMPLE_RATE), "-c", "1", "-b", "16"]
        # 3 dB of headroom first so that resampling can't clip; the final gain -n sets the level.
        effects = ["gain", "-3"] + (["tempo", "-s", u.tempo] if u.tempo else [])
        effects += ["rate", "-v", str(SAMPLE_RATE)]
        if not u.noise:
            run(SOX + [raw] + shape + [final] + effects + ["gain", "-n", u.peak_db])
        else:
            speech = os.path.join(work, "speech.wav")
            run(SOX + [raw] + shape + [speech] + effects)
            samples = wav_samples(speech)
            noise = os.path.join(work, "noise.wav")
            # sox -R makes the same noise sequence in every process; skipping a planned number
            # of samples gives each utterance its own stretch of it.
            run(
                SOX + ["-r", str(SAMPLE_RATE), "-c", "1", "-n", "-b", "16", noise]
                + ["synth", f"{len(samples) + int(u.noise_offset)}s", u.noise]
                + ["trim", f"{u.noise_offset}s"]
            )  # fmt: skip
            noise_rms = rms(wav_samples(noise))
            # Scale the noise so that 20*log10(rms(speech) / rms(scaled noise)) = SNR.
            volume = rms(samples) / (10 ** (float(u.snr_db) / 20)) / max(noise_rms, 1e-9)
            # Both at half volume so that their sum can't clip; the final gain -n sets the level.
            run(
                SOX + ["-m", "-v", "0.5", speech, "-v", f"{volume / 2:.6f}", noise]
                + shape + [final, "gain", "-n", u.peak_db]
            )  # fmt: skip
        return u.id, sample_count(final)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_manifest(path: str, plan: list[Utterance], samples: dict[str, int]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("id\taudio\tduration\ttext\tspeaker\n")
        for u in sorted(plan, key=lambda u: u.id):
            assert not any(c in u.text for c in "\t\r\n"), u.id
            duration = samples[u.id] / SAMPLE_RATE
            f.write(f"{u.id}\t{u.audio}\t{duration:.3f}\t{u.text}\t{u.voice}\n")


def write_plan(path: str, plan: dict[str, list[Utterance]]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\t".join(PLAN_FIELDS) + "\n")
        for split in SPLITS:
            for u in plan[split]:
                f.write("\t".join(str(getattr(u, k)) for k in PLAN_FIELDS) + "\n")


def tool_version(cmd: list[str]) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    return out.splitlines()[0] if out else "unknown"


def write_readme(path: str, args: argparse.Namespace, stats: dict[str, tuple[int, float]]) -> None:
    held = "\n".join(f"  {v}" for v in HELD_OUT_VOICES)
    seen = len(all_voices()) - len(HELD_OUT_VOICES)
    lines = [
        "Synthetic English speech corpus (Steadfast, deploy/make-speech-corpus.sh)",
        "",
        "Built with:",
        f"  deploy/make-speech-corpus.sh OUT --sentences {args.sentences} --valid {args.valid} "
        f"--test {args.test} --seed {args.seed}",
        "  (--jobs, --source and OUT do not change the files; the build is deterministic)",
        f"Seed: {args.seed}",
        f"Source: the English side of Multi30k ({os.path.basename(os.path.normpath(args.source))}: "
        "train.en, valid.en, test.en);",
        "  its origin and license: LICENSE-or-SOURCE.txt, copied here. Non-commercial",
        "  research/educational use only; cite Elliott et al. 2016 (see that file).",
        f"Tools: {tool_version(['espeak-ng', '--version'])}",
        f"       {tool_version(['sox', '--version'])}",
        "",
        "Splits (utterances, hours):",
    ]
    for split in SPLITS:
        n, seconds = stats[split]
        lines.append(f"  {split:5}  {n:6d}  {seconds / 3600:.3f}")
    lines += [
        "",
        "Files: {train,valid,test}.tsv (manifests), audio/<split>/<id>.wav|.flac (16 kHz mono",
        "16-bit), plan.txt (every utterance's planned parameters, tab separated).",
        "Manifest columns (tab separated, header first): id, audio (relative to the manifest),",
        "duration (seconds), text (the source sentence verbatim), speaker (espeak-ng voice).",
        "",
        "Sentences: sampled without replacement from each split's file; valid and test sentences",
        "that also occur in train.en are dropped, so no test sentence is heard in training.",
        "",
        f"Voices: espeak-ng accent+variant. Accents: {' '.join(ACCENTS)}.",
        f"Variants: {' '.join(VARIANTS)}.",
        f"Train and valid use {seen} voices; these {len(HELD_OUT_VOICES)} are held out and occur",
        "only in test:",
        held,
        "",
        "Per utterance: espeak-ng speed 130-200 wpm and pitch 25-75; sox resamples to 16 kHz;",
        f"{NOISE_FRACTION:.0%} get white, pink or brown noise at 15-35 dB SNR; "
        f"{TEMPO_FRACTION:.0%} a tempo change",
        f"of 0.9-1.1; every file a peak level of -12 to -1 dBFS; {FLAC_FRACTION:.0%} are FLAC, "
        "the rest WAV.",
        "",
    ]
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--sentences", type=int, required=True)
    parser.add_argument("--valid", type=int, required=True)
    parser.add_argument("--test", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--source", required=True)
    args = parser.parse_args()

    started = time.monotonic()
    plan = make_plan(args)
    out = args.out_dir
    for split in SPLITS:
        os.makedirs(os.path.join(out, "audio", split), exist_ok=True)
    write_plan(os.path.join(out, "plan.txt"), plan)

    everything = [u for split in SPLITS for u in plan[split]]
    total = len(everything)
    print(
        f"speech corpus: synthesising {total} utterances with {args.jobs} jobs "
        f"(seed {args.seed})",
        file=sys.stderr,
    )
    samples: dict[str, int] = {}
    step = max(total // 10, 1)
    work_root = tempfile.mkdtemp(prefix="speech-corpus-")
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(synthesise, u, out, work_root) for u in everything]
            try:
                for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
                    uid, n = future.result()
                    samples[uid] = n
                    if done % step == 0 or done == total:
                        print(f"speech corpus: {done}/{total}", file=sys.stderr)
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    finally:
        shutil.rmtree(work_root, ignore_errors=True)

    stats = {}
    for split in SPLITS:
        write_manifest(os.path.join(out, f"{split}.tsv"), plan[split], samples)
        stats[split] = (len(plan[split]), sum(samples[u.id] for u in plan[split]) / SAMPLE_RATE)
    shutil.copyfile(
        os.path.join(args.source, "LICENSE-or-SOURCE.txt"),
        os.path.join(out, "LICENSE-or-SOURCE.txt"),
    )
    write_readme(os.path.join(out, "README.txt"), args, stats)

    wall = time.monotonic() - started
    for split in SPLITS:
        n, seconds = stats[split]
        flac = sum(1 for u in plan[split] if u.ext == "flac")
        print(f"{split:5}  {n:6d} utterances  {seconds / 3600:7.3f} h  ({flac} FLAC)")
    print(f"total  {total:6d} utterances  {sum(s for _, s in stats.values()) / 3600:7.3f} h  "
          f"built in {wall:.1f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BadInput as e:
        print(f"make-speech-corpus.sh: {e}", file=sys.stderr)
        sys.exit(2)
    except RuntimeError as e:
        print(f"make-speech-corpus.sh: {e}", file=sys.stderr)
        sys.exit(1)
