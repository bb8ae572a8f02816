#!/usr/bin/python3
"""Independent PyTorch implementation of Steadfast's Transformer (and, with metadata arch
transformer_lm, of its decoder-only language model: fairseq's transformer_lm, decoder layers
without encoder attention), for the whole-model tests.

Usage: transformer_reference.py CASE.safetensors [--tolerance 1e-4]

The case file (written by engine_model_test) holds the model weights under their documented
names (docs/model-format.md), the batch ("batch.src", "batch.tgt_in", "batch.tgt_out", I32) and
the engine's results ("ours.logits", "ours.loss", "ours.grad.<param>"); the model's
configuration is in the metadata. This script rebuilds the model from torch ops in float64
(torch.nn.functional.multi_head_attention_forward, layer_norm, linear, log_softmax), computes
logits, the label-smoothed loss (fairseq's formula, summed over non-pad targets) and every
parameter gradient with autograd, and compares: relative error of a tensor = max |ours - ref| /
max |ref|. Prints one line per tensor and the worst; exits 1 when any exceeds the tolerance,
2 when the file cannot be read.

torch 1.13 has no safetensors support, so the file is parsed here with json + numpy.
"""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64,
          "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if info["dtype"] == "BF16":
            u16 = np.frombuffer(data[begin:end], dtype=np.uint16).astype(np.uint32) << 16
            arr = u16.view(np.float32)
        else:
            arr = np.frombuffer(data[begin:end], dtype=DTYPES[info["dtype"]])
        tensors[name] = arr.reshape(info["shape"])
    return tensors, meta


def sinusoidal(num, dim, pad):
    half = dim // 2
    f = math.log(10000) / (half - 1)
    freq = torch.exp(torch.arange(half, dtype=torch.float64) * -f)
    ang = torch.arange(num, dtype=torch.float64).unsqueeze(1) * freq.unsqueeze(0)
    emb = torch.cat([torch.sin(ang), torch.cos(ang)], dim=1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros(num, 1, dtype=torch.float64)], dim=1)
    emb[pad, :] = 0
    return emb


def embed(tokens, table, pad, dim):
    mask = tokens.ne(pad).long()
    positions = torch.cumsum(mask, dim=1) * mask + pad
    pe = sinusoidal(int(positions.max()) + 1, dim, pad)
    return math.sqrt(dim) * F.embedding(tokens, table) + pe[positions]


def attention(p, prefix, query, key, key_padding, causal, heads):
    # query [Tq, B, C], key [Tk, B, C] (torch's MHA layout)
    tq = query.shape[0]
    mask = None
    if causal:
        mask = torch.triu(torch.full((tq, tq), float("-inf"), dtype=torch.float64), diagonal=1)
    out, _ = F.multi_head_attention_forward(
        query, key, key, query.shape[-1], heads,
        p[prefix + ".in_proj_weight"], p[prefix + ".in_proj_bias"], None, None, False, 0.0,
        p[prefix + ".out_proj.weight"], p[prefix + ".out_proj.bias"], training=False,
        key_padding_mask=key_padding, need_weights=False, attn_mask=mask)
    return out


def layer_norm(p, name, x):
    return F.layer_norm(x, (x.shape[-1],), p[name + ".weight"], p[name + ".bias"], 1e-5)


def ffn(p, prefix, x, act):
    h = F.linear(x, p[prefix + "fc1.weight"], p[prefix + "fc1.bias"])
    h = F.relu(h) if act == "relu" else F.gelu(h)
    return F.linear(h, p[prefix + "fc2.weight"], p[prefix + "fc2.bias"])


def encoder_layers(p, x, pad, layers, heads, pre, act):
    """fairseq's TransformerEncoderLayer stack over x [T, B, C] with key padding pad [B, T], and
    encoder.layer_norm after it when pre-norm."""
    for i in range(layers):
        q = "encoder.layers.%d." % i
        if pre:
            h = layer_norm(p, q + "self_attn_layer_norm", x)
            x = x + attention(p, q + "self_attn", h, h, pad, False, heads)
            x = x + ffn(p, q, layer_norm(p, q + "final_layer_norm", x), act)
        else:
            x = layer_norm(p, q + "self_attn_layer_norm", x + attention(p, q + "self_attn", x, x, pad, False, heads))
            x = layer_norm(p, q + "final_layer_norm", x + ffn(p, q, x, act))
    if pre:
        x = layer_norm(p, "encoder.layer_norm", x)
    return x


def forward(p, meta, src, tin, tout):
    C = int(meta["d_model"]); H = int(meta["heads"]); pad = int(meta["pad_id"])
    pre = meta["normalize_before"] == "true"; act = meta["activation"]
    eps = float(meta["label_smoothing"])
    # A decoder-only language model (fairseq's transformer_lm): no encoder, and decoder layers
    # without encoder attention; the batch's src is not read.
    if meta["arch"] == "transformer_lm":
        return decoder_forward(p, meta, None, None, tin, tout, C, H, pad, pre, act, eps,
                               p["decoder.embed_tokens.weight"])
    src_table = p["encoder.embed_tokens.weight"]
    tgt_table = src_table if meta["share_embeddings"] == "true" else p["decoder.embed_tokens.weight"]
    src_pad = src.eq(pad)
    x = embed(src, src_table, pad, C).transpose(0, 1)  # [Ts, B, C]
    x = encoder_layers(p, x, src_pad, int(meta["encoder_layers"]), H, pre, act)
    return decoder_forward(p, meta, x, src_pad, tin, tout, C, H, pad, pre, act, eps, tgt_table)


def decoder_forward(p, meta, enc, src_pad, tin, tout, C, H, pad, pre, act, eps, tgt_table):
    """The decoder (with encoder attention over enc unless enc is None), the output projection and
    the label-smoothed loss summed over non-pad targets: returns (logits, loss)."""
    tgt_pad = tin.eq(pad)
    y = embed(tin, tgt_table, pad, C).transpose(0, 1)
    for i in range(int(meta["decoder_layers"])):
        q = "decoder.layers.%d." % i
        if pre:
            h = layer_norm(p, q + "self_attn_layer_norm", y)
            y = y + attention(p, q + "self_attn", h, h, tgt_pad, True, H)
            if enc is not None:
                h = layer_norm(p, q + "encoder_attn_layer_norm", y)
                y = y + attention(p, q + "encoder_attn", h, enc, src_pad, False, H)
            y = y + ffn(p, q, layer_norm(p, q + "final_layer_norm", y), act)
        else:
            y = layer_norm(p, q + "self_attn_layer_norm", y + attention(p, q + "self_attn", y, y, tgt_pad, True, H))
            if enc is not None:
                y = layer_norm(p, q + "encoder_attn_layer_norm",
                               y + attention(p, q + "encoder_attn", y, enc, src_pad, False, H))
            y = layer_norm(p, q + "final_layer_norm", y + ffn(p, q, y, act))
    if pre:
        y = layer_norm(p, "decoder.layer_norm", y)
    y = y.transpose(0, 1).reshape(-1, C)
    # fairseq's share_decoder_input_output_embed (files from before it existed are tied).
    tied = meta.get("share_decoder_input_output_embed", "true") == "true"
    output_projection = tgt_table if tied else p["decoder.output_projection.weight"]
    logits = y @ output_projection.t()
    lprobs = F.log_softmax(logits, dim=-1)
    target = tout.reshape(-1)
    V = logits.shape[-1]
    nll = -lprobs.gather(-1, target.long().unsqueeze(-1)).squeeze(-1)
    smooth = -lprobs.sum(-1)
    eps_i = eps / (V - 1)
    loss = (1.0 - eps - eps_i) * nll + eps_i * smooth
    loss = loss.masked_fill(target.eq(pad), 0.0).sum()
    return logits, loss


def rel_err(ours, ref):
    ref = np.asarray(ref, dtype=np.float64)
    ours = np.asarray(ours, dtype=np.float64)
    return float(np.max(np.abs(ours - ref)) / max(np.max(np.abs(ref)), 1e-30))


def compare_case(argv, doc, forward_fn):
    """Reads the case file argv[1], runs forward_fn(params, meta, src, tgt_in, tgt_out) ->
    (logits, loss) in float64 with autograd, and compares logits, loss and every parameter's
    gradient with the engine's ("ours.*"). Returns the exit status (0, 1 mismatch, 2 unreadable).
    Shared by the reference scripts of every family."""
    if len(argv) < 2:
        print(doc)
        return 2
    tol = 1e-4
    if "--tolerance" in argv:
        tol = float(argv[argv.index("--tolerance") + 1])
    try:
        t, meta = read_safetensors(argv[1])
    except Exception as e:  # noqa: BLE001 - report any unreadable file the same way
        print("cannot read %s: %s" % (argv[1], e))
        return 2
    torch.set_num_threads(1)
    names = [n for n in t if not n.startswith(("batch.", "ours."))]
    params = {n: torch.tensor(t[n], dtype=torch.float64, requires_grad=True) for n in names}
    src = torch.tensor(t["batch.src"], dtype=torch.long)
    tin = torch.tensor(t["batch.tgt_in"], dtype=torch.long)
    tout = torch.tensor(t["batch.tgt_out"], dtype=torch.long)
    logits, loss = forward_fn(params, meta, src, tin, tout)
    loss.backward()
    results = [("logits", rel_err(t["ours.logits"], logits.detach().numpy())),
               ("loss", rel_err(t["ours.loss"], loss.detach().numpy().reshape(1)))]
    for n in names:
        g = params[n].grad
        ref = np.zeros(t[n].shape) if g is None else g.numpy()
        results.append(("grad." + n, rel_err(t["ours.grad." + n], ref)))
    for name, err in results:
        print("%-60s rel_err %.3e" % (name, err))
    worst = max(results, key=lambda r: r[1])
    print("worst: %s rel_err %.3e (tolerance %.1e), loss ours %.6f torch %.6f" % (
        worst[0], worst[1], tol, float(t["ours.loss"][0]), float(loss)))
    return 0 if worst[1] <= tol else 1


def main():
    return compare_case(sys.argv, __doc__, forward)


if __name__ == "__main__":
    sys.exit(main())
