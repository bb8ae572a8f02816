#!/usr/bin/python3
"""fairseq's LSTM encoder (LSTMEncoder.forward) in PyTorch, for engine_lstm_test.

Usage: lstm_encoder_reference.py CASE.safetensors [--tolerance 1e-5]

The case file holds the encoder's weights under fairseq's names (embed_tokens.weight,
lstm.weight_ih_l0 ..., _reverse with both directions), the source ("input.src" I32 [B, S],
right-padded with "input.pad"), the loss's weights ("input.w" [S, B, D] on the outputs, zero at
padding; "input.wh.<l>", "input.wc.<l>" [B, D] on each layer's final h and c) and the engine's
results ("ours.out", "ours.final_h.<l>", "ours.final_c.<l>", "ours.grad.<param>"). This script
runs fairseq's steps in float64 — F.embedding with padding_idx, pack_padded_sequence
(enforce_sorted=False), nn.LSTM, pad_packed_sequence, combine_bidir — backpropagates the weighted
sum with autograd and compares (outputs at real positions only).
"""
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from lstm_reference import case_and_tolerance, compare  # noqa: E402


def residual_from(t):
    """The case's "input.residual_from" (GNMT's residual connections from that layer, 1-based;
    0 or absent: none)."""
    return int(t["input.residual_from"][0]) if "input.residual_from" in t else 0


def encoder_forward(t, prefix, src, pad):
    """fairseq's LSTMEncoder.forward on the case's weights under `prefix` ("" or "encoder."):
    returns the outputs [S, B, D] (pad_packed_sequence's padding value pad * 1.0), the combined
    final h and c [L, B, D], and the parameters (name -> leaf tensor) for their gradients.
    With residual connections (residual_from(t) = r >= 2), or GNMT's encoder (only the bottom
    layers have _reverse weights), the layers run one nn.LSTM each; with residuals layer
    l >= r - 1 (0-based) outputs its LSTM's output plus its input, as GNMT's."""
    f64 = lambda name: torch.tensor(t[name], dtype=torch.float64)  # noqa: E731
    table = f64(prefix + "embed_tokens.weight").requires_grad_()
    hidden = t[prefix + "lstm.weight_hh_l0"].shape[1]
    layers = sum(1 for k in t if k.startswith(prefix + "lstm.weight_ih_l") and not k.endswith("_reverse"))
    two_way = [prefix + f"lstm.weight_ih_l{l}_reverse" in t for l in range(layers)]
    bidirectional = two_way[0]
    # GNMT's encoder (Wu et al. 2016; TensorFlow nmt's gnmt_model.py): the bottom layers both
    # ways, the rest one way, each layer reading the one below's output (both directions side by
    # side); a two-way layer hands the decoder its backward direction's state (bi_encoder_state[1]).
    gnmt = any(two_way) and not all(two_way)
    params = {prefix + "embed_tokens.weight": table}
    bsz, _ = src.shape
    x = F.embedding(src, table, padding_idx=pad).transpose(0, 1)
    lengths = src.ne(pad).sum(dim=1)
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
    first_residual = residual_from(t) - 1

    def combine(states, dirs):  # [dirs, B, H] -> [B, dirs * H] (fairseq's combine_bidir)
        return states.transpose(0, 1).contiguous().view(bsz, -1) if dirs == 2 else states[0]

    if first_residual < 1 and not gnmt:
        lstm = torch.nn.LSTM(table.shape[1], hidden, num_layers=layers, bidirectional=bidirectional).double()
        with torch.no_grad():
            for name, value in lstm.named_parameters():
                value.copy_(f64(prefix + "lstm." + name))
                params[prefix + "lstm." + name] = value
        outs, (final_h, final_c) = lstm(packed)
        dirs = 2 if bidirectional else 1
        final_h = torch.stack([combine(h, dirs) for h in final_h.view(layers, dirs, bsz, -1)])
        final_c = torch.stack([combine(c, dirs) for c in final_c.view(layers, dirs, bsz, -1)])
    else:
        data, hs, cs = packed.data, [], []
        for l in range(layers):
            layer = torch.nn.LSTM(data.shape[1], hidden, bidirectional=two_way[l]).double()
            with torch.no_grad():
                for name, value in layer.named_parameters():
                    value.copy_(f64(prefix + "lstm." + name.replace("_l0", f"_l{l}")))
            out, (h, c) = layer(packed._replace(data=data))
            data = out.data + data if l >= first_residual >= 1 else out.data
            if gnmt and two_way[l]:
                h, c = h[1], c[1]
            else:
                h, c = combine(h, 2 if two_way[l] else 1), combine(c, 2 if two_way[l] else 1)
            hs.append(h)
            cs.append(c)
            for name, value in layer.named_parameters():  # their gradients, under the stack's names
                params[prefix + "lstm." + name.replace("_l0", f"_l{l}")] = value
        outs, final_h, final_c = packed._replace(data=data), torch.stack(hs), torch.stack(cs)
    out, _ = torch.nn.utils.rnn.pad_packed_sequence(outs, padding_value=pad * 1.0)
    return out, final_h, final_c, params


def main():
    t, tolerance = case_and_tolerance(sys.argv)
    f64 = lambda name: torch.tensor(t[name], dtype=torch.float64)  # noqa: E731
    src = torch.tensor(t["input.src"]).long()
    pad = int(t["input.pad"][0])
    out, final_h, final_c, params = encoder_forward(t, "", src, pad)
    layers = final_h.shape[0]
    loss = (out * f64("input.w")).sum()
    for l in range(layers):
        loss = loss + (final_h[l] * f64(f"input.wh.{l}")).sum() + (final_c[l] * f64(f"input.wc.{l}")).sum()
    loss.backward()

    real = src.ne(pad).t().unsqueeze(2).double()  # S x B x 1
    pairs = [("out", out * real, (torch.tensor(t["ours.out"]).double() * real).numpy())]
    for l in range(layers):
        pairs.append((f"final_h.{l}", final_h[l], t[f"ours.final_h.{l}"]))
        pairs.append((f"final_c.{l}", final_c[l], t[f"ours.final_c.{l}"]))
    for name, value in params.items():
        pairs.append((name, value.grad, t["ours.grad." + name]))
    sys.exit(compare(pairs, tolerance))

if __name__ == "__main__":
    main()
