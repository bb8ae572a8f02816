#!/usr/bin/python3
"""PyTorch's half of bench/speech_vs_pytorch.sh: the speech recogniser of
trainer/models/speech_ctc.h written with torch.nn (Conv2d x2 + ReLU, Linear, x sqrt(d) +
sinusoidal positions, nn.TransformerEncoder with norm_first, LayerNorm, Linear, F.ctc_loss),
one training step (forward, loss, backward; no optimizer) on the same synthetic batch as
bench/speech_ctc_bench.cc, timed. bf16: torch.autocast("cpu", torch.bfloat16).

Prints `frames_per_s=<N> step_ms=<median> frames=<per step>` (input frames).
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Recogniser(nn.Module):
    def __init__(self, mels, channels, dim, heads, layers, ffn, vocab):
        super().__init__()
        self.conv0 = nn.Conv2d(1, channels, 3, 2)
        self.conv1 = nn.Conv2d(channels, channels, 3, 2)
        m2 = ((mels - 1) // 2 - 1) // 2
        self.out = nn.Linear(channels * m2, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, ffn, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.ctc = nn.Linear(dim, vocab)
        self.dim = dim
        half = dim // 2
        freq = torch.exp(torch.arange(half) * -(math.log(10000) / (half - 1)))
        ang = torch.arange(4096 + 2).unsqueeze(1) * freq.unsqueeze(0)
        self.register_buffer("pe", torch.cat([torch.sin(ang), torch.cos(ang)], dim=1))

    def forward(self, feats, frames, targets, target_lengths):
        x = F.relu(self.conv0(feats.unsqueeze(1)))
        x = F.relu(self.conv1(x))
        b, c, t2, m2 = x.shape
        x = self.out(x.transpose(1, 2).reshape(b, t2, c * m2))
        x = F.dropout(math.sqrt(self.dim) * x + self.pe[2:2 + t2], 0.1, self.training)
        lengths = ((frames - 1) // 2 - 1) // 2
        pad = torch.arange(t2).unsqueeze(0) >= lengths.unsqueeze(1)
        x = self.norm(self.encoder(x, src_key_padding_mask=pad))
        logits = self.ctc(x)
        return F.ctc_loss(F.log_softmax(logits.float(), dim=-1).transpose(0, 1), targets, lengths, target_lengths,
                          reduction="sum", zero_infinity=True)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--min-frames", type=int, default=300)
    p.add_argument("--max-frames", type=int, default=400)
    p.add_argument("--mels", type=int, default=80)
    p.add_argument("--conv-channels", type=int, default=64)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=40)
    p.add_argument("--chars-per-second", type=float, default=15)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    span = a.max_frames - a.min_frames + 1
    frames = [a.min_frames + (i * 7919 + a.seed) % span for i in range(a.batch)]
    tlen = [int(f * a.chars_per_second / 100.0) for f in frames]
    longest, max_target = max(frames), max(max(tlen), 1)
    targets = torch.zeros(a.batch, max_target, dtype=torch.long)
    for i in range(a.batch):
        for k in range(tlen[i]):
            targets[i, k] = 1 + (i * 31 + k * 17) % (a.vocab - 1)
    feats = torch.zeros(a.batch, longest, a.mels)
    for i, f in enumerate(frames):
        feats[i, :f] = torch.randn(f, a.mels)
    model = Recogniser(a.mels, a.conv_channels, a.dim, a.heads, a.layers, a.ffn, a.vocab).train()
    frames_t, tlen_t = torch.tensor(frames), torch.tensor(tlen)
    times = []
    for s in range(a.warmup + a.steps):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = model(feats, frames_t, targets, tlen_t)
        loss.backward()
        model.zero_grad(set_to_none=True)
        if s >= a.warmup:
            times.append((time.perf_counter() - start) * 1000)
    median = statistics.median(times)
    print(f"frames_per_s={sum(frames) / (median / 1000):.0f} step_ms={median:.3f} frames={sum(frames)}")


if __name__ == "__main__":
    main()
