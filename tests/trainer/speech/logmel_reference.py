#!/usr/bin/python3
"""The speech front end's log-mel features and utterance CMVN, recomputed with numpy alone, for
speech_data_test (FrontEnd.MatchesAnIndependentNumpyComputation).

Usage: logmel_reference.py CASE.safetensors [--tolerance 1e-4]

The case file's metadata names the audio ("wav": a PCM WAV, read here with Python's `wave`
module, channels averaged) and the front-end options (sample_rate, window_ms, hop_ms, n_fft,
mels, f_min, f_max, log_floor); its tensors are the engine's results: "ours.logmel" and
"ours.cmvn" [frames, mels], "ours.filterbank" [mels, n_fft/2 + 1]. This script follows the
definition in trainer/speech/features.h in float64, written from the formulas (not from the
engine's code): snip-edges frames, the periodic Hann window, np.fft.rfft zero-padded to n_fft,
|X|^2, HTK-mel triangles (torchaudio's melscale_fbanks, norm=None), log(E + floor), then
fairseq's UtteranceCMVN. Relative error of a tensor = max |ours - ref| / max |ref|; prints one
line per tensor and the worst; exits 1 when any exceeds the tolerance.
"""
import sys
import wave

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/../reference")
from transformer_reference import read_safetensors  # noqa: E402


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2, "16-bit PCM expected"
        channels, rate = w.getnchannels(), w.getframerate()
        raw = w.readframes(w.getnframes())
    x = np.frombuffer(raw, dtype="<i2").astype(np.float64).reshape(-1, channels) / 32768.0
    return x.mean(axis=1), rate


def hz_to_mel(f):
    return 2595.0 * np.log10(1.0 + f / 700.0)


def mel_to_hz(m):
    return 700.0 * (10.0 ** (m / 2595.0) - 1.0)


def mel_filterbank(sample_rate, n_fft, mels, f_min, f_max):
    """[mels, n_fft/2 + 1]: triangle j rises from f_j to f_{j+1} and falls to f_{j+2}."""
    freqs = np.arange(n_fft // 2 + 1) * sample_rate / n_fft
    f_pts = mel_to_hz(np.linspace(hz_to_mel(f_min), hz_to_mel(f_max), mels + 2))
    fb = np.zeros((mels, freqs.size))
    for j in range(mels):
        lo, mid, hi = f_pts[j], f_pts[j + 1], f_pts[j + 2]
        rising = (freqs - lo) / (mid - lo)
        falling = (hi - freqs) / (hi - mid)
        fb[j] = np.maximum(0.0, np.minimum(rising, falling))
    return fb


def main(argv):
    tolerance = float(argv[argv.index("--tolerance") + 1]) if "--tolerance" in argv else 1e-4
    tensors, meta = read_safetensors(argv[1])
    x, rate = read_wav(meta["wav"])
    sample_rate = int(meta["sample_rate"])
    assert rate == sample_rate, (rate, sample_rate)
    win = int(round(float(meta["window_ms"]) * sample_rate / 1000))
    hop = int(round(float(meta["hop_ms"]) * sample_rate / 1000))
    n_fft = int(meta["n_fft"])
    if n_fft == 0:
        n_fft = 1
        while n_fft < win:
            n_fft *= 2
    mels = int(meta["mels"])
    f_min = float(meta["f_min"])
    f_max = float(meta["f_max"]) or sample_rate / 2
    floor = float(meta["log_floor"])

    frames = 1 + (x.size - win) // hop
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(win) / win)
    index = hop * np.arange(frames)[:, None] + np.arange(win)[None, :]
    spectrum = np.fft.rfft(x[index] * window, n=n_fft, axis=1)
    power = spectrum.real ** 2 + spectrum.imag ** 2
    fb = mel_filterbank(sample_rate, n_fft, mels, f_min, f_max)
    logmel = np.log(power @ fb.T + floor)

    mean = logmel.mean(axis=0)
    var = ((logmel - mean) ** 2).mean(axis=0)
    cmvn = (logmel - mean) / np.sqrt(np.maximum(var, 1e-10))

    worst, failed = 0.0, False
    print(f"frames {frames} mels {mels} n_fft {n_fft} window {win} hop {hop}")
    for name, ref in (("filterbank", fb), ("logmel", logmel), ("cmvn", cmvn)):
        ours = tensors["ours." + name].astype(np.float64)
        if ours.shape != ref.shape:
            print(f"{name}: shape {ours.shape}, reference {ref.shape}")
            failed = True
            continue
        err = float(np.max(np.abs(ours - ref)) / max(np.max(np.abs(ref)), 1e-30))
        worst = max(worst, err)
        failed |= err > tolerance
        print(f"{name}: rel {err:.3e}{'  > tolerance' if err > tolerance else ''}")
    print(f"worst: {worst:.3e} (tolerance {tolerance:g})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
