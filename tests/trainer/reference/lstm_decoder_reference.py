#!/usr/bin/python3
"""fairseq's LSTM decoder loop (LSTMDecoder.extract_features, AttentionLayer) in PyTorch, for
engine_lstm_test.

Usage: lstm_decoder_reference.py CASE.safetensors [--tolerance 1e-5]

The case file holds the decoder's weights under fairseq's names (layers.<i>.weight_ih ...,
attention.input_proj.weight, attention.output_proj.weight), its inputs ("input.x" [T, B, E]
time-major, "input.enc" [S, B, Ds], "input.padding" [B, S] as I32 with 1 = padding,
"input.h0.<i>", "input.c0.<i>" [B, H], "input.dy" [T, B, H]) and the engine's results
("ours.y", "ours.dx", "ours.denc", "ours.grad.<param>", "ours.dh0.<i>", "ours.dc0.<i>").
This script runs the loop with torch.nn.LSTMCell and torch ops in float64 (no dropout), as
fairseq writes it, backpropagates sum(y * dy) with autograd and compares: relative error of a
tensor = max |ours - ref| / max |ref|. Exits 1 when any exceeds the tolerance.
"""
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from lstm_reference import case_and_tolerance, compare  # noqa: E402


def decoder_forward(t, prefix, x, enc, padding, h0, c0):
    """fairseq's LSTMDecoder.extract_features loop (no dropout) on the case's weights under
    `prefix`: x [T, B, E] the embedded targets, enc [S, B, Ds], padding [S, B] bool, h0 / c0 one
    [B, H] per layer. Returns the outputs [T, B, H] and the parameters (name -> leaf tensor).
    With residual connections (the case's "input.residual_from" = r >= 2) layer i >= r - 1
    (0-based) outputs its cell's h plus its input, as GNMT's; the cell carries its own h."""
    first_residual = int(t["input.residual_from"][0]) - 1 if "input.residual_from" in t else -1
    f64 = lambda name: torch.tensor(t[name], dtype=torch.float64)  # noqa: E731
    layers = sum(1 for k in t if k.startswith(prefix + "layers.") and k.endswith(".weight_hh"))
    hidden = t[prefix + "layers.0.weight_hh"].shape[1]
    cells, params = [], {}
    for i in range(layers):
        cell = torch.nn.LSTMCell(t[f"{prefix}layers.{i}.weight_ih"].shape[1], hidden).double()
        with torch.no_grad():
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(cell, name).copy_(f64(f"{prefix}layers.{i}.{name}"))
                params[f"{prefix}layers.{i}.{name}"] = getattr(cell, name)
        cells.append(cell)
    input_proj = f64(prefix + "attention.input_proj.weight").requires_grad_()
    output_proj = f64(prefix + "attention.output_proj.weight").requires_grad_()
    params[prefix + "attention.input_proj.weight"] = input_proj
    params[prefix + "attention.output_proj.weight"] = output_proj
    steps, bsz, _ = x.shape
    prev_h, prev_c = list(h0), list(c0)
    input_feed = x.new_zeros(bsz, hidden)
    outs = []
    for j in range(steps):
        inp = torch.cat((x[j], input_feed), dim=1)
        for i, cell in enumerate(cells):
            h, c = cell(inp, (prev_h[i], prev_c[i]))
            prev_h[i], prev_c[i] = h, c
            h = h + inp if first_residual >= 1 and i >= first_residual else h
            inp = h
        a = F.linear(h, input_proj)
        scores = (enc * a.unsqueeze(0)).sum(dim=2).masked_fill(padding, float("-inf"))
        probs = F.softmax(scores, dim=0)
        ctx = (probs.unsqueeze(2) * enc).sum(dim=0)
        out = torch.tanh(F.linear(torch.cat((ctx, h), dim=1), output_proj))
        input_feed = out
        outs.append(out)
    return torch.stack(outs), params


def main():
    t, tolerance = case_and_tolerance(sys.argv)
    f64 = lambda name: torch.tensor(t[name], dtype=torch.float64)  # noqa: E731
    layers = sum(1 for k in t if k.startswith("layers.") and k.endswith(".weight_hh"))
    x = f64("input.x").requires_grad_()
    enc = f64("input.enc").requires_grad_()
    padding = torch.tensor(t["input.padding"]).bool().t()  # srclen x bsz, as fairseq keeps it
    h0 = [f64(f"input.h0.{i}").requires_grad_() for i in range(layers)]
    c0 = [f64(f"input.c0.{i}").requires_grad_() for i in range(layers)]
    y, params = decoder_forward(t, "", x, enc, padding, h0, c0)
    (y * f64("input.dy")).sum().backward()

    pairs = [("y", y, t["ours.y"]), ("dx", x.grad, t["ours.dx"]), ("denc", enc.grad, t["ours.denc"])]
    for name, value in params.items():
        pairs.append((name, value.grad, t["ours.grad." + name]))
    for i in range(layers):
        pairs.append((f"dh0.{i}", h0[i].grad, t[f"ours.dh0.{i}"]))
        pairs.append((f"dc0.{i}", c0[i].grad, t[f"ours.dc0.{i}"]))
    sys.exit(compare(pairs, tolerance))

if __name__ == "__main__":
    main()
