#!/usr/bin/python3
"""PyTorch's CTC loss on the engine's case, for engine_ctc_test.

Usage: ctc_reference.py CASE.safetensors [--tolerance 1e-5]

The case holds "input.logits" [B, T, C] (F32, batch-major as the engine's rows), "input.input_lengths" [B], "input.targets" [B, L]
(right-padded), "input.target_lengths" [B], "input.blank" [1] and "input.zero_infinity" [1] (I32),
"input.grad_scale" [1] (F32), and the engine's "ours.losses" [B] and "ours.dlogits" [B, T, C].
This script computes F.ctc_loss(F.log_softmax(logits), ..., reduction='none') in float64 and the
gradient of grad_scale * sum(losses) with respect to the logits by autograd, and compares: the
finite losses and gradients by relative error (max |ours - ref| / max |ref|); an infinite loss
must be infinite in both, and a NaN gradient entry NaN in both (PyTorch's convention without
zero_infinity).
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from lstm_reference import case_and_tolerance  # noqa: E402


def main():
    t, tolerance = case_and_tolerance(sys.argv)
    logits = torch.tensor(t["input.logits"], dtype=torch.float64, requires_grad=True)
    input_lengths = torch.tensor(t["input.input_lengths"].astype(np.int64))
    targets = torch.tensor(t["input.targets"].astype(np.int64))
    target_lengths = torch.tensor(t["input.target_lengths"].astype(np.int64))
    blank = int(t["input.blank"][0])
    zero_infinity = bool(t["input.zero_infinity"][0])
    grad_scale = float(t["input.grad_scale"][0])
    # F.ctc_loss takes (T, N, C) log-probabilities: the transpose of the engine's rows.
    losses = F.ctc_loss(F.log_softmax(logits, dim=-1).transpose(0, 1), targets, input_lengths, target_lengths, blank=blank,
                        reduction="none", zero_infinity=zero_infinity)
    (grad_scale * losses.sum()).backward()
    ref_losses = losses.detach().numpy()
    ref_grad = logits.grad.numpy()
    ours_losses = t["ours.losses"].astype(np.float64)
    ours_grad = t["ours.dlogits"].astype(np.float64).reshape(ref_grad.shape)
    failed = False
    for b, (r, o) in enumerate(zip(ref_losses, ours_losses)):
        print(f"loss {b}: reference {r:.6f} ours {o:.6f}")
        if np.isinf(r) != np.isinf(o):
            print(f"loss {b}: infinite in one only")
            failed = True
    nan_ref, nan_ours = np.isnan(ref_grad), np.isnan(ours_grad)
    if (nan_ref != nan_ours).any():
        print(f"gradient: NaN at {int((nan_ref != nan_ours).sum())} entries in one only")
        failed = True
    print(f"gradient: {int(nan_ref.sum())} NaN entries in both")
    finite = ~np.isinf(ref_losses)
    worst = 0.0
    for name, ref, ours in [("losses", ref_losses[finite], ours_losses[finite]),
                            ("dlogits", np.where(nan_ref, 0, ref_grad), np.where(nan_ours, 0, ours_grad))]:
        err = float(np.max(np.abs(ours - ref)) / max(np.max(np.abs(ref)), 1e-30)) if ref.size else 0.0
        worst = max(worst, err)
        print(f"{name}: rel {err:.3e}{'  > tolerance' if err > tolerance else ''}")
        failed |= err > tolerance
    print(f"worst: {worst:.3e} (tolerance {tolerance:g})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
