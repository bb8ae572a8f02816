#!/usr/bin/python3
"""PyTorch's half of bench/lstm_layer.sh: nn.LSTM's forward and backward over a packed batch.

Usage: pytorch_lstm_bench.py --batch 64 --min-len 10 --max-len 30 --input 256 --hidden 256
                             [--precision fp32|bf16] [--steps 20] [--warmup 3] [--seed 1]
                             [--threads 2]

The same lengths as lstm_layer_bench (min + (i * 7919 + seed) % span, sorted longest first),
packed with pack_padded_sequence; the step is lstm(packed), sum(y.data * dy), backward. bf16
runs under torch.autocast("cpu", dtype=torch.bfloat16). Prints the same line as the engine's
benchmark: `tokens_per_s=<N> step_ms=<median> tokens=<per step>`.
"""
import argparse
import time

import torch


def main():
    p = argparse.ArgumentParser()
    for name, default in (("batch", 64), ("min-len", 10), ("max-len", 30), ("input", 256), ("hidden", 256),
                          ("steps", 20), ("warmup", 3), ("seed", 1), ("threads", 2)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    span = a.max_len - a.min_len + 1
    lengths = sorted((a.min_len + (i * 7919 + a.seed) % span for i in range(a.batch)), reverse=True)
    lstm = torch.nn.LSTM(a.input, a.hidden)
    x = torch.rand(lengths[0], a.batch, a.input) * 0.2 - 0.1
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor(lengths), enforce_sorted=True)
    tokens = int(packed.data.shape[0])
    dy = torch.rand(tokens, a.hidden) * 0.2 - 0.1
    times = []
    for step in range(a.warmup + a.steps):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            y, _ = lstm(packed)
            loss = (y.data.float() * dy).sum()
        loss.backward()
        elapsed = (time.perf_counter() - start) * 1000
        if step >= a.warmup:
            times.append(elapsed)
    times.sort()
    median = times[len(times) // 2]
    print(f"tokens_per_s={tokens / (median / 1000):.0f} step_ms={median:.3f} tokens={tokens}")


if __name__ == "__main__":
    main()
