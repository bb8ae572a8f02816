#!/usr/bin/python3
"""Independent PyTorch implementation of fairseq's `fconv` (ConvS2S, Gehring et al. 2017) for
Steadfast's whole-model test: the model written the way fairseq's fconv.py computes it, in
float64, from the tensors of a case file.

Usage: fconv_reference.py CASE.safetensors [--tolerance 1e-4]

The case file holds the weights under fairseq's state_dict names (weight_v / weight_g / bias of
every weight-normalised layer, the embedding tables), the batch ("batch.src", "batch.tgt_in",
"batch.tgt_out", I32, right-padded with pad_id) and the engine's results ("ours.logits",
"ours.loss", "ours.grad.<param>"); the architecture is in the metadata (arch fconv,
encoder_layers / decoder_layers as "CHANNELSxKERNEL,..."). Dropout is off. The script
rebuilds the weights with torch's weight-norm formula (w = g v / ||v||, dim 0 for Linear, dim 2
for ConvTBC), runs the encoder with masked_fill of padding before each torch.conv_tbc and the
decoder's causal convolutions as fairseq's LinearizedConvolution (pad k-1, drop the last k-1
outputs), the attention layers with the sqrt(source length) scaling, GradMultiply on the
encoder output, and fairseq's label-smoothed loss summed over non-pad targets; then autograd.
Relative error of a tensor = max |ours - ref| / max |ref|. Prints one line per tensor and the
worst; exits 1 when any exceeds the tolerance, 2 when the file cannot be read.
"""
import math
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from transformer_reference import compare_case  # noqa: E402


def specs(text):
    return [tuple(int(v) for v in item.split("x")) for item in text.split(",")]


def wn_linear(p, name, x):
    v, g = p[name + ".weight_v"], p[name + ".weight_g"]
    w = g * v / v.norm(dim=1, keepdim=True)
    return F.linear(x, w, p[name + ".bias"])


def wn_conv_weight(p, name):
    v, g = p[name + ".weight_v"], p[name + ".weight_g"]
    return g * v / v.norm(dim=(0, 1), keepdim=True)


def positions(tokens, pad):
    mask = tokens.ne(pad).long()
    return torch.cumsum(mask, dim=1) * mask + pad


class GradMultiply(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.new(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


def forward(p, meta, src, tin, tout):
    pad = int(meta["pad_id"])
    eps = float(meta["label_smoothing"])
    enc_specs, dec_specs = specs(meta["encoder_layers"]), specs(meta["decoder_layers"])
    # ---- encoder (fairseq's FConvEncoder)
    x = F.embedding(src, p["encoder.embed_tokens.weight"]) + \
        F.embedding(positions(src, pad), p["encoder.embed_positions.weight"])
    input_embedding = x
    x = wn_linear(p, "encoder.fc1", x)
    padding = src.eq(pad).t()  # [S, B]
    x = x.transpose(0, 1)      # [S, B, C]
    for i, (channels, k) in enumerate(enc_specs):
        name = "encoder.projections.%d" % i
        residual = wn_linear(p, name, x) if name + ".weight_v" in p else x
        x = x.masked_fill(padding.unsqueeze(-1), 0)
        w, b = wn_conv_weight(p, "encoder.convolutions.%d" % i), p["encoder.convolutions.%d.bias" % i]
        if k % 2 == 1:
            x = torch.conv_tbc(x.contiguous(), w, b, k // 2)
        else:
            x = F.pad(x, (0, 0, 0, 0, (k - 1) // 2, k // 2))
            x = torch.conv_tbc(x.contiguous(), w, b, 0)
        x = F.glu(x, dim=2)
        x = (x + residual) * math.sqrt(0.5)
    x = x.transpose(1, 0)
    x = wn_linear(p, "encoder.fc2", x)
    x = x.masked_fill(padding.t().unsqueeze(-1), 0)
    x = GradMultiply.apply(x, 1.0 / (2.0 * len(dec_specs)))
    enc_a, enc_b = x, (x + input_embedding) * math.sqrt(0.5)
    src_pad = src.eq(pad)
    s = (src.shape[1] - src_pad.double().sum(dim=1, keepdim=True)).unsqueeze(-1)  # [B, 1, 1]
    # ---- decoder (fairseq's FConvDecoder in training mode)
    y = F.embedding(tin, p["decoder.embed_tokens.weight"]) + \
        F.embedding(positions(tin, pad), p["decoder.embed_positions.weight"])
    target_embedding = y
    y = wn_linear(p, "decoder.fc1", y).transpose(0, 1)  # [T, B, C]
    for i, (channels, k) in enumerate(dec_specs):
        name = "decoder.projections.%d" % i
        residual = wn_linear(p, name, y) if name + ".weight_v" in p else y
        w, b = wn_conv_weight(p, "decoder.convolutions.%d" % i), p["decoder.convolutions.%d.bias" % i]
        y = torch.conv_tbc(y.contiguous(), w, b, k - 1)
        if k > 1:
            y = y[:-(k - 1)]  # LinearizedConvolution: the future time steps removed
        y = F.glu(y, dim=2)
        # AttentionLayer
        g = y.transpose(0, 1)  # [B, T, C]
        a = "decoder.attention.%d" % i
        q = (wn_linear(p, a + ".in_projection", g) + target_embedding) * math.sqrt(0.5)
        scores = torch.bmm(q, enc_a.transpose(1, 2))
        scores = scores.masked_fill(src_pad.unsqueeze(1), float("-inf"))
        probs = F.softmax(scores, dim=2)
        c = torch.bmm(probs, enc_b) * (s * s.rsqrt())
        g = (wn_linear(p, a + ".out_projection", c) + g) * math.sqrt(0.5)
        y = g.transpose(0, 1)
        y = (y + residual) * math.sqrt(0.5)
    y = y.transpose(1, 0)
    y = wn_linear(p, "decoder.fc2", y)
    if "decoder.fc3.weight_v" in p:
        logits = wn_linear(p, "decoder.fc3", y)
    else:  # share_input_output_embed: fc3's weight is the decoder's embedding
        logits = F.linear(y, p["decoder.embed_tokens.weight"], p["decoder.fc3.bias"])
    logits = logits.reshape(-1, logits.shape[-1])
    lprobs = F.log_softmax(logits, dim=-1)
    target = tout.reshape(-1)
    V = logits.shape[-1]
    nll = -lprobs.gather(-1, target.long().unsqueeze(-1)).squeeze(-1)
    smooth = -lprobs.sum(-1)
    eps_i = eps / (V - 1)
    loss = (1.0 - eps - eps_i) * nll + eps_i * smooth
    loss = loss.masked_fill(target.eq(pad), 0.0).sum()
    return logits, loss


def main():
    return compare_case(sys.argv, __doc__, forward)


if __name__ == "__main__":
    sys.exit(main())
