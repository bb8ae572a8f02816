#!/usr/bin/python3
"""PyTorch's nn.LSTM on the engine's LSTM case (one layer, or a stack), for engine_lstm_test.

Usage: lstm_reference.py CASE.safetensors [--tolerance 1e-5]

The case file holds the weights under nn.LSTM's names (weight_ih_l0, weight_hh_l0, bias_ih_l0,
bias_hh_l0, and _l1..., _reverse for a stack: its layers and directions are read off the names),
a packed batch ("input.x" [N, in], "input.batch_sizes" I32 [T]), the
initial state when there is one ("input.h0", "input.c0" [B, H]), the gradient of the output
("input.dy" [N, H]) and the engine's results ("ours.y", "ours.dx", "ours.grad.<param>",
"ours.dh0", "ours.dc0"). This script runs torch.nn.LSTM in float64 on the same PackedSequence
(the data and batch sizes as PyTorch's pack_padded_sequence lays them out), backpropagates
sum(y * dy) with autograd and compares: relative error of a tensor = max |ours - ref| / max |ref|.
Prints one line per tensor and the worst; exits 1 when any exceeds the tolerance.
"""
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from transformer_reference import read_safetensors  # noqa: E402


def case_and_tolerance(argv):
    """The case file's tensors and the --tolerance (default 1e-5) of a reference script's argv."""
    tolerance = 1e-5
    if "--tolerance" in argv:
        tolerance = float(argv[argv.index("--tolerance") + 1])
    tensors, _ = read_safetensors(argv[1])
    return tensors, tolerance


def compare(pairs, tolerance):
    """Prints each (name, reference tensor, ours) relative error (max |ours - ref| / max |ref|) and
    the worst; returns the exit status: 1 when any exceeds the tolerance."""
    worst, failed = 0.0, False
    for name, ref, ours in pairs:
        ref = ref.detach().numpy().reshape(ours.shape)
        err = float(np.max(np.abs(ours.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))
        worst = max(worst, err)
        failed |= err > tolerance
        print(f"{name}: rel {err:.3e}{'  > tolerance' if err > tolerance else ''}")
    print(f"worst: {worst:.3e} (tolerance {tolerance:g})")
    return 1 if failed else 0


def main():
    t, tolerance = case_and_tolerance(sys.argv)
    x = torch.tensor(t["input.x"], dtype=torch.float64, requires_grad=True)
    batch_sizes = torch.tensor(t["input.batch_sizes"].astype(np.int64))
    hidden = t["weight_hh_l0"].shape[1]
    layers = sum(1 for k in t if k.startswith("weight_ih_l") and not k.endswith("_reverse"))
    bidirectional = "weight_ih_l0_reverse" in t
    lstm = torch.nn.LSTM(x.shape[1], hidden, num_layers=layers, bidirectional=bidirectional).double()
    names = [n for n, _ in lstm.named_parameters()]
    with torch.no_grad():
        for name in names:
            getattr(lstm, name).copy_(torch.tensor(t[name], dtype=torch.float64))
    packed = torch.nn.utils.rnn.PackedSequence(x, batch_sizes)
    state = None
    if "input.h0" in t:
        h0 = torch.tensor(t["input.h0"], dtype=torch.float64).unsqueeze(0).requires_grad_()
        c0 = torch.tensor(t["input.c0"], dtype=torch.float64).unsqueeze(0).requires_grad_()
        state = (h0, c0)
    y, _ = lstm(packed, state)
    dy = torch.tensor(t["input.dy"], dtype=torch.float64)
    (y.data * dy).sum().backward()

    pairs = [("y", y.data.detach(), t["ours.y"]), ("dx", x.grad, t["ours.dx"])]
    for name in names:
        pairs.append((name, getattr(lstm, name).grad, t["ours.grad." + name]))
    if state is not None:
        pairs.append(("dh0", state[0].grad[0], t["ours.dh0"]))
        pairs.append(("dc0", state[1].grad[0], t["ours.dc0"]))
    sys.exit(compare(pairs, tolerance))

if __name__ == "__main__":
    main()
