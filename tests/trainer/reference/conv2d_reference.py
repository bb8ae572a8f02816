#!/usr/bin/python3
"""PyTorch's F.conv2d on the engine's case, for engine_conv2d_test.

Usage: conv2d_reference.py CASE.safetensors [--tolerance 1e-5]

The case holds "input.x" [N, Cin, H, W], "input.w" [Cout, Cin, KH, KW], "input.b" [Cout],
"input.dy" [N, Cout, OH, OW], "input.stride" and "input.padding" (I32 [2]), and the engine's
"ours.y", "ours.dx", "ours.dw", "ours.db". This script runs F.conv2d in float64, backpropagates
sum(y * dy) by autograd and compares each tensor by relative error (max |ours - ref| / max |ref|).
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from lstm_reference import case_and_tolerance, compare  # noqa: E402


def main():
    t, tolerance = case_and_tolerance(sys.argv)
    f64 = lambda name: torch.tensor(t[name], dtype=torch.float64, requires_grad=True)  # noqa: E731
    x, w, b = f64("input.x"), f64("input.w"), f64("input.b")
    stride = tuple(int(v) for v in t["input.stride"])
    padding = tuple(int(v) for v in t["input.padding"])
    y = F.conv2d(x, w, b, stride=stride, padding=padding)
    (y * torch.tensor(t["input.dy"], dtype=torch.float64)).sum().backward()
    print(f"y {tuple(y.shape)} stride {stride} padding {padding}")
    pairs = [("y", y, t["ours.y"]), ("dx", x.grad, t["ours.dx"]), ("dw", w.grad, t["ours.dw"]),
             ("db", b.grad, t["ours.db"])]
    for name, ref, ours in pairs:
        if tuple(ref.shape) != tuple(np.asarray(ours).shape):
            print(f"{name}: shape {tuple(np.asarray(ours).shape)}, PyTorch's {tuple(ref.shape)}")
            sys.exit(1)
    sys.exit(compare(pairs, tolerance))


if __name__ == "__main__":
    main()
